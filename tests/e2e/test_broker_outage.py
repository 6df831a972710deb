"""A Redis outage loses nothing: writes answer 2xx while it is down, jobs move once it is back, the worker lives on.

Everything is real and separate from the test process: a Redis of the test's own (stopped and
started again mid-test), gunicorn serving the API, a Celery worker and beat, all on the test
database. MUSTER_TEST_OUTAGE_SECONDS sets how long Redis stays down (10 s by default; the closing
figures were taken with 30).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jobs.models import Job
from jobs.states import JobState
from quotas.models import Quota
from tests.conftest import PASSWORD
from tests.live_server import Api, free_port, start_gunicorn
from tests.processes import Processes, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
OUTAGE_SECONDS = float(os.environ.get("MUSTER_TEST_OUTAGE_SECONDS", "10"))
# The worker's flags as shipped (docker-compose.yml, platform/kubernetes/muster.yaml, scripts/run-local.sh).
WORKER_ARGS = ("worker", "--loglevel", "INFO", "--concurrency", "1", "--without-gossip", "--without-mingle", "--without-heartbeat")


class Redis:
    """A redis-server of this test's own, on loopback, that the test can stop and start again."""

    def __init__(self, tmp_path: Path) -> None:
        self.port = free_port()
        self.dir = tmp_path
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        binary = shutil.which("redis-server")
        assert binary, "redis-server is needed (scripts/test-services.sh installs it)"
        self.proc = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.dir)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(self.answers, 10, "redis-server to start")

    def answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
            self.proc = None


@pytest.fixture
def stack(require_postgres: None, require_redis: None, tmp_path: Path) -> Iterator[tuple[Processes, Redis, Api]]:
    redis = Redis(tmp_path)
    redis.start()
    procs = Processes(tmp_path)
    # Writes are not throttled here: this test counts how writes are answered, not how fast one user may send them.
    procs.env.update(
        {"REDIS_URL": redis.url, "CELERY_BROKER_URL": redis.url, "MUSTER_SIM_DEFAULT_DURATION_SECONDS": "2", "MUSTER_THROTTLE_WRITES": ""}
    )
    procs.env.pop("MUSTER_REQUIRE_SERVICES", None)
    web, api = start_gunicorn(procs.env, tmp_path / "web.log")
    procs.procs.append((web, tmp_path / "web.log"))
    try:
        yield procs, redis, api
    finally:
        procs.stop()
        redis.stop()


def job_body(i: int) -> dict[str, Any]:
    return {
        "name": f"outage-{i}",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["python", "train.py"],
        "nodes": 1,
        "gpus_per_node": 2,
        "wall_time_seconds": 600,
        "simulate": {"duration_seconds": 2},
    }


def test_writes_answer_during_a_redis_outage_and_jobs_move_once_it_is_back(stack, django_user_model, settings) -> None:
    procs, redis, api = stack
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # what gunicorn's settings check
    django_user_model.objects.create_user(username="researcher", password=PASSWORD)
    django_user_model.objects.create_user(username="boss", password=PASSWORD, is_staff=True, is_superuser=True)
    admin = Api(api.base)
    api.login("researcher")
    admin.login("boss")
    procs.start(*WORKER_ARGS)
    procs.start("beat", "--loglevel", "INFO", "--schedule", str(procs.tmp_path / "beat-schedule"))
    worker = procs.procs[-2][0]
    try:
        # Before the outage, the platform works.
        status, body = api.call("POST", "/api/v1/jobs/", job_body(0))
        assert status == 201, body
        wait_for(lambda: Job.objects.get(pk=body["id"]).state == JobState.SUCCEEDED, 60, "a job to run before the outage")

        redis.stop()
        statuses: Counter[int] = Counter()
        submitted: list[int] = []
        cancelled: list[int] = []
        i, weight = 0, 1.0
        deadline = time.monotonic() + OUTAGE_SECONDS
        while time.monotonic() < deadline:
            i += 1
            status, body = api.call("POST", "/api/v1/jobs/", job_body(i))
            statuses[status] += 1
            if status == 201:
                submitted.append(body["id"])
            if i % 3 == 0 and submitted:
                status, _ = api.call("POST", f"/api/v1/jobs/{submitted[-1]}/cancel/")
                statuses[status] += 1
                if status == 200:
                    cancelled.append(submitted[-1])
            if i % 4 == 0:
                weight += 1
                status, _ = admin.call("PATCH", "/api/v1/quotas/users/researcher/", {"fair_share_weight": weight})
                statuses[status] += 1
            time.sleep(0.2)
        writes = sum(statuses.values())
        assert set(statuses) <= {200, 201}, statuses
        assert Quota.objects.get(user__username="researcher").fair_share_weight == weight
        # Nothing moved while the broker was away (no cycle could be asked for), and nothing was lost.
        assert Job.objects.filter(pk__in=submitted).count() == len(submitted)
        redis.start()
        waiting = [j for j in submitted if j not in cancelled]
        wait_for(
            lambda: not Job.objects.filter(pk__in=waiting).exclude(state=JobState.SUCCEEDED).exists(),
            120,
            "every job submitted during the outage to run once Redis is back",
        )
        assert worker.poll() is None, "the worker exited during the outage"
        assert set(Job.objects.filter(pk__in=cancelled).values_list("state", flat=True)) <= {JobState.CANCELLED}
    except BaseException:
        print(procs.logs())
        raise
    print(
        f"\nRedis down {OUTAGE_SECONDS:.0f} s: {writes} writes ({len(submitted)} submits, {len(cancelled)} cancels, quota edits), "
        f"answered {dict(statuses)}; {len(waiting)} jobs moved to SUCCEEDED after; worker alive (pid {worker.pid})"
    )
