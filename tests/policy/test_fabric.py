"""The fabric counted: RDMA devices a gang asks for, and the topology level above the rack."""

from __future__ import annotations

from dataclasses import replace

from policy.capacity import Capacity
from policy.model import NodeView, Reservation
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, placed, running, snap, waiting


def rdma_nodes(devices: dict[str, int], nodes: int = 4) -> tuple[NodeView, ...]:
    return tuple(NodeView(f"n{i:02d}", 8, 8, rack="r0", rdma=devices.get(f"n{i:02d}", 0)) for i in range(nodes))


def test_a_gang_asking_for_rdma_devices_goes_only_to_nodes_that_have_them() -> None:
    views = rdma_nodes({"n01": 8, "n03": 8})
    gang = replace(pend(1, nodes=2), rdma_per_node=4)
    plain = pend(2, nodes=2)
    decisions = schedule(replace(snap([gang, plain]), nodes=views))
    assert placed(decisions)[1].node_names == ("n01", "n03")
    assert placed(decisions)[2].node_names == ("n00", "n02")


def test_a_gang_waits_for_rdma_nodes_and_says_so_even_when_other_nodes_are_idle() -> None:
    views = rdma_nodes({"n00": 8, "n01": 8})
    busy = snap([replace(pend(1, nodes=2, age=2 * HOUR), rdma_per_node=8)], [running(10, {"n00": 8}, left=3 * HOUR)], nodes=4)
    decisions = schedule(replace(busy, nodes=replace_free(views, {"n00": 0})), config(starvation_seconds=HOUR))
    assert decisions.placements == ()
    wait = waiting(decisions)[1]
    assert "Needs 2 whole nodes with 8 GPUs and 8 RDMA devices; 1 is free" in wait.reason
    # Its reservation is on the RDMA nodes, when n00 frees up; not on the idle n02 and n03.
    assert decisions.reservations == (Reservation(1, ("n00", "n01"), NOW + 3 * HOUR),)


def test_a_reservation_on_a_node_that_lost_its_rdma_devices_moves() -> None:
    views = rdma_nodes({"n00": 8, "n01": 8, "n02": 8})
    job = replace(pend(1, nodes=2, age=2 * HOUR), rdma_per_node=8)
    kept = Reservation(1, ("n00", "n01"), NOW + HOUR)
    busy = [running(10, {"n00": 8}, left=HOUR), running(11, {"n01": 8}, left=HOUR), running(12, {"n02": 8}, left=2 * HOUR)]
    shrunk = replace_free(views, {"n00": 0, "n01": 0, "n02": 0}, rdma={"n01": 0})
    decisions = schedule(replace(snap([job], busy, nodes=3), nodes=shrunk, reservations=(kept,)), config(starvation_seconds=HOUR))
    assert [(r.node_names, r.start) for r in decisions.reservations] == [(("n00", "n02"), NOW + 2 * HOUR)]
    assert "was lost with n01" in waiting(decisions)[1].reason


def test_a_gang_keeps_to_one_block_when_no_rack_fits_it() -> None:
    # Racks of two idle nodes each: r0, r1 under block b0; r2, r3 under b1, where r2 has three idle nodes.
    layout = {"a0": ("r0", "b0"), "a1": ("r0", "b0"), "b0": ("r1", "b0"), "b1": ("r1", "b0")}
    layout |= {"c0": ("r2", "b1"), "c1": ("r2", "b1"), "c2": ("r2", "b1"), "d0": ("r3", "b1")}
    cap = Capacity(NodeView(name, 8, 8, rack=rack, block=block) for name, (rack, block) in layout.items())
    # Four nodes: no rack has four; b0 has exactly four (the tightest block), b1 has four too but b0 sorts first.
    assert sorted(cap.whole_nodes(4, 8)) == ["a0", "a1", "b0", "b1"]
    # Three nodes: rack r2 alone fits.
    assert sorted(cap.whole_nodes(3, 8)) == ["c0", "c1", "c2"]
    # Five nodes: no block fits; a whole block (the first of the fullest) and then the next block's fullest rack.
    five = cap.whole_nodes(5, 8)
    assert five is not None and sorted(five[:4]) == ["a0", "a1", "b0", "b1"] and five[4] == "c0"


def replace_free(views: tuple[NodeView, ...], free: dict[str, int], rdma: dict[str, int] | None = None) -> tuple[NodeView, ...]:
    rdma = rdma or {}
    return tuple(replace(v, gpus_free=free.get(v.name, v.gpus_free), rdma=rdma.get(v.name, v.rdma)) for v in views)


def test_jobs_that_ask_no_rdma_go_where_there_is_none_while_they_fit_there() -> None:
    """One-GPU jobs and plain gangs filled the RDMA rack first (its nodes sort first) while the other stood idle, and the
    gang that asked for RDMA then waited, "fragmented"."""
    views = rdma_nodes({"n00": 8, "n01": 8}, nodes=6)
    small = [pend(i, gpus=1) for i in range(1, 4)]
    plain_gang = pend(4, nodes=2)
    decisions = schedule(replace(snap([*small, plain_gang]), nodes=views))
    where = {job_id: p.node_names for job_id, p in placed(decisions).items()}
    assert all(not set(names) & {"n00", "n01"} for names in where.values()), where
    # When only the RDMA nodes are left, a job that asks for none still goes there rather than wait.
    busy = replace_free(views, {"n02": 0, "n03": 0, "n04": 0, "n05": 0})
    decisions = schedule(replace(snap([pend(5, gpus=1)]), nodes=busy))
    assert placed(decisions)[5].node_names[0] in {"n00", "n01"}


def test_a_gang_waiting_for_rdma_nodes_is_short_of_room_not_fragmented() -> None:
    views = replace_free(rdma_nodes({"n00": 8, "n01": 8}, nodes=4), {"n00": 0})
    decisions = schedule(replace(snap([replace(pend(1, nodes=2), rdma_per_node=8)]), nodes=views))
    assert waiting(decisions)[1].reason_code == "NO_ROOM"  # 24 GPUs are free, but only 8 on nodes with its devices


def test_an_elastic_job_that_asks_no_rdma_keeps_off_rdma_nodes_while_an_rdma_gang_waits() -> None:
    views = rdma_nodes({"n00": 8, "n01": 8, "n02": 8}, nodes=6)
    flexible, rdma_gang = replace(pend(1, nodes=6), min_nodes=2), replace(pend(3, nodes=3, user="bob"), rdma_per_node=8)
    busy_rdma = replace_free(views, {"n02": 0})  # the gang cannot start: two of its three nodes are free
    decisions = schedule(replace(snap([rdma_gang, flexible]), nodes=busy_rdma))
    assert placed(decisions)[1].node_names == ("n03", "n04", "n05")  # the most nodes without RDMA, not all five free
    # Where only RDMA nodes are free it starts on its fewest; with no such gang waiting it takes all that fit.
    only_rdma = replace_free(views, {"n02": 0, "n03": 0, "n04": 0, "n05": 0})
    assert placed(schedule(replace(snap([rdma_gang, flexible]), nodes=only_rdma)))[1].node_names == ("n00", "n01")
    everything = placed(schedule(replace(snap([flexible]), nodes=views)))[1].node_names
    assert len(everything) == 6
    fewer = placed(schedule(replace(snap([replace(flexible, nodes=3)]), nodes=views)))[1].node_names
    assert fewer == ("n03", "n04", "n05")  # of every kind, those without RDMA first
    # Started on two of them: it grows onto the third, and onto the RDMA nodes only while no job that asks for RDMA waits.
    grower = replace(running(1, {"n03": 8, "n04": 8}, left=5 * HOUR), min_nodes=2, max_nodes=6, gpus_per_node=8)
    busy = replace(running(2, {"n02": 8}, left=2 * HOUR), rdma_per_node=8)
    nodes = replace_free(views, {"n02": 0, "n03": 0, "n04": 0})
    waits = schedule(replace(snap([rdma_gang], [grower, busy]), nodes=nodes))
    assert [r.added for r in waits.resizes] == [("n05",)]
    alone = schedule(replace(snap([], [grower, busy]), nodes=nodes))
    assert [r.added for r in alone.resizes] == [("n05", "n00", "n01")]  # nodes without RDMA first
