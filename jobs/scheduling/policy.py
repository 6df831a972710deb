"""Gang admission: priority-then-age order, all-or-nothing placement.

A job is placed only when every node it needs has room at once. Multi-node jobs
take whole nodes (their ranks talk over the network and must not share a node's
PCIe/NVLink with strangers); single-node jobs are packed onto the fullest node
that fits, so whole nodes stay free for the gangs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from jobs.scheduling.model import Decisions, NodeView, PendingJob, Placement, Snapshot, Waiting

# Stable codes for why a job waits; the text beside each says it in numbers.
NO_ROOM = "NO_ROOM"
FRAGMENTATION = "FRAGMENTATION"
NOT_EXAMINED = "NOT_EXAMINED"


def queue_order(pending: Iterable[PendingJob]) -> list[PendingJob]:
    """The order in which jobs are considered: class, then age, then id (a total order)."""
    return sorted(pending, key=lambda j: (j.class_rank, j.submitted_at, j.id))


def schedule(snapshot: Snapshot, *, max_jobs: int | None = None) -> Decisions:
    """Decide which pending jobs start now and on which nodes.

    Deterministic: the same snapshot always gives the same decisions.
    """
    free = {n.name: n.gpus_free for n in snapshot.nodes if n.schedulable}
    nodes = [n for n in sorted(snapshot.nodes, key=lambda n: n.name) if n.schedulable]
    placements: list[Placement] = []
    waiting: list[Waiting] = []
    position = 0
    for index, job in enumerate(queue_order(snapshot.pending)):
        if max_jobs is not None and index >= max_jobs:
            position += 1
            waiting.append(
                Waiting(job.id, position, NOT_EXAMINED, "Not examined in this cycle: the queue is longer than one cycle examines.")
            )
            continue
        chosen = _place(job, nodes, free)
        if chosen is None:
            position += 1
            code, text = _why_waiting(job, nodes, free)
            waiting.append(Waiting(job.id, position, code, text))
            continue
        held = tuple(job.gpus_per_node if job.nodes == 1 else free[name] for name in chosen)
        for name, gpus in zip(chosen, held, strict=True):
            free[name] -= gpus
        placements.append(Placement(job.id, tuple(chosen), held))
    return Decisions(tuple(placements), tuple(waiting))


def _place(job: PendingJob, nodes: list[NodeView], free: dict[str, int]) -> list[str] | None:
    if job.nodes == 1:
        fits = [n for n in nodes if free[n.name] >= job.gpus_per_node]
        if not fits:
            return None
        # Best fit: the node left with the fewest free GPUs, so whole nodes stay whole.
        best = min(fits, key=lambda n: (free[n.name] - job.gpus_per_node, n.name))
        return [best.name]
    whole = [n for n in nodes if free[n.name] == n.gpus_total and n.gpus_total >= job.gpus_per_node]
    if len(whole) < job.nodes:
        return None
    by_rack: dict[str, list[NodeView]] = defaultdict(list)
    for n in whole:
        by_rack[n.rack].append(n)
    # Prefer one rack (one leaf switch): the one that fits the gang most tightly.
    racks_that_fit = [r for r, members in by_rack.items() if len(members) >= job.nodes]
    if racks_that_fit:
        rack = min(racks_that_fit, key=lambda r: (len(by_rack[r]), r))
        return [n.name for n in by_rack[rack][: job.nodes]]
    # Otherwise span as few racks as possible, biggest first.
    chosen: list[str] = []
    for rack in sorted(by_rack, key=lambda r: (-len(by_rack[r]), r)):
        for n in by_rack[rack]:
            chosen.append(n.name)
            if len(chosen) == job.nodes:
                return chosen
    return None  # unreachable: len(whole) >= job.nodes


def _why_waiting(job: PendingJob, nodes: list[NodeView], free: dict[str, int]) -> tuple[str, str]:
    total_free = sum(free.values())
    if job.nodes == 1:
        most = max((free[n.name] for n in nodes), default=0)
        text = f"Needs {job.gpus_per_node} GPUs on one node; the most free on any node is {most}"
        if total_free >= job.gpus_per_node:
            return FRAGMENTATION, f"{text} ({total_free} GPUs are free, spread over several nodes)."
        return NO_ROOM, f"{text} ({total_free} GPUs free in the cluster)."
    whole = sum(1 for n in nodes if free[n.name] == n.gpus_total and n.gpus_total >= job.gpus_per_node)
    partly = [n for n in nodes if 0 < free[n.name] < n.gpus_total]
    partly_free = sum(free[n.name] for n in partly)
    text = f"Needs {job.nodes} whole nodes with {job.gpus_per_node} GPUs; {whole} {'is' if whole == 1 else 'are'} free"
    if partly:
        text += f", {partly_free} GPUs free on {len(partly)} partly used node{'s' if len(partly) != 1 else ''}"
    if total_free >= job.gpus:
        return FRAGMENTATION, text + "."
    return NO_ROOM, text + "."
