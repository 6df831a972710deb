"""A queue as a cycle leaves it, bulk-created for the benchmarks: pending jobs with their stored plan, and running jobs.

Import after `django.setup()`: the benchmarks choose their database before Django reads its settings.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Count
from django.utils import timezone

from jobs.models import Allocation, EstimateKind, Job, JobEvent, Node
from jobs.states import JobState
from scheduler.plans import store_queue_summary
from telemetry.latency import latency_recount

if TYPE_CHECKING:
    from django.contrib.auth.models import User

NODES, GPUS = 16, 8
RESERVED, PLANNED = 8, 500
SHAPES = [(1, 1), (1, 4), (1, 8), (2, 8), (4, 8), (16, 8)]


def plan(position: int, now: Any) -> dict[str, Any]:
    """What a cycle leaves on the job at `position`: a reservation for the first few, planned starts, then lower bounds."""
    start = now + timedelta(minutes=10 + position)
    fields: dict[str, Any] = {
        "queue_position": position,
        "priority": 10_000.0 - position,
        "priority_factors": {"fair_share": [0.5, 500.0], "age": [0.1, 50.0], "class": [0.5, 5000.0], "size": [0.06, 6.0]},
        "pending_reason_code": "NO_ROOM",
        "pending_reason": "Needs 2 whole nodes with 8 GPUs; 0 are free.",
        "estimated_start": start,
    }
    if position <= RESERVED:
        nodes = [f"sim-node-{(2 * position + i) % NODES:03d}" for i in range(2)]
        fields.update(estimate_kind=EstimateKind.RESERVED, reserved_nodes=nodes, reserved_start=start, promised_start=start)
    else:
        fields["estimate_kind"] = EstimateKind.PLANNED if position <= RESERVED + PLANNED else EstimateKind.AFTER
    return fields


def pending_job(owner: User, position: int, now: Any) -> Job:
    nodes, gpus = SHAPES[position % len(SHAPES)]
    return Job(
        owner=owner, name=f"bench-{position}", image="busybox:1", command=["true"], nodes=nodes, gpus_per_node=gpus,
        wall_time_seconds=3600, priority_class="normal", state=JobState.PENDING,
        submitted_at=now - timedelta(seconds=100_000 - position), **plan(position, now),
    )  # fmt: skip


def add_pending(owners: list[User], first: int, last: int) -> None:
    """Pending jobs at positions first..last, submitted oldest first, in bulk inserts."""
    now = timezone.now()
    jobs = (pending_job(owners[position % len(owners)], position, now) for position in range(first, last + 1))
    Job.objects.bulk_create(jobs, batch_size=500)
    planned = Job.objects.filter(state=JobState.PENDING, queue_position__isnull=False).order_by()
    store_queue_summary(dict(planned.values_list("pending_reason_code").annotate(n=Count("id"))))


def add_running(owner: User) -> None:
    """One 1 x 8 job on every node, running for an hour."""
    now = timezone.now()
    started = now - timedelta(hours=1)
    for rank, node in enumerate(Node.objects.order_by("name")):
        job = Job.objects.create(
            owner=owner, name=f"running-{rank}", image="busybox:1", command=["true"], nodes=1, gpus_per_node=GPUS,
            wall_time_seconds=7200, priority_class="normal", state=JobState.RUNNING, attempt=1,
            submitted_at=started, scheduled_at=started, started_at=started,
            over_quota=rank % 4 == 0,
        )  # fmt: skip
        Allocation.objects.create(job=job, node=node, attempt=1, rank=0, gpus=GPUS, allocated_at=started)
        # The events a start writes: the job page finds its run (and its telemetry) in them.
        JobEvent.objects.create(job=job, at=started, to_state=JobState.PENDING, reason="bench")
        JobEvent.objects.create(job=job, at=started, from_state=JobState.PENDING, to_state=JobState.RUNNING, reason="bench", attempt=1)


def running_job(owner: User, i: int, started: Any) -> Job:
    return Job(
        owner=owner, name=f"running-{i}", image="busybox:1", command=["true"], nodes=1, gpus_per_node=1,
        wall_time_seconds=7200 + i, priority_class="normal", state=JobState.RUNNING, attempt=1, submitted_at=started,
        scheduled_at=started, started_at=started, over_quota=i % 4 == 0,
    )  # fmt: skip


def add_running_jobs(owners: list[User], first: int, last: int, nodes: list[Node]) -> None:
    """Running jobs first..last of one GPU each, on `nodes` in turn (a GPU each, one per GPU of a node), in bulk
    inserts: with their allocation and the events a start writes. Their owners in turn, every fourth over quota."""
    now = timezone.now()
    # Each started a second apart within the last hour or two, as a real cluster's jobs did: no two alike.
    started = {i: now - timedelta(hours=1, seconds=i % 3600) for i in range(first, last + 1)}
    jobs = Job.objects.bulk_create((running_job(owners[i % len(owners)], i, started[i]) for i in range(first, last + 1)), batch_size=500)
    Allocation.objects.bulk_create(
        (
            Allocation(job=job, node=nodes[i % len(nodes)], attempt=1, rank=0, gpus=1, allocated_at=started[i])
            for i, job in enumerate(jobs, start=first)
        ),
        batch_size=500,
    )
    events = []
    for i, job in enumerate(jobs, start=first):
        at = started[i]
        events.append(JobEvent(job=job, at=at, to_state=JobState.PENDING, reason="bench"))
        events.append(JobEvent(job=job, at=at, from_state=JobState.PENDING, to_state=JobState.RUNNING, reason="bench", attempt=1))
    JobEvent.objects.bulk_create(events, batch_size=500)
    # Bulk-created starts bypass JobEvent.save and so the hook adding each to /metrics' latency totals: counted again.
    latency_recount()


def remove_pending_after(position: int) -> None:
    """Leave the first `position` pending jobs (their stored plan and the queue's summary as a cycle would leave them)."""
    Job.objects.filter(state=JobState.PENDING, queue_position__gt=position).delete()
    planned = Job.objects.filter(state=JobState.PENDING, queue_position__isnull=False).order_by()
    store_queue_summary(dict(planned.values_list("pending_reason_code").annotate(n=Count("id"))))
