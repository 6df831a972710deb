"""The cycle's snapshot knows each job's preemptions, from its history: what the anti-thrash rules read."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle import job_place, job_preempt
from jobs.models import Job, Node
from scheduler.snapshot import build_snapshot
from tests.jobs.factories import JobFactory

pytestmark = pytest.mark.django_db


def test_a_preempted_job_carries_when_it_was_preempted_and_a_running_one_how_often() -> None:
    now = timezone.now()
    job = JobFactory(running=True, priority_class="preemptible")
    node = Job.objects.get(pk=job.pk).allocations.get().node
    first = now - timedelta(minutes=30)
    job = job_preempt(job, reason="Preempted for job 9: it is of a lower priority class.", for_job_id=9, now=first)

    snapshot = build_snapshot(now)
    (pending,) = [p for p in snapshot.pending if p.id == job.pk]
    assert pending.preempted_at == pytest.approx(first.timestamp())

    # Placed again and preempted once more: running, it counts two preemptions.
    job = job_place(job, node_names=(node.name,), gpus_held=(8,), over_quota=False, node_ids={node.name: node.pk}, now=now)
    job = job_preempt(job, reason="again", for_job_id=10, now=now + timedelta(minutes=20))
    job = job_place(
        job, node_names=(node.name,), gpus_held=(8,), over_quota=False, node_ids=dict(Node.objects.values_list("name", "pk")), now=now
    )
    (running,) = [r for r in build_snapshot(now + timedelta(minutes=40)).running if r.id == job.pk]
    assert running.preemptions == 2


def test_a_job_never_preempted_has_no_history() -> None:
    job = JobFactory(running=True)
    (running,) = [r for r in build_snapshot(timezone.now()).running if r.id == job.pk]
    assert running.preemptions == 0
    waiting = JobFactory()
    (pending,) = [p for p in build_snapshot(timezone.now()).pending if p.id == waiting.pk]
    assert pending.preempted_at is None
