"""Reads of jobs and nodes, with who may see what."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypedDict

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.utils import timezone

from jobs.models import Allocation, Job, JobEvent, Node, NodeState
from jobs.scheduling.model import Priority
from jobs.scheduling.priority import prioritize, priority_order
from jobs.states import JobState

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


def jobs_visible_to(user: User | AnonymousUser) -> QuerySet[Job]:
    """Users see their own jobs; staff see everyone's. One rule for list, detail and cancel."""
    jobs = Job.objects.select_related("owner", "team").prefetch_related(
        Prefetch("allocations", queryset=Allocation.objects.select_related("node").order_by("attempt", "rank"))
    )
    if getattr(user, "is_staff", False):
        return jobs
    if not user.is_authenticated:
        return jobs.none()
    return jobs.filter(owner=user)


def job_assigned_nodes(job: Job) -> list[str]:
    """Node names of the job's latest attempt, by rank (uses prefetched allocations)."""
    allocations = [a for a in job.allocations.all() if a.attempt == job.attempt]
    return [a.node.name for a in sorted(allocations, key=lambda a: a.rank)]


class NodeUsage(TypedDict):
    gpus_held: int | None  # None while the node holds no live allocation


def nodes_with_usage() -> QuerySet[WithAnnotations[Node, NodeUsage]]:
    """Known nodes, each annotated with `gpus_held` by live allocations."""
    return (
        Node.objects.exclude(state=NodeState.GONE)
        .annotate(gpus_held=Sum("allocations__gpus", filter=Q(allocations__released_at__isnull=True)))
        .order_by("name")
    )


@dataclass(frozen=True)
class QueueEntry:
    job: Job
    position: int
    priority: Priority


@dataclass(frozen=True)
class QueuePlan:
    """The queue as the next cycle sees it: pending jobs in priority order, and what holds GPUs."""

    entries: list[QueueEntry]
    running_within_quota: int = 0
    running_over_quota: int = 0
    gpus_over_quota: int = 0
    by_job: dict[int, QueueEntry] = field(default_factory=dict)

    def reasons(self) -> dict[str, int]:
        return dict(sorted(Counter(e.job.pending_reason_code or "NEW" for e in self.entries).items()))


def queue_plan(*, now: datetime | None = None) -> QueuePlan:
    """Pending jobs in the order the scheduler considers them, each with its priority breakdown.

    The same snapshot and the same ordering code as the cycle, computed at read time, so
    what a user sees is what the next cycle will do.
    """
    from jobs.snapshot import build_snapshot, policy_config

    snapshot = build_snapshot(now or timezone.now())
    config = policy_config()
    priorities = prioritize(snapshot, config)
    order = [p.id for p in priority_order(snapshot, config, priorities)]
    jobs = Job.objects.select_related("owner", "team").in_bulk(order)
    entries = [QueueEntry(jobs[pk], position, priorities[pk]) for position, pk in enumerate((pk for pk in order if pk in jobs), start=1)]
    over = [r for r in snapshot.running if r.over_quota]
    return QueuePlan(
        entries=entries,
        running_within_quota=len(snapshot.running) - len(over),
        running_over_quota=len(over),
        gpus_over_quota=sum(r.gpus for r in over),
        by_job={e.job.pk: e for e in entries},
    )


def start_waits(*, after: datetime | None = None, until: datetime | None = None) -> Iterator[tuple[datetime, float]]:
    """(start, seconds waited) for every start of every job (all pods running) in (after, until].

    A wait runs from when the job last entered the queue, its submit or its requeue after a
    failed attempt or a preemption, to that start. Counting restarts from the submit would add
    the job's earlier runs to its wait, and one long job restarted once would look like a
    starved queue.
    """
    # Events are numbered in the order they happened: the latest entry into the queue before this start.
    queued = JobEvent.objects.filter(job=OuterRef("job"), to_state=JobState.PENDING, id__lt=OuterRef("id")).order_by("-id")
    starts = JobEvent.objects.filter(to_state=JobState.RUNNING)
    if after is not None:
        starts = starts.filter(at__gt=after)
    if until is not None:
        starts = starts.filter(at__lte=until)
    rows = starts.annotate(queued_at=Subquery(queued.values("at")[:1])).values_list("at", "queued_at")
    for started, queued_at in rows.iterator():
        if queued_at is not None:
            yield started, max(0.0, (started - queued_at).total_seconds())
