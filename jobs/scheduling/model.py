"""Plain data the policy reads and returns."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeView:
    """A node's capacity at the instant of the snapshot."""

    name: str
    gpus_total: int
    gpus_free: int
    rack: str = ""
    schedulable: bool = True

    @property
    def is_idle(self) -> bool:
        return self.gpus_free == self.gpus_total


@dataclass(frozen=True)
class PendingJob:
    id: int
    nodes: int
    gpus_per_node: int
    # 0 is the highest priority class.
    class_rank: int
    # Seconds since the epoch; older jobs go first within a class.
    submitted_at: float

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeView, ...]
    pending: tuple[PendingJob, ...]


@dataclass(frozen=True)
class Placement:
    job_id: int
    # One entry per rank: rank i runs on node_names[i] and holds gpus_held[i] GPUs there.
    # A multi-node job holds its nodes whole, whatever it asked per node.
    node_names: tuple[str, ...]
    gpus_held: tuple[int, ...]


@dataclass(frozen=True)
class Waiting:
    job_id: int
    position: int
    reason_code: str
    reason: str


@dataclass(frozen=True)
class Decisions:
    placements: tuple[Placement, ...]
    waiting: tuple[Waiting, ...]
