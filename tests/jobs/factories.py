"""Jobs, nodes and allocations in a given state, without going through submit and the cluster.

    JobFactory(owner=alice)                                   PENDING, submitted now
    JobFactory(owner=alice, queued=True, history=True)        ... as a fresh submit leaves it, with its PENDING event
    JobFactory(owner=alice, running=True, nodes=2)            RUNNING since 2 h ago on two new nodes, 8 GPUs each
    JobFactory(running=True, held=[("n1", 2), ("n2", 8)])     ... holding 2 GPUs on n1 and 8 on n2 (nodes by name)
    JobFactory(finished=True)                                 SUCCEEDED: ran from 2 h to 1 h ago, allocations released
    JobFactory(..., history=True)                             with the JobEvents a real run would have written

A job that was placed (scheduled_at set) gets one allocation per rank on new nodes unless `held`
says otherwise (`held=[]`: none); allocations start at started_at (or scheduled_at, or
submitted_at; `held__at=` overrides) and are released at finished_at for an ended job
(`held__released_at=` overrides).
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import factory
from django.utils import timezone

from jobs.models import Allocation, Job, JobEvent, Node
from jobs.states import JobState
from tests.accounts.factories import UserFactory


def hours_ago(hours: float) -> datetime:
    return timezone.now() - timedelta(hours=hours)


class NodeFactory(factory.django.DjangoModelFactory):
    """A ready node; by name, an existing one is reused (`NodeFactory(name="n1")` twice is one node)."""

    class Meta:
        model = Node
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"node-{n:03d}")
    gpus_total = 8
    rack = "r1"


class JobFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Job
        skip_postgeneration_save = True

    class Params:
        queued = factory.Trait(pending_reason_code="NEW", pending_reason="Waiting for the next scheduling cycle.")
        scheduled = factory.Trait(
            state=JobState.SCHEDULED,
            attempt=1,
            submitted_at=factory.LazyFunction(lambda: hours_ago(2)),
            scheduled_at=factory.SelfAttribute("submitted_at"),
        )
        running = factory.Trait(
            state=JobState.RUNNING,
            submitted_at=factory.LazyFunction(lambda: hours_ago(2)),
            attempt=1,
            scheduled_at=factory.SelfAttribute("submitted_at"),
            started_at=factory.SelfAttribute("scheduled_at"),
        )
        finished = factory.Trait(
            state=JobState.SUCCEEDED,
            attempt=1,
            exit_code=0,
            submitted_at=factory.LazyFunction(lambda: hours_ago(2)),
            scheduled_at=factory.SelfAttribute("submitted_at"),
            started_at=factory.SelfAttribute("scheduled_at"),
            finished_at=factory.LazyAttribute(lambda o: o.started_at + timedelta(hours=1)),
        )

    owner = factory.SubFactory(UserFactory)
    team = None
    name = "train"
    image = "busybox:1"
    command = factory.LazyFunction(lambda: ["true"])
    nodes = 1
    gpus_per_node = 8
    wall_time_seconds = 86400
    priority_class = "normal"
    state = JobState.PENDING
    submitted_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def held(obj: Job, create: bool, extracted: Any, **kwargs: Any) -> None:
        if not create:
            return
        if extracted is None:
            extracted = obj.scheduled_at is not None
        if extracted is True:
            extracted = [(NodeFactory(gpus_total=max(8, obj.gpus_per_node)), obj.gpus_per_node) for _ in range(obj.nodes)]
        at = kwargs.get("at") or obj.started_at or obj.scheduled_at or obj.submitted_at
        released = kwargs["released_at"] if "released_at" in kwargs else (None if obj.is_active else obj.finished_at)
        for rank, entry in enumerate(extracted or []):
            node, gpus = entry if isinstance(entry, tuple) else (entry, obj.gpus_per_node)
            if isinstance(node, str):
                node = NodeFactory(name=node)
            Allocation.objects.create(
                job=obj, node=node, attempt=max(obj.attempt, 1), rank=rank, gpus=gpus, allocated_at=at, released_at=released
            )

    @factory.post_generation
    def history(obj: Job, create: bool, extracted: Any, **kwargs: Any) -> None:
        """The state events a real run writes: submitted, scheduled, running, ended, as far as the job got."""
        if not (create and extracted):
            return
        steps = [("", JobState.PENDING, obj.submitted_at, f"Submitted by {obj.owner.get_username()}.")]
        if obj.scheduled_at:
            steps.append((JobState.PENDING, JobState.SCHEDULED, obj.scheduled_at, "scheduled"))
        if obj.started_at:
            steps.append((JobState.SCHEDULED, JobState.RUNNING, obj.started_at, "running"))
        if obj.finished_at:
            steps.append((JobState.RUNNING, obj.state, obj.finished_at, f"exit {obj.exit_code}"))
        for from_state, to_state, at, reason in steps:
            JobEvent.objects.create(job=obj, at=at, from_state=from_state, to_state=to_state, reason=reason, attempt=obj.attempt)


class AllocationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Allocation

    job = factory.SubFactory(JobFactory, running=True, held=[])
    node = factory.SubFactory(NodeFactory)
    attempt = factory.LazyAttribute(lambda o: max(o.job.attempt, 1))
    rank = 0
    gpus = factory.SelfAttribute("job.gpus_per_node")
    allocated_at = factory.LazyAttribute(lambda o: o.job.started_at or o.job.submitted_at)
    released_at = None
