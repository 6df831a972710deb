"""Which nodes Muster's allocations and the pods it did not start together over-fill (jobs.selectors)."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs.models import Allocation
from jobs.selectors import nodes_overfilled
from tests.jobs.factories import AllocationFactory, JobFactory, NodeFactory

pytestmark = pytest.mark.django_db


def test_a_node_is_overfilled_only_when_live_allocations_and_other_pods_hold_more_gpus_than_it_has() -> None:
    full = NodeFactory(name="full", gpus_foreign=4)
    over = NodeFactory(name="over", gpus_foreign=5)
    NodeFactory(name="foreign-only", gpus_foreign=8)
    JobFactory(scheduled=True, gpus_per_node=4, held=[full])
    JobFactory(scheduled=True, gpus_per_node=4, held=[over])
    # An ended job's allocation no longer counts, though its pod may still be terminating.
    JobFactory(finished=True, gpus_per_node=8, held=["foreign-only"])
    # Muster's own allocations alone are no other pods' doing (the policy never places so).
    JobFactory(scheduled=True, gpus_per_node=8, held=["muster-only"])
    JobFactory(scheduled=True, gpus_per_node=8, held=["muster-only"])

    assert nodes_overfilled(["full", "over", "foreign-only", "muster-only", "unknown"]) == ["over"]


def test_a_shared_node_is_judged_by_its_slices() -> None:
    shared = NodeFactory(name="shared", gpus_total=1, sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25, slices_foreign=2)
    job = JobFactory(running=True, gpus_per_node=1, held=[])
    for rank in range(2):
        AllocationFactory(job=job, node=shared, rank=rank, gpus=0.25, gpu_slot=0)
    assert nodes_overfilled(["shared"]) == []

    shared.slices_foreign = 3
    shared.save(update_fields=["slices_foreign"])
    assert nodes_overfilled(["shared"]) == ["shared"]
    Allocation.objects.filter(job=job, rank=1).update(released_at=timezone.now())
    assert nodes_overfilled(["shared"]) == []
