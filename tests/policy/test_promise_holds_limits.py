"""A promise holds its owner's quota and budget as well as its nodes.

Found by the quotas-and-borrowing replay of the Philly slice: an owner one GPU below its quota had four
starving one-GPU jobs (just preempted, so barred from borrowing). All four were promised a start in one
cycle; a second later another of the owner's jobs took the last GPU of the quota, and all four promises
were given back ("limits come first"), so each started after the start it had been promised.
"""

from __future__ import annotations

from dataclasses import replace

from policy.model import BUDGET, QUOTA_GPUS, Account, PendingJob, Reservation, RunningJob, Snapshot, user_key
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, pend, placed, running, snap, waiting


def _full_cluster() -> list[RunningJob]:
    """Three 8-GPU nodes, all taken; ann runs one GPU on n02."""
    return [
        running(1, {"n00": 8}, left=HOUR),
        running(2, {"n01": 8}, left=2 * HOUR),
        running(3, {"n02": 1}, user="ann", left=3 * HOUR),
        running(4, {"n02": 7}, left=3 * HOUR),
    ]


def _starving_and_barred(job_id: int) -> PendingJob:
    # Waited three hours (owed a promise after two, twice its wall time); preempted ten minutes ago.
    return replace(pend(job_id, gpus=1, preemptible=True, age=3 * HOUR), preempted_at=NOW - 600)


def _half_an_hour_later(first: Snapshot, pending: tuple[PendingJob, ...], promise: Reservation) -> Snapshot:
    """A GPU has freed on n02, where ann's own job runs; the promise of the first cycle is handed back."""
    jobs = [j for j in _full_cluster() if j.id != 4] + [running(4, {"n02": 6}, left=3 * HOUR)]
    return Snapshot(
        nodes=snap([], jobs, nodes=3).nodes,
        pending=pending,
        running=tuple(jobs),
        accounts=first.accounts,
        now=NOW + HOUR / 2,
        reservations=(promise,),
    )


def test_only_as_many_jobs_are_promised_as_the_quota_has_room_for_and_the_rest_say_why() -> None:
    quota = (Account(user_key("ann"), max_gpus=2),)
    decisions = schedule(snap([_starving_and_barred(10), _starving_and_barred(11)], _full_cluster(), nodes=3, accounts=quota))
    assert [r.job_id for r in decisions.reservations] == [10]
    wait = waiting(decisions)[11]
    assert wait.reason_code == QUOTA_GPUS
    assert wait.reason.startswith(
        "1 of 2 GPUs of the quota of user ann are in use and 1 held for its jobs promised a start; this job needs 1."
    )


def test_the_owners_later_job_cannot_take_the_quota_a_promised_job_needs() -> None:
    quota = (Account(user_key("ann"), max_gpus=2),)
    first = snap([_starving_and_barred(10)], _full_cluster(), nodes=3, accounts=quota)
    (promise,) = schedule(first).reservations
    # Ann's newer job, of a higher class, fits in the freed GPU and in the quota's last GPU: that one is held.
    decisions = schedule(_half_an_hour_later(first, (_starving_and_barred(10), pend(12, gpus=1, rank=0)), promise))
    assert list(placed(decisions)) == [10]
    assert waiting(decisions)[12].reason_code == QUOTA_GPUS


def test_the_owners_later_job_cannot_take_the_budget_a_promised_job_needs() -> None:
    # One GPU of an 8-GPU node for an hour is 0.125 node-hours. Half an hour on, ann's running GPU commits 2.5 x 0.125
    # (its 2.5 h left) and 0.2 more are left: room for one more 1-GPU hour but not two.
    budget = (Account(user_key("ann"), node_hours_left=0.2 + 2.5 * 0.125),)
    first = snap([pend(10, gpus=1, age=3 * HOUR)], _full_cluster(), nodes=3, accounts=budget)
    (promise,) = schedule(first).reservations
    decisions = schedule(_half_an_hour_later(first, (pend(10, gpus=1, age=3 * HOUR), pend(12, gpus=1, rank=0)), promise))
    assert list(placed(decisions)) == [10]
    assert waiting(decisions)[12].reason_code == BUDGET
