"""The simulated source: plausible, deterministic GPU and network series for jobs of the simulated cluster.

So `make run` shows live charts without a GPU in sight. Every value is a function of (job,
attempt, rank, GPU, metric, time), so a chart drawn twice, or a run stored when it ends,
shows the same numbers. What it models, roughly as a training job on an H100 cluster behaves:

- warm-up: the job first loads (data, weights: the GPUs near idle and memory filling in
  steps), then compiles and runs its first steps, utilisation climbing to its steady level
  (`WARMUP_*`);
- steady state: utilisation falls with job size (more time in communication) and falls again
  when the gang spans racks; it follows the job's training step (6-15 s per job): compute, then
  the gradient all-reduce in the last third of the step, when utilisation dips and NVLink and
  InfiniBand traffic burst. Each sample is the mean over its interval, as an exporter's is:
  sampled every few seconds the steps show as an uneven oscillation (each sample catches a
  different share of an all-reduce), sampled every minute they average out;
- periodic evaluation: every 10 minutes a 45 s evaluation pass, lighter on the GPUs and with
  no gradient traffic; every 30 minutes a checkpoint, the GPUs nearly idle while PCIe TX
  spikes as the weights go to host memory;
- stragglers now and then: in a job of several GPUs, one GPU sometimes falls behind for a
  minute or two and the others wait for it at every step (its row of the heatmap stays
  bright while the rest dim, and NCCL bandwidth drops);
- NCCL bus bandwidth: NVLink inside one node, InfiniBand inside one rack, and about half
  of that when the gang crosses the (oversubscribed) spine between racks; nothing while the
  job loads, evaluates or checkpoints (NCCL reports collectives, and there are none);
- TX and RX differ as on real hardware: PCIe RX (input batches to the GPU) outweighs TX
  except at checkpoints; NVLink and InfiniBand TX and RX are close (an all-reduce sends what
  it receives) but never identical;
- about a third of jobs carry one of the problems the efficiency flags look for (tensor
  cores unused, an idle rank, idle GPUs, an input-bound loader, a persistent straggler),
  chosen by a hash of the job id.

Samples are every MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS, or twice per bucket when the
buckets asked for are longer (a day of one job is then 2,880 samples per GPU, not 17,280).
The per-sample quantities shared by every GPU of a read (the phase of the run, the step's
oscillation, who straggles) are computed once per read; each GPU's loop is a few operations
per sample over a fixed noise table.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from django.conf import settings

from telemetry.catalogue import METRICS, Level, Metric, Scope
from telemetry.downsampling import bucketize_regular, samples_mean
from telemetry.rollups import reshape, roll_up
from telemetry.sources.base import JobTarget, RankPlacement, Series

_NOISE_SIZE = 4096
_MASK = _NOISE_SIZE - 1
# A fixed table of uniform noise in [-1, 1): indexing it is far cheaper than hashing per sample. (One generator for
# the whole table: a generator seeded afresh for each entry made every entry the same number, and every series a
# noiseless ramp.)
_RANDOM = random.Random(20240905)
_NOISE = tuple(_RANDOM.uniform(-1.0, 1.0) for _ in range(_NOISE_SIZE))
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

# Warm-up: a tenth of the expected run, at least two samples and at most 3 minutes; the first
# WARMUP_LOADING of it loading (GPUs near idle), the rest climbing to the steady level.
WARMUP_MAX_SECONDS = 180.0
WARMUP_SHARE = 0.1
WARMUP_LOADING = 0.4
CHECKPOINT_PERIOD = 1800.0
CHECKPOINT_SECONDS = 60.0
EVAL_PERIOD = 600.0
EVAL_SECONDS = 45.0
# An evaluation pass (forward only, smaller batches) keeps the GPUs this busy, relative to training.
EVAL_LEVEL = 0.45
# The training step: STEP_MIN_SECONDS to STEP_MIN_SECONDS + STEP_SPREAD_SECONDS long per job; its last
# STEP_ALL_REDUCE is the gradient all-reduce, when utilisation dips by STEP_DIP points and the links carry the traffic.
STEP_MIN_SECONDS = 6.0
STEP_SPREAD_SECONDS = 9.0
STEP_ALL_REDUCE = 0.35
STEP_DIP = 8.0
# Stragglers: each STRAGGLER_WINDOW of a run has a 1 in STRAGGLER_ODDS chance of one GPU falling behind for
# 60-150 s; the others wait, STRAGGLER_WAIT points less busy. A job of the STRAGGLER profile has one slow GPU
# for most of every window, and the others wait longer.
STRAGGLER_WINDOW = 1200
STRAGGLER_ODDS = 3
STRAGGLER_WAIT = 14.0
STRAGGLER_PROFILE_WAIT = 24.0
# An H100 SXM's memory (80 GB), in MiB.
H100_MEMORY_MIB = 81_559.0
# Steady bus bandwidth (GB/s) of a large all-reduce: NVLink in one node, InfiniBand in one rack.
BUSBW_ONE_NODE = 450.0
BUSBW_ONE_RACK = 370.0
# Crossing racks goes through an oversubscribed spine.
CROSS_RACK_FACTOR = 0.55

# What a sample's moment in the run is (per sample, shared by every GPU of a read).
_LOADING, _CLIMBING, _TRAINING, _EVALUATING, _CHECKPOINTING = range(5)


class Profile(StrEnum):
    HEALTHY = "healthy"
    FP32 = "fp32"  # tensor cores unused
    IDLE_RANK = "idle_rank"  # the last rank's GPUs wait while the others work
    INPUT_BOUND = "input_bound"  # the data loader cannot keep up: low, jumpy utilisation
    IDLE_GPUS = "idle_gpus"  # two GPUs of rank 0 are given nothing to do
    STRAGGLER = "straggler"  # one GPU is slow most of the time, and the whole gang waits for it


_PROBLEMS = (Profile.FP32, Profile.IDLE_RANK, Profile.INPUT_BOUND, Profile.IDLE_GPUS, Profile.STRAGGLER)


def job_profile(job_id: int) -> Profile:
    """About a quarter of jobs get one of the problems, by a stable hash of the id."""
    h = int.from_bytes(hashlib.blake2b(str(job_id).encode(), digest_size=2).digest(), "big") % 20
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


def _mix(*values: int) -> int:
    """A cheap, stable hash of a few integers into the noise table's range."""
    h = 0x9E3779B1
    for v in values:
        h = ((h ^ (v & 0xFFFFFFFF)) * 0x01000193) & 0xFFFFFFFF
        h ^= h >> 15
    return h


def _uniform(*values: int) -> float:
    """A stable number in [0, 1) for a few integers."""
    return (_NOISE[_mix(*values) & _MASK] + 1.0) / 2.0


@dataclass(frozen=True)
class _Shape:
    """Per-attempt constants of the model."""

    target: JobTarget
    profile: Profile
    steady: float
    warmup: float
    busbw: float | None
    memory_mib: float
    step_seconds: float
    # GPUs per rank number (a rank re-placed on another node by a resize keeps its shape).
    rank_gpus: dict[int, int] = field(default_factory=dict)
    # A GPU slice's share of its GPU and the memory it may use (MiB), per rank: a 1g.10gb MIG slice never shows 50 GiB.
    rank_slice: dict[int, tuple[float, float]] = field(default_factory=dict)

    @property
    def loading(self) -> float:
        return self.warmup * WARMUP_LOADING

    def gpu_index(self, rank: int, gpu: int) -> int:
        """The GPU's place in the gang (rank 0's GPUs first)."""
        return sum(g for r, g in self.rank_gpus.items() if r < rank) + gpu

    def is_idle(self, rank: int, gpu: int) -> bool:
        """A GPU the IDLE_GPUS profile gives nothing to do."""
        first = self.rank_gpus.get(0, 0)
        return self.profile == Profile.IDLE_GPUS and rank == 0 and first > 2 and gpu >= first - 2

    def gpu_base(self, rank: int, gpu: int) -> float:
        idle_rank = self.profile == Profile.IDLE_RANK and self.target.nodes > 1 and rank == self.target.nodes - 1
        if idle_rank:
            return 1.0
        if self.is_idle(rank, gpu):
            return 0.0
        # GPUs of one job differ a little (thermals, clocks).
        return self.steady + 2.0 * _NOISE[(self.seed(rank, gpu, "gpu_util") * 31) & _MASK]

    def seed(self, rank: int, gpu: int, metric: str) -> int:
        t = self.target
        return (t.job_id * 7919 + t.attempt * 104_729 + rank * 131 + (gpu + 1) * 17 + _METRIC_SEEDS[metric] * 1031) & 0xFFFFFFF

    def straggling(self, window: int) -> tuple[int, float, float, float]:
        """Who falls behind in one STRAGGLER_WINDOW of the run: (GPU index or -1, from, to (seconds into the window), wait)."""
        t = self.target
        gpus = t.gpus
        if gpus < 2 or self.profile in (Profile.IDLE_RANK, Profile.IDLE_GPUS, Profile.INPUT_BOUND):
            return -1, 0.0, 0.0, 0.0
        if self.profile == Profile.STRAGGLER:
            # The same slow GPU every time, behind for 60-80% of each window.
            slow = _mix(t.job_id, 1) % gpus
            begin = 60.0 + 120.0 * _uniform(t.job_id, t.attempt, window, 2)
            return slow, begin, begin + STRAGGLER_WINDOW * (0.6 + 0.2 * _uniform(t.job_id, t.attempt, window, 3)), STRAGGLER_PROFILE_WAIT
        if _mix(t.job_id, t.attempt, window, 4) % STRAGGLER_ODDS:
            return -1, 0.0, 0.0, 0.0
        slow = _mix(t.job_id, t.attempt, window, 5) % gpus
        begin = (STRAGGLER_WINDOW - 150.0) * _uniform(t.job_id, t.attempt, window, 6)
        return slow, begin, begin + 60.0 + 90.0 * _uniform(t.job_id, t.attempt, window, 7), STRAGGLER_WAIT


@dataclass(frozen=True)
class _Window:
    """Per-sample quantities of one read, shared by every GPU and metric."""

    key: tuple
    times: list[int]
    hashes: list[int]  # per-sample index into the noise table, before the series' seed
    rel: list[float]  # seconds since the run started
    phase: list[int]  # _LOADING ... _CHECKPOINTING
    # The gang's level, as a share of a GPU's steady utilisation: the warm-up's climb, the step's dip, evaluation.
    level: list[float]
    # The share of the sample's interval spent all-reducing gradients (0-1): NVLink and InfiniBand traffic follow it.
    comm: list[float]
    slow: list[int]  # the straggling GPU's index, or -1
    wait: list[float]  # how many points less busy the other GPUs are meanwhile


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
        warmup = min(WARMUP_MAX_SECONDS, max(2.0 * self.interval, WARMUP_SHARE * target.expected_seconds))
        step = STEP_MIN_SECONDS + STEP_SPREAD_SECONDS * _uniform(target.job_id, 8)
        placements = sorted(target.by_rank().items())
        rank_gpus = {r: p.gpus for r, p in placements}
        # Without guaranteed memory (time-slicing) a slice gets its share of an H100's.
        rank_slice = {r: (p.gpu_share, p.slice_memory_mib or H100_MEMORY_MIB * p.gpu_share) for r, p in placements if p.gpu_share < 1}
        steady = steady_utilisation(target, profile)
        return _Shape(target, profile, steady, warmup, nccl_bus_bandwidth(target), memory, step, rank_gpus, rank_slice)

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
        window = self._window(shape, times)

        def series(values: list[float], lvl: Level, node: str, gpu: int, rank: int | None) -> Series:
            buckets = bucketize_regular(times[0] if times else 0, interval, values, step, start=start, end=end)
            return Series(metric.key, lvl, node, gpu, rank, buckets, interval, self.name, target.attempt)

        def held(values: list[float], placement: RankPlacement) -> list[float]:
            """Samples while the node was held only: a node released by a resize, or not yet given, has none."""
            if not placement.held:
                return values
            return [v if placement.holds(t) else math.nan for v, t in zip(values, times, strict=True)]

        if metric.scope == Scope.JOB:
            values = self._job_values(shape, metric.key, window)
            return [] if values is None else [series(values, Level.JOB, "", -1, None)]
        finest: list[Series] = []
        for placement in target.ranks:
            if metric.scope == Scope.NODE:
                values = self._node_values(shape, metric.key, placement.rank, window)
                finest.append(series(held(values, placement), Level.NODE, placement.node, -1, placement.rank))
                continue
            for g in range(placement.gpus):
                values = self._gpu_values(shape, metric.key, placement.rank, g, window)
                finest.append(series(held(values, placement), Level.GPU, placement.node, g, placement.rank))
        return roll_up(finest, level)

    def cluster_gpu_use(self, jobs: Sequence[JobTarget], *, start: float, end: float) -> dict[int, float]:
        """Each job's mean utilisation over [start, end) (from its run's start when later), computed here, with no query:
        the same job-level read its page makes over that window, in buckets of the window's length."""
        metric, means = METRICS["gpu_util"], {}
        for target in jobs:
            lo = max(start, target.started)
            if end <= lo:
                continue  # it starts now: nothing to say yet
            # As RunReader.step_for: the window's length rounded up to a whole number of sample intervals.
            resolution = self.resolution(target)
            step = max(1, math.ceil(max(int(end - lo), 1) / resolution)) * resolution
            series = reshape(self.read(target, metric, start=lo, end=end, step=step, level=Level.JOB), start=lo, end=end, step=step)
            mean = samples_mean(s.buckets for s in series)
            if mean is not None:
                means[target.job_id] = mean
        return means

    # --- the model ------------------------------------------------------------------------------

    def _window(self, shape: _Shape, times: list[int]) -> _Window:
        """Per-sample quantities shared by every GPU and metric of one read, computed once."""
        target = shape.target
        key = ("window", target, shape.profile, times[0] if times else 0, len(times), times[1] - times[0] if len(times) > 1 else 0)
        window = self._cache.get(key)
        if window is not None:
            return window
        loading, warmup = shape.loading, shape.warmup
        climb = max(1.0, warmup - loading)
        step = shape.step_seconds
        reducing = STEP_ALL_REDUCE * step  # seconds of all-reduce per step
        interval = float(times[1] - times[0]) if len(times) > 1 else float(self.interval)

        def reduced(x: float) -> float:
            """Seconds spent all-reducing from the start of the run to x."""
            steps, into = divmod(x, step)
            return steps * reducing + max(0.0, into - (step - reducing))

        rel = [t - target.started for t in times]
        phase, level, comm, slow, wait = [], [], [], [], []
        episode: tuple[int, tuple[int, float, float, float]] = (-1, (-1, 0.0, 0.0, 0.0))
        for r in rel:
            if r < loading:
                phase.append(_LOADING)
                level.append(0.02)
                comm.append(0.0)
            elif r < warmup:
                phase.append(_CLIMBING)
                # The first steps: compilation and caches warming, quickly at first, then levelling off.
                level.append(1.0 - math.exp(-3.0 * (r - loading) / climb))
                comm.append(0.5)
            elif r >= CHECKPOINT_PERIOD and r % CHECKPOINT_PERIOD < CHECKPOINT_SECONDS:
                phase.append(_CHECKPOINTING)
                level.append(0.0)
                comm.append(0.0)
            elif r >= EVAL_PERIOD and r % EVAL_PERIOD < EVAL_SECONDS:
                phase.append(_EVALUATING)
                level.append(EVAL_LEVEL)
                comm.append(0.05)
            else:
                phase.append(_TRAINING)
                # Late in each step the gradients are all-reduced: the GPUs compute less, the links carry the traffic.
                # A sample is the mean over its interval: the share of it spent all-reducing.
                c = (reduced(r) - reduced(r - interval)) / interval
                level.append(1.0 - STEP_DIP / 100.0 * c)
                comm.append(c)
            number = int(r // STRAGGLER_WINDOW)
            if number != episode[0]:
                episode = (number, shape.straggling(number))
            who, begin, end, points = episode[1]
            into = r - number * STRAGGLER_WINDOW
            if who >= 0 and begin <= into < end and phase[-1] == _TRAINING:
                slow.append(who)
                wait.append(points)
            else:
                slow.append(-1)
                wait.append(0.0)
        window = _Window(key, times, [(t * 2_654_435_761) >> 7 for t in times], rel, phase, level, comm, slow, wait)
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
        jitter = 15.0 if shape.profile == Profile.INPUT_BOUND else 3.0
        me = shape.gpu_index(rank, gpu)
        out = []
        for lvl, n, who, points in zip(
            window.level, self._noise(shape.seed(rank, gpu, "gpu_util"), window), window.slow, window.wait, strict=True
        ):
            if lvl == 0.0:  # checkpointing: the GPUs wait for the host
                u = min(base, 3.0 + 2.0 * n)
            else:
                u = base * lvl + jitter * n
                if who >= 0:
                    # The straggler works through the step the others have finished, and they wait for it.
                    u = u + 2.0 if who == me else u - points
            out.append(0.0 if u < 0.0 else 100.0 if u > 100.0 else u)
        self._remember(key, out)
        return out

    def _gpu_values(self, shape: _Shape, key: str, rank: int, gpu: int, window: _Window) -> list[float]:
        values = self._whole_gpu_values(shape, key, rank, gpu, window)
        if rank not in shape.rank_slice:
            return values
        share, memory = shape.rank_slice[rank]
        if key == "fb_used":
            # Its working set fills the slice's memory as a job's fills a GPU's, never past it.
            scale = min(1.0, 0.9 * memory / (shape.memory_mib + 150.0))
            return [min(memory, v * scale) for v in values]
        if key in ("pcie_tx", "pcie_rx", "nvlink_tx", "nvlink_rx"):
            return [v * share for v in values]  # its share of the GPU's work moves its share of the traffic
        return values

    def _whole_gpu_values(self, shape: _Shape, key: str, rank: int, gpu: int, window: _Window) -> list[float]:
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
            idle = shape.is_idle(rank, gpu)
            full = 600.0 if idle else shape.memory_mib
            wobble = 0.0 if idle else 150.0
            # Weights arrive in chunks while the job loads (a third of the memory); activations and optimiser
            # state take the rest at the first step.
            loading, chunks = max(1.0, shape.loading), 4.0
            weights = 600.0 + (full - 600.0) * 0.35
            return [
                600.0 + (weights - 600.0) * math.floor(chunks * r / loading) / chunks if p == _LOADING else full + wobble * n
                for r, p, n in zip(window.rel, window.phase, noise, strict=True)
            ]
        if key == "pcie_rx":
            # Input batches, host to GPU.
            return [max(0.0, 1.2e7 * u + 0.15e9 * (1 + n)) for u, n in zip(util, noise, strict=True)]
        if key == "pcie_tx":
            # Checkpoints go from GPU memory to the host over PCIe.
            return [
                9.0e9 + 1.0e9 * n if p == _CHECKPOINTING else max(0.0, 0.25e7 * u + 0.05e9 * (1 + n))
                for u, n, p in zip(util, noise, window.phase, strict=True)
            ]
        if key in ("nvlink_tx", "nvlink_rx"):
            if shape.rank_gpus.get(rank, 1) < 2:
                return [0.0] * len(util)
            # An all-reduce receives what it sends, give or take: RX a little below TX, with its own noise.
            scale = 1.4e9 if key == "nvlink_tx" else 1.4e9 * (0.9 + 0.06 * _uniform(shape.target.job_id, rank, gpu))
            return [max(0.0, scale * u * (0.3 + 1.4 * c) * (0.92 + 0.08 * n)) for u, c, n in zip(util, window.comm, noise, strict=True)]
        if key == "power":
            return [75.0 + 6.0 * u + 10.0 * n for u, n in zip(util, noise, strict=True)]
        if key == "temp":
            return [33.0 + 0.42 * u + n for u, n in zip(util, noise, strict=True)]
        raise ValueError(f"the simulated source has no per-GPU model for {key!r}")

    def _node_values(self, shape: _Shape, key: str, rank: int, window: _Window) -> list[float]:
        # Inter-node traffic follows the node's GPU work, the step's all-reduce and the gang's bus bandwidth.
        if shape.target.nodes < 2 or shape.busbw is None:
            return [0.0] * len(window.times)
        util = self._utilisation(shape, rank, 0, window)
        per_node = shape.busbw * 1e9 * 0.45 / 100
        if key == "ib_rx":
            per_node *= 0.9 + 0.06 * _uniform(shape.target.job_id, rank, 9)
        noise = self._noise(shape.seed(rank, -1, key), window)
        return [max(0.0, per_node * u * (0.3 + 1.4 * c) * (0.92 + 0.08 * n)) for u, c, n in zip(util, window.comm, noise, strict=True)]

    def _job_values(self, shape: _Shape, key: str, window: _Window) -> list[float] | None:
        if shape.busbw is None:
            return None
        busbw = shape.busbw
        noise = self._noise(shape.seed(0, -1, key), window)
        # No collectives while loading, evaluating or checkpointing: gaps, as NCCL would report. A straggler makes
        # every collective wait for it, so their bandwidth drops.
        return [
            math.nan
            if p in (_LOADING, _EVALUATING, _CHECKPOINTING)
            else busbw * (0.96 + 0.04 * n) * (1.0 - 0.015 * w) * (0.75 + 0.25 * lvl if p == _CLIMBING else 1.0)
            for p, w, n, lvl in zip(window.phase, window.wait, noise, window.level, strict=True)
        ]
