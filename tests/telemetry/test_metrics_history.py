"""/metrics on a known history: every family pinned, the scheduling latency histogram's buckets, sum and count above all.

A small cluster's life: starts on bucket bounds and a microsecond past them, a job preempted and requeued in one
instant and started again, a failed attempt requeued, a release from a hold, a start with no entry into the queue
before it (no wait), one stamped before its queue entry by a skewed clock (a wait of 0), waits of days and past the
last bound; pending jobs for several reasons and held, running jobs within and over quota, an account above its
quota, nodes held, settling, gone and shared, the cycle's counters. The text was taken from /metrics as it read every
start and bucketed the waits in Python, so that summing them in the database changes none of it, on PostgreSQL or on
SQLite (`make run`'s default).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from jobs.models import ClusterHealth, Job, JobEvent, Node, NodeState
from jobs.states import JobState
from scheduler.counters import cycle_counters_record
from telemetry.exporter import metrics_text
from tests.jobs.factories import AllocationFactory, JobFactory, NodeFactory
from tests.quotas.factories import QuotaFactory, TeamFactory

P, S, R = JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.get_current_timezone())


def at(**delta: float) -> datetime:
    return NOW + timedelta(**delta)


def job(owner: Any, state: str, events: Sequence[tuple[datetime, str, str]], **fields: Any) -> Job:
    made = JobFactory(owner=owner, state=state, submitted_at=events[0][0], **fields)
    for moment, from_state, to_state in events:
        JobEvent.objects.create(job=made, at=moment, from_state=from_state, to_state=to_state, reason="test")
    return made


@pytest.fixture
def history(user: Any, settings: Any) -> None:
    settings.MUSTER_STARVATION_SECONDS = 3600
    settings.MUSTER_STARVATION_WALL_FACTOR = 0.0
    settings.MUSTER_NODE_SETTLE_SECONDS = 300
    team = TeamFactory(name="vision")
    team.members.add(user)
    QuotaFactory(team=team, max_gpus=4)  # the team holds 8 within its quota: above it
    n1, n2, n3 = NodeFactory(name="gpu-01"), NodeFactory(name="gpu-02"), NodeFactory(name="gpu-03")
    NodeFactory(name="gpu-04", held=True)
    NodeFactory(name="gpu-05", ready_since=at(seconds=-60))  # back a minute ago: settling
    NodeFactory(name="gpu-06", state=NodeState.NOT_READY, gpus_foreign=2)
    NodeFactory(name="gpu-07", state=NodeState.GONE)
    Node.objects.filter(name="gpu-03").update(sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25, slices_foreign=3)

    # Waited 4.5 s (placed after 3), ran, succeeded.
    job(user, JobState.SUCCEEDED, [
        (at(hours=-30), "", P), (at(hours=-30, seconds=3), P, S), (at(hours=-30, seconds=4.5), S, R),
        (at(hours=-29), R, JobState.SUCCEEDED),
    ], finished_at=at(hours=-29))  # fmt: skip
    # Exactly on a bound (5 s: in the 5.0 bucket), running now within the team's quota on 8 GPUs.
    on_bound = job(user, R, [(at(hours=-3), "", P), (at(hours=-3, seconds=5), P, S), (at(hours=-3, seconds=5), S, R)], team=team)
    AllocationFactory(job=on_bound, node=n1, gpus=8, allocated_at=at(hours=-3, seconds=5))
    # A microsecond past a bound (60 s), then preempted and requeued in one instant, started again after exactly
    # 2 h (7200 s), its attempt failed and requeued, started a third time after 12.345678 s: three starts, three waits.
    job(user, JobState.FAILED, [
        (at(hours=-20), "", P), (at(hours=-20, seconds=30), P, S), (at(hours=-20, seconds=60.000001), S, R),
        (at(hours=-19), R, JobState.PREEMPTED), (at(hours=-19), JobState.PREEMPTED, P),
        (at(hours=-17, seconds=-1), P, S), (at(hours=-17), S, R),
        (at(hours=-16), R, P), (at(hours=-16, seconds=12), P, S), (at(hours=-16, seconds=12.345678), S, R),
        (at(hours=-15), R, JobState.FAILED),
    ], attempt=3, finished_at=at(hours=-15))  # fmt: skip
    # Held for a day, released, started 1 h 50 min after the release: the wait counts from the release (6,600 s).
    job(user, JobState.SUCCEEDED, [
        (at(hours=-40), "", P), (at(hours=-16), P, P), (at(hours=-15, minutes=50), P, S), (at(hours=-15, minutes=50), S, R),
        (at(hours=-14), R, JobState.SUCCEEDED),
    ], finished_at=at(hours=-14))  # fmt: skip
    # Started with no entry into the queue before it (an import): no wait, in no bucket.
    job(user, JobState.SUCCEEDED, [(at(hours=-12), P, S), (at(hours=-12, seconds=1), S, R), (at(hours=-11), R, JobState.SUCCEEDED)],
        finished_at=at(hours=-11))  # fmt: skip
    # Stamped as started before its queue entry (a skewed clock): a wait of 0.
    job(user, JobState.CANCELLED, [(at(hours=-10), "", P), (at(hours=-10, seconds=-2), P, S), (at(hours=-10, seconds=-2), S, R),
        (at(hours=-9), R, JobState.CANCELLED)], finished_at=at(hours=-9))  # fmt: skip
    # Three days and a microsecond (past the 259200 bound), and eight days (past the last, 604800: +Inf only).
    job(user, JobState.SUCCEEDED, [
        (at(days=-9), "", P), (at(days=-6, microseconds=1), P, S), (at(days=-6, microseconds=1), S, R),
        (at(days=-5), R, JobState.SUCCEEDED),
    ], finished_at=at(days=-5))  # fmt: skip
    # Running over its quota on a quarter slice, after 1 s exactly.
    over = job(user, R, [(at(hours=-2), "", P), (at(hours=-2, seconds=1), P, S), (at(hours=-2, seconds=1), S, R)], over_quota=True)
    AllocationFactory(job=over, node=n3, gpus=0.25, allocated_at=at(hours=-2, seconds=1))
    late = job(user, R, [(at(days=-10), "", P), (at(days=-2), P, S), (at(days=-2), S, R)])
    AllocationFactory(job=late, node=n2, gpus=2, allocated_at=at(days=-2))
    # Placed, not yet started: no start.
    placed = job(user, S, [(at(minutes=-5), "", P), (at(minutes=-1), P, S)])
    AllocationFactory(job=placed, node=n2, gpus=4, allocated_at=at(minutes=-1))

    # Pending: one for room since 2 h (starving), one new, one held, one back after a preemption.
    job(user, P, [(at(hours=-2), "", P)], pending_reason_code="RESOURCES", pending_reason="Waiting for room.")
    job(user, P, [(at(minutes=-1), "", P)], pending_reason_code="")
    job(user, P, [(at(days=-3), "", P)], pending_reason_code="HELD", hold="user")
    job(user, P, [(at(hours=-1), "", P), (at(minutes=-50), P, S), (at(minutes=-50), S, R), (at(minutes=-20), R, JobState.PREEMPTED),
        (at(minutes=-20), JobState.PREEMPTED, P)], pending_reason_code="PRIORITY", attempt=1)  # fmt: skip

    cycle_counters_record(ran=True, seconds=0.75, launched=3, preempted=1)
    cycle_counters_record(ran=True, seconds=12.5, launch_failed=1, cluster_error=True)
    cycle_counters_record(ran=False, seconds=0)
    ClusterHealth.objects.create(pk=1, last_cycle_at=at(seconds=-20), reachable=True)


# Today's text (taken while /metrics read every start and bucketed the waits in Python). The waits, in seconds:
# 0 (the skewed clock), 1, 4.5, 5, 12.345678, 60.000001, 600, 6,600, 7,200, 259,200.000001 and 691,200; the import's
# start has none. Buckets hold the waits at or below their bound (Prometheus' le), so 5 is in 5.0 and 60.000001 not
# in 60.0.
EXPECTED = """
# HELP muster_jobs Jobs not yet ended, by state (queue depth).
# TYPE muster_jobs gauge
muster_jobs{state="PENDING"} 4.0
muster_jobs{state="SCHEDULED"} 1.0
muster_jobs{state="RUNNING"} 3.0
muster_jobs{state="PREEMPTED"} 0.0
# HELP muster_jobs_pending Pending jobs by why they wait (the scheduler's reason code; NEW: not examined yet).
# TYPE muster_jobs_pending gauge
muster_jobs_pending{reason="HELD"} 1.0
muster_jobs_pending{reason="NEW"} 1.0
muster_jobs_pending{reason="PRIORITY"} 1.0
muster_jobs_pending{reason="RESOURCES"} 1.0
# HELP muster_jobs_running Jobs holding GPUs (scheduled or running), within their quota or borrowing beyond it.
# TYPE muster_jobs_running gauge
muster_jobs_running{quota="within"} 3.0
muster_jobs_running{quota="over"} 1.0
# HELP muster_gpus_running GPUs held by jobs (a slice its share), within or beyond their quota.
# TYPE muster_gpus_running gauge
muster_gpus_running{quota="within"} 14.0
muster_gpus_running{quota="over"} 0.25
# HELP muster_accounts_above_quota Users and teams holding more GPUs than their quota allows, lowered under their running jobs (not stopped).
# TYPE muster_accounts_above_quota gauge
muster_accounts_above_quota{kind="user"} 0.0
muster_accounts_above_quota{kind="team"} 1.0
# HELP muster_pending_oldest_wait_seconds How long the longest-waiting pending job has waited since it was submitted (0 when none is pending).
# TYPE muster_pending_oldest_wait_seconds gauge
muster_pending_oldest_wait_seconds 7200.0
# HELP muster_jobs_starving Pending jobs that have waited past their starvation threshold (MUSTER_STARVATION_SECONDS; a single-node job at least MUSTER_STARVATION_WALL_FACTOR x its wall time): they are owed a reservation.
# TYPE muster_jobs_starving gauge
muster_jobs_starving 2.0
# HELP muster_starvation_threshold_seconds MUSTER_STARVATION_SECONDS: the shortest starvation threshold (longer jobs' grow with their wall time).
# TYPE muster_starvation_threshold_seconds gauge
muster_starvation_threshold_seconds 3600.0
# HELP muster_jobs_ended_total Jobs that have ended, by final state.
# TYPE muster_jobs_ended_total counter
muster_jobs_ended_total{state="CANCELLED"} 1.0
muster_jobs_ended_total{state="FAILED"} 1.0
muster_jobs_ended_total{state="SUCCEEDED"} 4.0
muster_jobs_ended_total{state="TIMED_OUT"} 0.0
# HELP muster_scheduling_latency_seconds Queued (submitted, or requeued after a failed attempt or a preemption) to started (all pods running), per start.
# TYPE muster_scheduling_latency_seconds histogram
muster_scheduling_latency_seconds_bucket{le="1.0"} 2.0
muster_scheduling_latency_seconds_bucket{le="5.0"} 4.0
muster_scheduling_latency_seconds_bucket{le="15.0"} 5.0
muster_scheduling_latency_seconds_bucket{le="30.0"} 5.0
muster_scheduling_latency_seconds_bucket{le="60.0"} 5.0
muster_scheduling_latency_seconds_bucket{le="120.0"} 6.0
muster_scheduling_latency_seconds_bucket{le="300.0"} 6.0
muster_scheduling_latency_seconds_bucket{le="600.0"} 7.0
muster_scheduling_latency_seconds_bucket{le="1800.0"} 7.0
muster_scheduling_latency_seconds_bucket{le="3600.0"} 7.0
muster_scheduling_latency_seconds_bucket{le="7200.0"} 9.0
muster_scheduling_latency_seconds_bucket{le="21600.0"} 9.0
muster_scheduling_latency_seconds_bucket{le="43200.0"} 9.0
muster_scheduling_latency_seconds_bucket{le="86400.0"} 9.0
muster_scheduling_latency_seconds_bucket{le="259200.0"} 9.0
muster_scheduling_latency_seconds_bucket{le="604800.0"} 10.0
muster_scheduling_latency_seconds_bucket{le="+Inf"} 11.0
muster_scheduling_latency_seconds_count 11.0
muster_scheduling_latency_seconds_sum 964882.84568
# HELP muster_nodes Known nodes by state.
# TYPE muster_nodes gauge
muster_nodes{state="READY"} 5.0
muster_nodes{state="CORDONED"} 0.0
muster_nodes{state="NOT_READY"} 1.0
muster_nodes{state="GONE"} 1.0
# HELP muster_nodes_held Nodes held out of placement (by an admin, or after failures in a row), by state.
# TYPE muster_nodes_held gauge
muster_nodes_held{state="READY"} 1.0
muster_nodes_held{state="CORDONED"} 0.0
muster_nodes_held{state="NOT_READY"} 0.0
muster_nodes_held{state="GONE"} 0.0
# HELP muster_nodes_settling READY nodes not held that take no new work yet: back from NotReady or GONE less than MUSTER_NODE_SETTLE_SECONDS ago.
# TYPE muster_nodes_settling gauge
muster_nodes_settling 1.0
# HELP muster_gpus_total GPUs on nodes the cluster reports (not GONE), schedulable or not.
# TYPE muster_gpus_total gauge
muster_gpus_total 48.0
# HELP muster_gpus_schedulable GPUs on READY nodes that take new work: neither held nor settling. What the scheduler may place on.
# TYPE muster_gpus_schedulable gauge
muster_gpus_schedulable 24.0
# HELP muster_gpus_held GPUs on held nodes the cluster reports (not GONE): capacity an admin (or the failure hold) keeps from new work.
# TYPE muster_gpus_held gauge
muster_gpus_held 8.0
# HELP muster_gpus_allocated GPUs held by live allocations (scheduled or running jobs).
# TYPE muster_gpus_allocated gauge
muster_gpus_allocated 14.25
# HELP muster_gpus_foreign GPUs held by pods Muster did not start on nodes the cluster reports (MUSTER_K8S_COUNT_FOREIGN_PODS); on a shared node, the GPU share of the slices they hold.
# TYPE muster_gpus_foreign gauge
muster_gpus_foreign 2.75
# HELP muster_cycles_total Scheduling cycles: ran (held the lock), skipped (another cycle held it), cluster_unavailable (ran, cluster unreachable).
# TYPE muster_cycles_total counter
muster_cycles_total{outcome="ran"} 2.0
muster_cycles_total{outcome="skipped"} 1.0
muster_cycles_total{outcome="cluster_unavailable"} 1.0
# HELP muster_cycle_duration_seconds How long each scheduling cycle that ran took.
# TYPE muster_cycle_duration_seconds histogram
muster_cycle_duration_seconds_bucket{le="0.01"} 0.0
muster_cycle_duration_seconds_bucket{le="0.025"} 0.0
muster_cycle_duration_seconds_bucket{le="0.05"} 0.0
muster_cycle_duration_seconds_bucket{le="0.1"} 0.0
muster_cycle_duration_seconds_bucket{le="0.25"} 0.0
muster_cycle_duration_seconds_bucket{le="0.5"} 0.0
muster_cycle_duration_seconds_bucket{le="1.0"} 1.0
muster_cycle_duration_seconds_bucket{le="2.5"} 1.0
muster_cycle_duration_seconds_bucket{le="5.0"} 1.0
muster_cycle_duration_seconds_bucket{le="10.0"} 1.0
muster_cycle_duration_seconds_bucket{le="30.0"} 2.0
muster_cycle_duration_seconds_bucket{le="60.0"} 2.0
muster_cycle_duration_seconds_bucket{le="+Inf"} 2.0
muster_cycle_duration_seconds_count 2.0
muster_cycle_duration_seconds_sum 13.25
# HELP muster_launches_total Gangs launched on the cluster.
# TYPE muster_launches_total counter
muster_launches_total 3.0
# HELP muster_launch_failures_total Failed launches, each requeued with a backoff or failed after too many: refused by the cluster, a container that could not start (ImagePullBackOff), a gang not up within MUSTER_LAUNCH_TIMEOUT_SECONDS.
# TYPE muster_launch_failures_total counter
muster_launch_failures_total 1.0
# HELP muster_preemptions_total Jobs preempted to make room for others.
# TYPE muster_preemptions_total counter
muster_preemptions_total 1.0
# HELP muster_last_cycle_timestamp_seconds When the last scheduling cycle that held the lock ran (Unix time; 0 before the first).
# TYPE muster_last_cycle_timestamp_seconds gauge
muster_last_cycle_timestamp_seconds 1.77245278e+09
# HELP muster_cluster_reachable 1 if the last cycle reached the cluster backend, else 0.
# TYPE muster_cluster_reachable gauge
muster_cluster_reachable 1.0
# HELP muster_cluster_down_since_timestamp_seconds When the current cluster outage began (Unix time; 0 while reachable).
# TYPE muster_cluster_down_since_timestamp_seconds gauge
muster_cluster_down_since_timestamp_seconds 0.0
"""  # noqa: E501 (the help texts as /metrics writes them)


def test_every_family_pinned(history: None) -> None:
    assert metrics_text(now=NOW).decode() == EXPECTED.lstrip("\n")


def latency_samples(now: datetime) -> dict[str, float]:
    text = metrics_text(now=now).decode()
    return {
        f"{s.name}{s.labels.get('le', '')}": s.value
        for family in text_string_to_metric_families(text)
        if family.name == "muster_scheduling_latency_seconds"
        for s in family.samples
    }


def test_a_later_scrape_only_adds(history: None, user: Any) -> None:
    """Prometheus reads a histogram's buckets, sum and count as counters: a later scrape adds the starts made since, in
    their buckets, and lowers nothing (the running job preempted and started again counts its second start too)."""
    before = latency_samples(NOW)
    running = Job.objects.get(state=R, team__name="vision")
    for moment, from_state, to_state in [
        (at(seconds=10), R, JobState.PREEMPTED), (at(seconds=10), JobState.PREEMPTED, P), (at(seconds=40), P, S), (at(seconds=40), S, R),
    ]:  # fmt: skip
        JobEvent.objects.create(job=running, at=moment, from_state=from_state, to_state=to_state, reason="test")
    job(user, R, [(at(seconds=20), "", P), (at(seconds=22), P, S), (at(seconds=22), S, R)])
    after = latency_samples(at(minutes=1))
    added = {name: after[name] - before[name] for name in before}
    bucket = "muster_scheduling_latency_seconds_bucket"
    assert added == {
        # Waits of 2 s (the new job) and 30 s (the requeued one, from its requeue).
        f"{bucket}1.0": 0,
        f"{bucket}5.0": 1,
        f"{bucket}15.0": 1,
        **{f"{bucket}{le}": 2 for le in ("30.0", "60.0", "120.0", "300.0", "600.0", "1800.0", "3600.0", "7200.0")},
        **{f"{bucket}{le}": 2 for le in ("21600.0", "43200.0", "86400.0", "259200.0", "604800.0", "+Inf")},
        "muster_scheduling_latency_seconds_count": 2,
        "muster_scheduling_latency_seconds_sum": 32.0,
    }
