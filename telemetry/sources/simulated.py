"""The simulated source: plausible, deterministic GPU and network series for jobs of the simulated cluster.

So `make run` shows live charts without a GPU in sight. Every value is a function of (job,
attempt, rank, GPU, metric, time), so a chart drawn twice, or a run stored when it ends,
shows the same numbers. What it models, roughly as an H100 cluster behaves:

- utilisation falls with job size (more time in communication) and falls again when the
  gang spans racks; it ramps up while the job loads, and dips every 30 minutes for a
  checkpoint (PCIe TX spikes as the checkpoint goes to host memory);
- NCCL bus bandwidth: NVLink inside one node, InfiniBand inside one rack, and about half
  of that when the gang crosses the (oversubscribed) spine between racks;
- a quarter of jobs carry one of the problems the efficiency flags look for (tensor cores
  unused, an idle rank, idle GPUs, an input-bound loader), chosen by a hash of the job id.

Samples are every MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS, or twice per bucket when the
buckets asked for are longer (a day of one job is then 2,880 samples per GPU, not 17,280).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings

from telemetry.catalogue import Level, Metric, Scope
from telemetry.downsampling import bucketize_regular
from telemetry.rollups import roll_up
from telemetry.sources.base import JobTarget, Series

_NOISE_SIZE = 4096
_MASK = _NOISE_SIZE - 1
# A fixed table of uniform noise in [-1, 1): indexing it is far cheaper than hashing per sample.
_NOISE = tuple(random.Random(20240905).uniform(-1.0, 1.0) for _ in range(_NOISE_SIZE))
_METRIC_SEEDS = {
    "gpu_util": 0,
    "sm_active": 101,
    "tensor_active": 211,
    "dram_active": 307,
    "fb_used": 401,
    "pcie_tx": 503,
    "pcie_rx": 601,
    "nvlink_tx": 701,
    "nvlink_rx": 809,
    "power": 907,
    "temp": 1009,
    "ib_tx": 1103,
    "ib_rx": 1201,
    "nccl_busbw": 1301,
}

CHECKPOINT_PERIOD = 1800.0
CHECKPOINT_SECONDS = 60.0
# Steady bus bandwidth (GB/s) of a large all-reduce: NVLink in one node, InfiniBand in one rack.
BUSBW_ONE_NODE = 450.0
BUSBW_ONE_RACK = 370.0
# Crossing racks goes through an oversubscribed spine.
CROSS_RACK_FACTOR = 0.55


class Profile(StrEnum):
    HEALTHY = "healthy"
    FP32 = "fp32"  # tensor cores unused
    IDLE_RANK = "idle_rank"  # the last rank's GPUs wait while the others work
    INPUT_BOUND = "input_bound"  # the data loader cannot keep up: low, jumpy utilisation
    IDLE_GPUS = "idle_gpus"  # two GPUs of rank 0 are given nothing to do


_PROBLEMS = (Profile.FP32, Profile.IDLE_RANK, Profile.INPUT_BOUND, Profile.IDLE_GPUS)


def job_profile(job_id: int) -> Profile:
    """A quarter of jobs get one of the problems, by a stable hash of the id."""
    h = int.from_bytes(hashlib.blake2b(str(job_id).encode(), digest_size=2).digest(), "big") % 16
    return _PROBLEMS[h] if h < len(_PROBLEMS) else Profile.HEALTHY


def nccl_bus_bandwidth(target: JobTarget) -> float | None:
    """Steady NCCL bus bandwidth (GB/s) for the gang's shape; None for a single GPU (no collectives)."""
    if target.gpus <= 1:
        return None
    if target.nodes == 1:
        return BUSBW_ONE_NODE
    bandwidth = BUSBW_ONE_RACK * (1 - 0.03 * math.log2(target.nodes))
    return bandwidth * CROSS_RACK_FACTOR if len(target.racks) > 1 else bandwidth


def steady_utilisation(target: JobTarget, profile: Profile) -> float:
    """Percent busy once loaded: larger gangs spend more time communicating, crossing racks more so."""
    util = 96.0 - 3.5 * math.log2(max(1, target.gpus))
    if len(target.racks) > 1:
        util -= 6.0
    if profile == Profile.INPUT_BOUND:
        util *= 0.5
    return util


@dataclass(frozen=True)
class _Shape:
    """Per-attempt constants of the model."""

    target: JobTarget
    profile: Profile
    steady: float
    ramp: float
    busbw: float | None
    memory_mib: float

    def gpu_base(self, rank: int, gpu: int) -> float:
        idle_rank = self.profile == Profile.IDLE_RANK and self.target.nodes > 1 and rank == self.target.nodes - 1
        idle_gpu = (
            self.profile == Profile.IDLE_GPUS and rank == 0 and gpu >= self.target.ranks[0].gpus - 2 and self.target.ranks[0].gpus > 2
        )
        if idle_rank:
            return 1.0
        if idle_gpu:
            return 0.0
        # GPUs of one job differ a little (thermals, stragglers).
        return self.steady + 2.0 * _NOISE[(self.seed(rank, gpu, "gpu_util") * 31) & _MASK]

    def seed(self, rank: int, gpu: int, metric: str) -> int:
        t = self.target
        return (t.job_id * 7919 + t.attempt * 104_729 + rank * 131 + (gpu + 1) * 17 + _METRIC_SEEDS[metric] * 1031) & 0xFFFFFFF


@dataclass(frozen=True)
class _Window:
    key: tuple
    times: list[int]
    hashes: list[int]  # per-sample index into the noise table, before the series' seed
    rel: list[float]  # seconds since the run started
    checkpoint: list[bool]


@dataclass
class SimulatedTelemetry:
    name: str = "simulated"
    interval: int = 5
    # Tests pin a job's profile instead of hunting for an id with the right hash.
    profile_for: Callable[[int], Profile] = field(default=job_profile)
    _cache: dict[tuple[Any, ...], Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_settings(cls) -> SimulatedTelemetry:
        return cls(interval=max(1, settings.MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS))

    def resolution(self, target: JobTarget) -> int:
        return self.interval

    def shape(self, target: JobTarget) -> _Shape:
        profile = self.profile_for(target.job_id)
        memory = 40_000.0 + (target.job_id * 2_654_435_761 % 35_000)
        ramp = min(120.0, max(self.interval, 0.1 * target.expected_seconds))
        return _Shape(target, profile, steady_utilisation(target, profile), ramp, nccl_bus_bandwidth(target), memory)

    def sample_times(self, target: JobTarget, start: float, end: float, step: int) -> tuple[list[int], int]:
        """Sample instants inside the attempt's run and [start, end), and the interval between them."""
        interval = self.interval
        if step >= 2 * interval:
            interval = step // 2 if step % 2 == 0 else step
        lo = max(start, target.started)
        hi = min(end, target.ended if target.ended is not None else end)
        first = math.ceil(lo / interval) * interval
        return list(range(int(first), math.ceil(hi), interval)), interval

    def read(self, target: JobTarget, metric: Metric, *, start: float, end: float, step: int, level: Level) -> list[Series]:
        level = metric.finest_level(level)
        times, interval = self.sample_times(target, start, end, step)
        shape = self.shape(target)
        window = self._window(target, times)

        def series(values: list[float], lvl: Level, node: str, gpu: int, rank: int | None) -> Series:
            buckets = bucketize_regular(times[0] if times else 0, interval, values, step, start=start, end=end)
            return Series(metric.key, lvl, node, gpu, rank, buckets, interval, self.name, target.attempt)

        if metric.scope == Scope.JOB:
            values = self._job_values(shape, metric.key, window)
            return [] if values is None else [series(values, Level.JOB, "", -1, None)]
        finest: list[Series] = []
        for placement in target.ranks:
            if metric.scope == Scope.NODE:
                values = self._node_values(shape, metric.key, placement.rank, window)
                finest.append(series(values, Level.NODE, placement.node, -1, placement.rank))
                continue
            for g in range(placement.gpus):
                values = self._gpu_values(shape, metric.key, placement.rank, g, window)
                finest.append(series(values, Level.GPU, placement.node, g, placement.rank))
        return roll_up(finest, level)

    # --- the model ------------------------------------------------------------------------------

    def _window(self, target: JobTarget, times: list[int]) -> _Window:
        """Per-sample quantities shared by every GPU and metric of one read, computed once."""
        key = ("window", target, times[0] if times else 0, len(times), times[1] - times[0] if len(times) > 1 else 0)
        window = self._cache.get(key)
        if window is None:
            rel = [t - target.started for t in times]
            window = _Window(
                key=key,
                times=times,
                hashes=[(t * 2_654_435_761) >> 7 for t in times],
                rel=rel,
                checkpoint=[r >= CHECKPOINT_PERIOD and r % CHECKPOINT_PERIOD < CHECKPOINT_SECONDS for r in rel],
            )
            self._remember(key, window)
        return window

    def _remember(self, key: tuple, value: object) -> None:
        if len(self._cache) > 1024:
            self._cache.clear()
        self._cache[key] = value

    @staticmethod
    def _noise(seed: int, window: _Window) -> list[float]:
        return [_NOISE[(seed + h) & _MASK] for h in window.hashes]

    def _utilisation(self, shape: _Shape, rank: int, gpu: int, window: _Window) -> list[float]:
        """Percent busy per sample. Every other metric of a GPU derives from it, so it is computed once per read window."""
        key = ("util", window.key, rank, gpu)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        base = shape.gpu_base(rank, gpu)
        jitter = 15.0 if shape.profile == Profile.INPUT_BOUND else 4.0
        ramp = shape.ramp
        out = []
        for rel, n, in_checkpoint in zip(
            window.rel, self._noise(shape.seed(rank, gpu, "gpu_util"), window), window.checkpoint, strict=True
        ):
            if rel < ramp:
                u = base * rel / ramp + 2.0 * n
            elif in_checkpoint:
                u = min(base, 3.0 + 2.0 * n)
            else:
                u = base + jitter * n
            out.append(0.0 if u < 0.0 else 100.0 if u > 100.0 else u)
        self._remember(key, out)
        return out

    def _gpu_values(self, shape: _Shape, key: str, rank: int, gpu: int, window: _Window) -> list[float]:
        util = self._utilisation(shape, rank, gpu, window)
        if key == "gpu_util":
            return util
        noise = self._noise(shape.seed(rank, gpu, key), window)
        if key == "sm_active":
            return [max(0.0, u * (0.0082 + 0.0005 * n)) for u, n in zip(util, noise, strict=True)]
        if key == "tensor_active":
            share = 0.01 if shape.profile == Profile.FP32 else 0.62
            scale = 0.0082 * share
            return [max(0.0, u * scale * (1 + 0.05 * n)) for u, n in zip(util, noise, strict=True)]
        if key == "dram_active":
            return [max(0.0, 0.05 + 0.0045 * u + 0.02 * n) for u, n in zip(util, noise, strict=True)]
        if key == "fb_used":
            idle = shape.gpu_base(rank, gpu) == 0.0
            full = 600.0 if idle else shape.memory_mib
            wobble = 0.0 if idle else 150.0
            ramp = shape.ramp
            return [600.0 + (full - 600.0) * min(1.0, rel / ramp) + wobble * n for rel, n in zip(window.rel, noise, strict=True)]
        if key == "pcie_rx":
            return [max(0.0, 1.2e7 * u + 0.15e9 * (1 + n)) for u, n in zip(util, noise, strict=True)]
        if key == "pcie_tx":
            # Checkpoints go from GPU memory to the host over PCIe.
            return [
                9.0e9 + 1.0e9 * n if c else max(0.0, 0.25e7 * u + 0.05e9 * (1 + n))
                for u, n, c in zip(util, noise, window.checkpoint, strict=True)
            ]
        if key in ("nvlink_tx", "nvlink_rx"):
            if shape.target.ranks[0].gpus < 2:
                return [0.0] * len(util)
            return [max(0.0, 1.4e9 * u * (0.9 + 0.1 * n)) for u, n in zip(util, noise, strict=True)]
        if key == "power":
            return [75.0 + 6.0 * u + 10.0 * n for u, n in zip(util, noise, strict=True)]
        if key == "temp":
            return [33.0 + 0.42 * u + n for u, n in zip(util, noise, strict=True)]
        raise ValueError(f"the simulated source has no per-GPU model for {key!r}")

    def _node_values(self, shape: _Shape, key: str, rank: int, window: _Window) -> list[float]:
        # Inter-node traffic follows the node's GPU work and the gang's bus bandwidth.
        if shape.target.nodes < 2 or shape.busbw is None:
            return [0.0] * len(window.times)
        util = self._utilisation(shape, rank, 0, window)
        per_node = shape.busbw * 1e9 * 0.45 / 100
        noise = self._noise(shape.seed(rank, -1, key), window)
        return [max(0.0, per_node * u * (0.95 + 0.05 * n)) for u, n in zip(util, noise, strict=True)]

    def _job_values(self, shape: _Shape, key: str, window: _Window) -> list[float] | None:
        if shape.busbw is None:
            return None
        ramp, busbw = shape.ramp, shape.busbw
        noise = self._noise(shape.seed(0, -1, key), window)
        # No collectives while loading or checkpointing: gaps, as NCCL would report.
        return [
            math.nan if rel < ramp or c else busbw * (0.96 + 0.04 * n)
            for rel, c, n in zip(window.rel, window.checkpoint, noise, strict=True)
        ]
