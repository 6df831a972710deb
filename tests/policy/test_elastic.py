"""Elastic jobs: min_nodes..nodes whole nodes; start at the most that fit, grow onto idle nodes, shrink for priority."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model import Account, PendingJob, RunningJob, Snapshot, user_key
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, placed, running, snap, waiting

NODES = 8


def elastic(job_id: int, low: int, high: int, **kwargs: object) -> PendingJob:
    return replace(pend(job_id, nodes=high, **kwargs), min_nodes=low)  # type: ignore[arg-type]


def elastic_running(job_id: int, on: list[str], low: int, high: int, **kwargs: object) -> RunningJob:
    r = running(job_id, dict.fromkeys(on, 8), **kwargs)  # type: ignore[arg-type]
    return replace(r, min_nodes=low, max_nodes=high, gpus_per_node=8)


def names(*indices: int) -> list[str]:
    return [f"n{i:02d}" for i in indices]


def test_an_elastic_job_starts_on_the_most_nodes_that_are_free() -> None:
    busy = [running(10, dict.fromkeys(names(6, 7), 8), left=5 * HOUR)]
    decisions = schedule(snap([elastic(1, 2, 8)], busy, nodes=NODES))
    assert placed(decisions)[1].node_names == tuple(names(0, 1, 2, 3, 4, 5))
    assert placed(decisions)[1].gpus_held == (8,) * 6


def test_an_elastic_job_asking_for_many_nodes_does_not_go_ahead_of_an_older_gang_that_fits() -> None:
    # Eight nodes free: a 6-node gang and, submitted just after it, an elastic 2-8 job of the same class and wall time.
    # Weighed at its most (8 nodes) the elastic job outranked the gang, started on all eight and left it an hour
    # waiting; at its least it goes second, and takes the two nodes the gang leaves.
    gang = pend(1, nodes=6, age=61.0)
    decisions = schedule(snap([gang, elastic(2, 2, 8)], nodes=NODES))
    assert decisions.priorities[1].total > decisions.priorities[2].total
    assert decisions.priorities[2].factors["size"][0] == 2 * 8 / (NODES * 8)
    assert len(placed(decisions)[1].node_names) == 6
    assert len(placed(decisions)[2].node_names) == 2


def test_an_elastic_job_does_not_start_on_nodes_a_reservation_needs_before_it_would_end() -> None:
    # A starving 8-node gang holds every node from when n06 and n07 free up, in an hour.
    gang = pend(5, nodes=8, age=3 * HOUR)
    busy = [running(10, dict.fromkeys(names(6, 7), 8), left=HOUR)]
    long = schedule(snap([gang, elastic(1, 2, 8, wall=2 * HOUR)], busy, nodes=NODES), config(starvation_seconds=HOUR))
    assert 1 not in placed(long)
    assert waiting(long)[1].reason_code == "RESERVATION"
    assert "Needs 2 to 8 whole nodes with 8 GPUs" in waiting(long)[5].reason or waiting(long)[5].estimate == "reserved"
    short = schedule(snap([gang, elastic(1, 2, 8, wall=HOUR / 2)], busy, nodes=NODES), config(starvation_seconds=HOUR))
    # Done before the reservation starts: it backfills all six idle nodes.
    assert len(placed(short)[1].node_names) == 6


def test_an_elastic_job_below_its_minimum_waits_with_its_range_in_the_reason() -> None:
    busy = [running(10, dict.fromkeys(names(*range(1, 8)), 8), left=HOUR)]
    decisions = schedule(snap([elastic(1, 2, 8)], busy, nodes=NODES))
    assert decisions.placements == ()
    assert waiting(decisions)[1].reason.startswith("Needs 2 to 8 whole nodes with 8 GPUs; 1 is free")


def test_an_elastic_job_grows_onto_idle_nodes_up_to_its_most() -> None:
    job = elastic_running(1, names(0, 1), 2, 4)
    decisions = schedule(snap([], [job], nodes=NODES))
    (resize,) = decisions.resizes
    assert resize.job_id == 1 and resize.added == tuple(names(2, 3)) and resize.removed == ()
    assert resize.node_names == tuple(names(0, 1, 2, 3))
    assert resize.reason == "Grew onto whole nodes left idle: from 2 to 4 nodes."


def test_a_range_beyond_the_cluster_is_capped_at_the_nodes_there_are_at_each_decision() -> None:
    # -N 2-40 is stored as asked; the policy caps it at the 8 nodes there are, and at more once the cluster has them.
    decisions = schedule(snap([elastic(1, 2, 40)], nodes=NODES))
    assert len(placed(decisions)[1].node_names) == NODES
    busy = [running(10, dict.fromkeys(names(*range(1, 8)), 8), left=HOUR)]
    assert waiting(schedule(snap([elastic(1, 2, 40)], busy, nodes=NODES)))[1].reason.startswith("Needs 2 to 8 whole nodes")
    grown = schedule(snap([], [elastic_running(1, names(*range(NODES)), 2, 40)], nodes=NODES + 4))
    (resize,) = grown.resizes
    assert resize.reason == "Grew onto whole nodes left idle: from 8 to 12 nodes."
    # Cut to its least (8-40 on 8 nodes) it starts on 8 as a gang would, and grows once nodes are added.
    assert len(placed(schedule(snap([elastic(1, 8, 40)], nodes=NODES)))[1].node_names) == NODES
    assert schedule(snap([], [elastic_running(1, names(*range(NODES)), 8, 40)], nodes=NODES)).resizes == ()
    (resize,) = schedule(snap([], [elastic_running(1, names(*range(NODES)), 8, 40)], nodes=NODES + 2)).resizes
    assert len(resize.node_names) == NODES + 2


def test_growth_leaves_nodes_that_a_waiting_job_takes_and_that_a_reservation_needs() -> None:
    job = elastic_running(1, names(0, 1), 2, 8, left=3 * HOUR)
    # A production job takes two of the four idle nodes; a starving gang of 4 is promised the other two and the two
    # busy ones, in an hour: the elastic job, which runs three more hours, may take none of them.
    busy = running(10, dict.fromkeys(names(2, 3), 8), left=HOUR)
    starving = pend(6, nodes=4, age=3 * HOUR, wall=HOUR)
    decisions = schedule(snap([pend(5, nodes=2, rank=0), starving], [job, busy], nodes=NODES), config(starvation_seconds=HOUR))
    assert set(placed(decisions)[5].node_names) <= set(names(4, 5, 6, 7))
    reserved = {r.job_id: r for r in decisions.reservations}[6]
    assert len(reserved.node_names) == 4
    assert decisions.resizes == ()


def test_an_elastic_job_shrinks_instead_of_being_preempted_for_a_higher_class() -> None:
    low = elastic_running(1, names(*range(8)), 2, 8, rank=2, ran=HOUR, left=5 * HOUR)
    urgent = pend(2, nodes=4, rank=0)
    decisions = schedule(snap([urgent], [low], nodes=NODES))
    assert decisions.preemptions == ()
    (resize,) = decisions.resizes
    assert resize.removed == tuple(names(7, 6, 5, 4)) and resize.node_names == tuple(names(0, 1, 2, 3))
    assert resize.reason == "Shrunk for job 2, which has priority: from 8 to 4 nodes."
    assert set(placed(decisions)[2].node_names) == set(names(4, 5, 6, 7))


def test_a_job_that_will_shrink_an_elastic_job_too_new_to_shrink_says_it_will_shrink_it_not_preempt() -> None:
    # The elastic job started 2 minutes ago (minimum run time 10): the job of a higher class waits for it, and its
    # reason said "It may preempt the jobs in its way", though the cycle then shrinks the elastic job, stopping no job.
    low = elastic_running(1, names(*range(8)), 2, 8, rank=2, ran=120.0, left=5 * HOUR)
    decisions = schedule(snap([pend(2, nodes=6, rank=1)], [low], nodes=NODES), config(preemption_min_runtime_seconds=600))
    wait = waiting(decisions)[2]
    assert wait.reason.endswith("the minimum run time (stopping no job).")
    assert "It may shrink elastic job 1 from " in wait.reason and "preempt" not in wait.reason
    assert wait.estimated_start == NOW + 480.0
    # Where a job must be stopped whole for the rest, the reason still says it may preempt.
    plain = running(3, dict.fromkeys(names(6, 7), 8), rank=2, ran=120.0, left=5 * HOUR)
    low = elastic_running(1, names(*range(6)), 5, 6, rank=2, ran=120.0, left=5 * HOUR)
    decisions = schedule(snap([pend(2, nodes=3, rank=1)], [low, plain], nodes=NODES), config(preemption_min_runtime_seconds=600))
    assert "It may preempt the jobs in its way from " in waiting(decisions)[2].reason


def test_two_jobs_waiting_for_one_elastic_job_to_be_old_enough_to_shrink_both_expect_to_start_then() -> None:
    # 14 nodes can go from the elastic job once it has run 10 minutes: enough for both 6-node jobs. The second read
    # 5 hours (the elastic job's end) with nothing but "0 are free", as the search that failed for the first was not
    # asked again for it; a third finds only 2 of the elastic job's nodes left and waits for its end.
    low = elastic_running(1, names(*range(16)), 2, 16, rank=2, ran=120.0, left=5 * HOUR)
    pending = [pend(2, nodes=6, rank=1), pend(3, nodes=6, rank=1, age=30.0), pend(4, nodes=6, rank=1, age=20.0)]
    decisions = schedule(snap(pending, [low], nodes=16), config(preemption_min_runtime_seconds=600))
    wait = waiting(decisions)
    for job_id in (2, 3):
        assert wait[job_id].estimated_start == NOW + 480.0
        assert "It may shrink elastic job 1 from " in wait[job_id].reason
    assert (wait[4].estimated_start or 0) >= NOW + 5 * HOUR and "shrink" not in wait[4].reason


def test_a_job_waiting_for_work_to_end_expects_to_start_when_the_rest_can_come_from_shrinking_an_elastic_job() -> None:
    """The plan read the elastic job's end at full size (5 hours), though once the plain job ends in an hour the cycle
    shrinks the elastic job for the two nodes still short and starts the job: its estimate is that hour, and says so."""
    plain = running(3, dict.fromkeys(names(0, 1, 2, 3, 4), 8), rank=1, ran=HOUR, left=HOUR)
    flexible = elastic_running(1, names(5, 6, 7), 1, 3, rank=2, ran=HOUR, left=5 * HOUR)
    second = pend(4, nodes=4, rank=1, age=30.0)
    decisions = schedule(snap([pend(2, nodes=7, rank=1), second], [plain, flexible], nodes=NODES))
    wait = waiting(decisions)
    assert (wait[2].estimated_start, wait[2].estimate) == (NOW + HOUR, "planned")
    assert wait[2].reason.endswith("It may shrink elastic job 1 for the nodes it lacks from 2026-11-23 13:00 UTC (stopping no job).")
    # The next job finds nothing left to take of the elastic job (it keeps its least): it waits for the first to end.
    assert wait[4].estimated_start == NOW + 2 * HOUR and "shrink" not in wait[4].reason
    assert decisions.resizes == ()  # nothing is shrunk now: the plain job's nodes are not free yet
    # An hour on, the plain job gone, the cycle does what the plan said: it shrinks the elastic job and starts the job.
    later = schedule(snap([pend(2, nodes=7, rank=1, age=HOUR + 60.0)], [replace(flexible, started_at=NOW - 2 * HOUR)], nodes=NODES))
    (resize,) = later.resizes
    assert (resize.job_id, resize.node_names, resize.for_job_id) == (1, tuple(names(5)), 2)
    assert len(placed(later)[2].node_names) == 7


def test_the_plan_does_not_shrink_an_elastic_job_for_one_the_policy_would_not_shrink_it_for() -> None:
    """Of the same class, the waiting job has no claim on the elastic job's nodes: it expects them at its end, as before.
    Nor with preemption off, when the walk shrinks no one, nor for a preemptible job its quota has no room for then:
    it would borrow, and the walk shrinks no one for a borrower."""
    plain = running(3, dict.fromkeys(names(0, 1, 2, 3, 4), 8), rank=1, ran=HOUR, left=HOUR)
    flexible = elastic_running(1, names(5, 6, 7), 1, 3, rank=1, ran=HOUR, left=5 * HOUR)
    wait = waiting(schedule(snap([pend(2, nodes=7, rank=1)], [plain, flexible], nodes=NODES)))[2]
    assert wait.estimated_start == NOW + 5 * HOUR and "shrink" not in wait.reason
    lower = replace(flexible, class_rank=2)
    no_preemption = waiting(schedule(snap([pend(2, nodes=7, rank=1)], [plain, lower], nodes=NODES), config(preemption=False)))[2]
    assert no_preemption.estimated_start == NOW + 5 * HOUR
    borrower = pend(2, nodes=7, rank=1, preemptible=True)
    for quota, expected in ((8, NOW + 5 * HOUR), (56, NOW + HOUR)):
        accounts = (Account(user_key("ann"), max_gpus=quota),)
        wait = waiting(schedule(snap([borrower], [plain, lower], nodes=NODES, accounts=accounts)))[2]
        assert wait.estimated_start == expected, quota
    # An hour on it does borrow, and waits for the elastic job's end: the plan said so.
    accounts = (Account(user_key("ann"), max_gpus=8),)
    later = schedule(
        snap([replace(borrower, submitted_at=NOW - HOUR)], [replace(lower, started_at=NOW - 2 * HOUR)], nodes=NODES, accounts=accounts)
    )
    assert later.resizes == () and later.placements == ()


def test_an_elastic_job_never_shrinks_below_its_minimum() -> None:
    low = elastic_running(1, names(*range(8)), 6, 8, rank=2, ran=HOUR, left=5 * HOUR)
    decisions = schedule(snap([pend(2, nodes=4, rank=0)], [low], nodes=NODES))
    # Two nodes are not enough: rather than shrink below six it is preempted whole (the old rule).
    assert decisions.resizes == ()
    assert [p.job_id for p in decisions.preemptions] == [1]


def test_a_job_with_priority_shrinks_elastic_jobs_first_and_preempts_only_for_the_rest() -> None:
    """Shrinking could free two of the four nodes the job needs: before, nothing was shrunk and the search stopped the
    elastic job whole as well as the plain one beside it (two jobs lost for room one of them made)."""
    flexible = elastic_running(1, names(0, 1, 2, 3), 2, 4, rank=2, ran=HOUR, left=5 * HOUR)
    plain = running(2, dict.fromkeys(names(4, 5), 8), rank=2, ran=HOUR, left=5 * HOUR)
    same_class = running(3, dict.fromkeys(names(6, 7), 8), rank=0, ran=HOUR, left=5 * HOUR)
    decisions = schedule(snap([pend(9, nodes=4, rank=0)], [flexible, plain, same_class], nodes=NODES))
    assert [p.job_id for p in decisions.preemptions] == [2]
    (resize,) = decisions.resizes
    assert resize.job_id == 1 and resize.removed == tuple(names(3, 2)) and resize.node_names == tuple(names(0, 1))
    assert resize.for_job_id == 9  # what a submit's estimate names
    assert set(placed(decisions)[9].node_names) == set(names(2, 3, 4, 5))


def test_the_rest_is_found_among_jobs_not_being_shrunk_before_an_elastic_one_is_stopped_whole() -> None:
    """An elastic 2..4 job giving up its two spare nodes was stopped whole too, beside the plain job whose four nodes made
    up the rest: its two remaining nodes cost less work lost than two of the plain job's. Stopping the plain job alone,
    with the shrink, is enough; the elastic job runs on, on its fewest nodes."""
    flexible = elastic_running(1, names(0, 1, 2, 3), 2, 4, rank=2, ran=HOUR, left=5 * HOUR)
    plain = running(2, dict.fromkeys(names(4, 5, 6, 7), 8), rank=2, ran=HOUR, left=5 * HOUR)
    decisions = schedule(snap([pend(9, nodes=6, rank=0)], [flexible, plain], nodes=NODES))
    assert [p.job_id for p in decisions.preemptions] == [2]
    (resize,) = decisions.resizes
    assert (resize.job_id, resize.node_names, resize.for_job_id) == (1, tuple(names(0, 1)), 9)
    assert set(placed(decisions)[9].node_names) == set(names(2, 3, 4, 5, 6, 7))


def test_a_shrink_gives_only_what_the_jobs_stopped_whole_leave_short() -> None:
    """The CLI walk: a 10-node job took 4 idle nodes, 4 from an elastic job and the 3 of a preempted one, one too many,
    and the elastic job grew back onto it in the same cycle: 6 -> 2 -> 3 nodes, two re-rendezvous for one."""
    flexible = elastic_running(1, names(0, 1, 2, 3, 4, 5), 2, 6, rank=2, ran=HOUR, left=5 * HOUR)
    plain = running(2, dict.fromkeys(names(6, 7, 8), 8), rank=2, ran=HOUR, left=5 * HOUR)
    decisions = schedule(snap([pend(9, nodes=10, rank=0)], [flexible, plain], nodes=13))
    assert [p.job_id for p in decisions.preemptions] == [2]
    (resize,) = decisions.resizes
    assert (resize.job_id, resize.node_names) == (1, tuple(names(0, 1, 2)))
    assert len(placed(decisions)[9].node_names) == 10


def test_an_elastic_job_stopped_whole_for_the_rest_is_not_also_shrunk() -> None:
    # Its two spare nodes and two more are needed, and only it can give them: it is preempted, with no resize beside.
    flexible = elastic_running(1, names(*range(8)), 6, 8, rank=2, ran=HOUR, left=5 * HOUR)
    decisions = schedule(snap([pend(9, nodes=4, rank=0)], [flexible], nodes=NODES))
    assert [p.job_id for p in decisions.preemptions] == [1] and decisions.resizes == ()
    assert len(placed(decisions)[9].node_names) == 4


def test_a_quota_bounds_how_large_an_elastic_job_starts_and_grows() -> None:
    accounts = (Account(user_key("ann"), max_gpus=24),)
    decisions = schedule(snap([elastic(1, 2, 8)], nodes=NODES, accounts=accounts))
    assert len(placed(decisions)[1].node_names) == 3
    grown = schedule(snap([], [elastic_running(1, names(0, 1), 2, 8, user="ann")], nodes=NODES, accounts=accounts))
    assert grown.resizes[0].node_names == tuple(names(0, 1, 2))


def test_a_preemptible_elastic_job_borrows_when_its_quota_has_no_room_for_its_fewest_nodes() -> None:
    """It waited for good, "Needs 2 to 8 whole nodes with 8 GPUs; 5 are free", while a preemptible job of fixed size
    submitted after it borrowed at once."""
    accounts = (Account(user_key("ann"), max_gpus=24),)
    mine = running(10, dict.fromkeys(names(0, 1), 8), user="ann")
    flexible = replace(elastic(1, 2, 8), preemptible=True)
    decisions = schedule(snap([flexible], [mine], nodes=NODES, accounts=accounts))
    assert placed(decisions)[1].over_quota and len(placed(decisions)[1].node_names) == 6
    # Not preemptible, it waits on its quota and says so.
    held = schedule(snap([elastic(1, 2, 8)], [mine], nodes=NODES, accounts=accounts))
    assert waiting(held)[1].reason_code == "QUOTA_GPUS"


@settings(max_examples=120, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 4), st.integers(0, 4), st.sampled_from([0.5, 1.0, 3.0])), min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 7), st.integers(1, 3), st.sampled_from([0.5, 2.0])), max_size=4),
    st.lists(st.tuples(st.integers(1, 6), st.sampled_from([1.0, 4.0]), st.integers(0, 2)), max_size=4),
)
def test_property_elastic_sizes_stay_within_bounds_and_never_take_a_reserved_node_early(
    elastic_asks: list[tuple[int, int, float]],
    running_asks: list[tuple[int, int, float]],
    gang_asks: list[tuple[int, float, int]],
) -> None:
    """Over random clusters: every elastic placement and resize stays within min..max and on whole nodes, and no node an
    elastic job starts or grows on is promised to a reservation that starts before that job's wall time ends."""
    taken: set[str] = set()
    jobs: list[RunningJob] = []
    for i, (first, count, left) in enumerate(running_asks):
        on = [n for n in names(*range(first, min(8, first + count))) if n not in taken]
        if on:
            taken |= set(on)
            low = max(1, len(on) - 1)
            jobs.append(replace(elastic_running(100 + i, on, low, len(on) + 2, left=left * HOUR, rank=2, ran=HOUR)))
    pending = [elastic(i + 1, low, low + extra, wall=wall * HOUR, rank=1) for i, (low, extra, wall) in enumerate(elastic_asks)]
    pending += [pend(50 + i, nodes=n, wall=wall * HOUR, rank=rank, age=3 * HOUR) for i, (n, wall, rank) in enumerate(gang_asks)]
    snapshot: Snapshot = snap(pending, jobs, nodes=NODES)
    decisions = schedule(snapshot, config(starvation_seconds=HOUR))
    by_id = {j.id: j for j in pending}
    ends: dict[str, list[tuple[int, float]]] = {}
    for p in decisions.placements:
        job = by_id[p.job_id]
        if job.elastic:
            assert job.min_nodes <= len(p.node_names) <= job.nodes and all(g == 8 for g in p.gpus_held)
        for name in p.node_names:
            ends.setdefault(name, []).append((p.job_id, NOW + job.wall_seconds))
    bounds = {r.id: r for r in jobs}
    for resize in decisions.resizes:
        r = bounds[resize.job_id]
        assert r.min_nodes <= len(resize.node_names) <= r.max_nodes
        for name in resize.added:
            ends.setdefault(name, []).append((r.id, r.ends_at))
    for reservation in decisions.reservations:
        for name in reservation.node_names:
            for job_id, end in ends.get(name, []):
                assert end <= reservation.start + 1e-6 or job_id == reservation.job_id, (reservation, name, job_id)
