"""`make bench`: the API as clients see it, through a live gunicorn on PostgreSQL with a long queue.

A fresh PostgreSQL database is created beside the one DATABASE_URL (or BENCH_DATABASE_URL) names, filled
as a cycle leaves a queue (benchmarks.queue_fill: pending jobs with their stored plan, 16 running jobs on a
16 x 8 cluster), and served by gunicorn with the shipped flags (2 workers x 8 threads). Clients are
threads of this process with keep-alive HTTP sessions, each signed in with a token of its own user.
Prints one JSON line per case; seconds are wall-clock per request as the client saw them:

  reads_pending{N}     at 1,000 then 20,000 pending: p50/p99 of GET /api/v1/jobs/ (an admin, who sees
                       every job, and a researcher), GET /api/v1/queue/, a pending job's page
  reads_growth         each read's p50 and p99 at 20,000 over the same at 1,000 (flat is ~1)
  submits_{C}_clients  with 10,000 pending, C clients submitting as fast as they can: submits/s, p50/p99
  array_1000           one POST /api/v1/jobs/array/ of 1,000 jobs: seconds (median of 3)
  page_cold_cache      a running job's page in Chromium with an empty cache (BENCH_CHROMIUM), then again with
                       what that visit cached: seconds to the HTML, the first paint of the page's content,
                       DOMContentLoaded, the load event and every chart drawn, and bytes over the wire (medians of 5)

The bars (issue 14): >= 100 submits/s with 8 clients and p99 < 200 ms; an array of 1,000 < 2 s; the
reads' p99 < 100 ms at 20,000 and flat from 1,000; the cold page < 1.5 s. Nothing here asserts them:
the numbers are printed for people to judge. Needs PostgreSQL; without it one line says so and it exits 0.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg2
import requests

ROOT = Path(__file__).resolve().parent.parent
SERVER_URL = os.environ.get("BENCH_DATABASE_URL") or os.environ.get("DATABASE_URL", "")
if not SERVER_URL.startswith(("postgres://", "postgresql://")):
    print(json.dumps({"name": "api", "skipped": "needs PostgreSQL: set DATABASE_URL (scripts/test-services.sh)"}), flush=True)
    sys.exit(0)

_TMP = tempfile.mkdtemp(prefix="muster-bench-api-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
BENCH_DB = f"muster_bench_api_{os.getpid()}"


def _on_server(sql: str) -> None:
    """Run `sql` outside a transaction (CREATE/DROP DATABASE refuse one) on the server's maintenance database."""
    conn = psycopg2.connect(urlunsplit(urlsplit(SERVER_URL)._replace(path="/postgres")))
    conn.autocommit = True
    try:
        with conn.cursor() as cursor:
            cursor.execute(sql)
    finally:
        conn.close()


_on_server(f'CREATE DATABASE "{BENCH_DB}"')
atexit.register(_on_server, f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')

# Before Django reads its settings: the fresh database, a private data directory and broker spool, no write
# throttle (the bench is the only client), the simulated cluster.
ENV = {
    "DATABASE_URL": urlunsplit(urlsplit(SERVER_URL)._replace(path=f"/{BENCH_DB}")),
    "MUSTER_DATA_DIR": _TMP,
    "MUSTER_CLUSTER": "simulated",
    "MUSTER_THROTTLE_WRITES": "1000000/minute",
    "DATABASE_CONN_MAX_AGE": "60",  # as docker-compose.yml and platform/kubernetes/muster.yaml ship it
    "CELERY_BROKER_URL": "filesystem://localhost/",
    "DJANGO_SETTINGS_MODULE": "config.settings",
}
os.environ.update(ENV)
os.environ.pop("REDIS_URL", None)

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402

from accounts.services import token_create  # noqa: E402
from benchmarks.queue_fill import GPUS, NODES, add_pending, add_running  # noqa: E402
from jobs.cluster.simulated import SimulatedCluster  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.services import nodes_sync  # noqa: E402
from jobs.states import JobState  # noqa: E402
from tests.live_server import free_port  # noqa: E402

USERS = 20
READ_SIZES = (1_000, 20_000)
SUBMIT_PENDING = 10_000
CLIENTS = (1, 8)
SUBMITS_PER_CASE = int(os.environ.get("BENCH_API_SUBMITS", "400"))
READ_REPEATS = int(os.environ.get("BENCH_API_READS", "100"))
SUBMIT_BODY: dict[str, Any] = {
    "name": "bench-submit", "image": "busybox:1", "command": ["true"], "nodes": 1, "gpus_per_node": 1, "wall_time_seconds": 3600,
}  # fmt: skip


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(times: list[float]) -> dict[str, float]:
    return {"p50_seconds": round(statistics.median(times), 4), "p99_seconds": round(percentile(times, 0.99), 4)}


class Server:
    """gunicorn as shipped (scripts/run-local.sh, docker-compose.yml) on a free loopback port, after collectstatic."""

    def __init__(self) -> None:
        call_command("collectstatic", interactive=False, verbosity=0)
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = Path(_TMP) / "gunicorn.log"
        command = [sys.executable, "-m", "gunicorn", "config.wsgi", "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--threads", "8"]
        self.proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ}, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)
        atexit.register(self.stop)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if requests.get(self.base + "/api/schema/", timeout=2).status_code < 500:
                    return
            except (requests.ConnectionError, requests.Timeout):  # not up yet, or its first schema still being built
                time.sleep(0.2)
        raise SystemExit(f"gunicorn did not answer: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(20)


def session_with_token(user: Any) -> requests.Session:
    session = requests.Session()
    session.headers["Authorization"] = f"Bearer {token_create(user=user, name='bench').secret}"
    return session


def session_signed_in(user: Any) -> requests.Session:
    """A browser-like session: the session cookie Django's login would set."""
    client = Client()
    client.force_login(user)
    session = requests.Session()
    session.cookies.set("sessionid", client.cookies["sessionid"].value)
    return session


def timed_gets(session: requests.Session, url: str, repeats: int) -> list[float]:
    assert session.get(url, timeout=30).status_code == 200, url  # warm: connection, worker imports
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        response = session.get(url, timeout=30)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code, response.text[:300])
    return times


def reads(server: Server, admin: Any, researcher: Any, pending: int) -> dict[str, Any]:
    target = Job.objects.get(queue_position=READ_SIZES[0] // 2)
    cases: dict[str, tuple[requests.Session, str]] = {
        "jobs_list_admin": (session_with_token(admin), "/api/v1/jobs/"),
        "jobs_list_researcher": (session_with_token(researcher), "/api/v1/jobs/"),
        "queue": (session_with_token(researcher), "/api/v1/queue/"),
        "job_page": (session_signed_in(target.owner), f"/jobs/{target.pk}/"),
    }
    result: dict[str, Any] = {"name": f"reads_pending{pending}", "pending": pending, "repeats": READ_REPEATS}
    for case, (session, path) in cases.items():
        result[case] = summary(timed_gets(session, server.base + path, READ_REPEATS))
    return result


def submits(server: Server, owners: list[Any], clients: int) -> dict[str, Any]:
    sessions = [session_with_token(owners[i]) for i in range(clients)]
    per_client = SUBMITS_PER_CASE // clients
    times: list[list[float]] = [[] for _ in range(clients)]
    failures: list[str] = []

    def run(i: int) -> None:
        for n in range(per_client):
            start = time.perf_counter()
            response = sessions[i].post(server.base + "/api/v1/jobs/", json={**SUBMIT_BODY, "name": f"bench-{clients}-{i}-{n}"}, timeout=30)
            times[i].append(time.perf_counter() - start)
            if response.status_code != 201:
                failures.append(f"{response.status_code} {response.text[:200]}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    before = Job.objects.count()
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    created = Job.objects.count() - before
    flat = [t for ts in times for t in ts]
    return {
        "name": f"submits_{clients}_clients",
        "pending": SUBMIT_PENDING,
        "submits": len(flat),
        "created": created,
        "failures": failures[:3],
        "per_second": round(len(flat) / wall, 1),
        **summary(flat),
    }


def array_submit(server: Server, owner: Any) -> dict[str, Any]:
    session = session_with_token(owner)
    times = []
    for _ in range(3):
        start = time.perf_counter()
        response = session.post(server.base + "/api/v1/jobs/array/", json={**SUBMIT_BODY, "array": "0-999"}, timeout=60)
        times.append(time.perf_counter() - start)
        assert response.status_code == 201, response.text[:300]
    return {"name": "array_1000", "median_seconds": round(statistics.median(times), 3), "max_seconds": round(max(times), 3)}


CHARTS_DRAWN = "() => [...document.querySelectorAll('.chart')].every(c => c.querySelector('.main-svg'))"
NAVIGATION = "() => performance.getEntriesByType('navigation')[0].toJSON()"
FIRST_PAINT = "() => performance.getEntriesByName('first-contentful-paint')[0].startTime"


def page_visit(context: Any, url: str) -> dict[str, float]:
    """Seconds from the request to the HTML received, the first contentful paint, DOMContentLoaded, the load event and
    every chart drawn; bytes read."""
    page = context.new_page()
    sizes: list[int] = []

    def finished(request: Any) -> None:
        sizes.append(request.sizes()["responseBodySize"])

    page.on("requestfinished", finished)
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    page.wait_for_function(CHARTS_DRAWN)
    drawn = time.perf_counter() - start
    timing = page.evaluate(NAVIGATION)
    painted = page.evaluate(FIRST_PAINT)
    page.close()
    return {
        "html": timing["responseEnd"] / 1000,
        "first_paint": painted / 1000,
        "dom_content_loaded": timing["domContentLoadedEventEnd"] / 1000,
        "load": timing["loadEventEnd"] / 1000,
        "charts_drawn": drawn,
        "bytes": sum(sizes),
    }


def page_cold_cache(server: Server, owner: Any) -> dict[str, Any]:
    """A running job's page (its telemetry charts too) as a first visit, Chromium with an empty cache; then a second visit."""
    chromium = os.environ.get("BENCH_CHROMIUM", "/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"name": "page_cold_cache", "skipped": "needs playwright"}
    if not os.access(chromium, os.X_OK):
        return {"name": "page_cold_cache", "skipped": f"needs Chromium at {chromium} (BENCH_CHROMIUM)"}
    job = Job.objects.filter(state=JobState.RUNNING, owner=owner).first()
    assert job is not None
    url = f"{server.base}/jobs/{job.pk}/"
    cookie = session_signed_in(owner).cookies["sessionid"] or ""
    cold, warm = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"], headless=True)
        for _ in range(5):
            context = browser.new_context()  # a new profile each time: nothing cached
            context.add_cookies([{"name": "sessionid", "value": cookie, "url": server.base}])
            cold.append(page_visit(context, url))
            warm.append(page_visit(context, url))
            context.close()
        browser.close()

    def medians(visits: list[dict[str, float]]) -> dict[str, float]:
        return {f"{key}_seconds" if key != "bytes" else key: round(statistics.median(v[key] for v in visits), 3) for key in visits[0]}

    return {"name": "page_cold_cache", "cold": medians(cold), "warm": medians(warm)}


def fill_to(owners: list[Any], pending: int) -> None:
    added = Job.objects.filter(state=JobState.PENDING).count()
    if pending > added:
        add_pending(owners, added + 1, pending)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the statistics autovacuum keeps on a live database


def main() -> None:
    call_command("migrate", verbosity=0)
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=NODES, gpus_per_node=GPUS, racks=2).list_nodes())
    users = get_user_model().objects
    owners = [users.create_user(username=f"user{i}") for i in range(USERS)]
    admin = users.create_superuser(username="admin")
    add_running(owners[0])
    server = Server()
    emit: Callable[[dict[str, Any]], None] = lambda line: print(json.dumps(line), flush=True)  # noqa: E731
    emit(page_cold_cache(server, owners[0]))
    results = {}
    fill_to(owners, READ_SIZES[0])
    results[READ_SIZES[0]] = reads(server, admin, owners[1], READ_SIZES[0])
    emit(results[READ_SIZES[0]])
    fill_to(owners, SUBMIT_PENDING)
    for clients in CLIENTS:
        emit(submits(server, owners, clients))
    emit(array_submit(server, owners[2]))
    Job.objects.filter(name__startswith="bench-", queue_position__isnull=True).delete()  # back to a plain queue
    fill_to(owners, READ_SIZES[1])
    results[READ_SIZES[1]] = reads(server, admin, owners[1], READ_SIZES[1])
    emit(results[READ_SIZES[1]])
    small, large = results[READ_SIZES[0]], results[READ_SIZES[1]]
    cases = [key for key, value in small.items() if isinstance(value, dict)]
    growth = {case: {q: round(large[case][f"{q}_seconds"] / small[case][f"{q}_seconds"], 2) for q in ("p50", "p99")} for case in cases}
    emit({"name": f"reads_growth_{READ_SIZES[0]}_to_{READ_SIZES[1]}", **growth})


if __name__ == "__main__":
    main()
