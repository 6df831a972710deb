"""A job's telemetry summary, computed exactly from its job-level series.

A job-level bucket combines every GPU's samples (its mean is weighted by sample counts), so
means, peaks and integrals over job-level series equal those over all the per-GPU samples:
the summary reads one series per metric and run, not 128.
"""

from __future__ import annotations

from typing import Any

from telemetry.downsampling import samples_integral, samples_max, samples_mean
from telemetry.sources.base import Series

MEANS = {"gpu_util": "gpu_util_mean", "sm_active": "sm_active_mean", "tensor_active": "tensor_active_mean"}
TOTALS = {
    "pcie_tx": "pcie_tx_bytes",
    "pcie_rx": "pcie_rx_bytes",
    "nvlink_tx": "nvlink_tx_bytes",
    "nvlink_rx": "nvlink_rx_bytes",
    "ib_tx": "ib_tx_bytes",
    "ib_rx": "ib_rx_bytes",
}
# The metrics whose job-level series the summary needs.
SUMMARY_METRICS = (*MEANS, "fb_used", *TOTALS, "nccl_busbw")


def total(series: list[Series]) -> float | None:
    """The integral of a rate over every run: each series' samples times its sample interval."""
    parts = [samples_integral([s.buckets], s.sample_seconds) for s in series]
    present = [p for p in parts if p is not None]
    return sum(present) if present else None


def summary_fields(job_level: dict[str, list[Series]], *, pushed_mean: float | None, pushed_count: int) -> dict[str, Any]:
    """Fields of JobTelemetrySummary from the job-level series of each metric (all runs) and the pushed NCCL results."""
    util = job_level.get("gpu_util", [])
    fields: dict[str, Any] = {"gpu_seconds": sum(s.buckets.samples * s.sample_seconds for s in util)}
    for key, name in MEANS.items():
        fields[name] = samples_mean(s.buckets for s in job_level.get(key, []))
    fields["memory_peak_mib"] = samples_max(s.buckets for s in job_level.get("fb_used", []))
    for key, name in TOTALS.items():
        fields[name] = total(job_level.get(key, []))
    # What the job measured itself beats what the source estimated.
    nccl = [s for s in job_level.get("nccl_busbw", []) if s.buckets.samples]
    if pushed_count:
        fields.update(nccl_busbw_mean_gbs=pushed_mean, nccl_busbw_origin="pushed", nccl_samples=pushed_count)
    elif nccl:
        fields.update(
            nccl_busbw_mean_gbs=samples_mean(s.buckets for s in nccl),
            nccl_busbw_origin=nccl[0].origin,
            nccl_samples=sum(s.buckets.samples for s in nccl),
        )
    else:
        fields.update(nccl_busbw_mean_gbs=None, nccl_busbw_origin="", nccl_samples=0)
    return fields
