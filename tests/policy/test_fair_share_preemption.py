"""Preemption for fair share: an owner who has used at most its share may stop preemptible work of one far over it."""

from __future__ import annotations

import math
from dataclasses import replace

from policy.model import Account, PolicyConfig, user_key
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, config, pend, placed, running, snap, waiting

# The decayed usage of an account that held every GPU (node) of the two-node test cluster for ever: U = 1.
WINDOW = PolicyConfig().half_life_seconds / math.log(2)
ON = config(fair_share_preemption=True)


def heavy(shares_used: float, *, user: str = "zed", max_gpus: int | None = None, active: int = 2) -> Account:
    """An account that has used `shares_used` times its share while `active` accounts have work (its share: 1/active)."""
    used = shares_used / active
    return Account(user_key(user), max_gpus=max_gpus, usage_gpu_seconds=used * 16 * WINDOW, usage_node_seconds=used * 2 * WINDOW)


def zeds(*job_ids: int, preemptible: bool = True) -> list:
    return [replace(running(j, {f"n0{i}": 8}, ran=HOUR, left=10 * HOUR), preemptible=preemptible) for i, j in enumerate(job_ids)]


def test_a_job_of_an_owner_under_its_share_stops_preemptible_work_of_one_far_over_it() -> None:
    decisions = schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=(heavy(3.0),)), ON)
    assert [p.job_id for p in decisions.preemptions] == [1]
    assert decisions.preemptions[0].reason.startswith(
        "Preempted for job 9: its owner has used more than its fair share of the cluster, and the job's owner less. "
        "The work since its start is lost ("
    )
    assert placed(decisions)[9].node_names == ("n00",)


def test_fair_share_preemption_is_off_by_default_and_spares_what_was_not_submitted_preemptible() -> None:
    accounts = (heavy(3.0),)
    assert schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=accounts)).preemptions == ()
    kept = schedule(snap([pend(9, user="ann")], zeds(1, 2, preemptible=False), accounts=accounts), ON)
    assert kept.preemptions == () and kept.placements == ()
    assert waiting(kept)[9].reason_code


def test_an_owner_within_a_gpu_quota_keeps_its_jobs_whatever_it_has_used() -> None:
    # A quota is the owner's guarantee: only what runs beyond it (over_quota) is taken back, as before.
    decisions = schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=(heavy(3.0, max_gpus=16),)), ON)
    assert decisions.preemptions == ()


def test_the_gap_between_the_two_owners_decides_and_nobody_preempts_upwards() -> None:
    # zed has used 1.5 shares and ann 0.8: less than the default gap of one share apart, nothing is stopped.
    close = (heavy(1.5), heavy(0.8, user="ann"))
    assert schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=close), ON).preemptions == ()
    half = config(fair_share_preemption=True, fair_share_preemption_gap=0.5)
    assert [p.job_id for p in schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=close), half).preemptions] == [1]
    # ann herself over her share (1.2 shares) may not stop zed's work, even far over his (3 shares).
    over = (heavy(3.0), heavy(1.2, user="ann"))
    assert schedule(snap([pend(9, user="ann")], zeds(1, 2), accounts=over), ON).preemptions == ()
    # And the heavy owner never preempts the light one.
    light = [replace(running(1, {"n00": 8}, user="ann", ran=HOUR, left=10 * HOUR), preemptible=True)]
    assert schedule(snap([pend(9, user="zed")], light, nodes=1, accounts=(heavy(3.0),)), ON).preemptions == ()


def test_the_usual_protections_hold_for_fair_share_victims() -> None:
    # Started five minutes ago, or further along than the lost-work ratio allows: waited for, not stopped.
    new = [replace(running(1, {"n00": 8}, ran=300, left=10 * HOUR), preemptible=True)]
    far = [replace(running(1, {"n00": 8}, ran=5 * HOUR, left=HOUR), preemptible=True)]
    for jobs, why in ((new, "8 by jobs that started less than 10 min ago"), (far, "8 by jobs too far along to stop")):
        decisions = schedule(snap([pend(9, user="ann")], jobs, nodes=1, accounts=(heavy(3.0),)), ON)
        assert decisions.preemptions == ()
        # Her reason says why the work of the owner over its share was not stopped for her.
        reason = waiting(decisions)[9].reason
        assert "Preemptible jobs of owners over their fair share hold 8 GPUs; none could be stopped for it: " + why in reason
    # Without the feature, or to zed himself, nothing of it is said.
    assert "fair share" not in waiting(schedule(snap([pend(9, user="ann")], far, nodes=1, accounts=(heavy(3.0),))))[9].reason
    assert "fair share" not in waiting(schedule(snap([pend(9, user="zed")], far, nodes=1, accounts=(heavy(3.0),)), ON))[9].reason


def test_a_heavy_owner_whose_search_failed_does_not_stand_for_a_light_one_of_the_same_shape() -> None:
    # bob (2 shares used) is first in the queue with a 1-hour job. He may stop only the lower-class job on n02, which
    # frees no whole node, so his search fails. ann's day-long job of the same shape comes after him and may stop zed's
    # work (3 shares): the cycle must not take bob's failed search for hers.
    accounts = (heavy(3.0, active=4), heavy(2.0, user="bob", active=4))
    lower = replace(running(3, {"n02": 4}, user="carl", rank=2, ran=HOUR, left=10 * HOUR), preemptible=True)
    kept = running(4, {"n02": 4}, user="carl", ran=HOUR, left=10 * HOUR)
    pending = [pend(8, user="bob"), pend(9, user="ann", wall=24 * HOUR)]
    decisions = schedule(snap(pending, [*zeds(1, 2), lower, kept], nodes=3, accounts=accounts), ON)
    assert decisions.priorities[8].total > decisions.priorities[9].total
    assert [(p.job_id, p.for_job_id) for p in decisions.preemptions] == [(1, 9)]
    assert set(placed(decisions)) == {9}


def test_an_elastic_job_of_the_owner_over_its_share_shrinks_for_the_newcomer_rather_than_being_stopped() -> None:
    wide = replace(running(1, {"n00": 8, "n01": 8}, ran=HOUR, left=10 * HOUR), preemptible=True, min_nodes=1, max_nodes=2, gpus_per_node=8)
    decisions = schedule(snap([pend(9, user="ann")], [wide], accounts=(heavy(3.0),)), ON)
    assert decisions.preemptions == ()
    (resize,) = decisions.resizes
    assert resize.job_id == 1 and resize.node_names == ("n00",)
    assert placed(decisions)[9].node_names == ("n01",)
    # Off, it keeps both nodes and the newcomer waits.
    off = schedule(snap([pend(9, user="ann")], [wide], accounts=(heavy(3.0),)))
    assert off.resizes == () and off.placements == ()


def test_fair_share_has_its_own_bound_on_preemptions_and_the_reason_names_the_one_that_applies() -> None:
    # zed's work was already stopped 3 times. With the fair-share bound at 5 it may be stopped for ann's fair share
    # a fourth time; the bound for reclaiming borrowers and for higher classes stays at 3.
    spent = [replace(job, preemptions=3) for job in zeds(1, 2)]
    looser = config(fair_share_preemption=True, max_preemptions=3, max_fair_share_preemptions=5)
    decisions = schedule(snap([pend(9, user="ann")], spent, accounts=(heavy(3.0),)), looser)
    assert [p.job_id for p in decisions.preemptions] == [1]
    # The same jobs, lower in class than ann's and not over any share: only the class claim holds, and its bound is 3.
    lower = [replace(job, class_rank=2) for job in spent]
    kept = schedule(snap([pend(9, user="ann", rank=1)], lower), looser)
    assert kept.preemptions == () and kept.placements == ()
    # By default the two bounds are equal, and ann's reason counts the work out of reach by the fair-share bound.
    default = schedule(snap([pend(9, user="ann")], spent, accounts=(heavy(3.0),)), ON)
    assert default.preemptions == ()
    assert "none could be stopped for it: 16 by jobs already preempted 3 times" in waiting(default)[9].reason
    five = [replace(job, preemptions=5) for job in zeds(1, 2)]
    reason = waiting(schedule(snap([pend(9, user="ann")], five, accounts=(heavy(3.0),)), looser))[9].reason
    assert "none could be stopped for it: 16 by jobs already preempted 5 times" in reason
