"""Quotas and borrowing in the replay: borrowers are reclaimed, and preemption does not thrash."""

from __future__ import annotations

from policy.model import PolicyConfig
from replay.simulator import ClusterSpec, SimResult, simulate
from replay.trace import Assumptions, TraceJob
from tests.replay.test_baselines import job


def trace() -> list[TraceJob]:
    # Tenant a floods a 4-node cluster with whole-node jobs from t=0, borrowing past its quota of two nodes; tenant b
    # claims one node of its share every 15 minutes for 10, so a's borrowers are reclaimed again and again.
    flood = [job(i, float(i), 7200.0, 8, tenant="a") for i in range(1, 41)]
    claims = [job(100 + i, 900.0 * i + 700.0, 600.0, 8, tenant="b") for i in range(1, 30)]
    return sorted(flood + claims, key=lambda j: (j.submit, j.id))


def run(config: PolicyConfig) -> SimResult:
    return simulate(trace(), cluster=ClusterSpec(nodes=4), policy="muster", config=config, assumptions=Assumptions(tenant_quotas=True))


def test_a_job_is_preempted_at_most_max_preemptions_times() -> None:
    bounded = run(PolicyConfig(max_preemptions=2, reborrow_hysteresis_seconds=0.0))
    unbounded = run(PolicyConfig(max_preemptions=10**6, reborrow_hysteresis_seconds=0.0))
    assert all(r.end is not None for r in bounded.records)
    assert max(r.preemptions for r in unbounded.records) > 2, "the scenario never preempts a job three times: it tests nothing"
    assert max(r.preemptions for r in bounded.records) == 2
    # b stays within its quota and is never reclaimed.
    assert all(r.job.tenant == "a" for r in bounded.records if r.preemptions)


def test_a_reclaimed_job_does_not_borrow_again_until_the_hysteresis_has_passed() -> None:
    hour = 3600.0
    # The one-hour base threshold for every job: with it, tenant a's within-quota jobs never end just as one of its
    # reclaimed jobs is due back, so every restart in this scenario is a borrow (a restart within the quota may
    # come at once, as it must).
    result = run(PolicyConfig(max_preemptions=10**6, reborrow_hysteresis_seconds=hour, starvation_wall_factor=0.0))
    restarts = [
        (end, next_start)
        for r in result.records
        if r.preemptions
        for (_, end, _), (next_start, _, _) in zip(r.attempts, r.attempts[1:], strict=False)
    ]
    assert restarts, "no job was reclaimed and restarted: the scenario tests nothing"
    # Tenant a is beyond its quota all along, so any restart of its jobs is a borrow.
    assert all(next_start >= end + hour for end, next_start in restarts)
    eager = run(PolicyConfig(max_preemptions=10**6, reborrow_hysteresis_seconds=0.0, starvation_wall_factor=0.0))
    assert any(b[0] < a[1] + hour for r in eager.records for a, b in zip(r.attempts, r.attempts[1:], strict=False)), (
        "without the hysteresis a reclaimed job borrows again within the hour"
    )
