"""Checkpoints a running job reports: when it last wrote one (and its training step), so that a preemption is weighed
by the work it would really throw away, and the job's page and the API say what a restart resumes from.

A gang's ranks may all report the same checkpoint, and reports may arrive out of order: the latest one of the attempt
stands, and an earlier or equal one changes nothing (it is not an error, so a training script need not care which rank
reports). A report of another attempt, or of a job that is not running, is refused: it says nothing about the work the
running attempt would lose.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from jobs.errors import JobNotRunning
from jobs.models import Job
from jobs.states import JobState

# How far a report's `at` may be ahead of the server's clock, or before the attempt was placed (the nodes', the web
# servers' and the worker's clocks drift apart): it is then taken as now, or as the placement.
CLOCK_SKEW = timedelta(seconds=60)


class CheckpointInvalid(Exception):
    """The report's `field` cannot be right for this job (400); nothing was stored."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Checkpoint:
    """The job's last checkpoint after a report; `recorded` is False when the attempt had already reported it or a later one."""

    job: int
    attempt: int
    checkpointed_at: datetime
    checkpoint_step: int | None
    recorded: bool


def job_checkpoint_report(
    job_id: int, *, at: datetime | None = None, step: int | None = None, attempt: int | None = None, now: datetime | None = None
) -> Checkpoint:
    """Record that the running job `job_id` wrote a checkpoint at `at` (now if None, and the job's attempt if None)."""
    now = now or timezone.now()
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job_id)
        if job.state != JobState.RUNNING:
            raise JobNotRunning(f"Job {job.pk} is {job.state}: only a running job reports checkpoints.")
        if attempt is not None and attempt != job.attempt:
            raise JobNotRunning(f"This report is from attempt {attempt}; job {job.pk} runs attempt {job.attempt} now (MUSTER_ATTEMPT).")
        at = now if at is None else at
        if at > now + CLOCK_SKEW:
            raise CheckpointInvalid("at", f"{at.isoformat()} is in the future (the server's time is {now.isoformat()}).")
        at = min(at, now)
        placed = job.scheduled_at or job.started_at
        if placed is not None and at < placed - CLOCK_SKEW:
            raise CheckpointInvalid(
                "at",
                f"{at.isoformat()} is before attempt {job.attempt} was placed ({placed.isoformat()}): "
                "a checkpoint counts for the attempt that wrote it.",
            )
        if placed is not None:
            at = max(at, placed)
        if job.checkpoint_attempt == job.attempt and job.checkpointed_at is not None and at <= job.checkpointed_at:
            return Checkpoint(job.pk, job.attempt, job.checkpointed_at, job.checkpoint_step, recorded=False)
        job.checkpointed_at, job.checkpoint_step, job.checkpoint_attempt = at, step, job.attempt
        job.save(update_fields=["checkpointed_at", "checkpoint_step", "checkpoint_attempt", "updated_at"])
    return Checkpoint(job.pk, job.attempt, at, step, recorded=True)
