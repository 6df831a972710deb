"""Issue 13: a read costs the same with ten times the queue or ten times the running jobs.

Every read of the queue (the API's pages, `muster queue`'s request, the cluster page), a job's pages and API, the
submit's answer, the dashboard and Prometheus' scrape of /metrics make as many queries, fetching as many rows, with
200 pending and 200 running jobs as with 20 and 20 (benchmarks.read_cost counts the rows at the cursor: a read that
fetches every running job in one query and sums them in Python is one query at any length). The timings are `make bench`'s
(benchmarks/bench_reads.py); counts do not flake.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

import frontend.views
from benchmarks.queue_fill import add_pending, add_running_jobs
from benchmarks.read_cost import ReadCost, read_cost
from jobs.cluster.simulated import SimulatedCluster
from jobs.models import Job, JobEvent, Node
from jobs.services import nodes_sync
from jobs.states import JobState
from telemetry.live_use import cluster_gpu_use_refresh
from tests.accounts.factories import UserFactory
from tests.conftest import session_for

N = 20  # jobs pending and jobs running; then ten times as many
PAGE = 10  # the queue's page asked: full at N
SUBMIT = {"name": "probe", "image": "busybox:1", "command": ["true"], "nodes": 1, "gpus_per_node": 1, "wall_time_seconds": 600}


@pytest.fixture
def queue(user: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """N planned pending jobs and N running ones of `user` and four others, on 25 nodes of 8 GPUs (room for 10 N)."""
    settings.MUSTER_THROTTLE_WRITES = "100000/minute"
    monkeypatch.setattr(frontend.views, "QUEUE_PAGE_SIZE", PAGE)  # the cluster page's queue, a full page at N
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=25, gpus_per_node=8).list_nodes())
    owners = [user, *UserFactory.create_batch(4)]
    nodes = list(Node.objects.order_by("name"))
    add_pending(owners, 1, N)
    add_running_jobs(owners, 0, N - 1, nodes)
    pending = Job.objects.get(queue_position=N // 2)
    running = Job.objects.filter(state=JobState.RUNNING).earliest("id")
    assert pending.owner == running.owner == user
    return {"owners": owners, "nodes": nodes, "pending": pending, "running": running}


def reads(queue: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any] | None]]:
    pending, running = queue["pending"].pk, queue["running"].pk
    return {
        "queue API, first page": (f"/api/v1/queue/?limit={PAGE}", None),
        "queue API, a later page": (f"/api/v1/queue/?limit={PAGE}&offset={N - PAGE}", None),
        "muster queue's request": (f"/api/v1/queue/?limit={N}", None),
        "cluster page": ("/cluster/", None),
        "job API, pending": (f"/api/v1/jobs/{pending}/", None),
        "job page, pending": (f"/jobs/{pending}/", None),
        "job page, pending, live": (f"/jobs/{pending}/live/", None),
        "job API, running": (f"/api/v1/jobs/{running}/", None),
        "job page, running": (f"/jobs/{running}/", None),
        "submit's answer": ("/api/v1/jobs/", SUBMIT),
        "dashboard": ("/dashboard/", None),
        # Prometheus' scrape, every 15-30 s per replica: it bucketed every start ever made, a row each, then the
        # database counted them all on every scrape; now it reads running totals.
        "/metrics": ("/metrics", None),
    }


def costs(client: Client, queue: dict[str, Any]) -> dict[str, ReadCost]:
    measured = {}
    for name, (path, body) in reads(queue).items():
        with read_cost() as cost:
            response = client.get(path) if body is None else client.post(path, body, content_type="application/json")
        assert response.status_code == (201 if body else 200), (name, response.content[:300])
        measured[name] = cost
        if body:  # the job submitted (and its event, in the dashboard's window) not left for the next reads to count
            Job.objects.filter(pk=response.json()["id"]).delete()
    return measured


def grown(small: dict[str, ReadCost], large: dict[str, ReadCost], *, allowed: dict[str, int] | None = None) -> list[str]:
    """The reads whose queries or rows grew (beyond `allowed` more rows), each with its queries before and after."""
    said = []
    for name, cost in large.items():
        before = small[name]
        if cost.queries != before.queries or cost.rows - before.rows != (allowed or {}).get(name, 0):
            said.append(
                f"{name}: {before.queries} queries, {before.rows} rows -> {cost.queries} queries, {cost.rows} rows\n"
                f"before:\n{before.describe()}\nafter:\n{cost.describe()}"
            )
    return said


def test_no_read_grows_with_the_queue(user: Any, queue: dict[str, Any]) -> None:
    client = session_for(user)
    costs(client, queue)  # the first request of a session (and of a process) reads what later ones have cached
    small = costs(client, queue)
    add_pending(queue["owners"], N + 1, 10 * N)
    assert not grown(small, costs(client, queue)), "\n\n".join(grown(small, costs(client, queue)))


def test_no_read_grows_with_the_running_jobs_but_the_grids_gpus(user: Any, queue: dict[str, Any]) -> None:
    """The node grid (the cluster page's and the dashboard's) draws every GPU held with its job: a row per live
    allocation, the cluster's size at most. Nothing else grows: the queue's summary counted the running jobs one row
    each (to find the accounts above their quota), the cluster page asked which of them the viewer may open with
    every running job's id in one IN list, the dashboard's history charts read every event, start and allocation
    in their window (ten times the jobs started, ten times the rows) where the database now sums each chart bucket,
    and /metrics read every start ever made to bucket its wait, where it now reads the totals each start added to
    (a row per bucket, and no query of the starts: the database's work does not grow either)."""
    # History older than the window, as on any site a day old: the charts' buckets are the window's, on edges a
    # whole number of steps before now, so the jobs' starts (an hour ago, a second apart) fall in the same few buckets
    # at N and at 10 N. (On a younger site the buckets are finer and the same starts spread over more of them: the
    # rows grow with the buckets that have any, never beyond the window's 288.)
    first = Job.objects.filter(state=JobState.RUNNING).earliest("id")
    JobEvent.objects.create(job=first, at=timezone.now() - timedelta(days=2), to_state=JobState.PENDING, reason="older history")
    client = session_for(user)
    # The dashboard's "GPUs used now" is measured from every running job's live telemetry by a periodic task; the
    # page reads its one cached result, so it is measured here before each round and the page's reads stay flat.
    cluster_gpu_use_refresh()
    costs(client, queue)
    small = costs(client, queue)
    added = 9 * N
    add_running_jobs(queue["owners"], N, 10 * N - 1, queue["nodes"])
    assert cluster_gpu_use_refresh()["jobs_running"] == 10 * N
    large = costs(client, queue)
    allowed = {"cluster page": added, "dashboard": added}
    assert not grown(small, large, allowed=allowed), "\n\n".join(grown(small, large, allowed=allowed))
    # Nor does the database's own work grow with the starts: /metrics reads the latency totals each start added to,
    # never the starts (it found every start's queue entry on each scrape, 1.5 s at 300,000), and they count them all.
    events = JobEvent._meta.db_table
    assert not [sql for sql, _ in large["/metrics"].per_query if events in sql], large["/metrics"].describe()
    assert f"muster_scheduling_latency_seconds_count {10 * N}.0" in session_for(user).get("/metrics").content.decode()
