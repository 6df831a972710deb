"""Writes of job telemetry: storing a run's series when it ends, the job's summary, pushed NCCL results."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Avg, Count, Prefetch
from django.utils import timezone

from config.celery_task import task_named
from jobs.models import Allocation, Job
from jobs.states import ACTIVE_STATES, JobState
from telemetry.catalogue import METRICS, Level, Scope
from telemetry.downsampling import samples_mean, store_step
from telemetry.efficiency import site_efficiency_flags
from telemetry.models import JobSeries, JobTelemetrySummary, NcclSample, RunStoreDue, TelemetryCredential
from telemetry.nccl_formats import NcclRecord, parse_push
from telemetry.rollups import roll_up
from telemetry.selectors import job_run, job_target, slice_held
from telemetry.sources import Series, TelemetrySource, TelemetryUnavailable, get_source
from telemetry.summaries import SUMMARY_METRICS, summary_fields

logger = logging.getLogger(__name__)

# The store task (telemetry.tasks), enqueued by name: that module imports this one.
STORE_RUN_TASK = "telemetry.tasks.telemetry_store_run"


class PushRefused(Exception):
    """A push that is well formed but not accepted now: `status` 409 (job not running) or 429 (rate, volume)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


def telemetry_job_left_running(*, job: Job, attempt: int, now: datetime | None = None) -> None:
    """Called by `job_transition` when a job leaves RUNNING: store that run's series once the transition commits.

    A Celery task does the work, so a slow or unreachable telemetry source never holds up the
    scheduling cycle that ended the job. The run is also written down as due (in the caller's
    transaction): if the task is lost or the source is away, the sweep enqueues it again.
    """
    due = (now or timezone.now()) + timedelta(seconds=settings.MUSTER_TELEMETRY_STORE_RETRY_SECONDS)
    RunStoreDue.objects.update_or_create(job=job, attempt=attempt, defaults={"due_at": due, "tries": 0, "last_error": ""})
    task_named(STORE_RUN_TASK).delay_on_commit(job.pk, attempt)


def telemetry_store_attempt(*, job_id: int, attempt: int, source: TelemetrySource | None = None, now: datetime | None = None) -> int:
    """The store task's body: store the run, or note why not so the sweep tries again later. Never raises for an away source."""
    try:
        stored = telemetry_store_run(job_id=job_id, attempt=attempt, source=source, now=now)
    except TelemetryUnavailable as exc:
        logger.warning("telemetry of job %s attempt %s not stored yet (the sweep retries): %s", job_id, attempt, exc)
        RunStoreDue.objects.filter(job_id=job_id, attempt=attempt).update(last_error=str(exc)[:500])
        return 0
    RunStoreDue.objects.filter(job_id=job_id, attempt=attempt).delete()
    return stored


def telemetry_store_due(*, now: datetime | None = None, limit: int = 200) -> list[tuple[int, int]]:
    """Enqueue the store task again for runs still not stored past their due time; returns the runs enqueued.

    Each try waits twice as long as the one before (from MUSTER_TELEMETRY_STORE_RETRY_SECONDS), so a
    telemetry source that is away for hours is not hammered; after MUSTER_TELEMETRY_STORE_MAX_TRIES the
    run is given up with an error in the log (its live series stay readable while the source keeps them).
    """
    now = now or timezone.now()
    enqueued: list[tuple[int, int]] = []
    with transaction.atomic():
        due = list(RunStoreDue.objects.select_for_update(skip_locked=True).filter(due_at__lte=now).order_by("due_at")[:limit])
        for row in due:
            if row.tries >= settings.MUSTER_TELEMETRY_STORE_MAX_TRIES:
                logger.error(
                    "gave up storing telemetry of job %s attempt %s after %s tries: %s", row.job_id, row.attempt, row.tries, row.last_error
                )
                row.delete()
                continue
            row.tries += 1
            row.due_at = now + timedelta(seconds=settings.MUSTER_TELEMETRY_STORE_RETRY_SECONDS * 2**row.tries)
            row.save(update_fields=["tries", "due_at"])
            task_named(STORE_RUN_TASK).delay_on_commit(row.job_id, row.attempt)
            enqueued.append((row.job_id, row.attempt))
    return enqueued


def _job_for_telemetry(job_id: int) -> Job | None:
    return (
        Job.objects.prefetch_related("events", Prefetch("allocations", queryset=Allocation.objects.select_related("node")))
        .filter(pk=job_id)
        .first()
    )


def _levels(scope: Scope) -> tuple[Level, ...]:
    return {Scope.GPU: (Level.NODE, Level.JOB), Scope.NODE: (Level.JOB,), Scope.JOB: ()}[scope]


def telemetry_store_run(*, job_id: int, attempt: int, source: TelemetrySource | None = None, now: datetime | None = None) -> int:
    """Downsample one ended run of a job into stored series (every metric, per GPU, node and job) and refresh its summary.

    Idempotent: storing a run again replaces its rows. Returns the number of series stored (0 when
    the run has not ended, or the job is gone). Raises TelemetryUnavailable when the source cannot answer.
    """
    job = _job_for_telemetry(job_id)
    run = job_run(job, attempt) if job else None
    if job is None or run is None or run.ended is None:
        return 0
    source = source or get_source()
    target = job_target(job, run)
    start, end = run.window(run.ended)
    step = store_step(end - start, source.resolution(target), settings.MUSTER_TELEMETRY_STORE_BUCKETS)
    rows: list[JobSeries] = []
    for metric in METRICS.values():
        finest = source.read(target, metric, start=start, end=end, step=step, level=Level(metric.scope.value))
        for series in [*finest, *(s for level in _levels(metric.scope) for s in roll_up(finest, level))]:
            row = JobSeries(
                job=job,
                attempt=attempt,
                metric=metric.key,
                level=series.level,
                node=series.node,
                gpu=series.gpu,
                rank=series.rank,
                sample_seconds=series.sample_seconds,
                origin=source.name,
            )
            row.set_buckets(series.buckets)
            rows.append(row)
    with transaction.atomic():
        JobSeries.objects.filter(job=job, attempt=attempt).delete()
        JobSeries.objects.bulk_create(rows, batch_size=100)
        telemetry_summary_refresh(job=job, now=now)
    return len(rows)


def _series(rows: Iterable[JobSeries]) -> list[Series]:
    return [Series(r.metric, Level(r.level), r.node, r.gpu, r.rank, r.buckets(), r.sample_seconds, r.origin, r.attempt) for r in rows]


def telemetry_summary_refresh(*, job: Job, now: datetime | None = None) -> JobTelemetrySummary | None:
    """Recompute the job's summary over every stored run and its pushed NCCL results; None while no run is stored.

    Efficiency flags are those of the latest stored run (ranks and GPUs differ between runs).
    """
    rows = list(JobSeries.objects.filter(job=job, level=Level.JOB, metric__in=SUMMARY_METRICS).order_by("attempt"))
    if not rows:
        return None
    job_level: dict[str, list[Series]] = {}
    for series in _series(rows):
        job_level.setdefault(series.metric, []).append(series)
    pushed = NcclSample.objects.filter(job=job).aggregate(mean=Avg("busbw_gbs"), count=Count("id"))
    fields = summary_fields(job_level, pushed_mean=pushed["mean"], pushed_count=pushed["count"])
    attempts = sorted({r.attempt for r in rows})
    latest = attempts[-1]
    gpu_util = _series(JobSeries.objects.filter(job=job, attempt=latest, metric="gpu_util", level=Level.GPU).order_by("rank", "gpu"))
    tensor = samples_mean(s.buckets for s in job_level.get("tensor_active", []) if s.attempt == latest)
    flags = site_efficiency_flags(gpu_util=gpu_util, tensor_active_mean=tensor, slice_share=slice_held(job))
    summary, _ = JobTelemetrySummary.objects.update_or_create(
        job=job,
        defaults={**fields, "attempts": attempts, "flags": [f.as_dict() for f in flags], "computed_at": now or timezone.now()},
    )
    return summary


# --- Pushed NCCL results ---------------------------------------------------------------------------


def _check_accepting(job: Job, now: datetime) -> None:
    if job.state in ACTIVE_STATES:
        return
    grace = settings.MUSTER_TELEMETRY_PUSH_GRACE_SECONDS
    if job.finished_at is not None and now - job.finished_at <= timedelta(seconds=grace):
        return
    if job.state in (JobState.PENDING, JobState.PREEMPTED):
        raise PushRefused(409, f"Job {job.pk} is not running ({job.state}): there is no run to record NCCL results for.")
    raise PushRefused(409, f"Job {job.pk} has ended ({job.state}); results are accepted up to {grace} s after a job ends.")


def _count_push(job_id: int, now: datetime) -> None:
    """Count the push in the job's one-minute window, or refuse it (429) when the window is full.

    In its own transaction, so a push refused later as malformed still counts: a job cannot
    flood the parser by sending garbage.
    """
    limit = settings.MUSTER_TELEMETRY_PUSHES_PER_MINUTE
    with transaction.atomic():
        credential = TelemetryCredential.objects.select_for_update().get(job_id=job_id)
        if credential.window_start is None or now - credential.window_start >= timedelta(minutes=1) or now < credential.window_start:
            credential.window_start, credential.window_pushes = now, 0
        if credential.window_pushes >= limit:
            retry = max(1, int(60 - (now - credential.window_start).total_seconds()) + 1)
            raise PushRefused(429, f"At most {limit} pushes per minute per job; try again in {retry} s.", retry_after=retry)
        credential.window_pushes += 1
        credential.save(update_fields=["window_start", "window_pushes"])


def telemetry_push(*, job_id: int, body: bytes, content_type: str, coll: str | None = None, now: datetime | None = None) -> int:
    """Store the NCCL results a job pushed (NCCL Inspector JSON or nccl-tests text). All or nothing.

    Raises PushRefused (409: not running; 429: rate or volume), UnsupportedFormat (415) or
    PushInvalid (400, naming each problem). Returns how many samples were stored.
    """
    now = now or timezone.now()
    job = Job.objects.get(pk=job_id)
    _check_accepting(job, now)
    _count_push(job_id, now)
    records = parse_push(body, content_type, max_records=settings.MUSTER_TELEMETRY_PUSH_MAX_RECORDS, now=now, coll=coll)
    with transaction.atomic():
        # Locks the job's credential row: two concurrent pushes cannot both slip under the cap.
        TelemetryCredential.objects.select_for_update().get(job_id=job_id)
        limit = settings.MUSTER_TELEMETRY_MAX_SAMPLES_PER_JOB
        stored = NcclSample.objects.filter(job_id=job_id).count()
        if stored + len(records) > limit:
            raise PushRefused(429, f"Job {job_id} has stored {stored} NCCL samples; at most {limit} per job.")
        NcclSample.objects.bulk_create([_sample(job, r, now) for r in records])
        summary = JobTelemetrySummary.objects.filter(job_id=job_id).first()
        if summary is not None:
            # Results pushed as the job stops arrive after its summary: fold them in.
            pushed = NcclSample.objects.filter(job_id=job_id).aggregate(mean=Avg("busbw_gbs"), count=Count("id"))
            summary.nccl_busbw_mean_gbs, summary.nccl_samples, summary.nccl_busbw_origin = pushed["mean"], pushed["count"], "pushed"
            summary.save(update_fields=["nccl_busbw_mean_gbs", "nccl_samples", "nccl_busbw_origin"])
    return len(records)


def _sample(job: Job, record: NcclRecord, now: datetime) -> NcclSample:
    return NcclSample(
        job=job,
        attempt=job.attempt,
        at=record.at or now,
        received_at=now,
        format=record.format,
        coll=record.coll,
        rank=record.rank,
        msg_size_bytes=record.msg_size_bytes,
        exec_time_us=record.exec_time_us,
        algbw_gbs=record.algbw_gbs,
        busbw_gbs=record.busbw_gbs,
        in_place=record.in_place,
    )
