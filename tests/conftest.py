"""Shared fixtures: users, API clients, a simulated cluster on a controllable clock."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.cluster.simulated import SimulatedCluster
from jobs.services import nodes_sync
from scheduler.cycle import CycleReport, run_cycle
from tests.accounts.factories import PASSWORD, UserFactory
from tests.processes import Processes

# CI sets this: a test that needs PostgreSQL or Redis fails instead of skipping.
REQUIRE_SERVICES = os.environ.get("MUSTER_REQUIRE_SERVICES") == "1"


def pytest_configure(config: pytest.Config) -> None:
    # A `make run` in this checkout collected the static files of its day into var/static, with a manifest naming them:
    # pages under test linked those (an old stylesheet made a page 405 px wide at 390 px), or failed on a file added
    # since ("Missing staticfiles manifest entry"), instead of the apps' files as they are now. The suite serves from an
    # empty STATIC_ROOT of its own, as on a clean clone; servers it starts in other processes inherit it.
    from django.conf import settings

    root = Path(tempfile.mkdtemp(prefix="muster-test-static-"))
    settings.STATIC_ROOT = root
    os.environ["MUSTER_STATIC_ROOT"] = str(root)
    config.add_cleanup(lambda: shutil.rmtree(root, ignore_errors=True))


def need_service(available: bool, what: str) -> None:
    if available:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"{what} is required (MUSTER_REQUIRE_SERVICES=1) but not configured")
    pytest.skip(f"{what} not configured; set DATABASE_URL/REDIS_URL (make test in CI does)")


@pytest.fixture
def require_postgres() -> None:
    need_service(connection.vendor == "postgresql", "PostgreSQL")


@pytest.fixture
def require_redis() -> None:
    need_service(bool(os.environ.get("REDIS_URL")), "Redis")


@pytest.fixture
def processes(require_postgres: None, require_redis: None, tmp_path: Path) -> Iterator[Processes]:
    """Real Celery processes (tests.processes) on PostgreSQL and Redis, stopped after the test."""
    from config.celery import app as celery_app

    celery_app.control.purge()  # stale messages of other tests: harmless, but not this test's
    procs = Processes(tmp_path)
    yield procs
    procs.stop()


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: Any) -> None:
    # The real hasher costs ~1 s per user created; tests check access rules, not hashing strength.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _own_lock_and_cache_per_xdist_worker(settings: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    # pytest-xdist workers each have their own test database, whose job ids start at 1 in every worker. Off
    # PostgreSQL the cycle lock is a file in DATA_DIR (jobs/locks.py; PostgreSQL's advisory lock is per database
    # already), and with Redis the cache is shared: each worker gets its own lock file and cache key prefix, so one
    # worker's cycle never finds another's lock held nor reads another's cached job 1.
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        settings.DATA_DIR = tmp_path_factory.getbasetemp()
        settings.CACHES = {"default": {**settings.CACHES["default"], "KEY_PREFIX": f"muster-test-{worker}"}}


@pytest.fixture(autouse=True)
def _job_logs_kept_per_test(settings: Any, tmp_path: Any) -> None:
    # Kept output is named by job id, attempt and rank, which every test database numbers from 1.
    settings.STORAGES = {
        **settings.STORAGES,
        "joblogs": {"BACKEND": "django.core.files.storage.FileSystemStorage", "OPTIONS": {"location": str(tmp_path / "joblogs")}},
    }


@pytest.fixture(autouse=True)
def _no_rate_throttles(settings: Any) -> None:
    # Scenario tests submit hundreds of jobs as one user, and the rates' counts (in Redis in CI) outlive a test;
    # tests/accounts/test_accounts.py sets real rates where it tests them. Brute-force lockouts stay on everywhere.
    settings.MUSTER_THROTTLE_WRITES = ""
    settings.MUSTER_THROTTLE_TOKEN_REQUESTS = ""
    settings.MUSTER_THROTTLE_DRY_RUNS = ""
    settings.MUSTER_THROTTLE_CHECKPOINTS = ""


@pytest.fixture
def user(db: None) -> Any:
    return UserFactory(username="alice")


@pytest.fixture
def classes_open(settings: Any) -> None:
    """Every priority class open to every user (by default the highest is kept for admins): for the tests of what a
    production job does, not of who may submit one."""
    settings.MUSTER_PRIORITY_CLASS_ACCESS = {}


@pytest.fixture
def other_user(db: None) -> Any:
    return UserFactory(username="bob")


@pytest.fixture
def admin_user(db: None) -> Any:
    return UserFactory(username="root", is_staff=True, is_superuser=True)


def client_for(u: Any) -> APIClient:
    client = APIClient()
    client.force_authenticate(u)
    return client


def session_for(u: Any) -> Client:
    """A browser-like client signed in as `u` (session auth, as the pages use)."""
    client = Client()
    client.force_login(u)
    return client


@pytest.fixture
def api(user: Any) -> APIClient:
    return client_for(user)


@pytest.fixture
def other_api(other_user: Any) -> APIClient:
    return client_for(other_user)


@pytest.fixture
def admin_api(admin_user: Any) -> APIClient:
    return client_for(admin_user)


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        self.now += timedelta(seconds=seconds)
        return self.now


@dataclass
class SimHarness:
    """A simulated cluster whose time the test moves, and a cycle driven by hand."""

    clock: Clock
    cluster: SimulatedCluster

    def cycle(self) -> CycleReport:
        report = run_cycle(backend=self.cluster, now=self.clock())
        assert report.ran, "another cycle held the scheduler lock"
        return report

    def advance(self, seconds: float) -> CycleReport:
        self.clock.advance(seconds)
        return self.cycle()


def make_sim(settings: Any, *, shared: str = "") -> SimHarness:
    """16 nodes x 8 GPUs in 2 racks (the first with 8 RDMA devices each), 1 s pod start-up, time under test control;
    `shared`: shared nodes beyond those (MUSTER_SIM_SHARED_NODES), none unless asked."""
    settings.MUSTER_SIM_SHARED_NODES = shared
    settings.MUSTER_SIM_NODES = 16
    settings.MUSTER_SIM_GPUS_PER_NODE = 8
    settings.MUSTER_SIM_RACKS = 2
    settings.MUSTER_SIM_RDMA_DEVICES = 8  # on the first rack's nodes
    settings.MUSTER_SIM_START_SECONDS = 1.0
    clock = Clock(timezone.now())
    cluster = SimulatedCluster.from_settings()
    cluster.clock = clock
    nodes_sync(cluster_nodes=cluster.list_nodes())
    return SimHarness(clock=clock, cluster=cluster)


@pytest.fixture
def sim(db: None, settings: Any) -> SimHarness:
    return make_sim(settings)


def job_payload(**overrides: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "name": "train-llm",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "--nproc-per-node", "8", "train.py"],
        "nodes": 2,
        "gpus_per_node": 8,
        "wall_time_seconds": 3600,
        "simulate": {"duration_seconds": 30},
    }
    payload.update(overrides)
    return {k: v for k, v in payload.items() if v is not None}


@pytest.fixture
def submit(api: APIClient, sim: SimHarness) -> Callable[..., dict[str, Any]]:
    """Submit a job through the API as the default user; returns the created job's JSON."""

    def _submit(client: APIClient | None = None, **overrides: Any) -> dict[str, Any]:
        response = (client or api).post("/api/v1/jobs/", job_payload(**overrides), format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return _submit


@pytest.fixture
def tx_sim(transactional_db: None, settings: Any) -> SimHarness:
    """The `sim` harness over committed data, for tests that use several connections or processes."""
    return make_sim(settings)


@pytest.fixture
def tx_submit(transactional_db: None, tx_sim: SimHarness, django_user_model: Any) -> Callable[..., dict[str, Any]]:
    owner = django_user_model.objects.create_user(username="carol", password=PASSWORD)
    client = client_for(owner)

    def _submit(**overrides: Any) -> dict[str, Any]:
        response = client.post("/api/v1/jobs/", job_payload(**overrides), format="json")
        assert response.status_code == 201, response.content
        return response.json()

    return _submit
