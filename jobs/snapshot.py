"""Reads the database into the policy's plain data: node capacity and the pending queue."""

from __future__ import annotations

from django.conf import settings

from jobs.models import Job, NodeState
from jobs.scheduling.model import NodeView, PendingJob
from jobs.selectors import nodes_with_usage
from jobs.states import JobState


def class_rank(priority_class: str) -> int:
    classes = settings.MUSTER_PRIORITY_CLASSES
    return classes.index(priority_class) if priority_class in classes else len(classes)


def node_views() -> tuple[NodeView, ...]:
    """Every known node with the GPUs not held by a live allocation."""
    return tuple(
        NodeView(
            name=n.name,
            gpus_total=n.gpus_total,
            gpus_free=max(0, n.gpus_total - (n.gpus_held or 0)),
            rack=n.rack,
            schedulable=n.state == NodeState.READY,
        )
        for n in nodes_with_usage()
    )


def pending_jobs() -> tuple[PendingJob, ...]:
    rows = Job.objects.filter(state=JobState.PENDING).values_list("id", "nodes", "gpus_per_node", "priority_class", "submitted_at")
    return tuple(
        PendingJob(id=pk, nodes=nodes, gpus_per_node=gpus, class_rank=class_rank(pc), submitted_at=submitted.timestamp())
        for pk, nodes, gpus, pc, submitted in rows
    )
