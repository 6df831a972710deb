"""An estimated start for every waiting job: planned forward as the work is expected to run, from when its limits let it run."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from policy.model import BUDGET, ESTIMATE_AFTER, ESTIMATE_NONE, ESTIMATE_PLANNED, QUOTA_GPUS, Account, user_key, when
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, running, snap, waiting


def test_jobs_are_planned_one_after_another_in_priority_order_around_the_running_work() -> None:
    # One node, busy for an hour: three 8-GPU jobs of an hour each start at +1 h, +2 h and +3 h.
    jobs = [running(10, {"n00": 8}, left=HOUR)]
    decisions = schedule(snap([pend(1, age=300), pend(2, age=200), pend(3, age=100)], jobs, nodes=1), config(starvation_seconds=10 * HOUR))
    w = waiting(decisions)
    assert [(w[i].estimate, w[i].estimated_start) for i in (1, 2, 3)] == [
        (ESTIMATE_PLANNED, NOW + HOUR),
        (ESTIMATE_PLANNED, NOW + 2 * HOUR),
        (ESTIMATE_PLANNED, NOW + 3 * HOUR),
    ]


def test_a_gang_is_planned_on_the_nodes_that_open_last_leaving_those_open_sooner_to_the_jobs_after_it() -> None:
    """The browser walk: an 8-node job planned for when a 12-node job ends took the 4 nodes free half an hour sooner,
    so the job after it, which started there as soon as they were free, was planned 56 minutes late."""
    jobs = [running(10, {"n00": 8, "n01": 8, "n02": 8}, left=HOUR), running(11, {"n03": 8}, left=HOUR / 2)]
    gang, after = pend(1, nodes=3, age=300), pend(2, age=200)
    decisions = schedule(snap([gang, after], jobs, nodes=4), config(starvation_seconds=10 * HOUR))
    w = waiting(decisions)
    assert [(w[i].estimate, w[i].estimated_start) for i in (1, 2)] == [
        (ESTIMATE_PLANNED, NOW + HOUR),
        (ESTIMATE_PLANNED, NOW + HOUR / 2),
    ]


def test_the_plan_follows_predicted_run_times_where_there_are_any() -> None:
    # The running job may hold n00 for two hours but is expected to end in half an hour; the first waiting job asks
    # an hour and is expected to take twenty minutes (its owner's recent runs).
    jobs = [replace(running(10, {"n00": 8}, left=2 * HOUR), expected_end=NOW + HOUR / 2)]
    first = replace(pend(1, age=300), expected_seconds=HOUR / 3)
    decisions = schedule(snap([first, pend(2, age=200)], jobs, nodes=1), config(starvation_seconds=10 * HOUR))
    w = waiting(decisions)
    assert [(w[i].estimate, w[i].estimated_start) for i in (1, 2)] == [
        (ESTIMATE_PLANNED, NOW + HOUR / 2),
        (ESTIMATE_PLANNED, NOW + HOUR / 2 + HOUR / 3),
    ]


def test_a_prediction_of_no_time_at_all_is_a_prediction_not_a_missing_one() -> None:
    # The owner's last jobs ended as they started: the job planned first is expected gone at once, not after its hour.
    jobs = [running(10, {"n00": 8}, left=HOUR / 2)]
    first = replace(pend(1, age=300), expected_seconds=0.0)
    decisions = schedule(snap([first, pend(2, age=200)], jobs, nodes=1), config(starvation_seconds=10 * HOUR))
    w = waiting(decisions)
    assert [w[i].estimated_start for i in (1, 2)] == [NOW + HOUR / 2, NOW + HOUR / 2]


def test_past_the_planned_jobs_the_estimate_is_a_lower_bound() -> None:
    jobs = [running(10, {"n00": 8}, left=HOUR)]
    pending = [pend(1, age=300), pend(2, age=200), pend(3, age=100)]
    w = waiting(schedule(snap(pending, jobs, nodes=1), config(starvation_seconds=10 * HOUR, plan_jobs=1)))
    assert (w[1].estimate, w[1].estimated_start) == (ESTIMATE_PLANNED, NOW + HOUR)
    assert [(w[i].estimate, w[i].estimated_start) for i in (2, 3)] == [(ESTIMATE_AFTER, NOW + HOUR)] * 2


def test_a_job_held_by_its_quota_is_planned_from_when_its_owners_jobs_end() -> None:
    quota = (Account(user_key("ann"), max_gpus=8),)
    mine = running(10, {"n00": 8}, user="ann", left=2 * HOUR)
    w = waiting(schedule(snap([pend(1, user="ann")], [mine], accounts=quota)))
    # n01 is idle now, but ann's quota is full until her job ends.
    assert (w[1].reason_code, w[1].estimate, w[1].estimated_start) == (QUOTA_GPUS, ESTIMATE_PLANNED, NOW + 2 * HOUR)


def test_a_job_held_by_its_budget_is_planned_from_the_renewal_or_has_no_estimate() -> None:
    renews = (Account(user_key("ann"), node_hours_left=0.0, budget_resets_at=NOW + 5 * HOUR, node_hours_per_period=10.0),)
    w = waiting(schedule(snap([pend(1, user="ann")], accounts=renews)))
    assert (w[1].reason_code, w[1].estimate, w[1].estimated_start) == (BUDGET, ESTIMATE_PLANNED, NOW + 5 * HOUR)
    unknown = (Account(user_key("ann"), node_hours_left=0.0),)
    w = waiting(schedule(snap([pend(1, user="ann")], accounts=unknown)))
    assert (w[1].reason_code, w[1].estimate, w[1].estimated_start) == (BUDGET, ESTIMATE_NONE, None)


def test_a_renewed_budget_that_fits_two_jobs_gets_two_jobs_planned_at_the_renewal() -> None:
    # ann's budget is spent until +5 h; it renews at 2.5 node-hours. Three one-node jobs of an hour wait on it: the
    # renewal lets two of them start, and the third is not told it starts then too.
    accounts = (Account(user_key("ann"), node_hours_left=0.0, budget_resets_at=NOW + 5 * HOUR, node_hours_per_period=2.5),)
    w = waiting(schedule(snap([pend(1, age=300), pend(2, age=200), pend(3, age=100)], nodes=4, accounts=accounts)))
    assert [(w[i].reason_code, w[i].estimated_start) for i in (1, 2, 3)] == [
        (BUDGET, NOW + 5 * HOUR),
        (BUDGET, NOW + 5 * HOUR),
        (BUDGET, None),
    ]


def test_what_runs_past_the_renewal_is_charged_to_the_renewed_budget() -> None:
    # ann's gang runs two nodes for 7 more hours: 4 of the renewed 5 node-hours are committed to it from +5 h.
    accounts = (Account(user_key("ann"), node_hours_left=14.5, budget_resets_at=NOW + 5 * HOUR, node_hours_per_period=5.0),)
    mine = running(10, {"n00": 8, "n01": 8}, user="ann", left=7 * HOUR)
    w = waiting(schedule(snap([pend(1, nodes=2)], [mine], nodes=4, accounts=accounts)))
    assert (w[1].reason_code, w[1].estimated_start) == (BUDGET, None)
    roomier = (replace(accounts[0], node_hours_per_period=6.0),)
    w = waiting(schedule(snap([pend(1, nodes=2)], [mine], nodes=4, accounts=roomier)))
    assert (w[1].reason_code, w[1].estimated_start) == (BUDGET, NOW + 5 * HOUR)


def test_jobs_planned_before_a_job_spend_the_budget_it_is_planned_against() -> None:
    # One node, busy for an hour; ann has 1.5 node-hours for new jobs. Her first job fits in them and is planned at
    # +1 h; the second fits in the nodes at +2 h but not in what the first leaves: it is planned at the renewal.
    accounts = (Account(user_key("ann"), node_hours_left=1.5, budget_resets_at=NOW + 5 * HOUR, node_hours_per_period=10.0),)
    jobs = [running(10, {"n00": 8}, left=HOUR)]
    decisions = schedule(snap([pend(1, age=300), pend(2, age=200)], jobs, nodes=1, accounts=accounts), config(starvation_seconds=10 * HOUR))
    w = waiting(decisions)
    assert [w[i].estimated_start for i in (1, 2)] == [NOW + HOUR, NOW + 5 * HOUR]


def test_a_quota_that_fits_one_job_at_a_time_has_its_waiting_jobs_planned_one_after_another() -> None:
    # ann may hold 20 GPUs: her 2x8 gang runs for two more hours, and three more of an hour each wait for it. The
    # cluster has room for all of them; her quota for one at a time.
    quota = (Account(user_key("ann"), max_gpus=20),)
    mine = running(10, {"n00": 8, "n01": 8}, user="ann", left=2 * HOUR)
    pending = [pend(i, nodes=2, user="ann", age=300 - i) for i in (1, 2, 3)]
    w = waiting(schedule(snap(pending, [mine], nodes=8, accounts=quota), config(starvation_seconds=10 * HOUR)))
    assert [(w[i].reason_code, w[i].estimated_start) for i in (1, 2, 3)] == [
        (QUOTA_GPUS, NOW + 2 * HOUR),
        (QUOTA_GPUS, NOW + 3 * HOUR),
        (QUOTA_GPUS, NOW + 4 * HOUR),
    ]


def test_a_job_waiting_for_room_is_planned_where_its_quota_has_room_too() -> None:
    # ann's quota (8 GPUs) has room now, but no node does: the cluster is full for an hour. Her first job is planned
    # at +1 h; the second, though a node frees then too, only when the first is expected gone.
    quota = (Account(user_key("ann"), max_gpus=8),)
    jobs = [running(10, {"n00": 8}, left=HOUR), running(11, {"n01": 8}, left=HOUR)]
    pending = [pend(1, user="ann", age=300), pend(2, user="ann", age=200), pend(3, user="bob", age=100)]
    w = waiting(schedule(snap(pending, jobs, accounts=quota), config(starvation_seconds=10 * HOUR)))
    assert [w[i].estimated_start for i in (1, 2, 3)] == [NOW + HOUR, NOW + 2 * HOUR, NOW + HOUR]


def test_a_preemptible_job_may_borrow_so_its_owners_quota_does_not_plan_it() -> None:
    quota = (Account(user_key("ann"), max_gpus=8),)
    jobs = [running(10, {"n00": 8}, left=HOUR), running(11, {"n01": 8}, left=HOUR)]
    pending = [pend(1, user="ann", age=300), pend(2, user="ann", age=200, preemptible=True)]
    w = waiting(schedule(snap(pending, jobs, accounts=quota), config(starvation_seconds=10 * HOUR)))
    assert [w[i].estimated_start for i in (1, 2)] == [NOW + HOUR, NOW + HOUR]


def test_a_job_placed_in_this_cycle_frees_its_owners_quota_at_its_wall_time() -> None:
    quota = (Account(user_key("ann"), max_gpus=8),)
    pending = [pend(1, user="ann", age=300), pend(2, user="ann", age=200, wall=2 * HOUR)]
    decisions = schedule(snap(pending, [], accounts=quota), config(starvation_seconds=10 * HOUR))
    assert [p.job_id for p in decisions.placements] == [1]
    w = waiting(decisions)
    assert (w[2].reason_code, w[2].estimate, w[2].estimated_start) == (QUOTA_GPUS, ESTIMATE_PLANNED, NOW + HOUR)


def test_a_job_that_may_preempt_once_the_minimum_run_time_passes_is_expected_then_not_at_the_victims_end() -> None:
    """A production job read "in 54 min" (the lower class's wall-time end) and started 6 minutes later, as soon as the
    job in its way had run MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS."""
    young = running(10, {"n00": 8, "n01": 8}, rank=2, ran=4 * 60.0, left=HOUR)
    decisions = schedule(snap([pend(1, nodes=2, rank=0)], [young]), config(preemption_min_runtime_seconds=600.0))
    assert decisions.preemptions == ()
    wait = waiting(decisions)[1]
    assert (wait.estimated_start, wait.estimate) == (NOW + 6 * 60.0, ESTIMATE_PLANNED)
    assert wait.reason.endswith(f"It may preempt the jobs in its way from {when(NOW + 6 * 60.0)}, when they have run the minimum run time.")
    # Of its own class, the job in its way may not be preempted: it is expected at that job's end.
    same = schedule(snap([pend(1, nodes=2, rank=2)], [young]), config(preemption_min_runtime_seconds=600.0))
    assert waiting(same)[1].estimated_start == NOW + HOUR


def test_a_job_that_may_preempt_says_so_also_when_the_job_in_its_way_is_expected_to_end_sooner() -> None:
    """The plan expected the job in its way to end at about the time it could be preempted (its owner's recent runs):
    the estimate stayed, and the reason lost the sentence that explains it if that job runs on."""
    young = replace(running(10, {"n00": 8, "n01": 8}, rank=2, ran=4 * 60.0, left=HOUR), expected_end=NOW + 5 * 60.0)
    wait = waiting(schedule(snap([pend(1, nodes=2, rank=0)], [young]), config(preemption_min_runtime_seconds=600.0)))[1]
    assert (wait.estimated_start, wait.estimate) == (NOW + 5 * 60.0, ESTIMATE_PLANNED)
    assert wait.reason.endswith(f"It may preempt the jobs in its way from {when(NOW + 6 * 60.0)}, when they have run the minimum run time.")


def test_a_job_that_may_preempt_is_expected_when_any_jobs_in_its_way_may_be_stopped_not_the_cheapest() -> None:
    """Two normal jobs that come of age in a minute, and a preemptible one that has run a minute: stopping the young one
    loses least, but a production job starts as soon as the old ones may be stopped. It read "from 05:25" (the young
    job's instant) and preempted the old ones at 05:21."""
    jobs = [
        running(10, {"n00": 8}, rank=1, ran=9 * 60.0, left=HOUR),
        running(11, {"n01": 8}, rank=1, ran=9 * 60.0, left=HOUR),
        running(12, {"n02": 8}, rank=2, ran=60.0, left=HOUR),
    ]
    settings = config(preemption_min_runtime_seconds=600.0)
    wait = waiting(schedule(snap([pend(1, nodes=2, rank=0)], jobs, nodes=3), settings))[1]
    assert (wait.estimated_start, wait.estimate) == (NOW + 60.0, ESTIMATE_PLANNED)
    assert wait.reason.endswith(f"It may preempt the jobs in its way from {when(NOW + 60.0)}, when they have run the minimum run time.")
    # A minute on, it does: the old ones, the young one still protected.
    later = [replace(r, started_at=r.started_at - 60.0, ends_at=r.ends_at - 60.0) for r in jobs]
    decisions = schedule(snap([pend(1, nodes=2, rank=0, age=120.0)], later, nodes=3), settings)
    assert sorted(p.job_id for p in decisions.preemptions) == [10, 11]


def _settling(snapshot: Any, name: str, opens_at: float) -> Any:
    """`snapshot` with node `name` closed until `opens_at`, as a node back from NotReady settles."""
    nodes = tuple(
        replace(n, schedulable=False, closed_why="settling until then", opens_at=opens_at) if n.name == name else n for n in snapshot.nodes
    )
    return replace(snapshot, nodes=nodes)


def test_a_settling_node_is_counted_from_when_it_opens_and_given_no_work_before() -> None:
    # n00 busy for an hour; n01 idle but settling for two minutes. A one-node job starts on n01 when it opens, not in an
    # hour (the estimate ignored it: "in 1 h" for a job that started two minutes on); a two-node gang when both are free.
    jobs = [running(10, {"n00": 8}, left=HOUR)]
    snapshot = _settling(snap([pend(1, age=300), pend(2, nodes=2, age=200)], jobs, nodes=2), "n01", NOW + 120)
    decisions = schedule(snapshot, config(starvation_seconds=10 * HOUR))
    assert decisions.placements == () and decisions.reservations == ()
    w = waiting(decisions)
    assert (w[1].estimate, w[1].estimated_start) == (ESTIMATE_PLANNED, NOW + 120)
    assert (w[2].estimate, w[2].estimated_start) == (ESTIMATE_PLANNED, NOW + 120 + HOUR)
    assert "settling until then" in w[1].reason


def test_a_job_still_running_on_a_settling_node_frees_it_when_both_have_passed() -> None:
    # A job that outlived the NotReady ends in a minute, the node opens in five: nothing starts there before five.
    jobs = [running(10, {"n00": 8}, left=HOUR), running(11, {"n01": 8}, left=60)]
    snapshot = _settling(snap([pend(1, age=300)], jobs, nodes=2), "n01", NOW + 300)
    w = waiting(schedule(snapshot, config(starvation_seconds=10 * HOUR)))
    assert (w[1].estimate, w[1].estimated_start) == (ESTIMATE_PLANNED, NOW + 300)
