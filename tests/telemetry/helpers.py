"""Helpers shared by the telemetry tests: run a job to its end on the simulated cluster, with its run stored."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import plotly.graph_objects as go
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.models import Job, JobEvent
from jobs.states import TERMINAL_STATES
from telemetry import tasks
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import samples_mean
from telemetry.selectors import RunReader, job_run
from telemetry.services import telemetry_store_run
from telemetry.sources import TelemetrySource
from tests.jobs.factories import JobFactory


def as_plotly_figure(figure: dict[str, Any]) -> go.Figure:
    """A figure's JSON as plotly graph objects: validated (raises ValueError on anything Plotly does not know)."""
    return go.Figure(figure)


def store_runs_when_they_end(monkeypatch: Any) -> list[tuple[int, int]]:
    """Make the end-of-run hook store the run right after the commit, in this process (no worker)."""
    stored: list[tuple[int, int]] = []

    def delay_on_commit(job_id: int, attempt: int) -> None:
        def store() -> None:
            stored.append((job_id, attempt))
            telemetry_store_run(job_id=job_id, attempt=attempt)

        transaction.on_commit(store)

    monkeypatch.setattr(tasks.telemetry_store_run_task, "delay_on_commit", delay_on_commit)
    return stored


def run_to_end(sim: Any, job_id: int, capture: Callable[..., Any], *, step: float = 1.0, limit: float = 3600) -> Job:
    """Cycle the simulated cluster until the job ends, running on-commit callbacks (the telemetry store) as they come."""
    waited = 0.0
    with capture(execute=True):
        sim.cycle()
    while waited < limit:
        with capture(execute=True):
            sim.advance(step)
        waited += step
        job = Job.objects.get(pk=job_id)
        if job.state in TERMINAL_STATES:
            return job
    raise AssertionError(f"job {job_id} did not end within {limit} s")


def start_running(submit: Callable[..., Any], sim: Any, *, ran_for: float = 3600, **job: Any) -> Job:
    """A job running on the simulated cluster whose run started `ran_for` seconds ago by the real clock.

    The harness' clock runs ahead of the real one; live reads end at the real now, so the run's
    history is moved back to have something to read.
    """
    job_id = submit(**job)["id"]
    sim.cycle()
    sim.advance(2)
    running = Job.objects.get(pk=job_id)
    assert running.state == "RUNNING"
    started = JobEvent.objects.get(job=running, to_state="RUNNING").at
    JobEvent.objects.filter(job=running).update(at=F("at") - (started - timezone.now()) - timedelta(seconds=ran_for))
    return Job.objects.get(pk=job_id)


def stored_run(owner: Any, *, nodes: int, gpus_per_node: int, seconds: float) -> Job:
    """A job that ran `seconds` on the simulated cluster, ended a minute ago and had its run stored, as the
    end-of-run hook leaves it; built with factories (no API, no cycles) for tests that read what was stored."""
    ended = timezone.now() - timedelta(minutes=1)
    started = ended - timedelta(seconds=seconds)
    job = JobFactory(
        owner=owner,
        finished=True,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        simulate={"duration_seconds": seconds},
        submitted_at=started - timedelta(seconds=2),
        scheduled_at=started - timedelta(seconds=1),
        started_at=started,
        finished_at=ended,
        history=True,
    )
    assert telemetry_store_run(job_id=job.pk, attempt=job.attempt) > 0
    return Job.objects.get(pk=job.pk)


def gpu_use_as_each_page_reads(source: TelemetrySource, now: datetime, window_seconds: int) -> dict[str, float]:
    """The dashboard's "GPUs used now" as the first version measured it (commit 8174a24): each running job read through
    `RunReader` as its page reads it (four Prometheus queries each, every event of every job loaded), its GPUs held
    times its mean utilisation over the window, summed. The figures the bounded measure must keep."""
    start = (now - timedelta(seconds=window_seconds)).timestamp()
    running = Job.objects.filter(state="RUNNING").prefetch_related("events", "allocations__node").order_by("pk")
    use = {"jobs_running": 0, "jobs_reporting": 0, "gpus_reporting": 0.0, "busy_gpus": 0.0}
    for job in running:
        run = job_run(job)
        if run is None or run.ended is not None:
            continue
        use["jobs_running"] += 1
        held = sum(float(a.gpus) for a in job.allocations.all() if a.attempt == run.attempt and a.released_at is None)
        reader = RunReader.open(job, run, source, now=now)
        lo, hi = reader.window()
        lo = max(lo, start)
        if hi <= lo:
            continue
        series = reader.read(METRICS["gpu_util"], level=Level.JOB, start=lo, end=hi, step=reader.step_for(int(hi - lo)))
        mean = samples_mean(s.buckets for s in series)
        if mean is None or not held:
            continue
        use["jobs_reporting"] += 1
        use["gpus_reporting"] += held
        use["busy_gpus"] += held * mean / 100
    return use
