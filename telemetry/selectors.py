"""Reads of job telemetry: a job's runs, their series (stored when the run has ended and was stored,
live from the source otherwise), pushed NCCL results and the summary."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings
from django.utils import timezone

from jobs.attempts import allocations_never_up
from jobs.cluster import gang_name
from jobs.models import Allocation, Job
from jobs.states import JobState
from telemetry.catalogue import Level, Metric
from telemetry.downsampling import bucketize, step_for
from telemetry.models import JobSeries, JobTelemetrySummary, NcclSample
from telemetry.rollups import reshape
from telemetry.sources import JobTarget, RankPlacement, Series, TelemetrySource

PUSHED = "pushed"


@dataclass(frozen=True)
class Run:
    """One attempt of a job that reached RUNNING, from its RUNNING event to the event that ended it."""

    attempt: int
    started: datetime
    ended: datetime | None

    def window(self, now: datetime) -> tuple[float, float]:
        """[start, end) in seconds since the epoch; a running run ends now."""
        end = self.ended or max(now, self.started)
        return self.started.timestamp(), end.timestamp()


def slice_held(job: Job) -> float | None:
    """The share of one GPU a slice job holds (its latest attempt's: 0.143 for a MIG 1g.10gb), None for whole GPUs."""
    allocation = job.allocations.filter(gpu_slot__isnull=False).order_by("-attempt").first()
    return None if allocation is None else float(allocation.gpus)


def job_runs(job: Job) -> list[Run]:
    """Every run of the job, oldest first (uses prefetched events when there are)."""
    runs: list[Run] = []
    for event in job.events.all():
        if event.to_state == JobState.RUNNING:
            runs.append(Run(event.attempt, event.at, None))
        elif runs and runs[-1].ended is None and event.from_state == JobState.RUNNING:
            runs[-1] = Run(runs[-1].attempt, runs[-1].started, event.at)
    return runs


def job_run(job: Job, attempt: int | None = None) -> Run | None:
    """The run of that attempt, else the latest run; None if the job never ran."""
    runs = job_runs(job)
    if attempt is None:
        return runs[-1] if runs else None
    return next((r for r in reversed(runs) if r.attempt == attempt), None)


def expected_seconds(job: Job) -> float:
    if settings.MUSTER_CLUSTER == "simulated":
        return float((job.simulate or {}).get("duration_seconds", settings.MUSTER_SIM_DEFAULT_DURATION_SECONDS))
    return float(job.wall_time_seconds)


def run_placements(allocations: list[Allocation]) -> tuple[RankPlacement, ...]:
    """One placement per node the run held, with the windows it held it when that was not the whole run.

    The gang's first allocations and its last releases are the run's ends (written in the transactions of the state
    changes, a moment apart from the events that start and end the run); only a resize's fall inside it.
    """
    by_node: dict[str, list[Allocation]] = {}
    for a in sorted(allocations, key=lambda a: (a.allocated_at, a.rank)):
        by_node.setdefault(a.node.name, []).append(a)
    if not by_node:
        return ()
    first = min(a.allocated_at for a in allocations)
    last = None if any(a.released_at is None for a in allocations) else max(a.released_at for a in allocations if a.released_at)
    placements = []
    for held in by_node.values():
        windows = tuple(
            (
                -math.inf if a.allocated_at == first else a.allocated_at.timestamp(),
                None if a.released_at is None or a.released_at == last else a.released_at.timestamp(),
            )
            for a in held
        )
        whole = windows == ((-math.inf, None),)
        last_held = held[-1]  # a node that held two ranks one after the other is labelled with the later
        node = last_held.node
        # A GPU slice is charted as its whole GPU (one series): see telemetry.page.shared_gpu_note.
        share = last_held.gpus if last_held.gpu_slot is not None else 1.0
        slice_memory = node.slice_memory_gb * 1e9 / 2**20 if last_held.gpu_slot is not None else 0.0
        placements.append(
            RankPlacement(
                last_held.rank,
                node.name,
                node.rack,
                max(1, int(last_held.gpus)),
                () if whole else windows,
                share,
                slice_memory,
                gpu_model=node.gpu_model,
            )
        )
    return tuple(sorted(placements, key=lambda p: (p.rank, p.held[0][0] if p.held else -math.inf)))


def job_target(job: Job, run: Run) -> JobTarget:
    """Where and when one run of the job ran, as a telemetry source needs it (uses prefetched allocations).

    An elastic job resized during the run held some nodes only part of it: their placements carry the windows they
    were held, and every source reads each node's series over those windows only. A rank it grew by that never came up
    (shrunk back: `jobs.attempts.allocations_never_up`) ran nowhere: no placement, so no series and no straggler.
    """
    never_up = allocations_never_up(job)
    allocations = [a for a in job.allocations.all() if a.attempt == run.attempt and a.pk not in never_up]
    return JobTarget(
        job_id=job.pk,
        attempt=run.attempt,
        ranks=run_placements(allocations),
        started=run.started.timestamp(),
        ended=run.ended.timestamp() if run.ended else None,
        expected_seconds=expected_seconds(job),
        namespace=settings.MUSTER_K8S_NAMESPACE,
        pod_prefix=f"{gang_name(job.pk, run.attempt)}-",
    )


def stored_step(job: Job, attempt: int) -> int | None:
    return JobSeries.objects.filter(job=job, attempt=attempt).values_list("step_seconds", flat=True).first()


@dataclass(frozen=True)
class RunReader:
    """Reads series of one run: from the database when the run is stored, from the source otherwise."""

    job: Job
    run: Run
    source: TelemetrySource
    stored: bool
    resolution: int
    now: datetime

    @classmethod
    def open(cls, job: Job, run: Run, source: TelemetrySource, *, now: datetime | None = None) -> RunReader:
        step = stored_step(job, run.attempt)
        now = now or timezone.now()
        if step is not None:
            return cls(job, run, source, True, step, now)
        return cls(job, run, source, False, source.resolution(job_target(job, run)), now)

    @property
    def origin(self) -> str:
        return "stored" if self.stored else self.source.name

    def stored_from(self) -> str:
        """The source a stored run's samples came from ('simulated' is no real GPU's); '' when not stored."""
        if not self.stored:
            return ""
        rows = JobSeries.objects.filter(job=self.job, attempt=self.run.attempt).exclude(origin="pushed")
        return rows.values_list("origin", flat=True).first() or ""

    def window(self) -> tuple[float, float]:
        return self.run.window(self.now)

    def step_for(self, step: int) -> int:
        """The step actually used: at least the data's resolution, and a whole multiple of it."""
        return max(1, math.ceil(max(step, 1) / self.resolution)) * self.resolution

    def read(self, metric: Metric, *, level: Level, start: float, end: float, step: int, node: str | None = None) -> list[Series]:
        """The metric at `level` over [start, end) in `step`-second buckets (step from `step_for`).

        Raises TelemetryUnavailable when the run is not stored and the source cannot answer.
        """
        level = metric.finest_level(level)
        if level == Level.JOB:
            node = None  # a job-wide series (NCCL) belongs to no node: show it whatever node is picked
        if self.stored:
            rows = JobSeries.objects.filter(job=self.job, attempt=self.run.attempt, metric=metric.key, level=level)
            if node is not None:
                rows = rows.filter(node=node)
            series = [
                Series(r.metric, Level(r.level), r.node, r.gpu, r.rank, r.buckets(), r.sample_seconds, "stored", r.attempt)
                for r in rows.order_by("rank", "node", "gpu")
            ]
        else:
            series = self.source.read(job_target(self.job, self.run), metric, start=start, end=end, step=step, level=level)
            if node is not None:
                series = [s for s in series if s.node == node]
        return reshape(series, start=start, end=end, step=step)

    def pushed_nccl(self, *, start: float, end: float, step: int) -> Series | None:
        """NCCL bus bandwidth the job pushed during this run, in the same buckets; None when it pushed nothing."""
        rows = NcclSample.objects.filter(job=self.job, attempt=self.run.attempt).values_list("at", "busbw_gbs")
        times, values = [], []
        for at, busbw in rows:
            times.append(at.timestamp())
            values.append(busbw)
        if not times:
            return None
        buckets = bucketize(times, values, step, start=start, end=end)
        if not buckets.samples:
            return None
        return Series("nccl_busbw", Level.JOB, "", -1, None, buckets, 0.0, PUSHED, self.run.attempt)


def job_telemetry_summary(job: Job) -> JobTelemetrySummary | None:
    """The job's stored summary; None until one of its runs has ended and been stored."""
    if not job.attempt:  # never placed, so never ran
        return None
    try:
        return job.telemetry_summary
    except JobTelemetrySummary.DoesNotExist:
        return None


@dataclass(frozen=True)
class MetricRead:
    """What `GET /api/v1/jobs/{id}/metrics/` returns: one metric of one run over a window."""

    job: int
    run: int
    metric: Metric
    level: Level
    start: datetime
    end: datetime
    step: int
    resolution: int  # the data's: `step` is a whole multiple of it
    series: list[Series]


class NoRun(Exception):
    """The job has not run (or has no run of the attempt asked for)."""


class BadRead(ValueError):
    """A read this run cannot answer as asked (a node it never used, a window outside it): `field` names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def run_nodes(job: Job, run: Run) -> list[str]:
    """The names of the nodes the run held at any time, in the order of their first rank."""
    rows = Allocation.objects.filter(job=job, attempt=run.attempt).order_by("rank", "allocated_at").values_list("node__name", flat=True)
    return list(dict.fromkeys(rows))


def _check_read(
    job: Job, run: Run, *, level: Level, node: str | None, start: datetime | None, end: datetime | None, window: tuple[float, float]
) -> None:
    """Refuse what would otherwise answer an empty or silently different read, naming what the run has."""
    run_start, run_end = window
    if node is not None:
        if level == Level.JOB:
            raise BadRead("node", "node= picks one node's series: it applies to level=node or level=gpu, not level=job.")
        nodes = run_nodes(job, run)
        if node not in nodes:
            raise BadRead("node", f"Job {job.pk} did not run on {node!r} in run {run.attempt}; its nodes: {', '.join(nodes)}.")
    started = datetime.fromtimestamp(run_start, tz=UTC).isoformat()
    if start is not None and start.timestamp() >= run_end:
        until = f"ended at {datetime.fromtimestamp(run_end, tz=UTC).isoformat()}" if run.ended else "is running: it has data until now"
        raise BadRead("start", f"Run {run.attempt} of job {job.pk} started at {started} and {until}; start= is after that.")
    if end is not None and end.timestamp() <= run_start:
        raise BadRead("end", f"Run {run.attempt} of job {job.pk} started at {started}; end= is before that.")


def job_metric_read(
    job: Job,
    metric: Metric,
    *,
    level: Level,
    source: TelemetrySource,
    start: datetime | None = None,
    end: datetime | None = None,
    step: int | None = None,
    node: str | None = None,
    attempt: int | None = None,
    now: datetime | None = None,
) -> MetricRead:
    """One metric of one run of a job, in buckets: stored if the run was stored, else live from the source.

    The window is clipped to the run; the step is rounded up to a multiple of the data's
    resolution (by default: the finest giving at most MUSTER_TELEMETRY_MAX_POINTS buckets).
    NCCL bus bandwidth also returns what the job pushed, as a series of origin "pushed".
    Raises NoRun for a job that has not run; BadRead for an attempt that did not run, a node the run never used (or
    any node at job level) and a window outside the run; TelemetryUnavailable when the source cannot answer.
    """
    runs = job_runs(job)
    if not runs:
        raise NoRun(f"Job {job.pk} has not run: it has no telemetry.")
    run = job_run(job, attempt)
    if run is None:
        attempts = ", ".join(str(r.attempt) for r in runs)
        raise BadRead("run", f"Job {job.pk} has no run {attempt}; its runs (attempts that reached RUNNING): {attempts}.")
    reader = RunReader.open(job, run, source, now=now)
    run_start, run_end = reader.window()
    _check_read(job, run, level=level, node=node, start=start, end=end, window=(run_start, run_end))
    lo = max(run_start, start.timestamp()) if start else run_start
    hi = min(run_end, end.timestamp()) if end else run_end
    hi = max(lo, hi)
    chosen = reader.step_for(step or step_for(hi - lo, reader.resolution, settings.MUSTER_TELEMETRY_MAX_POINTS))
    level = metric.finest_level(level)
    series = reader.read(metric, level=level, start=lo, end=hi, step=chosen, node=node)
    if metric.key == "nccl_busbw":
        pushed = reader.pushed_nccl(start=lo, end=hi, step=chosen)
        if pushed is not None:
            series.append(pushed)
    return MetricRead(
        job=job.pk,
        run=run.attempt,
        metric=metric,
        level=level,
        start=datetime.fromtimestamp(lo, tz=UTC),
        end=datetime.fromtimestamp(hi, tz=UTC),
        step=chosen,
        resolution=reader.resolution,
        series=series,
    )
