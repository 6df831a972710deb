"""Preemption without thrash: bounded per job, no re-borrowing at once, and the least work thrown away."""

from __future__ import annotations

from dataclasses import replace

from policy.model import QUOTA_GPUS, Account, user_key
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, placed, running, snap, waiting


def test_a_job_preempted_as_often_as_allowed_runs_on_and_the_next_one_is_stopped() -> None:
    tired = replace(running(1, {"n00": 8}, rank=2, ran=3 * HOUR, left=10 * HOUR), preemptions=3)
    fresh = replace(running(3, {"n01": 8}, rank=2, ran=2 * HOUR, left=10 * HOUR), preemptions=2)
    decisions = schedule(snap([pend(2, rank=0)], [tired, fresh]), config(max_preemptions=3))
    assert [p.job_id for p in decisions.preemptions] == [3]
    only_tired = schedule(snap([pend(2, rank=0)], [tired], nodes=1), config(max_preemptions=3))
    assert only_tired.preemptions == () and only_tired.placements == ()


def test_a_just_preempted_job_does_not_borrow_again_until_the_hysteresis_has_passed() -> None:
    quota = (Account(user_key("ann"), max_gpus=8),)
    within = running(1, {"n00": 8}, user="ann")
    reclaimed = replace(pend(2, preemptible=True), preempted_at=NOW - 600)
    decisions = schedule(snap([reclaimed], [within], accounts=quota), config(reborrow_hysteresis_seconds=HOUR))
    assert decisions.placements == ()
    wait = waiting(decisions)[2]
    assert wait.reason_code == QUOTA_GPUS
    assert "may borrow again from 2026-11-23 12:50 UTC" in wait.reason
    later = replace(reclaimed, preempted_at=NOW - HOUR)
    (placement,) = schedule(snap([later], [within], accounts=quota), config(reborrow_hysteresis_seconds=HOUR)).placements
    assert placement.over_quota is True


def test_the_victim_is_the_job_that_loses_the_least_work() -> None:
    # Both hold a whole node; the one that checkpointed ten minutes ago loses less than the one that never did.
    never = running(1, {"n00": 8}, rank=2, ran=2 * HOUR, left=10 * HOUR)
    checkpointed = replace(running(3, {"n01": 8}, rank=2, ran=5 * HOUR, left=10 * HOUR), checkpointed_at=NOW - 600)
    decisions = schedule(snap([pend(2, rank=0)], [never, checkpointed]))
    assert [p.job_id for p in decisions.preemptions] == [3]
    assert placed(decisions)[2].node_names == ("n01",)
    # Without checkpoints, the younger job loses less.
    young = running(4, {"n01": 8}, rank=2, ran=HOUR, left=10 * HOUR)
    assert [p.job_id for p in schedule(snap([pend(2, rank=0)], [never, young])).preemptions] == [4]


def test_a_job_far_along_for_what_it_has_left_is_waited_for_not_preempted() -> None:
    # Five hours in and one left by its wall time: stopping it throws away more than waiting an hour costs.
    nearly_done = running(1, {"n00": 8}, rank=2, ran=5 * HOUR, left=HOUR)
    decisions = schedule(snap([pend(2, rank=0)], [nearly_done], nodes=1))
    assert decisions.preemptions == () and decisions.placements == ()
    # With a checkpoint ten minutes ago it loses ten minutes' work: it is stopped.
    checkpointed = replace(nearly_done, checkpointed_at=NOW - 600)
    assert [p.job_id for p in schedule(snap([pend(2, rank=0)], [checkpointed], nodes=1)).preemptions] == [1]
    # The default ratio is 0.5: two hours run and four left is the last point at which it is stopped.
    at_ratio = running(1, {"n00": 8}, rank=2, ran=2 * HOUR, left=4 * HOUR)
    assert [p.job_id for p in schedule(snap([pend(2, rank=0)], [at_ratio], nodes=1)).preemptions] == [1]
    past = running(1, {"n00": 8}, rank=2, ran=2 * HOUR + 60, left=4 * HOUR)
    assert schedule(snap([pend(2, rank=0)], [past], nodes=1)).preemptions == ()
    # A large ratio turns the check off.
    assert schedule(snap([pend(2, rank=0)], [nearly_done], nodes=1), config(preemption_max_lost_ratio=1e9)).preemptions


def test_a_job_within_its_quota_that_reclaims_nothing_says_why_the_lent_gpus_stay_lent() -> None:
    # ann may hold 8 GPUs and holds none; zed borrows both nodes, one job too new to stop, one too far along.
    quota = (Account(user_key("ann"), max_gpus=8), Account(user_key("zed"), max_gpus=0))
    new = running(1, {"n00": 8}, ran=300, left=10 * HOUR, over_quota=True)
    far = running(3, {"n01": 8}, ran=5 * HOUR, left=HOUR, over_quota=True)
    decisions = schedule(snap([pend(2, user="ann")], [new, far], accounts=quota))
    assert decisions.preemptions == () and decisions.placements == ()
    reason = waiting(decisions)[2].reason
    assert "Jobs beyond their owners' quotas hold 16 GPUs; none could be taken back for it" in reason
    assert "8 by jobs that started less than 10 min ago" in reason
    assert "8 by jobs too far along to stop" in reason
    # Once the new one has run past the minimum run time it is taken back, and nothing needs explaining.
    older = replace(new, started_at=NOW - HOUR)
    assert [p.job_id for p in schedule(snap([pend(2, user="ann")], [older, far], accounts=quota)).preemptions] == [1]


def test_only_a_job_that_could_reclaim_is_told_about_borrowers() -> None:
    # zed borrows both nodes with a job too far along to stop.
    far = running(3, {"n00": 8, "n01": 8}, ran=5 * HOUR, left=HOUR, over_quota=True)
    told = "Jobs beyond their owners' quotas hold 16 GPUs; none could be taken back for it: 16 by jobs too far along"
    # ann has no quota at all: nothing limits her, so she may reclaim, and is told why she did not.
    unlimited = (Account(user_key("zed"), max_gpus=0),)
    assert told in waiting(schedule(snap([pend(2)], [far], accounts=unlimited)))[2].reason
    # ann beyond her own quota would only borrow, and borrowers stop no one: nothing to tell her.
    borrower = (Account(user_key("ann"), max_gpus=0), Account(user_key("zed"), max_gpus=0))
    reason = waiting(schedule(snap([pend(2, preemptible=True)], [far], accounts=borrower)))[2].reason
    assert "Jobs beyond their owners' quotas" not in reason
    # Without preemption no one is stopped for anyone: nothing to tell either.
    assert "Jobs beyond" not in waiting(schedule(snap([pend(2)], [far], accounts=unlimited), config(preemption=False)))[2].reason


def test_a_job_past_the_cycles_preemption_searches_is_told_so_not_that_nothing_can_be_stopped() -> None:
    # Every node is held; the only borrower is too new to stop, so every search fails, each for a new shape.
    quota = (Account(user_key("ann"), max_gpus=1000), Account(user_key("zed"), max_gpus=0))
    jobs = [running(1, {"n00": 8}, user="bob"), running(3, {"n01": 8}, user="bob"), running(4, {"n02": 8}, ran=60, over_quota=True)]
    shapes = [(nodes, gpus) for nodes in (1, 2, 3, 4, 5) for gpus in range(1, 9)]
    pending = [pend(100 + i, nodes=n, gpus=g, user="ann") for i, (n, g) in enumerate(shapes)]
    decisions = schedule(snap(pending, jobs, accounts=quota, nodes=3))
    reasons = [w.reason for w in decisions.waiting if w.job_id >= 100]
    told_later = [r for r in reasons if "had already looked for jobs to preempt for 32 others" in r]
    told_why = [r for r in reasons if "none could be taken back for it: 8 by jobs that started less than 10 min ago" in r]
    assert len(told_why) == 32 and len(told_later) == len(shapes) - 32


def test_a_job_waits_a_moment_for_a_victim_that_loses_much_less_work() -> None:
    """The admin's walk: a production job stopped two normal jobs (5.3 GPU-hours of work lost) one second before a
    preemptible job in its way passed the minimum run time and could have been stopped instead."""
    normal = running(1, {"n00": 8}, rank=2, ran=40 * 60, left=10 * HOUR)
    just_short = running(3, {"n01": 8}, rank=2, ran=600 - 1, left=10 * HOUR)
    decisions = schedule(snap([pend(2, rank=0)], [normal, just_short]))
    assert decisions.preemptions == () and decisions.placements == ()
    wait = waiting(decisions)[2]
    assert wait.estimated_start == NOW + 1
    assert (
        "Stopping the jobs in its way now would throw away 5.333 GPU-hours of work; it waits to stop jobs that lose 1.333." in wait.reason
    )
    assert "It may preempt the jobs in its way from" in wait.reason
    assert decisions.reservations == ()
    # A second on, the young job is the victim, and the one 40 minutes in keeps its work.
    later = replace(snap([pend(2, rank=0)], [normal, just_short]), now=NOW + 1)
    assert [p.job_id for p in schedule(later).preemptions] == [3]


def test_a_job_does_not_wait_when_its_wait_costs_more_than_the_work_it_saves() -> None:
    # The young job comes of age in 20 minutes: the job's 8 GPUs waiting 20 min cost more than 8 x (30 - 20) min saved.
    normal = running(1, {"n00": 8}, rank=2, ran=30 * 60, left=10 * HOUR)
    young = running(3, {"n01": 8}, rank=2, ran=0, left=10 * HOUR)
    decisions = schedule(
        snap([pend(2, rank=0)], [normal, young]), config(preemption_min_runtime_seconds=20 * 60, preemption_defer_seconds=HOUR)
    )
    assert [p.job_id for p in decisions.preemptions] == [1]
    # Nor past its bound, counted from when it was queued: the bound keeps a job from being put off again and again.
    just_short = running(3, {"n01": 8}, rank=2, ran=600 - 1, left=10 * HOUR)
    old = pend(2, rank=0, age=600)
    assert [p.job_id for p in schedule(snap([old], [normal, just_short])).preemptions] == [1]
    # 0 turns the wait off.
    assert [p.job_id for p in schedule(snap([pend(2, rank=0)], [normal, just_short]), config(preemption_defer_seconds=0)).preemptions] == [
        1
    ]


def test_a_borrower_whose_owner_has_quota_room_again_counts_within_it() -> None:
    """The CLI walk: a production job stopped ann's borrower; back in the queue within the quota, it stopped ann's other
    borrower, although ann held exactly her quota (the swap gained her nothing and lost its work)."""
    quota = (Account(user_key("ann"), max_gpus=16), Account(user_key("bob"), max_gpus=8))
    within = running(1, {"n00": 8}, user="ann", ran=HOUR, left=10 * HOUR)
    borrower = running(3, {"n01": 8}, user="ann", ran=HOUR, left=10 * HOUR, over_quota=True)
    back = replace(pend(2, user="ann", preemptible=True), preempted_at=NOW - 60)
    decisions = schedule(snap([back], [within, borrower], accounts=quota))
    assert decisions.within_quota == (3,)
    assert decisions.preemptions == () and decisions.placements == ()
    assert waiting(decisions)[2].reason_code == QUOTA_GPUS  # ann holds her 16 now; it may borrow again later
    # Within quota now, bob's job within his own quota cannot take it back either.
    decisions = schedule(snap([pend(4, user="bob")], [within, borrower], accounts=quota))
    assert decisions.within_quota == (3,) and decisions.preemptions == ()
    # While ann holds her whole quota elsewhere, it is still a borrower, and bob takes it back.
    third = running(5, {"n02": 8}, user="ann", ran=HOUR, left=10 * HOUR)
    decisions = schedule(snap([pend(4, user="bob")], [within, third, borrower], nodes=3, accounts=quota))
    assert decisions.within_quota == () and [p.job_id for p in decisions.preemptions] == [3]


def test_an_owner_never_takes_back_its_own_borrowed_gpus() -> None:
    # ann's quota has 8 GPUs free, too few for her 16-GPU borrower; her 8-GPU job may not stop it to run within quota.
    quota = (Account(user_key("ann"), max_gpus=8),)
    borrower = running(3, {"n00": 8, "n01": 8}, user="ann", ran=HOUR, left=10 * HOUR, over_quota=True)
    decisions = schedule(snap([pend(2, user="ann")], [borrower], accounts=quota))
    assert decisions.within_quota == () and decisions.preemptions == ()
    assert "Jobs beyond their owners' quotas hold" not in waiting(decisions)[2].reason
    # Of a higher class, it may: that claim is the class's, whoever owns the victim.
    assert [p.job_id for p in schedule(snap([pend(2, user="ann", rank=0)], [borrower], accounts=quota)).preemptions] == [3]


def test_a_job_taking_back_borrowed_gpus_does_not_wait_for_a_cheaper_borrower() -> None:
    """The quota is its owner's guarantee: only a job stopping work of a lower class waits for a cheaper victim."""
    quota = (Account(user_key("ann"), max_gpus=8), Account(user_key("zed"), max_gpus=0))
    older = running(1, {"n00": 8}, ran=40 * 60, left=10 * HOUR, over_quota=True)
    just_short = running(3, {"n01": 8}, ran=600 - 1, left=10 * HOUR, over_quota=True)
    decisions = schedule(snap([pend(2, user="ann")], [older, just_short], accounts=quota))
    assert [p.job_id for p in decisions.preemptions] == [1]
