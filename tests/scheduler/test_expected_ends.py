"""The cycle's snapshot predicts each running job's end from its owner's last finished jobs (policy/runtime.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from jobs.states import JobState
from scheduler.snapshot import pending_jobs, running_jobs
from tests.accounts.factories import UserFactory
from tests.jobs.factories import JobFactory, hours_ago

pytestmark = pytest.mark.django_db


def finished(owner: object, *, ended_hours_ago: float, ran_minutes: float, state: str = JobState.SUCCEEDED) -> None:
    end = hours_ago(ended_hours_ago)
    JobFactory(owner=owner, finished=True, state=state, started_at=end - timedelta(minutes=ran_minutes), finished_at=end)


def test_a_running_job_is_expected_to_end_after_the_mean_of_its_owners_last_two_run_times() -> None:
    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    finished(ann, ended_hours_ago=30, ran_minutes=600)  # older than the last two: not counted
    finished(ann, ended_hours_ago=20, ran_minutes=30)
    finished(ann, ended_hours_ago=10, ran_minutes=90, state=JobState.FAILED)
    JobFactory(owner=ann, state=JobState.CANCELLED, started_at=hours_ago(5), finished_at=hours_ago(4))  # never counted
    job = JobFactory(owner=ann, running=True, wall_time_seconds=4 * 3600)
    newcomer = JobFactory(owner=bob, running=True, wall_time_seconds=4 * 3600)
    ends = {r.id: (r.started_at, r.expected_end, r.ends_at) for r in running_jobs()}
    started, expected, wall_end = ends[job.id]
    assert expected == pytest.approx(started + 60 * 60)
    assert wall_end == pytest.approx(started + 4 * 3600)
    assert ends[newcomer.id][1] is None  # no history: its wall time is all that is known
    waiting = JobFactory(owner=ann, wall_time_seconds=4 * 3600)
    assert {j.id: j.expected_seconds for j in pending_jobs()} == {waiting.id: 3600.0}


def test_run_times_older_than_a_month_say_nothing() -> None:
    ann = UserFactory(username="ann")
    finished(ann, ended_hours_ago=31 * 24, ran_minutes=30)
    job = JobFactory(owner=ann, running=True, wall_time_seconds=4 * 3600)
    assert {r.id: r.expected_end for r in running_jobs()} == {job.id: None}


def test_the_cycles_snapshot_reads_run_times_once_for_waiting_and_running_owners() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from scheduler.snapshot import build_snapshot

    ann, bob = UserFactory(username="ann"), UserFactory(username="bob")
    for hours_before in (2, 3):
        finished(ann, ended_hours_ago=hours_before, ran_minutes=30)
        finished(bob, ended_hours_ago=hours_before, ran_minutes=90)
    running = JobFactory(owner=ann, running=True, wall_time_seconds=4 * 3600)
    waiting = JobFactory(owner=bob, wall_time_seconds=4 * 3600)
    with CaptureQueriesContext(connection) as queries:
        snapshot = build_snapshot(timezone.now())
    assert sum("ROW_NUMBER" in q["sql"] for q in queries.captured_queries) == 1
    (run,) = snapshot.running
    assert (run.id, run.expected_end) == (running.id, pytest.approx(run.started_at + 30 * 60))
    assert {j.id: j.expected_seconds for j in snapshot.pending} == {waiting.id: 90 * 60.0}


def test_a_prediction_reads_only_the_owners_jobs_of_its_kind() -> None:
    """Two finished 30-second notebook slices made each of the owner's queued 2-hour gangs expected to take 30 seconds,
    so the queue page put ten of them two minutes apart."""
    from django.utils import timezone

    from scheduler.snapshot import build_snapshot

    ann = UserFactory(username="ann")
    for hours_before in (5, 4):
        end = hours_ago(hours_before)
        JobFactory(owner=ann, finished=True, state=JobState.SUCCEEDED, nodes=2, started_at=end - timedelta(minutes=100), finished_at=end)
    for hours_before in (2, 1):
        end = hours_ago(hours_before)
        JobFactory(
            owner=ann, finished=True, state=JobState.SUCCEEDED, nodes=1, gpus_per_node=1, gpu_fraction=0.25,
            started_at=end - timedelta(seconds=30), finished_at=end,
        )  # fmt: skip
    gang = JobFactory(owner=ann, nodes=4, wall_time_seconds=2 * 3600)
    notebook = JobFactory(owner=ann, nodes=1, gpus_per_node=1, gpu_fraction=0.25, wall_time_seconds=3600)
    single = JobFactory(owner=ann, nodes=1, wall_time_seconds=3600)
    predicted = {j.id: j.expected_seconds for j in build_snapshot(timezone.now()).pending}
    assert predicted[gang.pk] == pytest.approx(100 * 60.0)
    assert predicted[notebook.pk] == pytest.approx(30.0)
    assert predicted[single.pk] is None  # no single-node job of hers has run: its wall time, not a notebook's 30 s
