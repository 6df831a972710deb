"""A `muster logs -f` being served when the web server is told to stop (make run's Ctrl-C: gunicorn's quick shutdown,
config/gunicorn_ready.py's `worker_int`) ends at its next look at the job, as at MUSTER_LOG_FOLLOW_SECONDS: it held its
worker's thread until the attempt ended, the worker's exit waited for it, and make run's Ctrl-C waited 20 s and killed
the web server ("the web server (gunicorn) did not stop within 20 s; killing it")."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from jobs import logs
from jobs.logs import job_logs_follow
from jobs.models import Job
from jobs.states import JobState
from tests.conftest import SimHarness

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def follows_end() -> Iterator[threading.Event]:
    yield logs.FOLLOWS_END
    logs.FOLLOWS_END.clear()  # the process's own: the next test's follows run again


def test_a_follow_ends_when_its_web_server_worker_is_told_to_stop(tx_submit: Any, tx_sim: SimHarness, follows_end: threading.Event) -> None:
    job_id = tx_submit(nodes=1, gpus_per_node=1, wall_time_seconds=3600, simulate={"duration_seconds": 3000})["id"]
    tx_sim.cycle()
    tx_sim.advance(2)
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.RUNNING

    spec = importlib.util.spec_from_file_location("gunicorn_ready", ROOT / "config" / "gunicorn_ready.py")
    assert spec is not None and spec.loader is not None
    gunicorn_config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gunicorn_config)
    # gunicorn calls worker_int in the worker told to stop, while the follow's thread is still serving it.
    chunks: list[str] = []

    def serve() -> None:  # as the worker's thread does, with a connection of its own, closed when done
        try:
            chunks.extend(job_logs_follow(job, rank=0, tail=None, backend=tx_sim.cluster))
        finally:
            connection.close()

    follow = threading.Thread(target=serve)
    follow.start()
    time.sleep(1)
    gunicorn_config.worker_int(None)
    follow.join(timeout=5)
    ended = not follow.is_alive()
    if not ended:
        tx_sim.advance(3000)  # the attempt's end ends it, so the test does not hang on it
        follow.join(timeout=30)
    assert ended, "the follow went on after its worker was told to stop"  # not until the attempt ends, 50 minutes on
    assert f"job {job_id} attempt 1 rank 0" in "".join(chunks)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING  # the job runs on: only the follow ended
