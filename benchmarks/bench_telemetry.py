"""`make bench`: the job page's telemetry for a 16-node x 8-GPU job that ran 24 hours, sampled every 30 s.

In a throwaway SQLite database (never the configured one): the run is stored the way a
finished job's is (the simulated source sampled at 30 s, kept in 1-minute buckets), then the
job page is requested through Django's test client several times. Prints one JSON line with
the median server seconds per page (figures built, serialised and rendered), the most points
any line trace carries, and the heatmap's size; then a line for the same job read live from
the simulated source (a job still running after 24 hours), and how long storing the run took.

The bar: median page <= 1 s, no trace above ~2,000 points.
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
from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib.auth.models import User

_TMP = tempfile.mkdtemp(prefix="muster-bench-telemetry-")
atexit.register(shutil.rmtree, _TMP, ignore_errors=True)
# Before Django reads its settings: a private database and data directory, and the 30 s simulated source.
os.environ["DATABASE_URL"] = f"sqlite:///{_TMP}/bench.sqlite3"
os.environ["MUSTER_DATA_DIR"] = _TMP
os.environ["MUSTER_CLUSTER"] = "simulated"
os.environ["MUSTER_TELEMETRY_SOURCE"] = "simulated"
os.environ["MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS"] = "30"
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from jobs.cluster.simulated import SimulatedCluster  # noqa: E402
from jobs.models import Allocation, Job, JobEvent, Node  # noqa: E402
from jobs.services import nodes_sync  # noqa: E402
from jobs.states import JobState  # noqa: E402
from telemetry.figures import max_points  # noqa: E402
from telemetry.models import JobSeries  # noqa: E402
from telemetry.page import job_telemetry_context  # noqa: E402
from telemetry.selectors import job_runs  # noqa: E402
from telemetry.services import telemetry_store_run  # noqa: E402

NODES, GPUS, HOURS = 16, 8, 24


def make_job(owner: User, *, finished: bool) -> Job:
    """A 16 x 8 job that started 24 h ago, on every node of both racks; ended now when `finished`."""
    now = timezone.now().replace(microsecond=0)
    started = now - timedelta(hours=HOURS)
    job = Job.objects.create(
        owner=owner, name="bench-llm", image="nvcr.io/nvidia/pytorch:24.05-py3", command=["torchrun", "train.py"],
        nodes=NODES, gpus_per_node=GPUS, wall_time_seconds=(HOURS + 1) * 3600, priority_class="normal",
        simulate={"duration_seconds": HOURS * 3600}, submitted_at=started - timedelta(minutes=5),
        state=JobState.SUCCEEDED if finished else JobState.RUNNING, attempt=1, started_at=started,
        finished_at=now if finished else None,
    )  # fmt: skip
    for rank, node in enumerate(Node.objects.order_by("name")[:NODES]):
        Allocation.objects.create(
            job=job, node=node, attempt=1, rank=rank, gpus=GPUS, allocated_at=started, released_at=now if finished else None
        )
    JobEvent.objects.create(job=job, at=started - timedelta(minutes=5), to_state=JobState.PENDING, reason="bench")
    JobEvent.objects.create(
        job=job, at=started - timedelta(seconds=30), from_state=JobState.PENDING, to_state=JobState.SCHEDULED, reason="bench", attempt=1
    )
    JobEvent.objects.create(job=job, at=started, from_state=JobState.SCHEDULED, to_state=JobState.RUNNING, reason="bench", attempt=1)
    if finished:
        JobEvent.objects.create(job=job, at=now, from_state=JobState.RUNNING, to_state=JobState.SUCCEEDED, reason="bench", attempt=1)
    return job


def time_page(client: Client, job: Job, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        response = client.get(f"/jobs/{job.pk}/")
        times.append(time.perf_counter() - start)
        assert response.status_code == 200, response.status_code
    return times


def figure_sizes(job: Job) -> dict[str, int]:
    context = job_telemetry_context(Job.objects.prefetch_related("events", "allocations__node").get(pk=job.pk), {})
    assert not context.get("error"), context.get("error")
    heatmap = next(f["figure"] for f in context["figures"] if f["id"] == "telemetry-heatmap")
    lines = [f["figure"] for f in context["figures"] if f["id"] != "telemetry-heatmap"]
    z = heatmap["data"][0]["z"]
    return {
        "figures": len(context["figures"]),
        "line_traces": sum(len(f["data"]) for f in lines),
        "max_points_per_trace": max(max_points(f) for f in lines),
        "heatmap_rows": len(z),
        "heatmap_columns": len(z[0]),
        "step_seconds": context["step_seconds"],
        "bytes_of_figure_json": len(json.dumps([f["figure"] for f in context["figures"]], separators=(",", ":"))),
    }


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    call_command("migrate", verbosity=0)
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=NODES, gpus_per_node=GPUS, racks=2).list_nodes())
    owner = get_user_model().objects.create_user(username="bench", password="bench-password-not-secret")
    client = Client(HTTP_HOST="localhost")
    client.force_login(owner)

    finished = make_job(owner, finished=True)
    start = time.perf_counter()
    rows = telemetry_store_run(job_id=finished.pk, attempt=1)
    store_seconds = time.perf_counter() - start
    with connection.cursor() as cursor:
        cursor.execute("SELECT SUM(LENGTH(mean) + LENGTH(min) + LENGTH(max) + LENGTH(count)) FROM telemetry_jobseries")
        stored_bytes = cursor.fetchone()[0]
    step = JobSeries.objects.filter(job=finished).values_list("step_seconds", flat=True).first()
    times = time_page(client, finished, repeats)
    sizes = figure_sizes(finished)
    print(json.dumps({
        "name": f"job_page_telemetry_{NODES}x{GPUS}_{HOURS}h_30s_stored",
        "median_seconds": round(statistics.median(times), 4), "min_seconds": round(min(times), 4), "repeats": repeats,
        **sizes,
        "bar_median_le_1s": statistics.median(times) <= 1.0, "bar_points_le_2000": sizes["max_points_per_trace"] <= 2000,
        "stored_series": rows, "stored_step_seconds": step, "stored_mib": round(stored_bytes / 2**20, 1),
        "store_seconds": round(store_seconds, 2),
    }), flush=True)  # fmt: skip

    running = make_job(owner, finished=False)
    assert job_runs(running)[-1].ended is None
    times = time_page(client, running, max(3, repeats // 2))
    sizes = figure_sizes(running)
    print(json.dumps({
        "name": f"job_page_telemetry_{NODES}x{GPUS}_{HOURS}h_live_simulated",
        "median_seconds": round(statistics.median(times), 4), "min_seconds": round(min(times), 4), "repeats": len(times),
        **sizes,
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
