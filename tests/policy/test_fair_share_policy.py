"""The fair-share gang policy: quotas, budgets, preemption, reservations and backfill.

Examples first, each named for what a user would notice; then properties over random
but consistent clusters (running jobs really laid onto the nodes) and queues.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.model import (
    BUDGET,
    ESTIMATE_PLANNED,
    ESTIMATE_RESERVED,
    JOB_LIMIT,
    NO_ROOM,
    QUOTA_GPUS,
    RESERVATION,
    Account,
    Decisions,
    NodeView,
    PendingJob,
    Placement,
    PolicyConfig,
    RunningJob,
    Snapshot,
    Waiting,
    team_key,
    user_key,
)
from policy.priority import prioritize, short_factor
from policy.schedule import schedule

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC).timestamp()
HOUR = 3600.0


def pend(
    job_id: int,
    *,
    nodes: int = 1,
    gpus: int = 8,
    rank: int = 1,
    user: str = "ann",
    team: str | None = None,
    preemptible: bool = False,
    wall: float = HOUR,
    age: float = 60.0,
) -> PendingJob:
    return PendingJob(
        id=job_id,
        nodes=nodes,
        gpus_per_node=gpus,
        class_rank=rank,
        submitted_at=NOW - age,
        user=user,
        team=team,
        preemptible=preemptible,
        wall_seconds=wall,
    )


def running(
    job_id: int,
    on: dict[str, int],
    *,
    rank: int = 1,
    user: str = "zed",
    team: str | None = None,
    ran: float = 20 * 60.0,
    left: float = HOUR,
    over_quota: bool = False,
) -> RunningJob:
    """A job holding `on` = {node: GPUs}, started `ran` seconds ago, ending `left` seconds from now."""
    return RunningJob(
        id=job_id,
        node_names=tuple(on),
        gpus_held=tuple(on.values()),
        class_rank=rank,
        started_at=NOW - ran,
        ends_at=NOW + left,
        user=user,
        team=team,
        preemptible=over_quota,
        over_quota=over_quota,
    )


def snap(
    pending: tuple[PendingJob, ...] | list[PendingJob],
    jobs: tuple[RunningJob, ...] | list[RunningJob] = (),
    *,
    nodes: int = 2,
    gpus: int = 8,
    racks: dict[str, str] | None = None,
    accounts: tuple[Account, ...] = (),
) -> Snapshot:
    """Nodes n00, n01, ... whose free GPUs are what the running jobs leave."""
    held: Counter[str] = Counter()
    for r in jobs:
        for name, g in zip(r.node_names, r.gpus_held, strict=True):
            held[name] += g
    racks = racks or {}
    names = [f"n{i:02d}" for i in range(nodes)]
    views = tuple(NodeView(name, gpus, gpus - held[name], rack=racks.get(name, "r0")) for name in names)
    return Snapshot(views, tuple(pending), tuple(jobs), {a.key: a for a in accounts}, NOW)


def config(**kwargs: object) -> PolicyConfig:
    return PolicyConfig(**kwargs)  # type: ignore[arg-type]


def placed(decisions: Decisions) -> dict[int, Placement]:
    return {p.job_id: p for p in decisions.placements}


def waiting(decisions: Decisions) -> dict[int, Waiting]:
    return {w.job_id: w for w in decisions.waiting}


# --- quotas --------------------------------------------------------------------------------------


def test_job_beyond_its_users_gpu_quota_waits_and_says_how_many_gpus_are_in_use() -> None:
    decisions = schedule(
        snap([pend(2, gpus=4)], [running(1, {"n00": 8}, user="ann")], accounts=(Account(user_key("ann"), max_gpus=8),)),
    )
    assert decisions.placements == ()
    (wait,) = decisions.waiting
    assert wait.reason_code == QUOTA_GPUS
    assert wait.reason == "8 of 8 GPUs of the quota of user ann are in use; this job needs 4."


def test_gpus_in_a_quota_reason_read_as_the_api_gives_them() -> None:
    """Slices held read "holds 24.3929 GPUs" beside the usage page's 24.393."""
    held = running(1, {"n00": 8 + 1 / 7}, user="ann")  # type: ignore[dict-item]
    decisions = schedule(snap([pend(2, gpus=8)], [held], accounts=(Account(user_key("ann"), max_gpus=9),)))
    (wait,) = decisions.waiting
    assert wait.reason == "8.143 of 9 GPUs of the quota of user ann are in use; this job needs 8."


def test_a_quota_lowered_under_running_work_is_said_as_it_is() -> None:
    """Not "16 of 8 GPUs ... are in use": the account holds more than its limit because the limit came down."""
    decisions = schedule(
        snap([pend(2, gpus=4)], [running(1, {"n00": 8, "n01": 8}, user="ann")], accounts=(Account(user_key("ann"), max_gpus=8),)),
    )
    (wait,) = decisions.waiting
    assert wait.reason == "User ann holds 16 GPUs, above its quota of 8: the quota was lowered after they started; this job needs 4."


def test_a_job_needing_more_than_a_quota_lowered_since_it_was_queued_says_only_raising_it_helps() -> None:
    """Submit refuses such a job: it was queued under a larger quota. "0 of 2 GPUs are in use; this job needs 8" left
    its owner waiting for GPUs that would never be enough."""
    decisions = schedule(snap([pend(2, gpus=8)], [], accounts=(Account(user_key("ann"), max_gpus=2),)))
    (wait,) = decisions.waiting
    assert (wait.reason_code, wait.estimated_start) == (QUOTA_GPUS, None)
    assert wait.reason == (
        "This job needs 8 GPUs at once, more than the quota of user ann allows (2): it waits until an admin raises the "
        "quota. To run sooner, make it preemptible (muster update 2 --preemptible: it may then borrow idle GPUs), or cancel "
        "it and submit it smaller."
    )


def test_a_job_beyond_a_per_job_limit_lowered_since_it_was_queued_waits_without_an_estimate_and_blocks_nobody() -> None:
    accounts = (Account(user_key("ann"), max_wall_seconds=3600, max_node_hours_per_job=3),)
    decisions = schedule(snap([pend(1, gpus=8, wall=7200), pend(2, nodes=4, gpus=8), pend(3, gpus=8)], [], nodes=4, accounts=accounts))
    waits = {w.job_id: w for w in decisions.waiting}
    assert [p.job_id for p in decisions.placements] == [3]
    assert (waits[1].reason_code, waits[1].estimated_start, waits[2].reason_code) == (JOB_LIMIT, None, JOB_LIMIT)
    assert waits[1].reason.startswith("Its wall time of 2 h is beyond the 1 h per job user ann allows now")
    assert waits[2].reason.startswith("It may use 4 node-hours, beyond the 3 per job user ann allows now")


def test_job_beyond_its_teams_gpu_quota_waits_and_says_how_many_gpus_are_in_use() -> None:
    decisions = schedule(
        snap(
            [pend(2, gpus=8, user="ann", team="vision")],
            [running(1, {"n00": 6}, user="bob", team="vision")],
            nodes=3,
            accounts=(Account(user_key("ann"), max_gpus=32), Account(team_key("vision"), max_gpus=12)),
        ),
    )
    (wait,) = decisions.waiting
    assert wait.reason_code == QUOTA_GPUS
    assert wait.reason == "6 of 12 GPUs of the quota of team vision are in use; this job needs 8."


def test_a_second_job_is_held_by_the_quota_the_first_one_just_used() -> None:
    decisions = schedule(snap([pend(1, gpus=8), pend(2, gpus=8)], accounts=(Account(user_key("ann"), max_gpus=8),)))
    assert list(placed(decisions)) == [1]
    assert decisions.waiting[0].reason == "8 of 8 GPUs of the quota of user ann are in use; this job needs 8."


def test_preemptible_job_beyond_its_quota_borrows_idle_gpus_marked_over_quota() -> None:
    decisions = schedule(
        snap(
            [pend(2, gpus=8, preemptible=True)],
            [running(1, {"n00": 8}, user="ann")],
            accounts=(Account(user_key("ann"), max_gpus=8),),
        ),
    )
    (placement,) = decisions.placements
    assert placement.node_names == ("n01",)
    assert placement.over_quota is True
    assert decisions.preemptions == ()


def test_preemptible_job_within_its_quota_is_not_marked_over_quota() -> None:
    decisions = schedule(snap([pend(1, gpus=8, preemptible=True)], accounts=(Account(user_key("ann"), max_gpus=8),)))
    assert decisions.placements[0].over_quota is False


def test_gang_counts_the_whole_nodes_it_holds_against_the_quota() -> None:
    # 2 x 4 GPUs asked, but a gang holds its 8-GPU nodes whole: 16 GPUs, beyond a quota of 8.
    decisions = schedule(snap([pend(1, nodes=2, gpus=4)], accounts=(Account(user_key("ann"), max_gpus=8),)))
    assert decisions.placements == ()
    (wait,) = decisions.waiting
    assert wait.reason_code == QUOTA_GPUS
    assert wait.reason.startswith("This job needs 16 GPUs at once, more than the quota of user ann allows (8): it waits until")


def test_gang_within_a_tight_quota_takes_nodes_small_enough_to_stay_within_it() -> None:
    nodes = (NodeView("big-0", 8, 8), NodeView("big-1", 8, 8), NodeView("small-0", 4, 4), NodeView("small-1", 4, 4))
    snapshot = Snapshot(nodes, (pend(1, nodes=2, gpus=4),), accounts={user_key("ann"): Account(user_key("ann"), max_gpus=8)}, now=NOW)
    (placement,) = schedule(snapshot).placements
    assert placement.node_names == ("small-0", "small-1")
    assert placement.gpus_held == (4, 4)
    assert placement.over_quota is False


def test_preemptible_gang_beyond_its_quota_borrows_whole_nodes() -> None:
    decisions = schedule(snap([pend(1, nodes=2, gpus=4, preemptible=True)], accounts=(Account(user_key("ann"), max_gpus=8),)))
    (placement,) = decisions.placements
    assert placement.gpus_held == (8, 8)
    assert placement.over_quota is True


def test_borrower_does_not_preempt_anyone() -> None:
    decisions = schedule(
        snap(
            [pend(2, gpus=8, rank=0, preemptible=True)],
            [running(1, {"n00": 8}, user="ann"), running(3, {"n01": 8}, rank=2)],
            accounts=(Account(user_key("ann"), max_gpus=8),),
        ),
    )
    assert decisions.placements == ()
    assert decisions.preemptions == ()


# --- preemption ----------------------------------------------------------------------------------


def test_job_within_its_quota_preempts_an_over_quota_borrower_and_takes_its_gpus() -> None:
    # Bob's quota has no room for his job (a borrower whose owner's quota has room counts within it: test_preemption_thrash).
    borrower = running(1, {"n00": 8}, user="bob", over_quota=True)
    quotas = (Account(user_key("ann"), max_gpus=8), Account(user_key("bob"), max_gpus=0))
    decisions = schedule(snap([pend(2, gpus=8, user="ann")], [borrower], nodes=1, accounts=quotas))
    (preemption,) = decisions.preemptions
    assert (preemption.job_id, preemption.for_job_id) == (1, 2)
    assert "beyond its owner's quota" in preemption.reason
    (placement,) = decisions.placements
    assert (placement.job_id, placement.node_names, placement.gpus_held, placement.over_quota) == (2, ("n00",), (8,), False)


def test_production_job_preempts_a_lower_class_job_that_ran_long_enough_but_not_a_young_one() -> None:
    old = running(1, {"n00": 8}, rank=2, ran=2 * HOUR, left=5 * HOUR)
    young = running(3, {"n01": 8}, rank=2, ran=60)
    # Without the wait for a cheaper victim (tests/policy/test_preemption_thrash.py), which the young one is in 9 minutes.
    no_wait = config(preemption_min_runtime_seconds=600, preemption_defer_seconds=0)
    decisions = schedule(snap([pend(2, rank=0)], [young, old]), no_wait)
    assert [(p.job_id, p.for_job_id) for p in decisions.preemptions] == [(1, 2)]
    assert "lower priority class" in decisions.preemptions[0].reason
    assert decisions.placements[0].node_names == ("n00",)


def test_job_younger_than_the_minimum_run_time_is_never_preempted() -> None:
    decisions = schedule(
        snap([pend(2, rank=0)], [running(1, {"n00": 8}, rank=2, ran=599)], nodes=1), config(preemption_min_runtime_seconds=600)
    )
    assert decisions.preemptions == ()
    assert decisions.placements == ()
    assert decisions.waiting[0].reason_code == NO_ROOM


def test_job_started_in_this_cycle_is_not_preempted_in_it_even_without_a_minimum_run_time() -> None:
    # Bob's borrower goes first (older) onto the only node; ann's job within quota must not stop it in the same cycle.
    pending = [pend(1, user="bob", preemptible=True, age=100), pend(2, user="ann", age=50)]
    snapshot = snap(pending, nodes=1, accounts=(Account(user_key("bob"), max_gpus=0),))
    decisions = schedule(snapshot, config(preemption_min_runtime_seconds=0))
    assert decisions.preemptions == ()
    assert [(p.job_id, p.over_quota) for p in decisions.placements] == [(1, True)]
    assert waiting(decisions)[2].reason_code == NO_ROOM


def test_without_a_minimum_run_time_a_borrower_that_just_started_may_be_preempted() -> None:
    borrower = running(1, {"n00": 8}, user="bob", ran=0, over_quota=True)
    decisions = schedule(snap([pend(2)], [borrower], nodes=1), config(preemption_min_runtime_seconds=0))
    assert [(p.job_id, p.for_job_id) for p in decisions.preemptions] == [(1, 2)]


def test_job_never_preempts_jobs_of_its_own_or_a_higher_class_within_their_quota() -> None:
    jobs = [running(1, {"n00": 8}, rank=1, ran=10 * HOUR), running(3, {"n01": 8}, rank=0, ran=10 * HOUR)]
    decisions = schedule(snap([pend(2, rank=1, age=10 * HOUR)], jobs))
    assert decisions.preemptions == ()
    assert decisions.placements == ()


def test_preemption_stops_one_big_job_rather_than_several_small_ones() -> None:
    small = [running(10 + i, {"n00": 2}, rank=2) for i in range(4)]
    big = running(20, {"n01": 8}, rank=2)
    decisions = schedule(snap([pend(1, rank=0)], [*small, big]))
    assert [p.job_id for p in decisions.preemptions] == [20]
    assert decisions.placements[0].node_names == ("n01",)


def test_preemption_stops_the_fewest_jobs_on_a_node() -> None:
    # n00: 4 + 2 + 2 GPUs held; 4 are needed: stopping the 4-GPU job alone is enough.
    jobs = [running(10, {"n00": 2}, rank=2), running(11, {"n00": 4}, rank=2), running(12, {"n00": 2}, rank=2)]
    decisions = schedule(snap([pend(1, gpus=4, rank=0)], jobs, nodes=1))
    assert [p.job_id for p in decisions.preemptions] == [11]
    assert decisions.placements[0].gpus_held == (4,)


def test_gang_preempts_whole_nodes_only_where_every_job_may_be_stopped() -> None:
    jobs = [
        running(10, {"n00": 8}, rank=2),
        running(11, {"n01": 4}, rank=2),
        running(12, {"n01": 4}, rank=0),  # n01 cannot be emptied
        running(13, {"n02": 4}, rank=2),
        running(14, {"n02": 4}, rank=2),
    ]
    decisions = schedule(snap([pend(1, nodes=2, rank=0)], jobs, nodes=3))
    assert sorted(p.job_id for p in decisions.preemptions) == [10, 13, 14]
    assert sorted(decisions.placements[0].node_names) == ["n00", "n02"]


def test_preemption_can_be_turned_off() -> None:
    decisions = schedule(snap([pend(2, rank=0)], [running(1, {"n00": 8}, rank=2, over_quota=True)], nodes=1), config(preemption=False))
    assert decisions.preemptions == ()
    assert decisions.placements == ()


# --- budget --------------------------------------------------------------------------------------


def test_job_beyond_its_budget_waits_naming_the_account_and_when_it_renews() -> None:
    resets = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    account = Account(user_key("ann"), node_hours_left=1.5, budget_resets_at=resets)
    decisions = schedule(snap([pend(1, nodes=2, wall=HOUR)], accounts=(account,)))
    (wait,) = decisions.waiting
    assert wait.reason_code == BUDGET
    assert wait.reason == (
        "The budget of user ann has 1.5 node-hours left; this job may use 2.0 (2 nodes x 1.00 h). It renews 2026-12-01 00:00 UTC."
    )


def test_a_job_beyond_a_whole_budget_lowered_under_it_is_not_promised_the_renewal() -> None:
    """It read "It renews 2026-12-01": no renewal gives a job more than the whole budget."""
    resets = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    account = Account(user_key("ann"), node_hours_left=1.0, budget_resets_at=resets, node_hours_per_period=1.0)
    decisions = schedule(snap([pend(1, nodes=2, wall=HOUR)], accounts=(account,)))
    (wait,) = decisions.waiting
    assert wait.reason_code == BUDGET and wait.estimated_start is None
    assert wait.reason == (
        "The budget of user ann has 1.0 node-hours left; this job may use 2.0 (2 nodes x 1.00 h). That is more than its "
        "whole budget of 1 node-hour a period (lowered since it was submitted): it waits until an admin raises the "
        "budget. To run sooner, shorten it (muster update 1 -t 30m fits a period's budget), or cancel it and submit it smaller."
    )


def test_team_budget_is_charged_by_the_jobs_placed_in_the_same_cycle() -> None:
    account = Account(team_key("vision"), node_hours_left=1.5)
    decisions = schedule(snap([pend(1, team="vision", age=100), pend(2, team="vision", age=50)], accounts=(account,)))
    assert list(placed(decisions)) == [1]
    (wait,) = decisions.waiting
    assert wait.reason_code == BUDGET
    # The job placed before it in this cycle is committed to its wall time: the same words as the usage page.
    assert wait.reason.startswith(
        "The budget of team vision has 1.5 node-hours left, 1.0 of it committed to running jobs, 0.5 for new jobs; this job may use 1.0"
    )


def test_a_single_node_job_counts_only_its_share_of_the_node_against_the_budget() -> None:
    # The ledger charges 2 of 8 GPUs for two hours as 0.5 node-hours: the hold counts the same.
    account = Account(user_key("ann"), node_hours_left=0.75)
    decisions = schedule(snap([pend(1, gpus=2, wall=2 * HOUR, age=100), pend(2, gpus=2, wall=2 * HOUR, age=50)], accounts=(account,)))
    assert list(placed(decisions)) == [1]
    (wait,) = decisions.waiting
    assert wait.reason == (
        "The budget of user ann has 0.75 node-hours left, 0.50 of it committed to running jobs, 0.25 for new jobs; "
        "this job may use 0.5 (2 of a node's 8 GPUs x 2.00 h)."
    )


def test_a_need_just_over_the_budget_is_stated_to_the_decimals_that_show_it() -> None:
    # 1.96 node-hours left and a need of 2.0: at one decimal "2.0 node-hours left; this job may use 2.0", and it waited.
    account = Account(user_key("ann"), node_hours_left=1.96)
    (wait,) = schedule(snap([pend(1, nodes=2, wall=HOUR)], accounts=(account,))).waiting
    assert wait.reason == "The budget of user ann has 1.96 node-hours left; this job may use 2.00 (2 nodes x 1.00 h)."


def test_a_small_charge_is_not_stated_as_nothing() -> None:
    # One GPU of eight for five minutes is 0.0104 node-hours: at one decimal it read "may use 0.0", and waited.
    account = Account(user_key("ann"), node_hours_left=0.005)
    (wait,) = schedule(snap([pend(1, gpus=1, wall=300)], accounts=(account,))).waiting
    assert "this job may use 0.01 (1 of a node's 8 GPUs x 0.08 h)." in wait.reason


def test_job_with_a_spent_budget_waits_even_on_an_empty_cluster() -> None:
    decisions = schedule(snap([pend(1, gpus=1, wall=60)], accounts=(Account(user_key("ann"), node_hours_left=0.0),)))
    assert decisions.waiting[0].reason_code == BUDGET


# --- reservations and backfill -------------------------------------------------------------------


def test_starving_gang_reserves_the_nodes_that_free_up_earliest_and_shows_when() -> None:
    jobs = [
        running(10, {"n00": 8}, rank=0, left=1000),
        running(11, {"n01": 8}, rank=0, left=3000),
        running(12, {"n02": 8}, rank=0, left=2000),
    ]
    decisions = schedule(snap([pend(1, nodes=2, age=2 * HOUR)], jobs, nodes=3), config(starvation_seconds=HOUR))
    (reservation,) = decisions.reservations
    assert reservation.job_id == 1
    assert reservation.node_names == ("n00", "n02")
    assert reservation.start == NOW + 2000
    (wait,) = decisions.waiting
    assert wait.estimated_start == reservation.start
    assert "Reserved n00, n02" in wait.reason


def test_single_node_reservation_starts_when_enough_gpus_on_one_node_are_free() -> None:
    jobs = [running(10, {"n00": 2}, rank=0, left=100), running(11, {"n00": 2}, rank=0, left=500), running(12, {"n00": 2}, rank=0, left=900)]
    # n00 has 2 free; 6 are needed: the jobs ending at +100 and +500 must end first.
    decisions = schedule(snap([pend(1, gpus=6, age=2 * HOUR)], jobs, nodes=1), config(starvation_seconds=HOUR))
    (reservation,) = decisions.reservations
    assert reservation.start == NOW + 500
    assert decisions.waiting[0].estimated_start == NOW + 500


def test_job_that_has_not_waited_long_enough_gets_no_reservation() -> None:
    decisions = schedule(snap([pend(1, age=HOUR - 1)], [running(10, {"n00": 8}, rank=0)], nodes=1), config(starvation_seconds=HOUR))
    assert decisions.reservations == ()
    # Not a promise, but still an estimate: the plan of the queue says when job 10's node frees up.
    assert (decisions.waiting[0].estimate, decisions.waiting[0].estimated_start) == (ESTIMATE_PLANNED, NOW + HOUR)


def test_a_long_job_starves_after_a_share_of_its_wall_time_not_after_the_base_threshold() -> None:
    busy = [running(10, {"n00": 8}, rank=0, left=20 * HOUR)]
    cfg = config(starvation_seconds=HOUR, starvation_wall_factor=0.5)
    # Ten hours of wall: past the one-hour base threshold, but owed a promise only after five hours.
    early = schedule(snap([pend(1, wall=10 * HOUR, age=5 * HOUR - 1)], busy, nodes=1), cfg)
    assert early.reservations == ()
    assert early.waiting[0].estimate == ESTIMATE_PLANNED
    late = schedule(snap([pend(1, wall=10 * HOUR, age=5 * HOUR)], busy, nodes=1), cfg)
    assert [(r.job_id, r.start) for r in late.reservations] == [(1, NOW + 20 * HOUR)]
    # A one-hour job is owed one after the base threshold, even though an older long job is not yet.
    both = schedule(snap([pend(1, wall=10 * HOUR, age=4 * HOUR), pend(2, wall=HOUR, age=HOUR)], busy, nodes=1), cfg)
    assert [r.job_id for r in both.reservations] == [2]
    # A gang waits for whole nodes, which only a reservation frees: owed one after the base threshold, however long.
    gang_busy = [running(10, {"n00": 8}, rank=0, left=20 * HOUR), running(11, {"n01": 8}, rank=0, left=20 * HOUR)]
    gang = schedule(snap([pend(1, nodes=2, wall=10 * HOUR, age=HOUR)], gang_busy, nodes=2), cfg)
    assert [r.job_id for r in gang.reservations] == [1]


def test_a_failed_preemption_search_is_not_reused_for_a_job_that_may_backfill_where_it_could_not() -> None:
    jobs = [running(10, {"n00": 8}, rank=1, left=1000), running(11, {"n01": 8}, rank=2, left=10 * HOUR)]
    pending = [
        pend(1, nodes=2, age=2 * HOUR),  # starving: reserves n00 and n01 from +10 h (job 10 cannot be stopped for it)
        pend(2, wall=20 * HOUR, age=100),  # would outlast the reservation: may not use, or preempt on, its nodes
        pend(3, wall=100, age=50),  # the same class and shape, but gone long before it starts: may backfill there
    ]
    decisions = schedule(snap(pending, jobs), config(starvation_seconds=HOUR))
    (reservation,) = decisions.reservations
    assert (reservation.job_id, reservation.start) == (1, NOW + 10 * HOUR)
    assert [(p.job_id, p.node_names) for p in decisions.placements] == [(3, ("n01",))]
    assert [(p.job_id, p.for_job_id) for p in decisions.preemptions] == [(11, 3)]
    assert [w.job_id for w in decisions.waiting] == [1, 2]


def backfill_case(short_wall: float) -> Decisions:
    # n00: 4 GPUs free until +1000; n01 full for long. Job 1 (8 GPUs) is starving and reserves n00 at +1000.
    jobs = [running(10, {"n00": 4}, rank=0, left=1000), running(11, {"n01": 8}, rank=0, left=5 * HOUR)]
    pending = [
        pend(1, gpus=8, age=2 * HOUR),
        pend(2, gpus=4, age=100, wall=2 * HOUR),  # would fit on n00 now, but would outlast the reservation
        pend(3, gpus=4, age=50, wall=short_wall),
    ]
    # Without the short-wall-time factor, so job 2 (older) is looked at before job 3.
    return schedule(snap(pending, jobs), config(starvation_seconds=HOUR, weight_short=0.0))


def test_short_job_backfills_onto_reserved_nodes_and_a_long_one_waits_behind_the_reservation() -> None:
    decisions = backfill_case(short_wall=900)
    (reservation,) = decisions.reservations
    assert (reservation.job_id, reservation.node_names, reservation.start) == (1, ("n00",), NOW + 1000)
    assert placed(decisions)[3].node_names == ("n00",)
    wait = waiting(decisions)[2]
    assert wait.reason_code == RESERVATION
    assert wait.reason.startswith("Behind the reservation for job 1, expected to start")


def test_a_job_behind_reservations_is_told_the_one_on_the_nodes_it_fits_on() -> None:
    # n00 frees whole first and is reserved for job 1; job 3 (4 GPUs) fits only on n01, which job 2 has reserved.
    jobs = [running(10, {"n00": 6}, left=1000), running(11, {"n01": 4}, left=2000), running(12, {"n02": 8}, left=5 * HOUR)]
    pending = [pend(1, age=3 * HOUR), pend(2, age=2.5 * HOUR), pend(3, gpus=4, age=100, wall=2 * HOUR)]
    decisions = schedule(snap(pending, jobs, nodes=3), config(starvation_seconds=HOUR, weight_short=0.0))
    assert {r.job_id: (r.node_names, r.start) for r in decisions.reservations} == {1: (("n00",), NOW + 1000), 2: (("n01",), NOW + 2000)}
    wait = waiting(decisions)[3]
    assert wait.reason_code == RESERVATION
    assert wait.reason.startswith("Behind the reservation for job 2, expected to start"), wait.reason


def test_a_job_behind_a_reservation_is_told_the_wall_time_that_would_start_it_now_and_that_one_does() -> None:
    # n00 keeps 4 GPUs free for 1000 s (16 min 40 s) before job 1's reservation: 16 min is the longest whole-minute wall.
    decisions = backfill_case(short_wall=1001)
    for job_id in (2, 3):
        assert waiting(decisions)[job_id].reason.endswith("With a wall time of at most 16 min it would start now.")
    assert 3 in placed(backfill_case(short_wall=16 * 60))
    assert 3 not in placed(backfill_case(short_wall=17 * 60))


def test_no_shorter_wall_time_is_offered_when_the_free_span_is_too_short_to_be_of_use() -> None:
    jobs = [running(10, {"n00": 4}, rank=0, left=5 * 60), running(11, {"n01": 8}, rank=0, left=5 * HOUR)]
    pending = [pend(1, gpus=8, age=2 * HOUR), pend(2, gpus=4, age=100, wall=2 * HOUR)]
    wait = waiting(schedule(snap(pending, jobs), config(starvation_seconds=HOUR)))[2]
    assert wait.reason_code == RESERVATION
    assert "wall time" not in wait.reason


def test_backfill_may_end_exactly_when_the_reservation_starts_but_not_a_second_later() -> None:
    assert 3 in placed(backfill_case(short_wall=1000))
    decisions = backfill_case(short_wall=1001)
    assert decisions.placements == ()
    assert waiting(decisions)[3].reason_code == RESERVATION


def test_reservations_are_bounded_by_max_reservations() -> None:
    jobs = [running(10 + i, {f"n{i:02d}": 8}, rank=0, left=1000 * (i + 1)) for i in range(4)]
    pending = [pend(i, age=2 * HOUR + i) for i in range(1, 4)]
    decisions = schedule(snap(pending, jobs, nodes=4), config(starvation_seconds=HOUR, max_reservations=2))
    assert [r.job_id for r in decisions.reservations] == [3, 2]  # the oldest first
    assert [r.node_names for r in decisions.reservations] == [("n00",), ("n01",)]
    assert waiting(decisions)[1].estimate == ESTIMATE_PLANNED  # past the bound: planned, not promised
    assert schedule(snap(pending, jobs, nodes=4), config(starvation_seconds=HOUR, max_reservations=0)).reservations == ()


# --- priority ------------------------------------------------------------------------------------


def test_fair_share_lets_the_user_with_less_recent_usage_go_first() -> None:
    accounts = (Account(user_key("ann"), usage_gpu_seconds=0.0), Account(user_key("bob"), usage_gpu_seconds=8 * 24 * HOUR))
    pending = [pend(1, user="bob", age=100), pend(2, user="ann", age=100)]
    assert list(placed(schedule(snap(pending, nodes=1, accounts=accounts)))) == [2]
    swapped = (Account(user_key("ann"), usage_gpu_seconds=8 * 24 * HOUR), Account(user_key("bob"), usage_gpu_seconds=0.0))
    assert list(placed(schedule(snap(pending, nodes=1, accounts=swapped)))) == [1]


def test_fair_share_gives_more_to_the_account_with_more_shares() -> None:
    usage = 8 * 24 * HOUR
    accounts = (
        Account(user_key("ann"), weight=4.0, usage_gpu_seconds=usage),
        Account(user_key("bob"), weight=1.0, usage_gpu_seconds=usage),
    )
    pending = [pend(1, user="bob", age=100), pend(2, user="ann", age=100)]
    snapshot = snap(pending, nodes=1, accounts=accounts)
    priorities = prioritize(snapshot, PolicyConfig())
    assert priorities[2].factors["fair_share"][0] > priorities[1].factors["fair_share"][0]
    assert list(placed(schedule(snapshot))) == [2]


def test_idle_account_has_full_fair_share_and_one_that_used_its_share_has_half() -> None:
    # One 8-GPU node; ann alone, having used exactly the cluster's decayed capacity: U = S = 1.
    config_ = PolicyConfig()
    window = config_.half_life_seconds / math.log(2)
    used = Account(user_key("ann"), usage_gpu_seconds=8 * window)
    assert prioritize(snap([pend(1)], nodes=1), config_)[1].factors["fair_share"][0] == 1.0
    assert prioritize(snap([pend(1)], nodes=1, accounts=(used,)), config_)[1].factors["fair_share"][0] == pytest.approx(0.5)


def test_fair_share_counts_only_the_gpus_muster_shares_not_those_other_pods_hold() -> None:
    # Two 8-GPU nodes, 8 of their GPUs held by pods Muster did not start: ann's usage of 8 GPUs over the window is
    # the whole of what Muster's users share (U = S = 1), not half of it.
    config_ = PolicyConfig()
    window = config_.half_life_seconds / math.log(2)
    used = (Account(user_key("ann"), usage_gpu_seconds=8 * window),)
    shared = snap([pend(1)], nodes=2, accounts=used)
    held = replace(shared, nodes=(replace(shared.nodes[0], gpus_free=0, gpus_foreign=8), shared.nodes[1]))
    assert prioritize(shared, config_)[1].factors["fair_share"][0] == pytest.approx(2**-0.5)
    assert prioritize(held, config_)[1].factors["fair_share"][0] == pytest.approx(0.5)


def test_priority_factors_are_between_zero_and_one_and_add_up_to_the_total() -> None:
    accounts = (Account(user_key("ann"), usage_gpu_seconds=5e5, usage_node_seconds=1e5), Account(team_key("vision"), weight=2.0))
    pending = [pend(1, rank=0, team="vision", age=30 * 24 * HOUR), pend(2, rank=2, nodes=3, gpus=8, user="bob", age=0)]
    for priority in prioritize(snap(pending, nodes=4, accounts=accounts), PolicyConfig()).values():
        assert set(priority.factors) == {"fair_share", "age", "class", "size", "short"}
        for value, _ in priority.factors.values():
            assert 0.0 <= value <= 1.0
        assert priority.total == pytest.approx(sum(weighted for _, weighted in priority.factors.values()))


def test_short_factor_is_one_up_to_an_hour_and_falls_on_a_log_scale_to_zero_at_the_max() -> None:
    week = 7 * 24 * HOUR
    assert short_factor(10 * 60.0, week) == 1.0
    assert short_factor(HOUR, week) == 1.0
    assert short_factor(week, week) == 0.0
    assert short_factor(4 * week, week) == 0.0
    # Log scale: doubling the wall time costs the same wherever it is.
    doubling_short = short_factor(HOUR, week) - short_factor(2 * HOUR, week)
    assert doubling_short == pytest.approx(short_factor(24 * HOUR, week) - short_factor(48 * HOUR, week))
    assert short_factor(24 * HOUR, week) == pytest.approx(1 - math.log(24) / math.log(168))


def test_the_shorter_wall_time_goes_first_with_the_short_factor_weighted_and_the_older_job_without() -> None:
    pending = [pend(1, wall=48 * HOUR, age=600.0), pend(2, wall=HOUR, age=60.0)]
    without = prioritize(snap(pending, nodes=1), PolicyConfig(weight_short=0.0))
    assert without[1].total > without[2].total  # only age tells them apart
    weighted = prioritize(snap(pending, nodes=1), PolicyConfig(weight_short=1000.0))
    assert weighted[2].total > weighted[1].total
    assert weighted[2].factors["short"] == (1.0, 1000.0)


def test_one_free_node_goes_to_the_owners_shorter_job_though_it_came_later() -> None:
    busy = [running(10, {"n00": 8}, left=10 * HOUR)]
    pending = [pend(1, wall=3 * 24 * HOUR, age=1800.0), pend(2, wall=2 * HOUR, age=60.0)]
    decisions = schedule(snap(pending, busy, nodes=2), PolicyConfig())
    assert [p.job_id for p in decisions.placements] == [2]
    assert schedule(snap(pending, busy, nodes=2), PolicyConfig(weight_short=0.0)).placements[0].job_id == 1


# --- placement -----------------------------------------------------------------------------------


def test_multi_node_job_is_placed_in_one_rack_when_one_has_room() -> None:
    racks = {"n00": "a", "n01": "b", "n02": "a", "n03": "b", "n04": "b", "n05": "a"}
    # Rack a has n00, n02 idle (n05 busy); rack b has n01, n03, n04 idle.
    decisions = schedule(snap([pend(1, nodes=3)], [running(10, {"n05": 8}, rank=0)], nodes=6, racks=racks))
    assert sorted(decisions.placements[0].node_names) == ["n01", "n03", "n04"]


def test_multi_node_job_takes_the_tightest_rack_that_fits() -> None:
    racks = {f"n{i:02d}": ("a" if i < 4 else "b") for i in range(7)}
    decisions = schedule(snap([pend(1, nodes=3)], nodes=7, racks=racks))
    assert sorted(decisions.placements[0].node_names) == ["n04", "n05", "n06"]


# --- properties ----------------------------------------------------------------------------------

USERS = ("ann", "bob", "cat", "dan")
TEAMS = (None, "red", "blue")
PROPERTY_NOW = 1_000_000.0


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Snapshot, PolicyConfig]:
    """A snapshot whose nodes' free GPUs are exactly what its running jobs leave, and a config."""
    now = PROPERTY_NOW
    count = draw(st.integers(1, 9))
    totals = [draw(st.sampled_from([4, 8])) for _ in range(count)]
    racks = [draw(st.sampled_from(["a", "b", "c"])) for _ in range(count)]
    schedulable = [draw(st.booleans()) or draw(st.booleans()) or draw(st.booleans()) for _ in range(count)]
    held = [0] * count
    jobs: list[RunningJob] = []
    for job_id in range(100, 100 + draw(st.integers(0, 10))):
        idle = [i for i in range(count) if held[i] == 0]
        if len(idle) >= 2 and draw(st.integers(0, 3)) == 0:
            on = draw(st.lists(st.sampled_from(idle), min_size=2, max_size=min(3, len(idle)), unique=True))
            gpus = [totals[i] for i in on]
        else:
            room = [i for i in range(count) if held[i] < totals[i]]
            if not room:
                break
            node = draw(st.sampled_from(room))
            on, gpus = [node], [draw(st.integers(1, totals[node] - held[node]))]
        for i, g in zip(on, gpus, strict=True):
            held[i] += g
        started = now - draw(st.sampled_from([0.0, 300.0, 599.0, 600.0, 3600.0, 50_000.0]))
        preemptible = draw(st.booleans())
        jobs.append(
            RunningJob(
                id=job_id,
                node_names=tuple(f"node-{i}" for i in on),
                gpus_held=tuple(gpus),
                class_rank=draw(st.integers(0, 2)),
                started_at=started,
                ends_at=started + draw(st.sampled_from([300.0, 1800.0, 3600.0, 7200.0, 86_400.0])),
                user=draw(st.sampled_from(USERS)),
                team=draw(st.sampled_from(TEAMS)),
                preemptible=preemptible,
                over_quota=preemptible and draw(st.booleans()),
            )
        )
    nodes = tuple(NodeView(f"node-{i}", totals[i], totals[i] - held[i], rack=racks[i], schedulable=schedulable[i]) for i in range(count))
    pending = tuple(
        PendingJob(
            id=job_id,
            nodes=draw(st.sampled_from([1, 1, 1, 2, 3])),
            gpus_per_node=draw(st.sampled_from([1, 2, 4, 8]) | st.integers(1, 8)),
            class_rank=draw(st.integers(0, 2)),
            submitted_at=now - draw(st.sampled_from([0.0, 30.0, 100.0, 1000.0, 5000.0])),
            user=draw(st.sampled_from(USERS)),
            team=draw(st.sampled_from(TEAMS)),
            preemptible=draw(st.booleans()),
            wall_seconds=draw(st.sampled_from([60.0, 600.0, 1800.0, 3600.0, 7200.0, 36_000.0])),
        )
        for job_id in range(1, 1 + draw(st.integers(0, 12)))
    )
    keys = [user_key(u) for u in USERS] + [team_key(t) for t in TEAMS if t]
    accounts = {}
    for key in keys:
        if draw(st.booleans()):
            accounts[key] = Account(
                key=key,
                max_gpus=draw(st.sampled_from([None, 4, 8, 16, 32])),
                node_hours_left=draw(st.sampled_from([None, 0.0, 5.0, 50.0])),
                budget_resets_at=draw(st.sampled_from([None, now + 86_400.0])),
                weight=draw(st.sampled_from([0.5, 1.0, 2.0, 3.0])),
                usage_gpu_seconds=draw(st.sampled_from([0.0, 1e4, 1e6])),
                usage_node_seconds=draw(st.sampled_from([0.0, 1e3, 1e5])),
            )
    policy = PolicyConfig(
        starvation_seconds=draw(st.sampled_from([0.0, 60.0, 900.0])),
        starvation_wall_factor=draw(st.sampled_from([0.0, 0.5])),
        max_reservations=draw(st.integers(0, 3)),
        preemption_min_runtime_seconds=draw(st.sampled_from([0.0, 600.0])),
        preemption=draw(st.booleans()) or draw(st.booleans()),
    )
    return Snapshot(nodes, pending, tuple(jobs), accounts, now), policy


PROPERTY = settings(max_examples=200, deadline=None)


def after(snapshot: Snapshot, decisions: Decisions) -> list[tuple[RunningJob | PendingJob, tuple[str, ...], tuple[int, ...], bool, float]]:
    """Who holds what once the decisions are applied: (job, nodes, GPUs held, over quota, ends at)."""
    preempted = {p.job_id for p in decisions.preemptions}
    pending = {j.id: j for j in snapshot.pending}
    held: list[tuple[RunningJob | PendingJob, tuple[str, ...], tuple[int, ...], bool, float]] = [
        (r, r.node_names, r.gpus_held, r.over_quota, r.ends_at) for r in snapshot.running if r.id not in preempted
    ]
    for p in decisions.placements:
        job = pending[p.job_id]
        held.append((job, p.node_names, p.gpus_held, p.over_quota, snapshot.now + job.wall_seconds))
    return held


@PROPERTY
@given(clusters())
def test_no_gpu_is_given_twice_even_with_preemption(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    nodes = {n.name: n for n in snapshot.nodes}
    jobs = {r.id: r for r in snapshot.running}
    freed: Counter[str] = Counter()
    for p in decisions.preemptions:
        for name, gpus in zip(jobs[p.job_id].node_names, jobs[p.job_id].gpus_held, strict=True):
            freed[name] += gpus
    taken: Counter[str] = Counter()
    for p in decisions.placements:
        for name, gpus in zip(p.node_names, p.gpus_held, strict=True):
            assert nodes[name].schedulable
            taken[name] += gpus
    for name, gpus in taken.items():
        assert gpus <= nodes[name].gpus_free + freed[name]
    # And so, once applied, no node holds more than it has.
    load: Counter[str] = Counter()
    for _, names, gpus_held, _, _ in after(snapshot, decisions):
        for name, gpus in zip(names, gpus_held, strict=True):
            load[name] += gpus
    assert all(load[name] <= nodes[name].gpus_total for name in load)


@PROPERTY
@given(clusters())
def test_gangs_are_all_or_nothing_and_every_job_is_decided_exactly_once(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    jobs = {j.id: j for j in snapshot.pending}
    nodes = {n.name: n for n in snapshot.nodes}
    for p in decisions.placements:
        job = jobs[p.job_id]
        assert len(p.node_names) == len(p.gpus_held) == job.nodes
        assert len(set(p.node_names)) == job.nodes
        for name, gpus in zip(p.node_names, p.gpus_held, strict=True):
            assert gpus >= job.gpus_per_node
            if job.nodes > 1:
                assert gpus == nodes[name].gpus_total
            else:
                assert gpus == job.gpus_per_node
    decided = [p.job_id for p in decisions.placements] + [w.job_id for w in decisions.waiting]
    assert sorted(decided) == sorted(jobs)
    assert [w.position for w in decisions.waiting] == list(range(1, len(decisions.waiting) + 1))


@PROPERTY
@given(clusters())
def test_only_preemptible_jobs_go_beyond_a_quota(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    jobs = {j.id: j for j in snapshot.pending}
    assert all(jobs[p.job_id].preemptible for p in decisions.placements if p.over_quota)
    charged: set[str] = set()
    for p in decisions.placements:
        if not p.over_quota:
            job = jobs[p.job_id]
            charged.add(user_key(job.user))
            if job.team:
                charged.add(team_key(job.team))
    in_quota: Counter[str] = Counter()
    for job, _, gpus_held, over_quota, _ in after(snapshot, decisions):
        if not over_quota:
            in_quota[user_key(job.user)] += sum(gpus_held)
            if job.team:
                in_quota[team_key(job.team)] += sum(gpus_held)
    for key in charged:
        account = snapshot.accounts.get(key)
        if account is not None and account.max_gpus is not None:
            assert in_quota[key] <= account.max_gpus, key


@PROPERTY
@given(clusters())
def test_only_jobs_that_may_be_stopped_are_preempted_and_for_a_job_that_starts(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    if not policy.preemption:
        assert decisions.preemptions == ()
    jobs = {r.id: r for r in snapshot.running}
    pending = {j.id: j for j in snapshot.pending}
    started = {p.job_id: p for p in decisions.placements}
    assert len({p.job_id for p in decisions.preemptions}) == len(decisions.preemptions)
    for p in decisions.preemptions:
        assert p.job_id in jobs
        victim = jobs[p.job_id]
        assert snapshot.now - victim.started_at >= policy.preemption_min_runtime_seconds
        assert victim.over_quota or victim.class_rank > pending[p.for_job_id].class_rank
        assert p.for_job_id in started
        assert not started[p.for_job_id].over_quota


@PROPERTY
@given(clusters())
def test_backfill_never_delays_a_reservation(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    assert len(decisions.reservations) <= policy.max_reservations
    nodes = {n.name: n for n in snapshot.nodes}
    pending = {j.id: j for j in snapshot.pending}
    waits = {w.job_id: w for w in decisions.waiting}
    # Every interval [start, end) a GPU is spoken for on a node: running work (by wall time) and reservations.
    spoken: dict[str, list[tuple[float, float, int]]] = {name: [] for name in nodes}
    for _, names, gpus_held, _, ends_at in after(snapshot, decisions):
        for name, gpus in zip(names, gpus_held, strict=True):
            spoken[name].append((snapshot.now, max(ends_at, snapshot.now), gpus))
    for reservation in decisions.reservations:
        job = pending[reservation.job_id]
        assert reservation.start >= snapshot.now
        assert snapshot.now - job.submitted_at >= policy.starvation_seconds
        assert (waits[job.id].estimated_start, waits[job.id].estimate) == (reservation.start, ESTIMATE_RESERVED)
        assert len(set(reservation.node_names)) == job.nodes
        for name in reservation.node_names:
            assert nodes[name].schedulable
            need = nodes[name].gpus_total if job.nodes > 1 else job.gpus_per_node
            spoken[name].append((reservation.start, reservation.start + job.wall_seconds, need))
    # Nothing started now, kept running or reserved overlaps a reservation beyond the node's GPUs.
    for name, intervals in spoken.items():
        for at in {start for start, _, _ in intervals}:
            in_use = sum(gpus for start, end, gpus in intervals if start <= at < end)
            assert in_use <= nodes[name].gpus_total, (name, at)


@PROPERTY
@given(clusters(), st.randoms(use_true_random=False))
def test_same_snapshot_gives_the_same_decisions_whatever_the_order_of_its_parts(
    case: tuple[Snapshot, PolicyConfig], rnd: random.Random
) -> None:
    snapshot, policy = case
    decisions = schedule(snapshot, policy)
    assert schedule(snapshot, policy) == decisions
    nodes, pending, jobs, keys = list(snapshot.nodes), list(snapshot.pending), list(snapshot.running), list(snapshot.accounts)
    for part in (nodes, pending, jobs, keys):
        rnd.shuffle(part)
    shuffled = Snapshot(tuple(nodes), tuple(pending), tuple(jobs), {k: snapshot.accounts[k] for k in keys}, snapshot.now)
    assert schedule(shuffled, policy) == decisions


@PROPERTY
@given(clusters())
def test_priority_factors_are_in_unit_range_and_add_up(case: tuple[Snapshot, PolicyConfig]) -> None:
    snapshot, policy = case
    for priority in prioritize(snapshot, policy).values():
        for value, _ in priority.factors.values():
            assert 0.0 <= value <= 1.0
        assert priority.total == pytest.approx(sum(weighted for _, weighted in priority.factors.values()))


def test_a_gang_larger_than_the_cluster_has_become_says_it_cannot_start_until_nodes_join() -> None:
    """Submit refuses a gang larger than the cluster; a cluster that lost nodes since (4 here, from the 14 the job was
    sized for) left it reading "Needs 14 whole nodes with 8 GPUs; 3 are free", as if waiting for GPUs would start it."""
    decisions = schedule(snap([pend(1, nodes=14)], [running(2, {"n00": 8})], nodes=4))
    assert waiting(decisions)[1].reason == (
        "Needs 14 whole nodes with 8 GPUs; 3 are free. The cluster has only 4 such nodes now (nodes left it since the job "
        "was submitted): it starts only when more join. To run it now, cancel it and submit it on at most 4."
    )
    # One that fits the cluster, busy or not, reads as before.
    assert waiting(schedule(snap([pend(1, nodes=4)], [running(2, {"n00": 8})], nodes=4)))[1].reason == (
        "Needs 4 whole nodes with 8 GPUs; 3 are free."
    )
