"""A real Celery worker process over Redis runs the cycle that schedules and finishes a job."""

from __future__ import annotations

import pytest

from config.celery import app as celery_app
from jobs.models import Job, JobEvent
from jobs.states import JobState
from tests.processes import Processes, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_worker_over_redis_schedules_and_finishes_a_submitted_job(processes: Processes, tx_submit) -> None:
    # Only a worker first: the submit itself must enqueue the cycle that places the job.
    processes.start("worker", "--loglevel", "INFO", "--concurrency", "1", "--without-heartbeat", "--without-gossip", "--without-mingle")
    wait_for(lambda: celery_app.control.ping(timeout=0.5), 60, "the worker to answer a ping")
    job_id = tx_submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 2})["id"]
    try:
        wait_for(lambda: Job.objects.get(pk=job_id).state == JobState.SCHEDULED, 20, "the submit-triggered cycle to place the job")
        # Beat's periodic cycles then follow the gang until it ends.
        processes.start("beat", "--loglevel", "INFO", "--schedule", str(processes.tmp_path / "beat-schedule"))
        wait_for(lambda: Job.objects.get(pk=job_id).state == JobState.SUCCEEDED, 60, "the job to succeed")
    except BaseException:
        print(processes.logs())
        raise
    assert list(JobEvent.objects.filter(job_id=job_id).values_list("to_state", flat=True)) == [
        "PENDING",
        "SCHEDULED",
        "RUNNING",
        "SUCCEEDED",
    ]
    assert Job.objects.get(pk=job_id).allocations.filter(released_at__isnull=True).count() == 0
