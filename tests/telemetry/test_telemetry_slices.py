"""A GPU-slice job's simulated telemetry is its slice's: memory within the slice, traffic by its share of the GPU."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Allocation
from telemetry.catalogue import METRICS, Level
from telemetry.selectors import job_run, job_target
from telemetry.services import telemetry_store_run
from telemetry.sources.simulated import SimulatedTelemetry
from tests.jobs.factories import JobFactory, NodeFactory


def test_a_mig_slice_shows_its_own_memory_and_its_share_of_the_traffic(user: Any) -> None:
    ended = timezone.now() - timedelta(minutes=1)
    started = ended - timedelta(seconds=1200)
    job = JobFactory(
        owner=user, finished=True, nodes=1, gpus_per_node=1, simulate={"duration_seconds": 1200}, submitted_at=started,
        started_at=started, finished_at=ended, history=True, held=[],
    )  # fmt: skip
    node = NodeFactory(
        name="mig-0", sharing="mig", slices_per_gpu=7, slice_gpus=1 / 7, slice_memory_gb=10.0, slice_resource="nvidia.com/mig-1g.10gb"
    )
    Allocation.objects.create(job=job, node=node, attempt=1, rank=0, gpus=1 / 7, gpu_slot=3, allocated_at=started, released_at=ended)
    assert telemetry_store_run(job_id=job.pk, attempt=1) > 0
    summary = job.telemetry_summary
    slice_mib = 10e9 / 2**20
    assert 0.5 * slice_mib < summary.memory_peak_mib <= slice_mib  # a 1g.10gb slice: at most 10 GB, not 50
    # Its PCIe traffic is a seventh of what the same work moves on a whole GPU.
    run = job_run(job)
    target = job_target(job, run)
    whole = replace(target, ranks=tuple(replace(p, gpu_share=1.0, slice_memory_mib=0.0) for p in target.ranks))
    source = SimulatedTelemetry.from_settings()
    start, end = run.window(ended)

    def total(t: Any) -> float:
        (series,) = source.read(t, METRICS["pcie_rx"], start=start, end=end, step=60, level=Level.GPU)
        return sum(m * c for m, c in zip(series.buckets.mean, series.buckets.count, strict=True) if c)

    assert total(target) == pytest.approx(total(whole) / 7)
