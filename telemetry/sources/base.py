"""The interface between Muster and wherever a job's GPU and network series live."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from telemetry.catalogue import Level, Metric
from telemetry.downsampling import NAN, Buckets


class TelemetryUnavailable(Exception):
    """The source cannot answer (down, not configured, not built): pages say so and still render."""


@dataclass(frozen=True)
class RankPlacement:
    """A node the attempt held, with its rank, and when (an elastic job resized holds some nodes only part of the run).

    `held` is the node's [from, to) windows in seconds since the epoch (`to` None while held); empty means the whole run.
    A node that held two ranks one after the other keeps the later rank number.
    """

    rank: int
    node: str
    rack: str
    gpus: int
    held: tuple[tuple[float, float | None], ...] = ()
    # A GPU slice (MIG, time-sliced, MPS): its share of its GPU and its guaranteed memory in MiB (0: none guaranteed).
    gpu_share: float = 1.0
    slice_memory_mib: float = 0.0
    # The node's GPU product as the cluster reports it ("NVIDIA-H100-80GB-HBM3"; "" unknown): the memory chart's capacity.
    gpu_model: str = ""

    def holds(self, t: float) -> bool:
        return not self.held or any(lo <= t and (hi is None or t < hi) for lo, hi in self.held)

    def overlaps(self, lo: float, hi: float) -> bool:
        """Whether the node was held at some time in [lo, hi)."""
        return not self.held or any(a < hi and (b is None or lo < b) for a, b in self.held)


def held_only(buckets: Buckets, placement: RankPlacement) -> Buckets:
    """The buckets with every bucket outside the node's held windows a gap: what a node did for other jobs is not this one's."""
    if not placement.held:
        return buckets
    out = Buckets(buckets.first, buckets.step, list(buckets.mean), list(buckets.min), list(buckets.max), list(buckets.count))
    for i, t in enumerate(buckets.times()):
        if out.count[i] and not placement.overlaps(t, t + buckets.step):
            out.mean[i] = out.min[i] = out.max[i] = NAN
            out.count[i] = 0
    return out


@dataclass(frozen=True)
class JobTarget:
    """One attempt of a job, as a source needs to find its series: where each rank ran, and when."""

    job_id: int
    attempt: int
    ranks: tuple[RankPlacement, ...]
    # Seconds since the epoch; `ended` is None while the attempt runs.
    started: float
    ended: float | None
    # How long the run was expected to last (the simulated duration, else the wall time).
    expected_seconds: float
    # Where its pods live on Kubernetes, and their name prefix (`muster-<job>-<attempt>-<rank>`).
    namespace: str = ""
    pod_prefix: str = ""

    @property
    def resized(self) -> bool:
        """Whether some node was held only part of the run (an elastic job shrunk or grown)."""
        return any(r.held for r in self.ranks)

    def by_rank(self) -> dict[int, RankPlacement]:
        """One placement per rank number (the last node that held it): the gang's shape, whatever its resizes."""
        return {r.rank: r for r in self.ranks}

    @property
    def nodes(self) -> int:
        return len(self.by_rank())

    @property
    def gpus(self) -> int:
        return sum(r.gpus for r in self.by_rank().values())

    @property
    def racks(self) -> set[str]:
        return {r.rack for r in self.ranks}


@dataclass
class Series:
    """One series of one attempt, read at one level.

    `node` is "" at job level; `gpu` is -1 above GPU level. `sample_seconds` is how long each
    sample stands for (integrals of rates use it); `origin` says where the numbers came from.
    """

    metric: str
    level: Level
    node: str
    gpu: int
    rank: int | None
    buckets: Buckets
    sample_seconds: float
    origin: str
    attempt: int = 0

    @property
    def label(self) -> str:
        if self.level == Level.JOB:
            return "job"
        where = f"rank {self.rank} · {self.node}" if self.rank is not None else self.node
        return where if self.gpu < 0 else f"{where} · GPU {self.gpu}"


class TelemetrySource(Protocol):
    #: Shown on the job page and in the API (`origin` of the series it returns).
    name: str

    def resolution(self, target: JobTarget) -> int:
        """The finest step, in seconds, this source can answer for the target."""

    def read(self, target: JobTarget, metric: Metric, *, start: float, end: float, step: int, level: Level) -> list[Series]:
        """The metric's series of one attempt over [start, end), in buckets of `step` seconds, at `level`.

        A metric of a coarser scope than `level` answers at its own scope (see Metric.finest_level).
        Raises TelemetryUnavailable when the source cannot answer.
        """

    def cluster_gpu_use(self, jobs: Sequence[JobTarget], *, start: float, end: float) -> dict[int, float]:
        """Each job's mean GPU utilisation (percent, every sample of every GPU weighing alike) over [start, end), by
        job id, for the jobs that have samples in it: the dashboard's "GPUs used now" (telemetry/live_use.py).

        Asked of every running job once a minute, so it costs a number of queries that does not grow with the jobs
        (a `read` per job was four Prometheus queries each). Raises TelemetryUnavailable when the source cannot answer.
        """
