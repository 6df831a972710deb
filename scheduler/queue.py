"""The queue as the next cycle will see it, computed at read time for the API, the pages and the dashboard."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.utils import timezone

from jobs.models import Job
from policy.model import Priority
from policy.priority import prioritize, priority_order
from scheduler.snapshot import build_snapshot, policy_config


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
