"""`make bench`: reads of the queue at 1,000 and 20,000 pending jobs, which read what the cycle stored.

In a throwaway SQLite database (never the configured one; BENCH_DATABASE_URL names an empty one to fill
instead): pending jobs are bulk-created with the
plan a cycle leaves on them (position, priority and factors, reason, estimate and its kind, a
reservation for the first few), beside 16 running jobs on a 16 x 8 cluster. Then, through Django's
test client as a signed-in user, each of these is requested several times:

  job_api       GET /api/v1/jobs/{id}/ of one pending job (the owner's)
  job_page      the job page /jobs/{id}/ of that job
  queue_page    GET /api/v1/queue/ (its first page of 50, with the summary of the whole queue)

Prints one JSON line per queue length with the median server seconds of each, how many queries
each made, the cost of what reads no longer do (the snapshot and priority order the old read-time
plan computed, timed once), and what the cycle's plan writes cost at that length (every job moved
one place; then nothing changed). A last line gives each read's ratio 20,000 / 1,000.

The bar: a single job's reads flat in the queue's length (ratio ~1); the queue's first page grows
only by its counts (a few aggregate queries).
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

_TMP = tempfile.mkdtemp(prefix="muster-bench-reads-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
# Before Django reads its settings: a private database and data directory. BENCH_DATABASE_URL names an empty
# database to use instead (PostgreSQL, say): the bench migrates and fills it, and leaves it so.
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{_TMP}/bench.sqlite3"
os.environ["MUSTER_DATA_DIR"] = _TMP
os.environ["MUSTER_CLUSTER"] = "simulated"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.queue_fill import GPUS, NODES, add_pending, add_running  # noqa: E402
from jobs.cluster.simulated import SimulatedCluster  # noqa: E402
from jobs.models import Job  # noqa: E402
from jobs.services import nodes_sync  # noqa: E402
from jobs.states import JobState  # noqa: E402
from policy.model import Priority, Reservation, Waiting  # noqa: E402
from policy.priority import prioritize, priority_order  # noqa: E402
from scheduler.plans import store_plans  # noqa: E402
from scheduler.snapshot import build_snapshot, policy_config  # noqa: E402

USERS = 20
SIZES = (1_000, 20_000)


def timed(client: Client, url: str, repeats: int) -> tuple[float, int]:
    """Median seconds of GET url, and the queries one request makes."""
    queries: list[str] = []

    def count(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        assert client.get(url).status_code == 200, url
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), len(queries)


def read_time_plan_seconds() -> float:
    """What every read used to compute: the snapshot, the priorities and the order (scheduler.queue before issue 13)."""
    gc.collect()
    start = time.perf_counter()
    snapshot = build_snapshot(timezone.now())
    config = policy_config()
    priority_order(snapshot, config, prioritize(snapshot, config))
    return time.perf_counter() - start


STORED = (
    "id", "queue_position", "priority", "priority_factors", "pending_reason_code", "pending_reason", "estimated_start",
    "estimate_kind", "reserved_nodes", "reserved_start",
)  # fmt: skip


def stored_decisions(shift: int) -> tuple[list[Waiting], dict[int, Priority], list[Reservation]]:
    """The decisions that would leave every pending job's plan as stored, but `shift` places further down."""
    waiting, priorities, reservations = [], {}, []
    for pk, position, total, factors, code, reason, estimated, kind, nodes, reserved_start in Job.objects.filter(
        state=JobState.PENDING
    ).values_list(*STORED):
        waiting.append(Waiting(pk, position + shift, code, reason, estimated.timestamp() if estimated else None, kind))
        priorities[pk] = Priority(total, {name: (v, w) for name, (v, w) in factors.items()})
        if reserved_start:
            reservations.append(Reservation(pk, tuple(nodes), reserved_start.timestamp()))
    return waiting, priorities, reservations


def store_plans_seconds() -> dict[str, Any]:
    """The cycle's plan writes at this length: every job moved one place (the head started), then the same plan again."""
    decisions = stored_decisions(shift=1)
    result: dict[str, Any] = {}
    for case in ("all_moved", "unchanged"):
        gc.collect()
        start = time.perf_counter()
        with transaction.atomic():
            written = store_plans(*decisions)
        result[f"store_plans_{case}_seconds"] = round(time.perf_counter() - start, 4)
        result[f"store_plans_{case}_rows"] = written
    with transaction.atomic():
        store_plans(*stored_decisions(shift=-1))  # back to the positions the jobs were created with
    return result


def measure(client: Client, target: Job, pending: int, repeats: int) -> dict[str, Any]:
    job_api, job_api_queries = timed(client, f"/api/v1/jobs/{target.pk}/", repeats)
    job_page, job_page_queries = timed(client, f"/jobs/{target.pk}/", repeats)
    queue_page, queue_page_queries = timed(client, "/api/v1/queue/", repeats)
    return {
        "name": f"reads_pending{pending}",
        "pending": pending,
        "repeats": repeats,
        "job_api_median_seconds": round(job_api, 4),
        "job_page_median_seconds": round(job_page, 4),
        "queue_page_median_seconds": round(queue_page, 4),
        "queries": {"job_api": job_api_queries, "job_page": job_page_queries, "queue_page": queue_page_queries},
        "read_time_plan_seconds_no_longer_paid": round(read_time_plan_seconds(), 4),
        **store_plans_seconds(),
    }


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    call_command("migrate", verbosity=0)
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=NODES, gpus_per_node=GPUS, racks=2).list_nodes())
    users = get_user_model().objects
    owners = [users.create_user(username=f"user{i}") for i in range(USERS)]
    add_running(owners[0])
    client = Client(HTTP_HOST="localhost")
    results: dict[int, dict[str, Any]] = {}
    added = 0
    for pending in SIZES:
        add_pending(owners, added + 1, pending)
        added = pending
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # the statistics a live database keeps (autovacuum), so plans are the real ones
        # One job in the middle of the first thousand: the same job at both lengths.
        target = Job.objects.get(queue_position=SIZES[0] // 2)
        client.force_login(target.owner)
        results[pending] = measure(client, target, pending, repeats)
        print(json.dumps(results[pending]), flush=True)
    small, large = (results[n] for n in SIZES)
    ratio = {
        key.removesuffix("_median_seconds") + "_ratio": round(large[key] / small[key], 2)
        for key in ("job_api_median_seconds", "job_page_median_seconds", "queue_page_median_seconds")
    }
    print(json.dumps({"name": f"reads_growth_{SIZES[0]}_to_{SIZES[1]}", **ratio}), flush=True)


if __name__ == "__main__":
    main()
