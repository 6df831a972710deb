"""/metrics' scheduling latency histogram and ended jobs from running totals each start and end adds to as it is
recorded (telemetry.latency, telemetry.ended).

The totals must read what /metrics read when it counted every start from the events (`wait_histogram`, and the text
`test_metrics_history.py` pins): after starts made through the services (a preemption, a requeued second attempt, a
release from a hold), after the migration that counts an existing install's history, and never lower at a later
scrape, an ended job deleted or two starts recorded at once. The ended jobs by state likewise.
"""

from __future__ import annotations

import importlib
import threading
from datetime import timedelta
from typing import Any

import pytest
from django.apps import apps
from django.db import connection, transaction
from django.utils import timezone

from jobs.lifecycle import job_mark_running, job_preempt, job_requeue, job_within_quota
from jobs.models import Job, JobEvent
from jobs.services import job_cancel, job_hold, job_release, job_transition
from jobs.states import JobState
from telemetry.exporter import metrics_text
from telemetry.latency import LATENCY_SECONDS_BUCKETS, bucket_of, latency_histogram, wait_histogram
from telemetry.models import EndedJobsTotal, SchedulingLatencyTotal
from tests.jobs.factories import JobFactory
from tests.telemetry.test_metrics_history import EXPECTED, NOW, history, latency_samples

__all__ = ["history"]  # the pinned history, a fixture here too

P, S, R = JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING


def recounted() -> tuple[list[int], int, float]:
    """What /metrics read before the totals: every start counted from the events."""
    counts, n, total_us = wait_histogram(LATENCY_SECONDS_BUCKETS)
    return counts, n, total_us / 1_000_000


def test_starts_through_the_services_add_what_the_events_count(history: None, user: Any) -> None:
    """A start, a preemption and its second start, a requeue (a second attempt), a hold and release and its third start:
    each start adds its wait from the job's last entry into the queue, in the transaction that records it."""
    before = latency_histogram()
    assert before == recounted()
    t0 = timezone.now()
    job = JobFactory(owner=user, state=P, submitted_at=t0)
    JobEvent.objects.create(job=job, at=t0, to_state=P, reason="Submitted.")  # as job_submit writes it
    job = job_transition(job, S, reason="placed", now=t0 + timedelta(seconds=3))
    job = job_mark_running(job, now=t0 + timedelta(seconds=4))  # waited 4 s
    job = job_preempt(job, reason="room for another", for_job_id=0, now=t0 + timedelta(seconds=100))
    job = job_transition(job, S, reason="placed", now=t0 + timedelta(seconds=110))
    job = job_mark_running(job, now=t0 + timedelta(seconds=130))  # waited 30 s since its requeue
    job = job_requeue(job, now=t0 + timedelta(seconds=200), why="Its node was lost.", attempt=2)
    job = job_hold(job=job, by=user)
    job = job_release(job=job, by=user)  # now, a moment after t0: the wait counts from here
    job = job_transition(job, S, reason="placed", now=t0 + timedelta(seconds=7000))
    job_mark_running(job, now=t0 + timedelta(seconds=7200))  # waited a little under 2 h since the release

    after = latency_histogram()
    assert after == recounted()
    added = {bound: a - b for bound, a, b in zip(LATENCY_SECONDS_BUCKETS, after[0], before[0], strict=True)}
    assert added == {
        **dict.fromkeys((1.0,), 0),
        **dict.fromkeys((5.0, 15.0), 1),
        **dict.fromkeys((30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0), 2),
        **dict.fromkeys((7200.0, 21600.0, 43200.0, 86400.0, 259200.0, 604800.0), 3),
    }
    assert after[1] - before[1] == 3


def test_a_within_quota_note_is_no_start(history: None) -> None:
    """A borrowing job the quota now has room for is said so in its history, from and to RUNNING (job_within_quota):
    no start. It counted as one, its wait from its queue entry to the note (2 h 30 min here, its run time included)."""
    job = Job.objects.get(state=R, over_quota=True)
    before = latency_samples(NOW)
    assert job_within_quota(job, now=NOW + timedelta(minutes=30))
    assert JobEvent.objects.filter(job=job, from_state=R, to_state=R).exists()
    assert latency_samples(NOW) == before
    assert latency_histogram() == recounted()


def test_the_migration_counts_what_metrics_read_before_it(history: None) -> None:
    """An existing install's totals, counted by the migration from the starts it recorded, read what /metrics read
    before it (the pinned text, taken while /metrics bucketed every start in Python): no count goes down."""
    SchedulingLatencyTotal.objects.all().delete()
    migration = importlib.import_module("telemetry.migrations.0004_scheduling_latency_totals")
    migration.count_recorded_starts(apps, None)
    assert metrics_text(now=NOW).decode() == EXPECTED.lstrip("\n")
    assert SchedulingLatencyTotal.objects.count() == len(LATENCY_SECONDS_BUCKETS) + 1


def test_the_ended_jobs_migration_counts_what_metrics_read_before_it(history: None) -> None:
    EndedJobsTotal.objects.all().delete()
    migration = importlib.import_module("telemetry.migrations.0005_ended_jobs_totals")
    migration.count_ended_jobs(apps, None)
    assert metrics_text(now=NOW).decode() == EXPECTED.lstrip("\n")


def ended(now: Any = NOW) -> dict[str, float]:
    text = metrics_text(now=now).decode()
    return {line.split('"')[1]: float(line.split()[-1]) for line in text.splitlines() if line.startswith("muster_jobs_ended_total{")}


def test_each_end_adds_one_to_its_state(history: None, user: Any) -> None:
    """An end through the services counts once, in its final state; a move between live states or a note counts
    nowhere."""
    before = ended()
    running = Job.objects.get(state=R, team__name="vision")
    JobEvent.objects.create(job=running, at=NOW, from_state=R, to_state=R, reason="Within its owner's quota now.")
    job_transition(running, JobState.TIMED_OUT, reason="Wall time reached.", now=NOW)
    job_cancel(job=Job.objects.get(state=P, pending_reason_code="RESOURCES"), by=user)
    after = ended()
    assert {state: after[state] - before[state] for state in after} == {"CANCELLED": 1, "FAILED": 0, "SUCCEEDED": 0, "TIMED_OUT": 1}
    assert after == {state: float(Job.objects.filter(state=state).count()) for state in after}


def test_deleting_an_ended_job_lowers_nothing(history: None) -> None:
    """The one way the histogram and the ended jobs went down (an admin deleting an ended job took its starts and its
    end out of the count) is gone: the totals keep every start and end recorded."""
    before, ended_before = latency_samples(NOW), ended()
    Job.objects.filter(state__in=(JobState.SUCCEEDED, JobState.FAILED)).delete()
    assert latency_samples(NOW) == before
    assert ended() == ended_before


def test_a_start_rolled_back_adds_nothing(history: None) -> None:
    job = Job.objects.get(state=R, team__name="vision")
    before = latency_samples(NOW)
    with pytest.raises(RuntimeError), transaction.atomic():
        JobEvent.objects.create(job=job, at=NOW, from_state=S, to_state=R, reason="test")
        raise RuntimeError("the cycle failed after the start")
    assert latency_samples(NOW) == before


@pytest.mark.parametrize("row_made", [True, False], ids=["row made", "no row yet"])
@pytest.mark.django_db(transaction=True)
def test_two_starts_at_once_both_count(require_postgres: None, user: Any, row_made: bool) -> None:
    """Two starts of the same wait recorded at once, the first uncommitted while the second is written: the second
    waits for the first's lock on the row (or on the row it made) and adds to what it committed, losing nothing."""
    SchedulingLatencyTotal.objects.all().delete()
    if row_made:
        SchedulingLatencyTotal.objects.create(le_us=bucket_of(10_000_000), starts=5, waited_us=50_000_000)
    t0 = timezone.now()
    jobs = [JobFactory(owner=user, state=S, submitted_at=t0) for _ in range(2)]
    for job in jobs:
        JobEvent.objects.create(job=job, at=t0, to_state=P, reason="Submitted.")
    recorded, release = threading.Event(), threading.Event()

    def start(job: Job, *, hold_open: bool) -> None:
        try:
            with transaction.atomic():
                job_mark_running(job, now=t0 + timedelta(seconds=10))
                if hold_open:
                    recorded.set()
                    release.wait(10)
        finally:
            connection.close()

    first = threading.Thread(target=start, args=(jobs[0],), kwargs={"hold_open": True})
    first.start()
    assert recorded.wait(10)
    second = threading.Thread(target=start, args=(jobs[1],), kwargs={"hold_open": False})
    second.start()
    second.join(1)
    assert second.is_alive(), "the second start went on while the first's was uncommitted"
    release.set()
    first.join(10)
    second.join(10)
    row = SchedulingLatencyTotal.objects.get(le_us=bucket_of(10_000_000))
    assert (row.starts, row.waited_us) == ((7, 70_000_000) if row_made else (2, 20_000_000))
