"""The cluster's measured GPU use now: what the running jobs' GPUs did over the last few minutes, for the dashboard.

Measured by a periodic task (`telemetry.tasks.cluster_gpu_use`, every USE_REFRESH_SECONDS), never by the dashboard,
at a cost that does not grow with the running jobs' events nor, on Prometheus, with the jobs: two database queries
(the running jobs with their current run's start, and their live allocations) and one `cluster_gpu_use` of the
source (two Prometheus queries, whatever the jobs; the simulated source computes in process). Reading each job
through `RunReader` as its page does was four Prometheus queries per job and every event of every running job:
16,000 queries a minute at 4,000 jobs. The task keeps the figures in one row (`ClusterGpuUse`), and the dashboard
reads that row alone (docs/scheduling.md, "Reads").
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import OuterRef, Subquery
from django.utils import timezone

from jobs.cluster import gang_name
from jobs.models import Allocation, Job, JobEvent
from jobs.states import JobState
from telemetry.models import ClusterGpuUse
from telemetry.selectors import expected_seconds, run_placements
from telemetry.sources import JobTarget, TelemetrySource, TelemetryUnavailable, get_source

# The window the figures are the mean of: long enough to smooth a step's all-reduce dip and a checkpoint, short enough
# to be "now". Older figures are not shown: the dashboard says no running job has reported in that long.
USE_WINDOW_SECONDS = 300
USE_REFRESH_SECONDS = 60


def running_targets() -> tuple[list[JobTarget], dict[int, float]]:
    """Each running job's current run as a source finds it (its live allocations), and the GPUs it holds, by job id.

    Two queries whatever the jobs' histories: the run's start and attempt are its latest RUNNING event, found by the
    database per job (a subquery), never by loading the job's events.
    """
    latest = JobEvent.objects.filter(job=OuterRef("pk"), to_state=JobState.RUNNING).order_by("-at", "-pk")
    jobs = list(
        Job.objects.filter(state=JobState.RUNNING)
        .annotate(run_started=Subquery(latest.values("at")[:1]), run_attempt=Subquery(latest.values("attempt")[:1]))
        .filter(run_started__isnull=False)
        .only("pk", "simulate", "wall_time_seconds")
        .order_by("pk")
    )
    live: dict[int, list[Allocation]] = {}
    allocations = Allocation.objects.filter(job__state=JobState.RUNNING, released_at__isnull=True).select_related("node")
    for allocation in allocations.order_by("job_id", "rank"):
        live.setdefault(allocation.job_id, []).append(allocation)
    targets, held = [], {}
    for job in jobs:
        mine = [a for a in live.get(job.pk, []) if a.attempt == job.run_attempt]
        held[job.pk] = sum(float(a.gpus) for a in mine)
        targets.append(
            JobTarget(
                job_id=job.pk,
                attempt=job.run_attempt,
                ranks=run_placements(mine),
                started=job.run_started.timestamp(),
                ended=None,
                expected_seconds=expected_seconds(job),
                namespace=settings.MUSTER_K8S_NAMESPACE,
                pod_prefix=f"{gang_name(job.pk, job.run_attempt)}-",
            )
        )
    return targets, held


def cluster_gpu_use_refresh(*, now: datetime | None = None, source: TelemetrySource | None = None) -> dict[str, Any]:
    """Measure every running job's mean GPU utilisation over the last USE_WINDOW_SECONDS and keep the cluster's sum.

    `busy_gpus` is each reporting job's GPUs held times its mean utilisation (a job of 8 GPUs at 50 % is 4 busy GPUs),
    summed; `gpus_reporting` the GPUs those jobs hold. A job that has no sample in the window (it just started, its
    exporter is down), or all of them when the source is unavailable, is counted in `jobs_running` only.
    """
    now = now or timezone.now()
    source = source or get_source()
    targets, held = running_targets()
    unavailable = ""
    try:
        means = source.cluster_gpu_use(targets, start=(now - timedelta(seconds=USE_WINDOW_SECONDS)).timestamp(), end=now.timestamp())
    except TelemetryUnavailable as exc:
        means, unavailable = {}, str(exc)
    jobs_reporting = 0
    gpus_reporting = busy = 0.0
    for target in targets:
        mean = means.get(target.job_id)
        if mean is None or not held[target.job_id]:
            continue
        jobs_reporting += 1
        gpus_reporting += held[target.job_id]
        busy += held[target.job_id] * mean / 100
    ClusterGpuUse.objects.update_or_create(
        pk=1,
        defaults={
            "at": now,
            "window_seconds": USE_WINDOW_SECONDS,
            "jobs_running": len(targets),
            "jobs_reporting": jobs_reporting,
            "gpus_reporting": gpus_reporting,
            "busy_gpus": busy,
            "unavailable": unavailable[:500],
        },
    )
    return cluster_gpu_use(now)


def cluster_gpu_use(now: datetime | None = None) -> dict[str, Any]:
    """The last measured figures (one row), with `measured` False when there are none from the last window or no
    running job reported in it: the dashboard then says so rather than show a number or "unknown"."""
    now = now or timezone.now()
    use = ClusterGpuUse.objects.filter(pk=1).first()
    if use is None or (now - use.at).total_seconds() > USE_WINDOW_SECONDS:
        return {"measured": False, "window_seconds": USE_WINDOW_SECONDS, "swept": False, "unavailable": ""}
    return {
        "measured": bool(use.jobs_reporting),
        "swept": True,
        "at": use.at,
        "window_seconds": use.window_seconds,
        "jobs_running": use.jobs_running,
        "jobs_reporting": use.jobs_reporting,
        "jobs_silent": use.jobs_running - use.jobs_reporting,
        "gpus_reporting": use.gpus_reporting,
        "busy_gpus": use.busy_gpus,
        "utilisation": use.busy_gpus / use.gpus_reporting * 100 if use.gpus_reporting else None,
        "unavailable": use.unavailable,
    }
