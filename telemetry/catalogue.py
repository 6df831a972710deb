"""The metric catalogue: what Muster charts and stores per job, and what each series is called at the source.

A metric has a stable key (used in the API, the database and the charts) and a series name at
its source: by default the NVIDIA DCGM exporter's field names, node exporter's InfiniBand port
counters and NCCL Inspector's Prometheus metric. `MUSTER_TELEMETRY_METRIC_NAMES`
(`key=NAME,...`) renames them for a site whose exporters differ.

Units are the source's own (DCGM reports utilisation in percent, activities as ratios 0-1,
framebuffer in MiB, PCIe/NVLink as bytes per second), so stored values equal what the
exporter reported.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from django.conf import settings


class Scope(StrEnum):
    GPU = "gpu"  # one series per GPU (DCGM)
    NODE = "node"  # one series per node (node exporter)
    JOB = "job"  # one series per job (NCCL)


class Level(StrEnum):
    """How finely a series is read: every GPU, every node (its GPUs combined), or the whole job."""

    GPU = "gpu"
    NODE = "node"
    JOB = "job"


LEVEL_ORDER = {Level.GPU: 0, Level.NODE: 1, Level.JOB: 2}


@dataclass(frozen=True)
class Metric:
    key: str
    default_name: str
    label: str
    # Names a metric among others of one chart, e.g. "TX" in "TX rank 0 · node-a".
    short: str
    unit: str
    scope: Scope
    # Decimals kept in chart data (display only; the API returns stored values as they are).
    decimals: int
    # A rate in bytes/s whose integral over the run (bytes) goes in the job's summary.
    total: bool = False
    # A counter at the source (Prometheus needs rate() over it), rather than a gauge.
    counter: bool = False

    @property
    def name(self) -> str:
        """The series name at the source, after the site's renames."""
        return settings.MUSTER_TELEMETRY_METRIC_NAMES.get(self.key, self.default_name)

    def finest_level(self, level: Level) -> Level:
        """A node-scope metric has no per-GPU series: asked per GPU, it answers per node."""
        scope_level = Level(self.scope.value)
        return level if LEVEL_ORDER[level] >= LEVEL_ORDER[scope_level] else scope_level


_METRICS = (
    Metric("gpu_util", "DCGM_FI_DEV_GPU_UTIL", "GPU utilisation", "util", "%", Scope.GPU, 1),
    Metric("sm_active", "DCGM_FI_PROF_SM_ACTIVE", "SM activity", "SM", "ratio", Scope.GPU, 4),
    Metric("tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Tensor-core activity", "tensor", "ratio", Scope.GPU, 4),
    Metric("dram_active", "DCGM_FI_PROF_DRAM_ACTIVE", "Memory bandwidth activity", "DRAM", "ratio", Scope.GPU, 4),
    Metric("fb_used", "DCGM_FI_DEV_FB_USED", "GPU memory used", "memory", "MiB", Scope.GPU, 0),
    Metric("pcie_tx", "DCGM_FI_PROF_PCIE_TX_BYTES", "PCIe TX", "TX", "B/s", Scope.GPU, 0, total=True),
    Metric("pcie_rx", "DCGM_FI_PROF_PCIE_RX_BYTES", "PCIe RX", "RX", "B/s", Scope.GPU, 0, total=True),
    Metric("nvlink_tx", "DCGM_FI_PROF_NVLINK_TX_BYTES", "NVLink TX", "TX", "B/s", Scope.GPU, 0, total=True),
    Metric("nvlink_rx", "DCGM_FI_PROF_NVLINK_RX_BYTES", "NVLink RX", "RX", "B/s", Scope.GPU, 0, total=True),
    Metric("power", "DCGM_FI_DEV_POWER_USAGE", "Power", "power", "W", Scope.GPU, 1),
    Metric("temp", "DCGM_FI_DEV_GPU_TEMP", "GPU temperature", "temp", "°C", Scope.GPU, 0),
    Metric(
        "ib_tx", "node_infiniband_port_data_transmitted_bytes_total", "Inter-node TX (InfiniBand)", "TX", "B/s", Scope.NODE, 0, True, True
    ),
    Metric("ib_rx", "node_infiniband_port_data_received_bytes_total", "Inter-node RX (InfiniBand)", "RX", "B/s", Scope.NODE, 0, True, True),
    Metric("nccl_busbw", "nccl_bus_bandwidth_gbs", "NCCL bus bandwidth", "busbw", "GB/s", Scope.JOB, 2),
)

METRICS: dict[str, Metric] = {m.key: m for m in _METRICS}


def metric_lookup(key_or_name: str) -> Metric | None:
    """A metric by its key (`gpu_util`) or by its source name (`DCGM_FI_DEV_GPU_UTIL`)."""
    if key_or_name in METRICS:
        return METRICS[key_or_name]
    return next((m for m in METRICS.values() if m.name == key_or_name), None)
