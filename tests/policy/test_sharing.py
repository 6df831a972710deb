"""GPU slices: fractions and memory slices of a GPU on the nodes a site shares (policy/sharing.py)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model import ESTIMATE_PLANNED, NO_ROOM, QUOTA_GPUS, Account, NodeView, PendingJob, RunningJob, Snapshot, user_key
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, pend, placed, running, waiting

WHOLE = NodeView("a-whole", 8, 8, rack="r0")
QUARTERS = NodeView("ts-quarters", 2, 0, rack="r1", sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25)
HALVES = NodeView("mps-halves", 2, 0, rack="r1", sharing="mps", slices_per_gpu=2, slice_gpus=0.5, slice_memory_gb=40)
MIG = NodeView("mig-1g", 1, 0, rack="r1", sharing="mig", slices_per_gpu=7, slice_gpus=1 / 7, slice_memory_gb=10)


def sliced(job_id: int, fraction: float = 0.25, *, memory: float = 0.0, isolation: bool = False, **kwargs: object) -> PendingJob:
    return replace(pend(job_id, gpus=1, **kwargs), gpu_fraction=fraction, gpu_memory_gb=memory, gpu_isolation=isolation)  # type: ignore[arg-type]


def on_slice(job_id: int, node: str, share: float, *, left: float = HOUR, user: str = "zed") -> RunningJob:
    return replace(running(job_id, {node: 1}, left=left, user=user), gpus_held=(share,))


def cluster(*jobs: PendingJob, nodes: tuple[NodeView, ...] = (WHOLE, QUARTERS, HALVES, MIG), **kwargs: object) -> Snapshot:
    return Snapshot(nodes=nodes, pending=jobs, now=NOW, **kwargs)  # type: ignore[arg-type]


def test_a_quarter_gpu_job_takes_a_quarter_slice_and_holds_a_quarter_of_a_gpu() -> None:
    decisions = schedule(cluster(sliced(1, 0.25)))
    placement = placed(decisions)[1]
    assert placement.node_names == ("ts-quarters",)
    assert placement.gpus_held == (0.25,)
    assert placement.gpu_slot == 0  # no GPU is shared yet: the first one is opened


def test_slices_pack_onto_the_gpu_already_shared_before_opening_another() -> None:
    used = replace(QUARTERS, slices_used=(0, 2))
    decisions = schedule(cluster(sliced(1), sliced(2), sliced(3), nodes=(used,)))
    slots = [placed(decisions)[j].gpu_slot for j in (1, 2, 3)]
    # GPU 1 holds two already: it is filled to four before GPU 0 is opened.
    assert slots == [1, 1, 0]


def test_a_job_takes_the_smallest_slice_that_meets_its_ask() -> None:
    decisions = schedule(cluster(sliced(1, 0.2), sliced(2, 0.4)))
    assert placed(decisions)[1].node_names == ("ts-quarters",)
    assert placed(decisions)[2].node_names == ("mps-halves",)
    assert placed(decisions)[2].gpus_held == (0.5,)


def test_a_memory_ask_goes_only_where_memory_is_enforced_and_large_enough() -> None:
    decisions = schedule(cluster(sliced(1, 0.0, memory=10), sliced(2, 0.0, memory=20)))
    # 10 GB: the MIG 1g.10gb slice is the smallest that guarantees it; time-slicing guarantees no memory.
    assert placed(decisions)[1].node_names == ("mig-1g",)
    assert placed(decisions)[2].node_names == ("mps-halves",)


def test_isolation_goes_only_to_mig_and_says_so_when_no_mig_slice_meets_the_ask() -> None:
    decisions = schedule(cluster(sliced(1, 0.1, isolation=True), sliced(2, 0.25, isolation=True)))
    assert placed(decisions)[1].node_names == ("mig-1g",)
    wait = waiting(decisions)[2]
    assert wait.reason_code == NO_ROOM
    assert "a slice of at least 0.25 GPU, isolated (MIG)" in wait.reason and "no node that shares its GPUs offers one" in wait.reason
    # No node is closed: it says no node offers such slices, not that they are gone, drained or held.
    assert wait.reason.endswith("No node offers such slices: a smaller ask may fit.")
    # A closed node that would offer one is named with why.
    big_mig = replace(MIG, name="mig-3g", slices_per_gpu=2, slice_gpus=0.5, schedulable=False, closed_why="cordoned")
    closed = schedule(cluster(sliced(2, 0.25, isolation=True), nodes=(WHOLE, QUARTERS, HALVES, MIG, big_mig)))
    assert waiting(closed)[2].reason.endswith("offers one now. mig-3g (cordoned) takes no new work now.")


def test_whole_gpu_and_multi_node_jobs_never_land_on_shared_nodes() -> None:
    shared_only = (QUARTERS, HALVES, MIG, replace(WHOLE, gpus_free=0))
    decisions = schedule(cluster(pend(1, gpus=1), pend(2, nodes=2, gpus=1), nodes=shared_only))
    assert decisions.placements == ()
    reason = waiting(decisions)[1].reason
    # The shared nodes' GPUs are said apart: `muster nodes` shows them free beside a reason that said none was.
    assert reason.startswith("Needs 1 GPU on one node; the most free on any node is 0 (0 GPUs free in the cluster).")
    shared = sum(n.gpus_total for n in (QUARTERS, HALVES, MIG))
    assert reason.endswith(f" Nodes that share their GPUs ({shared} GPUs) take GPU-slice jobs only.")


def test_a_slice_job_waits_with_an_estimate_from_the_held_slices_ends() -> None:
    full = replace(HALVES, slices_used=(2, 2))
    held = [on_slice(10 + i, "mps-halves", 0.5, left=(i + 1) * HOUR) for i in range(4)]
    decisions = schedule(cluster(sliced(1, 0.5), sliced(2, 0.5, wall=2 * HOUR), nodes=(WHOLE, full), running=tuple(held)))
    assert decisions.placements == ()
    first, second = waiting(decisions)[1], waiting(decisions)[2]
    assert "all 4 such slices (on 1 node) are held" in first.reason
    assert (first.estimate, first.estimated_start) == (ESTIMATE_PLANNED, NOW + HOUR)
    # The first is planned on the slice freeing first; the second on the next one.
    assert second.estimated_start == NOW + 2 * HOUR


def test_a_users_quota_counts_slices_exactly() -> None:
    accounts = {user_key("ann"): Account(user_key("ann"), max_gpus=1)}
    jobs = [sliced(i, 0.25) for i in range(1, 6)]
    decisions = schedule(cluster(*jobs, accounts=accounts, running=()))
    assert sorted(placed(decisions)) == [1, 2, 3, 4]
    assert waiting(decisions)[5].reason_code == QUOTA_GPUS
    assert "1 of 1 GPUs of the quota of user ann are in use; this job needs 0.25." in waiting(decisions)[5].reason


def test_a_running_slice_counts_its_share_against_a_whole_gpu_jobs_quota() -> None:
    accounts = {user_key("ann"): Account(user_key("ann"), max_gpus=2)}
    snap = cluster(pend(1, gpus=2), accounts=accounts, running=(on_slice(9, "ts-quarters", 0.25, user="ann"),))
    decisions = schedule(snap)
    assert "0.25 of 2 GPUs" in waiting(decisions)[1].reason


def test_the_jobs_ahead_in_the_queue_use_the_quota_first_whatever_their_kind() -> None:
    # ann may hold 8 GPUs and holds them for another hour. Her 8-GPU job waits ahead of her quarter-GPU one: it is
    # planned at the hour, and the slice after it, not the slice first and the 8-GPU job an hour later.
    accounts = {user_key("ann"): Account(user_key("ann"), max_gpus=8)}
    mine = running(9, {"a-whole": 8}, user="ann", left=HOUR)
    snap = cluster(pend(1, gpus=8, age=3000), sliced(2, 0.25, age=100), accounts=accounts, running=(mine,))
    w = waiting(schedule(replace(snap, nodes=(replace(WHOLE, gpus_free=0), QUARTERS))))
    assert [w[1].position, w[2].position] == [1, 2]
    assert [(w[i].reason_code, w[i].estimated_start) for i in (1, 2)] == [(QUOTA_GPUS, NOW + HOUR), (QUOTA_GPUS, NOW + 2 * HOUR)]


def test_a_budget_counts_a_slice_as_its_share_of_the_node() -> None:
    # 0.25 of a 2-GPU node for 4 hours is 0.5 node-hours: within a budget of 0.6, not of 0.4.
    job = sliced(1, 0.25, wall=4 * HOUR)
    # (Before it is placed, the bound is the largest share any slice meeting its ask could be: here one pool.)
    fits = schedule(cluster(job, nodes=(QUARTERS,), accounts={user_key("ann"): Account(user_key("ann"), node_hours_left=0.6)}))
    held = schedule(cluster(job, nodes=(QUARTERS,), accounts={user_key("ann"): Account(user_key("ann"), node_hours_left=0.4)}))
    assert 1 in placed(fits)
    assert "this job may use 0.5 (a slice of 0.125 of a node x 4.00 h)" in waiting(held)[1].reason


NODES = st.lists(
    st.tuples(st.sampled_from(["time-slicing", "mps", "mig", ""]), st.integers(1, 4), st.integers(1, 7)), min_size=1, max_size=5
)
ASKS = st.lists(
    st.tuples(st.sampled_from([0.0, 0.1, 0.25, 0.5]), st.sampled_from([0.0, 10.0, 20.0]), st.booleans(), st.integers(0, 2)),
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(NODES, ASKS, st.integers(1, 4))
def test_property_no_gpu_above_one_and_no_slice_under_whole_gpu_work(nodes: list, asks: list, cycles: int) -> None:  # type: ignore[type-arg]
    """Over cycles of slice jobs, whole-GPU jobs and gangs: no GPU's slices sum above 1, no slice on an unshared node,
    no whole-GPU or multi-node job on a shared node."""
    views = []
    for i, (mode, gpus, per_gpu) in enumerate(nodes):
        if mode:
            views.append(
                NodeView(f"s{i}", gpus, 0, sharing=mode, slices_per_gpu=per_gpu, slice_gpus=1 / per_gpu, slice_memory_gb=80 / per_gpu)
            )
        else:
            views.append(NodeView(f"w{i}", gpus, gpus))
    shared = {v.name: v for v in views if v.sharing}
    held: dict[str, Counter[int]] = {name: Counter() for name in shared}
    job_id = 0
    for _ in range(cycles):
        pending = []
        for fraction, memory, isolation, kind in asks:
            job_id += 1
            if kind == 0 and (fraction or memory or isolation):
                pending.append(sliced(job_id, fraction, memory=memory, isolation=isolation))
            else:
                pending.append(pend(job_id, nodes=kind or 1, gpus=1))
        current = tuple(replace(v, slices_used=tuple(held[v.name][g] for g in range(v.gpus_total))) if v.sharing else v for v in views)
        decisions = schedule(Snapshot(nodes=current, pending=tuple(pending), now=NOW))
        for p in decisions.placements:
            job = next(j for j in pending if j.id == p.job_id)
            on_shared = [n for n in p.node_names if n in shared]
            if job.shares_gpu:
                assert len(p.node_names) == 1 and on_shared and p.gpu_slot is not None
                node = shared[p.node_names[0]]
                assert p.gpus_held == (node.slice_gpus,) and node.slice_gpus + 1e-9 >= job.gpu_fraction
                held[node.name][p.gpu_slot] += 1
            else:
                assert not on_shared
        for name, counts in held.items():
            node = shared[name]
            assert all(n * node.slice_gpus <= 1 + 1e-9 for n in counts.values())
            assert all(0 <= gpu < node.gpus_total for gpu in counts)
        views = [replace(v, gpus_free=0) if not v.sharing else v for v in views]
