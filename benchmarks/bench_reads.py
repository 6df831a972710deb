"""`make bench`: every read of the queue at 1,000 and 20,000 pending jobs and 200 and 4,000 running, which read
what the cycle stored.

In a throwaway SQLite database (never the configured one; BENCH_DATABASE_URL names an empty one to fill
instead): pending jobs are bulk-created with the plan a cycle leaves on them (position, priority and
factors, reason, estimate and its kind, a reservation for the first few), beside running jobs of one GPU
each on a 500 x 8 cluster (benchmarks.queue_fill). Then, through Django's test client as a signed-in
user (not an admin), each of READS is requested several times, in four cases: the baseline (1,000 pending,
200 running), 20,000 pending, 4,000 running, and both.

Prints one JSON line per case with each read's median milliseconds, the queries it made and the rows they
fetched (benchmarks.read_cost); with the cost of what reads no longer do (the snapshot and priority order
the old read-time plan computed, timed once) and what the cycle's plan writes cost at that length (every
job moved one place; then nothing changed). Then one line per case with each read's ratio to the baseline
(time, queries, rows), and a table of the same for people.

Then /metrics alone at 4,000 and 300,000 starts ever recorded (`BENCH_STARTS` for the second; ended jobs' history
bulk-created, a start each): its time, queries and rows at each, their ratio, and what the scrape no longer pays
(every start's wait counted from the events, `telemetry.latency.wait_histogram`, as each scrape did before the running
totals). `--metrics-only` runs this part alone (4,000 running jobs, then the history).

The bar (issue 13): every read flat in the queue's length and in the number of running jobs: its queries
and the rows they fetch the same (a page of 50 is 50 rows at any length), its time ~1x. Counts are done by
the database (the queue's summary counts a few aggregates, the dashboard's history sums the window's events
per chart bucket, /metrics the waits of every start ever made into its histogram's buckets, one row): those
queries cost more at 20,000, not their rows. The node grid reads a row per GPU held;
the dashboard's history a row per bucket with a change, more of them at 4,000 running here (a young site's
finer buckets, docs/scheduling.md). /metrics flat in the starts ever recorded too, its time as well: it reads the
running totals each start added to, never the starts.
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
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

_TMP = tempfile.mkdtemp(prefix="muster-bench-reads-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
# Before Django reads its settings: a private database and data directory. BENCH_DATABASE_URL names an empty
# database to use instead (PostgreSQL, say): the bench migrates and fills it, and leaves it so.
os.environ["DATABASE_URL"] = os.environ.get("BENCH_DATABASE_URL") or f"sqlite:///{_TMP}/bench.sqlite3"
os.environ["MUSTER_DATA_DIR"] = _TMP
os.environ["MUSTER_CLUSTER"] = "simulated"
# The submit read: its cycle is asked of a broker spool in the data directory, and it is not throttled (1 user).
os.environ["CELERY_BROKER_URL"] = "filesystem://localhost/"
os.environ["MUSTER_THROTTLE_WRITES"] = "1000000/minute"
os.environ.pop("REDIS_URL", None)  # the cache and broker of nobody else
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from benchmarks.queue_fill import GPUS, add_pending, add_running_jobs, remove_pending_after, running_job  # noqa: E402
from benchmarks.read_cost import read_cost  # noqa: E402
from jobs.cluster.simulated import SimulatedCluster  # noqa: E402
from jobs.models import Allocation, Job, JobEvent, Node  # noqa: E402
from jobs.services import nodes_sync  # noqa: E402
from jobs.states import JobState  # noqa: E402
from policy.model import Priority, Reservation, Waiting  # noqa: E402
from policy.priority import prioritize, priority_order  # noqa: E402
from scheduler.plans import store_plans  # noqa: E402
from scheduler.snapshot import build_snapshot, policy_config  # noqa: E402
from telemetry.ended import ended_recount  # noqa: E402
from telemetry.latency import LATENCY_SECONDS_BUCKETS, latency_recount, wait_histogram  # noqa: E402

USERS = 20
PENDING = (1_000, 20_000)
RUNNING = (200, 4_000)
# Enough GPUs for the most running jobs, the same cluster in every case: the node grid's cells do not change.
CLUSTER_NODES = 500
# The cases, in the order they are filled: pending, running. The first is the baseline of every ratio.
CASES = ((PENDING[0], RUNNING[0]), (PENDING[1], RUNNING[0]), (PENDING[1], RUNNING[1]), (PENDING[0], RUNNING[1]))
# Starts ever recorded for /metrics alone: the 4,000 running jobs', then a busy site's year (BENCH_STARTS).
STARTS = (RUNNING[1], int(os.environ.get("BENCH_STARTS", "300000")))
SUBMIT = {"name": "bench-submit", "image": "busybox:1", "command": ["true"], "nodes": 1, "gpus_per_node": 1, "wall_time_seconds": 600}


@dataclass(frozen=True)
class Read:
    """One request a user or the CLI makes: its name in the output, and how to make it."""

    name: str
    path: str
    post: dict[str, Any] | None = None
    status: int = 200


def reads(pending_job: Job, running_job: Job) -> list[Read]:
    """Every read issue 13 names, of the same jobs and pages in every case (a later page there is at 1,000 too)."""
    return [
        Read("queue_api_first_page", "/api/v1/queue/"),
        Read("queue_api_later_page", "/api/v1/queue/?offset=900&limit=50"),
        # What `muster queue` asks first (muster_client.client.Client.queue: the API's largest page).
        Read("muster_queue_request", "/api/v1/queue/?limit=500"),
        Read("cluster_page", "/cluster/"),
        # The queue on the cluster page, a later page of it, as its live poll redraws it.
        Read("queue_page_later", "/cluster/?page=5&parts=1"),
        Read("job_api_pending", f"/api/v1/jobs/{pending_job.pk}/"),
        Read("job_page_pending", f"/jobs/{pending_job.pk}/"),
        Read("job_page_pending_live", f"/jobs/{pending_job.pk}/live/"),
        Read("job_api_running", f"/api/v1/jobs/{running_job.pk}/"),
        Read("job_page_running", f"/jobs/{running_job.pk}/"),
        Read("submit_response", "/api/v1/jobs/", post=SUBMIT, status=201),
        Read("dashboard_page", "/dashboard/"),
        # Prometheus' scrape (loopback, no token set): every 15-30 s per replica, signed in or not.
        Read("metrics_scrape", "/metrics"),
    ]


def request(client: Client, read: Read) -> None:
    if read.post is None:
        response = client.get(read.path)
    else:
        response = client.post(read.path, read.post, content_type="application/json")
    assert response.status_code == read.status, (read.path, response.status_code, response.content[:500])


def timed(client: Client, read: Read, repeats: int) -> dict[str, Any]:
    """Median milliseconds of the read, and the queries and rows of one request (the first, which also warms up)."""
    with read_cost() as cost:
        request(client, read)
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        request(client, read)
        times.append(time.perf_counter() - start)
    return {"ms": round(statistics.median(times) * 1000, 2), "queries": cost.queries, "rows": cost.rows}


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
        state=JobState.PENDING,
        queue_position__isnull=False,  # not the jobs the submit read added
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


def measure(client: Client, targets: tuple[Job, Job], pending: int, running: int, repeats: int) -> dict[str, Any]:
    return {
        "name": f"reads_pending{pending}_running{running}",
        "pending": pending,
        "running": running,
        "repeats": repeats,
        "reads": {read.name: timed(client, read, repeats) for read in reads(*targets)},
        "read_time_plan_seconds_no_longer_paid": round(read_time_plan_seconds(), 4),
        **store_plans_seconds(),
    }


def fill(owners: list[Any], nodes: list[Node], pending: int, running: int) -> None:
    """Grow or shrink the queue to `pending` planned jobs and add running jobs up to `running` (never fewer)."""
    planned = Job.objects.filter(state=JobState.PENDING, queue_position__isnull=False).count()
    if pending > planned:
        add_pending(owners, planned + 1, pending)
    elif pending < planned:
        remove_pending_after(pending)
    now_running = Job.objects.filter(state=JobState.RUNNING).count()
    if running > now_running:
        add_running_jobs(owners, now_running, running - 1, nodes)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the statistics a live database keeps (autovacuum), so plans are the real ones


def add_ended_starts(owners: list[Any], nodes: list[Node], first: int, count: int) -> None:
    """`count` ended jobs, each submitted, started after a wait of up to two hours on a GPU it released half an hour
    later, succeeded, within the last year, in bulk inserts (a start each), then /metrics' totals counted again:
    bulk-created starts and ends bypass the hook that adds each as it is recorded."""
    now = timezone.now()
    for chunk in range(first, first + count, 10_000):
        numbers = range(chunk, min(chunk + 10_000, first + count))
        started = {i: now - timedelta(days=2, seconds=(i * 97) % (360 * 86400)) for i in numbers}
        jobs = Job.objects.bulk_create((running_job(owners[i % len(owners)], i, started[i]) for i in numbers), batch_size=1000)
        Job.objects.filter(pk__in=[job.pk for job in jobs]).update(state=JobState.SUCCEEDED, finished_at=now - timedelta(days=1))
        held = timedelta(minutes=30)
        allocations = (
            Allocation(
                job=job, node=nodes[i % len(nodes)], attempt=1, rank=0, gpus=1, allocated_at=started[i], released_at=started[i] + held
            )
            for i, job in zip(numbers, jobs, strict=True)
        )
        Allocation.objects.bulk_create(allocations, batch_size=1000)
        events = []
        for i, job in zip(numbers, jobs, strict=True):
            queued = started[i] - timedelta(seconds=i % 7200, microseconds=i % 1000)
            history = ((queued, "", JobState.PENDING), (started[i], JobState.SCHEDULED, JobState.RUNNING),
                       (started[i] + timedelta(minutes=30), JobState.RUNNING, JobState.SUCCEEDED))  # fmt: skip
            events += [JobEvent(job=job, at=at, from_state=was, to_state=to, reason="bench", attempt=1) for at, was, to in history]
        JobEvent.objects.bulk_create(events, batch_size=1000)
    latency_recount()
    ended_recount()


def metrics_by_starts(client: Client, owners: list[Any], nodes: list[Node], repeats: int) -> None:
    """/metrics at each of STARTS starts ever recorded, and its ratio at the most to the fewest."""
    read = Read("metrics_scrape", "/metrics")
    results = []
    for starts in STARTS:
        recorded = JobEvent.objects.filter(to_state=JobState.RUNNING).count()
        if starts > recorded:
            add_ended_starts(owners, nodes, 1_000_000 + recorded, starts - recorded)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
        cost = timed(client, read, repeats)
        gc.collect()
        start = time.perf_counter()
        wait_histogram(LATENCY_SECONDS_BUCKETS)
        before = round((time.perf_counter() - start) * 1000, 2)
        results.append({"starts": starts, **cost, "counting_every_start_ms_no_longer_paid": before})
        print(json.dumps({"name": f"metrics_scrape_starts{starts}", "repeats": repeats, **results[-1]}), flush=True)
    few, most = results[0], results[-1]
    ratio = {
        key: round(most[key] / few[key], 2) if few[key] else None
        for key in ("ms", "queries", "rows", "counting_every_start_ms_no_longer_paid")
    }
    print(json.dumps({"name": f"metrics_scrape_starts{most['starts']}_over_starts{few['starts']}", **ratio}), flush=True)


def growth(case: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """Each read's time, queries and rows over the baseline's."""

    def ratio(a: float, b: float) -> float:
        return round(a / b, 2) if b else (1.0 if a == b else float("inf"))

    return {
        name: {key: ratio(cost[key], base["reads"][name][key]) for key in ("ms", "queries", "rows")} for name, cost in case["reads"].items()
    }


def table(results: list[dict[str, Any]]) -> str:
    """The same numbers for people: ms / queries / rows per read and case, with the time's ratio to the baseline."""
    base = results[0]
    heads = [f"p{r['pending']:,} r{r['running']:,}" for r in results]
    lines = [f"{'read':<24}" + "".join(f"{h:>30}" for h in heads)]
    for name in base["reads"]:
        cells = []
        for r in results:
            c = r["reads"][name]
            times = c["ms"] / base["reads"][name]["ms"]
            cells.append(f"{c['ms']:>7.1f} ms {times:>4.1f}x {c['queries']:>3}q {c['rows']:>5}r")
        lines.append(f"{name:<24}" + "".join(f"{cell:>30}" for cell in cells))
    return "\n".join(lines)


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--metrics-only"]
    repeats = int(args[0]) if args else 15
    call_command("migrate", verbosity=0)
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=CLUSTER_NODES, gpus_per_node=GPUS, racks=10).list_nodes())
    nodes = list(Node.objects.order_by("name"))
    users = get_user_model().objects
    owners = [users.create_user(username=f"user{i}") for i in range(USERS)]
    client = Client(HTTP_HOST="localhost")
    if "--metrics-only" in sys.argv:
        fill(owners, nodes, 0, RUNNING[1])
        metrics_by_starts(client, owners, nodes, repeats)
        return
    results: list[dict[str, Any]] = []
    targets: tuple[Job, Job] | None = None
    for pending, running in CASES:
        fill(owners, nodes, pending, running)
        if targets is None:
            # One job in the middle of the first thousand and the first running job: the same jobs in every case.
            targets = (Job.objects.get(queue_position=PENDING[0] // 2), Job.objects.filter(state=JobState.RUNNING).earliest("id"))
            assert targets[0].owner_id == targets[1].owner_id
            client.force_login(targets[0].owner)
        results.append(measure(client, targets, pending, running, repeats))
        print(json.dumps(results[-1]), flush=True)
    base = results[0]
    for case in results[1:]:
        name = f"reads_growth_p{case['pending']}_r{case['running']}_over_p{base['pending']}_r{base['running']}"
        print(json.dumps({"name": name, **growth(case, base)}), flush=True)
    print(table(results), flush=True)
    metrics_by_starts(client, owners, nodes, repeats)


if __name__ == "__main__":
    main()
