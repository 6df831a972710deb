"""GPU slices: single-node jobs that need a share of a GPU, on the nodes a site shares.

A site shares a node pool's GPUs with the device plugin it runs there, and each way guarantees something
different (docs/gpu-sharing.md):

- time-slicing: each GPU is handed out as `slices_per_gpu` replicas that take turns on it; no memory limit and
  no fault isolation (one job can take all the memory, one fault can end them all);
- MPS: replicas that run at once, each with a share of the compute and of the memory enforced; one fault domain;
- MIG: hardware partitions of fixed profiles (e.g. 1g.10gb), each with its own memory and faults.

Such a node takes nothing else: a whole-GPU or multi-node job never lands on a shared GPU, and slice jobs never
take a GPU of an unshared node, so whole nodes stay free for gangs. A slice job holds one slice. Among the slices
that meet its asks it takes the smallest (a 0.25 job does not take a 0.5 slice while a 0.25 slice is free), on the
GPU already most shared (a new GPU is opened only when the shared ones are full), on the node already most used.
What it holds is that slice's share of its GPU, and that is what its quota, budget and the ledger count.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from policy.model import NodeView, PendingJob, RunningJob

TIME_SLICING = "time-slicing"
MPS = "mps"
MIG = "mig"
MODES = (TIME_SLICING, MPS, MIG)
# The modes that enforce a slice's memory; time-slicing shares the whole memory with no limit.
MEMORY_LIMITED = (MPS, MIG)
# A slice's share is a float (1/7 for a MIG 1g slice): compared with this slack, so 1/4 meets an ask of 0.25.
EPSILON = 1e-9


def slice_fits(job: PendingJob, node: NodeView) -> bool:
    """Whether one of the node's slices meets the job's asks: its share, its memory, its isolation."""
    if not node.sharing or node.slices_per_gpu < 1:
        return False
    if job.gpu_isolation and node.sharing != MIG:
        return False
    if job.gpu_fraction and node.slice_gpus + EPSILON < job.gpu_fraction:
        return False
    return not job.gpu_memory_gb or (node.sharing in MEMORY_LIMITED and node.slice_memory_gb + EPSILON >= job.gpu_memory_gb)


def describe_ask(job: PendingJob) -> str:
    """The job's asks in words: "a slice of at least 0.25 GPU with at least 10 GB of GPU memory, isolated (MIG)". At
    least: the smallest slice that meets them is taken (a 0.1 ask takes a MIG 1g.10gb, 1/7 of a GPU), so "a 0.3-GPU
    slice" read as if only a slice of exactly 0.3 would do."""
    text = f"a slice of at least {job.gpu_fraction:g} GPU" if job.gpu_fraction else "a GPU slice"
    if job.gpu_memory_gb:
        text += f" with at least {job.gpu_memory_gb:g} GB of GPU memory"
    if job.gpu_isolation:
        text += ", isolated (MIG)"
    return text


class Slices:
    """The shared nodes' slices in one cycle: which are free, and when the held ones end by their wall time."""

    def __init__(self, nodes: Iterable[NodeView], running: Iterable[RunningJob], now: float) -> None:
        self.nodes = {n.name: n for n in sorted(nodes, key=lambda n: n.name) if n.sharing and n.schedulable and n.slices_per_gpu > 0}
        self.used: dict[str, list[int]] = {}
        for name, node in self.nodes.items():
            used = list(node.slices_used[: node.gpus_total]) + [0] * max(0, node.gpus_total - len(node.slices_used))
            self.used[name] = [min(u, node.slices_per_gpu) for u in used]
        # Per node, a heap of the instants its held slices are free again (wall-time ends): the plan for estimates.
        self.ends: dict[str, list[float]] = {name: [] for name in self.nodes}
        for r in running:
            for name in r.node_names:
                if name in self.ends:
                    heapq.heappush(self.ends[name], max(r.ends_at, now))
        self.now = now
        self.available: dict[str, list[float]] | None = None

    def fitting(self, job: PendingJob) -> list[NodeView]:
        return [n for n in self.nodes.values() if slice_fits(job, n)]

    def free(self, name: str) -> int:
        node = self.nodes[name]
        return node.slices_per_gpu * node.gpus_total - sum(self.used[name])

    def place(self, job: PendingJob) -> tuple[str, int] | None:
        """(node, GPU index) of the slice the job takes now, or None when every slice meeting its asks is held."""
        open_nodes = [n for n in self.fitting(job) if self.free(n.name) > 0]
        if not open_nodes:
            return None
        # The smallest slice that does, then the node already most used (the others stay whole for what needs them).
        node = min(open_nodes, key=lambda n: (n.slice_gpus, n.slice_memory_gb, self.free(n.name), n.name))
        used = self.used[node.name]
        # The GPU already most shared that has room: a new GPU is opened only when the shared ones are full.
        gpu = max((i for i, u in enumerate(used) if u < node.slices_per_gpu), key=lambda i: (used[i], -i))
        used[gpu] += 1
        heapq.heappush(self.ends[node.name], self.now + job.wall_seconds)
        return node.name, gpu

    def smallest_share(self, job: PendingJob) -> float:
        """The least GPU share a slice meeting its asks holds (its quota's need); its own ask when none does."""
        return min((n.slice_gpus for n in self.fitting(job)), default=job.gpu_fraction or 1.0)

    def node_share(self, job: PendingJob) -> float:
        """The largest share of a node it may hold (its budget's need, in nodes): its slice over the node's GPUs."""
        return max((n.slice_gpus / n.gpus_total for n in self.fitting(job) if n.gpus_total), default=0.0)

    def earliest(self, job: PendingJob, after: float) -> tuple[float, str] | None:
        """When a slice meeting its asks is free, by wall-time ends, at or after `after`, and on which node.

        Called after the walk, in the queue's order; `hold` then plans the slice as held by the job until its wall
        time, so the next job waiting for such a slice is planned after it, as the whole-GPU forecast plans.
        """
        if self.available is None:
            # Each slice once: the free ones now, the held ones at their ends.
            self.available = {name: sorted([self.now] * self.free(name) + self.ends[name]) for name in self.nodes}
        best: tuple[float, str] | None = None
        for node in self.fitting(job):
            slots = self.available[node.name]
            if slots and (best is None or (max(slots[0], after), node.name) < best):
                best = (max(slots[0], after), node.name)
        return best

    def hold(self, name: str, start: float, wall_seconds: float) -> None:
        """The slice of `name` that frees first, planned as held from `start` for `wall_seconds` (see `earliest`)."""
        assert self.available is not None, "earliest() first"
        heapq.heapreplace(self.available[name], start + wall_seconds)
