"""Reads of jobs and nodes, with who may see what."""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Prefetch, Q, QuerySet, Sum

from jobs.models import Allocation, Job, Node, NodeState
from jobs.scheduling.policy import queue_order


def jobs_visible_to(user: AbstractBaseUser | AnonymousUser) -> QuerySet[Job]:
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


def nodes_with_usage() -> QuerySet[Node]:
    """Known nodes, each annotated with `gpus_held` by live allocations."""
    return (
        Node.objects.exclude(state=NodeState.GONE)
        .annotate(gpus_held=Sum("allocations__gpus", filter=Q(allocations__released_at__isnull=True)))
        .order_by("name")
    )


def queue_jobs() -> list[Job]:
    """Pending jobs in the order the scheduler considers them."""
    from jobs.snapshot import pending_jobs

    order = [p.id for p in queue_order(pending_jobs())]
    jobs = Job.objects.select_related("owner", "team").in_bulk(order)
    return [jobs[pk] for pk in order if pk in jobs]
