"""The pure gang policy, over plain data: examples, then properties over random clusters and queues."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model import FRAGMENTATION, HELD, LAUNCH_BACKOFF, NO_ROOM, NOT_EXAMINED, NodeView, PendingJob, RunningJob, Snapshot
from policy.schedule import schedule


def cluster(nodes: int = 4, gpus: int = 8, racks: int = 2, free: dict[str, int] | None = None) -> tuple[NodeView, ...]:
    free = free or {}
    per_rack = -(-nodes // racks)
    return tuple(
        NodeView(name=f"n{i:02d}", gpus_total=gpus, gpus_free=free.get(f"n{i:02d}", gpus), rack=f"r{i // per_rack}") for i in range(nodes)
    )


def job(job_id: int, nodes: int = 1, gpus: int = 8, rank: int = 1, at: float | None = None) -> PendingJob:
    return PendingJob(id=job_id, nodes=nodes, gpus_per_node=gpus, class_rank=rank, submitted_at=float(job_id if at is None else at))


def test_gang_is_placed_whole_on_distinct_idle_nodes_in_one_rack() -> None:
    decisions = schedule(Snapshot(cluster(nodes=8, racks=2), (job(1, nodes=3),)))
    (placement,) = decisions.placements
    assert len(set(placement.node_names)) == 3
    assert len({int(n[1:]) // 4 for n in placement.node_names}) == 1  # one rack
    assert placement.gpus_held == (8, 8, 8)


def test_gang_that_does_not_fit_takes_nothing() -> None:
    nodes = cluster(nodes=4, free={"n00": 0, "n01": 8, "n02": 8, "n03": 4})
    decisions = schedule(Snapshot(nodes, (job(1, nodes=3),)))
    assert decisions.placements == ()
    (wait,) = decisions.waiting
    assert wait.reason_code == NO_ROOM
    assert "Needs 3 whole nodes" in wait.reason and "2 are free" in wait.reason and "4 GPUs free on 1 partly used node" in wait.reason


def test_multi_node_job_holds_whole_nodes_even_when_asking_fewer_gpus() -> None:
    decisions = schedule(Snapshot(cluster(nodes=2, racks=1), (job(1, nodes=2, gpus=4), job(2, nodes=1, gpus=4))))
    assert [p.job_id for p in decisions.placements] == [1]
    assert decisions.placements[0].gpus_held == (8, 8)
    assert decisions.waiting[0].job_id == 2


def test_small_jobs_pack_onto_partly_used_nodes() -> None:
    nodes = cluster(nodes=3, free={"n00": 8, "n01": 3, "n02": 8})
    decisions = schedule(Snapshot(nodes, (job(1, gpus=2),)))
    assert decisions.placements[0].node_names == ("n01",)


def test_a_small_job_goes_where_the_jobs_end_with_it_so_the_node_comes_free_whole() -> None:
    # Two nodes equally tight for 4 GPUs: one frees up in an hour, the other in ten.
    nodes = cluster(nodes=2, racks=1, free={"n00": 4, "n01": 4})
    running = (
        RunningJob(id=10, node_names=("n00",), gpus_held=(4,), class_rank=1, started_at=0.0, ends_at=3600.0),
        RunningJob(id=11, node_names=("n01",), gpus_held=(4,), class_rank=1, started_at=0.0, ends_at=36000.0),
    )
    for wall, node in ((3000.0, "n00"), (36000.0, "n01")):
        pending = (replace(job(1, gpus=4), wall_seconds=wall),)
        (placement,) = schedule(Snapshot(nodes, pending, running)).placements
        assert placement.node_names == (node,), f"a job of {wall} s went to {placement.node_names}"


def test_fragmentation_is_named_when_free_gpus_are_scattered() -> None:
    nodes = cluster(nodes=3, free={"n00": 4, "n01": 4, "n02": 4})
    (wait,) = schedule(Snapshot(nodes, (job(1, gpus=8),))).waiting
    assert wait.reason_code == FRAGMENTATION
    assert "the most free on any node is 4" in wait.reason


def test_higher_class_gets_the_last_node() -> None:
    decisions = schedule(Snapshot(cluster(nodes=1, racks=1), (job(1, rank=1, at=0), job(2, rank=0, at=100))))
    assert [p.job_id for p in decisions.placements] == [2]


def test_cordoned_nodes_are_not_used() -> None:
    nodes = (NodeView("a", 8, 8, schedulable=False), NodeView("b", 8, 8))
    decisions = schedule(Snapshot(nodes, (job(1), job(2))))
    assert [p.node_names for p in decisions.placements] == [("b",)]
    # The waiting job is told why the idle node is no room: else "0 GPUs free" beside a node list showing 8 free.
    (wait,) = decisions.waiting
    assert wait.reason.endswith(
        "(0 GPUs free in the cluster). 1 more node takes no new work now (held by an admin, cordoned, not ready, or settling "
        "after being unready)."
    )


def test_a_job_waiting_for_room_is_told_which_nodes_take_no_new_work_and_why() -> None:
    """It read "3 more nodes take no new work now (held by an admin, cordoned, not ready, or settling ...)": the user
    could not tell which node to ask an admin about."""
    closed = [("d", "not ready"), ("a", "cordoned"), ("c", "tainted maintenance=true:NoExecute"), ("b", "held by an admin")]
    nodes = tuple(NodeView(name, 8, 8, schedulable=False, closed_why=why) for name, why in closed)
    (wait,) = schedule(Snapshot((*nodes, NodeView("e", 8, 0)), (job(1),))).waiting
    assert wait.reason.endswith(
        "a (cordoned), b (held by an admin), c (tainted maintenance=true:NoExecute) and 1 more take no new work now."
    )
    (wait,) = schedule(Snapshot((nodes[1], NodeView("e", 8, 0)), (job(1),))).waiting
    assert wait.reason.endswith("(0 GPUs free in the cluster). a (cordoned) takes no new work now.")


def test_examined_jobs_are_bounded_per_cycle() -> None:
    decisions = schedule(Snapshot(cluster(nodes=8), tuple(job(i) for i in range(1, 6))), max_jobs=2)
    assert len(decisions.placements) == 2
    assert [w.reason_code for w in decisions.waiting] == [NOT_EXAMINED] * 3
    assert [w.position for w in decisions.waiting] == [1, 2, 3]


# --- properties ---------------------------------------------------------------------------------


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    node_count = draw(st.integers(1, 12))
    nodes = []
    for i in range(node_count):
        total = draw(st.sampled_from([4, 8]))
        nodes.append(
            NodeView(
                name=f"node-{i}",
                gpus_total=total,
                gpus_free=draw(st.integers(0, total)),
                rack=draw(st.sampled_from(["a", "b", "c"])),
                schedulable=draw(st.booleans()) or draw(st.booleans()),
            )
        )
    pending = []
    for i in range(draw(st.integers(0, 25))):
        pending.append(
            PendingJob(
                id=i + 1,
                nodes=draw(st.integers(1, 5)),
                gpus_per_node=draw(st.integers(1, 8)),
                class_rank=draw(st.integers(0, 2)),
                submitted_at=draw(st.floats(0, 1000, allow_nan=False)),
            )
        )
    return Snapshot(tuple(nodes), tuple(pending))


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_no_gpu_is_ever_given_twice(snapshot: Snapshot) -> None:
    held: Counter[str] = Counter()
    for p in schedule(snapshot).placements:
        for name, gpus in zip(p.node_names, p.gpus_held, strict=True):
            held[name] += gpus
    nodes = {n.name: n for n in snapshot.nodes}
    for name, gpus in held.items():
        assert nodes[name].schedulable
        assert gpus <= nodes[name].gpus_free


@settings(max_examples=300, deadline=None)
@given(snapshots())
def test_gangs_are_all_or_nothing_and_every_job_is_decided_once(snapshot: Snapshot) -> None:
    decisions = schedule(snapshot)
    jobs = {j.id: j for j in snapshot.pending}
    for p in decisions.placements:
        j = jobs[p.job_id]
        assert len(p.node_names) == j.nodes
        assert len(set(p.node_names)) == j.nodes  # one rank per node
        nodes = {n.name: n for n in snapshot.nodes}
        for name, gpus in zip(p.node_names, p.gpus_held, strict=True):
            assert gpus >= j.gpus_per_node
            if j.nodes > 1:
                assert gpus == nodes[name].gpus_total == nodes[name].gpus_free  # whole, idle nodes
    decided = [p.job_id for p in decisions.placements] + [w.job_id for w in decisions.waiting]
    assert sorted(decided) == sorted(jobs)
    assert [w.position for w in decisions.waiting] == list(range(1, len(decisions.waiting) + 1))


@settings(max_examples=200, deadline=None)
@given(snapshots(), st.randoms(use_true_random=False))
def test_same_snapshot_gives_same_decisions_whatever_the_input_order(snapshot: Snapshot, rnd) -> None:
    shuffled_nodes = list(snapshot.nodes)
    shuffled_jobs = list(snapshot.pending)
    rnd.shuffle(shuffled_nodes)
    rnd.shuffle(shuffled_jobs)
    assert schedule(snapshot) == schedule(Snapshot(tuple(shuffled_nodes), tuple(shuffled_jobs)))


@settings(max_examples=200, deadline=None)
@given(snapshots())
def test_a_waiting_job_really_did_not_fit(snapshot: Snapshot) -> None:
    """Work-conserving: whatever waits could not have been placed on what was left."""
    decisions = schedule(snapshot)
    free = {n.name: n.gpus_free for n in snapshot.nodes if n.schedulable}
    for p in decisions.placements:
        for name, gpus in zip(p.node_names, p.gpus_held, strict=True):
            free[name] -= gpus
    nodes = {n.name: n for n in snapshot.nodes if n.schedulable}
    jobs = {j.id: j for j in snapshot.pending}
    for w in decisions.waiting:
        j = jobs[w.job_id]
        if j.nodes == 1:
            assert all(f < j.gpus_per_node for f in free.values())
        else:
            whole = [n for n, f in free.items() if f == nodes[n].gpus_total and nodes[n].gpus_total >= j.gpus_per_node]
            assert len(whole) < j.nodes


def test_a_job_backing_off_after_failed_launches_waits_and_blocks_nobody() -> None:
    held = replace(job(1, nodes=4), launch_failures=2, not_before=1_000.0)
    later = job(2, nodes=4)
    decisions = schedule(Snapshot(cluster(nodes=4), (held, later), now=990.0))
    # The older job is held back, and the nodes it would take go to the next one.
    assert [p.job_id for p in decisions.placements] == [2]
    (wait,) = decisions.waiting
    assert (wait.job_id, wait.reason_code) == (1, LAUNCH_BACKOFF)
    assert "Its last 2 launches in a row did not come up" in wait.reason and "00:16:40 UTC" in wait.reason
    # Once the pause is over it is placed like any other job.
    assert [p.job_id for p in schedule(Snapshot(cluster(nodes=4), (held,), now=1_000.0)).placements] == [1]


def test_a_held_job_keeps_its_place_but_waits_with_no_estimate_and_blocks_nobody() -> None:
    # The oldest job, of the whole cluster and starving: without its hold it would go first, or be promised every node.
    held = replace(job(1, nodes=4), submitted_at=-100_000.0, held="Held by its owner (alice).")
    later = job(2, nodes=4)
    decisions = schedule(Snapshot(cluster(nodes=4), (held, later), now=990.0))
    assert [p.job_id for p in decisions.placements] == [2]
    (wait,) = decisions.waiting
    assert (wait.job_id, wait.position, wait.reason_code, wait.reason) == (1, 1, HELD, "Held by its owner (alice).")
    assert (wait.estimated_start, decisions.reservations) == (None, ())
    # Released, it is placed like any other job.
    assert [p.job_id for p in schedule(Snapshot(cluster(nodes=4), (replace(held, held=""),))).placements] == [1]


def test_a_retry_goes_elsewhere_than_the_node_its_rank_failed_on_while_the_cluster_has_room() -> None:
    first = schedule(Snapshot(cluster(nodes=4), (job(1, nodes=2),))).placements[0].node_names
    retry = replace(job(1, nodes=2), avoid_nodes=(first[1],))
    again = schedule(Snapshot(cluster(nodes=4), (retry,))).placements[0].node_names
    assert first[1] not in again and len(again) == 2
    # Where the cluster has no other nodes of its size it is not stranded: it may go back.
    tight = replace(job(2, nodes=2), avoid_nodes=("n01",))
    assert sorted(schedule(Snapshot(cluster(nodes=2), (tight,))).placements[0].node_names) == ["n00", "n01"]
