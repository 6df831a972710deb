"""The queue as the last cycle stored it, for the API, the pages and the dashboard.

Reads never run the policy: the cycle (`scheduler.cycle._store_plans`) stores each waiting job's
position, priority, estimate and reservation on its row, and everything here reads those columns.
A job no cycle has seen yet (just submitted, or back in the queue after a requeue) has no position
and no priority: it is new, not yet planned, and sorts after the planned jobs by submit time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import Count, DateTimeField, DurationField, ExpressionWrapper, F, Q, QuerySet, Sum, Value

from jobs.amounts import gpu_amount
from jobs.models import Allocation, Job, PlannedQueue
from jobs.states import ACTIVE_STATES, JobState
from policy.model import Priority
from quotas.selectors import AboveQuota, accounts_above_quota
from scheduler.snapshot import policy_config

# What the reason counts call a job no cycle has given a reason yet.
NEW_REASON = "NEW"


@dataclass(frozen=True)
class QueueEntry:
    job: Job
    # 1 is next, as the last cycle ordered the queue; None: not yet planned (new since that cycle).
    position: int | None
    priority: Priority | None

    @property
    def planned(self) -> bool:
        return self.position is not None


@dataclass(frozen=True)
class QueueCounts:
    """The whole queue counted, and what holds GPUs within and beyond its owners' quotas (a few aggregate queries)."""

    pending: int = 0
    pending_by_reason: dict[str, int] = field(default_factory=dict)
    running_within_quota: int = 0
    running_over_quota: int = 0
    gpus_over_quota: float = 0
    # The accounts holding more than a quota lowered under their running jobs (AccountUsage.above_quota).
    above_quota: tuple[AboveQuota, ...] = ()

    @property
    def above_quota_text(self) -> str:
        """One clause per account ("team research holds 126 GPUs of its quota of 8"); "" for none."""
        return "; ".join(a.above_quota_text for a in self.above_quota)


def stored_priority(job: Job) -> Priority | None:
    """The priority the last cycle used for the job, from its row; None if no cycle planned it."""
    if job.priority is None:
        return None
    factors = {name: (float(value), float(weighted)) for name, (value, weighted) in (job.priority_factors or {}).items()}
    return Priority(total=job.priority, factors=factors)


def queue_entry(job: Job) -> QueueEntry | None:
    """One job's place in the queue, from its own row (no other job is read); None unless it is pending."""
    if job.state != JobState.PENDING:
        return None
    return QueueEntry(job=job, position=job.queue_position, priority=stored_priority(job))


def queue_entries(jobs: Iterable[Job]) -> list[QueueEntry]:
    """A page of `queue_jobs` as entries."""
    return [entry for job in jobs if (entry := queue_entry(job)) is not None]


def queue_jobs() -> QuerySet[Job]:
    """Pending jobs in queue order: by stored position, then the jobs not yet planned by submit time (index job_queue_order)."""
    return (
        Job.objects.filter(state=JobState.PENDING)
        .select_related("owner", "team")
        .order_by(F("queue_position").asc(nulls_last=True), "submitted_at", "id")
    )


def pending_by_reason() -> dict[str, int]:
    """Waiting jobs by reason: the last cycle's count of the jobs it planned (one row), and the jobs not planned since.

    Jobs that the last cycle planned and that started or were cancelled since are counted until the next
    cycle (a cancel or a start asks for one within seconds), as their positions are shown until then.
    Before any cycle has counted, the pending jobs are counted by reason.
    """
    planned = PlannedQueue.objects.filter(pk=1).first()
    if planned is None:
        counted = Job.objects.filter(state=JobState.PENDING).order_by().values_list("pending_reason_code").annotate(n=Count("id"))
        reasons: dict[str, int] = {}
        for code, n in counted:
            reasons[code or NEW_REASON] = reasons.get(code or NEW_REASON, 0) + n
        return reasons
    reasons = dict(planned.pending_by_reason)
    # Index job_queue_order: the not-yet-planned jobs lead it (queue_position IS NULL), so this counts only them.
    new = Job.objects.filter(state=JobState.PENDING, queue_position__isnull=True).count()
    if new:
        reasons[NEW_REASON] = reasons.get(NEW_REASON, 0) + new
    return reasons


def queue_counts() -> QueueCounts:
    """The summary of the queue: pending jobs by reason, running jobs and GPUs within and over quota."""
    reasons = pending_by_reason()
    running = Job.objects.filter(state__in=ACTIVE_STATES).aggregate(total=Count("id"), over=Count("id", filter=Q(over_quota=True)))
    gpus_over = Allocation.objects.filter(released_at__isnull=True, job__state__in=ACTIVE_STATES, job__over_quota=True).aggregate(
        gpus=Sum("gpus")
    )["gpus"]
    return QueueCounts(
        pending=sum(reasons.values()),
        pending_by_reason=dict(sorted(reasons.items())),
        running_within_quota=running["total"] - running["over"],
        running_over_quota=running["over"],
        gpus_over_quota=gpu_amount(gpus_over),
        above_quota=tuple(accounts_above_quota()),
    )


def starving_count(pending: QuerySet[Job], now: datetime) -> int:
    """How many of `pending` have waited past their starvation threshold (PolicyConfig.starving_after).

    A single-node job's threshold grows with its wall time past `starvation_seconds / starvation_wall_factor`:
    gangs and jobs up to that wall time are counted past the one threshold, the longer ones past their own
    (submitted at least `starvation_wall_factor` x their wall time ago), in the same count: the dashboard and
    /metrics ask on every read, and reading those jobs to compare in Python read half of a long queue.
    """
    config = policy_config()
    past_base = pending.filter(submitted_at__lte=now - timedelta(seconds=config.starvation_seconds))
    if config.starvation_wall_factor <= 0:
        return past_base.count()
    longest_plain = config.starvation_seconds / config.starvation_wall_factor
    plain = Q(wall_time_seconds__lte=longest_plain) | Q(nodes__gt=1)
    factor = config.starvation_wall_factor
    if connection.vendor == "postgresql":
        waited: Any = F("wall_time_seconds") * Value(timedelta(seconds=factor))
    else:  # SQLite keeps a duration as microseconds, and multiplies no interval
        waited = ExpressionWrapper(F("wall_time_seconds") * Value(round(factor * 1_000_000)), output_field=DurationField())
    owed_from = ExpressionWrapper(F("submitted_at") + waited, output_field=DateTimeField())
    return past_base.alias(owed_from=owed_from).filter(plain | Q(owed_from__lte=now)).count()


def is_starving(job: Job, now: datetime) -> bool:
    return (now - job.submitted_at).total_seconds() >= policy_config().starving_after(job.wall_time_seconds, job.nodes)
