"""A real Celery worker process over Redis runs the cycle that schedules and finishes a job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from config.celery import app as celery_app
from jobs.models import Job, JobEvent
from jobs.states import JobState

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        # The worker reads the test database, so it sees what the API wrote.
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MUSTER_CLUSTER": "simulated",
            "MUSTER_SIM_START_SECONDS": "0.5",
            "MUSTER_CYCLE_INTERVAL_SECONDS": "1",
            "MUSTER_DATA_DIR": str(tmp_path),
        }

    def start(self, *args: str) -> None:
        log = self.tmp_path / f"{args[0]}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", *args], cwd=ROOT, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT
        )
        self.procs.append((proc, log))

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for _, log in self.procs)

    def stop(self) -> None:
        for proc, _ in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()


@pytest.fixture
def processes(require_postgres: None, require_redis: None, tmp_path: Path) -> Iterator[Processes]:
    celery_app.control.purge()  # stale cycle messages from other tests: harmless, but not ours
    procs = Processes(tmp_path)
    yield procs
    procs.stop()


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
