"""The cluster's measured GPU use now: what the running jobs' GPUs did over the last few minutes, for the dashboard.

Read from the same live telemetry the job pages read (`RunReader` on each running job's current run), by a
periodic task (`telemetry.tasks.cluster_gpu_use`, every USE_REFRESH_SECONDS), never by the dashboard: a read per
running job (four Prometheus queries each) would make the dashboard's cost grow with the jobs. The task keeps the
figures in one row (`ClusterGpuUse`), and the dashboard reads that row alone (docs/scheduling.md, "Reads").
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from jobs.models import Job
from jobs.states import JobState
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import samples_mean
from telemetry.models import ClusterGpuUse
from telemetry.selectors import RunReader, job_run
from telemetry.sources import TelemetrySource, TelemetryUnavailable, get_source

# The window the figures are the mean of: long enough to smooth a step's all-reduce dip and a checkpoint, short enough
# to be "now". Older figures are not shown: the dashboard says no running job has reported in that long.
USE_WINDOW_SECONDS = 300
USE_REFRESH_SECONDS = 60


def cluster_gpu_use_refresh(*, now: datetime | None = None, source: TelemetrySource | None = None) -> dict[str, Any]:
    """Measure every running job's mean GPU utilisation over the last USE_WINDOW_SECONDS and keep the cluster's sum.

    `busy_gpus` is each reporting job's GPUs held times its mean utilisation (a job of 8 GPUs at 50 % is 4 busy GPUs),
    summed; `gpus_reporting` the GPUs those jobs hold. A job whose telemetry is unavailable, or that has no sample in
    the window (it just started, its exporter is down), is counted in `jobs_running` only.
    """
    now = now or timezone.now()
    source = source or get_source()
    start = (now - timedelta(seconds=USE_WINDOW_SECONDS)).timestamp()
    running = Job.objects.filter(state=JobState.RUNNING).prefetch_related("events", "allocations__node").order_by("pk")
    jobs_running = jobs_reporting = 0
    gpus_reporting = busy = 0.0
    unavailable = ""
    for job in running:
        run = job_run(job)
        if run is None or run.ended is not None:
            continue
        jobs_running += 1
        held = sum(float(a.gpus) for a in job.allocations.all() if a.attempt == run.attempt and a.released_at is None)
        try:
            reader = RunReader.open(job, run, source, now=now)
            lo, hi = reader.window()
            lo = max(lo, start)
            if hi <= lo:
                continue
            series = reader.read(METRICS["gpu_util"], level=Level.JOB, start=lo, end=hi, step=reader.step_for(int(hi - lo)))
        except TelemetryUnavailable as exc:
            unavailable = str(exc)
            continue
        mean = samples_mean(s.buckets for s in series)
        if mean is None or not held:
            continue
        jobs_reporting += 1
        gpus_reporting += held
        busy += held * mean / 100
    ClusterGpuUse.objects.update_or_create(
        pk=1,
        defaults={
            "at": now,
            "window_seconds": USE_WINDOW_SECONDS,
            "jobs_running": jobs_running,
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
