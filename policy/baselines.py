"""Baseline policies for the what-if replay: strict FIFO and FIFO with EASY backfill.

Same signature as `policy.schedule.schedule`, same placement rules: multi-node jobs take whole idle
nodes (one rack if any fits), single-node jobs the fullest node that fits (best fit). Both ignore
fair share, priority classes, quotas, budgets and preemption: the queue is in submit order (then id).

- `fifo`: strict, head-of-line blocking. Jobs start in submit order while they fit; once the head
  does not fit, nothing behind it starts. The head's `estimated_start` is when its nodes free up by
  the running jobs' wall-time ends; the jobs behind it have none.
- `easy`: EASY backfill. The head (the first job that does not fit) gets one reservation: the nodes
  that free up earliest for it by the running jobs' wall-time ends. A later job starts only if it fits
  now and cannot delay that reservation: it ends, by its wall time, before the reservation starts, or
  it uses only nodes the reservation does not need.

Both honour `max_jobs` (the jobs past it wait as NOT_EXAMINED), like the real policy. Deterministic.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from policy.capacity import Allowed, Capacity
from policy.model import (
    FRAGMENTATION,
    NO_ROOM,
    NOT_EXAMINED,
    RESERVATION,
    Decisions,
    PendingJob,
    Placement,
    PolicyConfig,
    Reservation,
    Snapshot,
    Waiting,
    plural,
    when,
)

# Waits behind a head job that does not fit (strict FIFO).
HEAD_OF_LINE = "HEAD_OF_LINE"


def fifo(snapshot: Snapshot, config: PolicyConfig | None = None, *, max_jobs: int | None = None) -> Decisions:
    """Strict first-in, first-out: nothing starts behind a head that does not fit."""
    return _Baseline(snapshot, config or PolicyConfig(), max_jobs, backfill=False).run()


def easy(snapshot: Snapshot, config: PolicyConfig | None = None, *, max_jobs: int | None = None) -> Decisions:
    """FIFO with EASY backfill: one reservation for the head; later jobs start only if they cannot delay it."""
    return _Baseline(snapshot, config or PolicyConfig(), max_jobs, backfill=True).run()


def _backfill(reserved: dict[str, float], end: float) -> Allowed:
    """The nodes a job ending at `end` may use: any not reserved, and reserved ones it leaves before they are needed."""
    if not reserved:
        return None
    return lambda name: name not in reserved or end <= reserved[name]


class _Baseline:
    def __init__(self, snapshot: Snapshot, config: PolicyConfig, max_jobs: int | None, *, backfill: bool) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.max_jobs = max_jobs if max_jobs is not None else config.max_jobs
        self.backfill = backfill
        self.capacity = Capacity(snapshot.nodes)
        # node -> [(wall-time end, GPUs held there)] of the running jobs and of the ones placed here.
        self.ends: dict[str, list[tuple[float, int]]] = defaultdict(list)
        for r in snapshot.running:
            for name, gpus in zip(r.node_names, r.gpus_held, strict=True):
                self.ends[name].append((max(r.ends_at, self.now), int(gpus)))
        self.placements: list[Placement] = []
        self.waiting: list[Waiting] = []
        self.reservations: list[Reservation] = []

    def run(self) -> Decisions:
        queue = sorted(self.snapshot.pending, key=lambda j: (j.submitted_at, j.id))
        if self.max_jobs is not None and len(queue) > self.max_jobs:
            queue, rest = queue[: self.max_jobs], queue[self.max_jobs :]
        else:
            rest = []
        for index, job in enumerate(queue):
            chosen = self._fit(job, None)
            if chosen is not None:
                self._place(job, chosen)
                continue
            self._head(job, queue[index + 1 :])
            break
        text = "Not examined in this cycle: the queue is longer than one cycle examines."
        for job in rest:
            self._wait(job, NOT_EXAMINED, text)
        return Decisions(tuple(self.placements), tuple(self.waiting), (), tuple(self.reservations))

    def _head(self, head: PendingJob, behind: list[PendingJob]) -> None:
        """The first job that does not fit: it waits (with a reservation under EASY); then the jobs behind it."""
        reservation = self._reserve(head)
        start = reservation.start if reservation else None
        text = self._room_text(head)
        if start is not None:
            text += f" Expected to start {when(start)}."
        self._wait(head, FRAGMENTATION if self.capacity.free_total >= head.gpus else NO_ROOM, text, start)
        waiting = self.waiting
        if not self.backfill:
            text = f"Behind job {head.id}, first in the queue, which does not fit yet."
            for job in behind:
                waiting.append(Waiting(job.id, len(waiting) + 1, HEAD_OF_LINE, text))
            return
        reserved: dict[str, float] = {}
        if reservation is not None:
            self.reservations.append(reservation)
            reserved = dict.fromkeys(reservation.node_names, reservation.start)
        failed: set[tuple[int, int, bool]] = set()  # shapes that did not fit: capacity only shrinks in a call
        reasons: dict[tuple[int, int, int], tuple[str, str]] = {}
        cap = self.capacity
        for job in behind:
            end = self.now + job.wall_seconds
            shape = (job.nodes, job.gpus_per_node, start is not None and end <= start)
            if shape not in failed:
                chosen = self._fit(job, _backfill(reserved, end))
                if chosen is not None:
                    self._place(job, chosen)
                    continue
                failed.add(shape)
            # The reason depends only on the shape, the capacity and the reservation: worked out once per state.
            key = (job.nodes, job.gpus_per_node, cap.version)
            reason = reasons.get(key)
            if reason is None:
                if start is not None and self._fit(job, None) is not None:
                    reason = (RESERVATION, f"Behind the reservation for job {head.id}, expected to start {when(start)}.")
                else:
                    reason = (FRAGMENTATION if cap.free_total >= job.gpus else NO_ROOM, self._room_text(job))
                reasons[key] = reason
            waiting.append(Waiting(job.id, len(waiting) + 1, reason[0], reason[1]))

    def _wait(self, job: PendingJob, code: str, text: str, estimated_start: float | None = None) -> None:
        self.waiting.append(Waiting(job.id, len(self.waiting) + 1, code, text, estimated_start))

    def _fit(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        if job.nodes == 1:
            name = self.capacity.best_fit(job.gpus_per_node, allowed)
            return None if name is None else [name]
        return self.capacity.whole_nodes(job.nodes, job.gpus_per_node, allowed)

    def _place(self, job: PendingJob, chosen: list[str]) -> None:
        held = tuple(job.gpus_per_node if job.nodes == 1 else self.capacity.total[name] for name in chosen)
        for name, gpus in zip(chosen, held, strict=True):
            self.capacity.take(name, gpus)
            self.ends[name].append((self.now + job.wall_seconds, gpus))
        self.placements.append(Placement(job.id, tuple(chosen), held))

    def _reserve(self, job: PendingJob) -> Reservation | None:
        """The nodes that free up earliest for the job, by the running jobs' wall-time ends (as the real policy)."""
        cap = self.capacity
        candidates = (
            (name, cap.free[name], sorted(self.ends.get(name, []))) for name, total in cap.total.items() if total >= job.gpus_per_node
        )
        return earliest_reservation(job.id, job.nodes, job.gpus_per_node, candidates, self.now)

    def _room_text(self, job: PendingJob) -> str:
        cap = self.capacity
        if job.nodes == 1:
            return f"Needs {plural(job.gpus_per_node, 'GPU')} on one node; the most free on any node is {cap.max_free()}."
        whole = sum(len(v) for v in cap.idle_nodes(job.gpus_per_node).values())
        return f"Needs {job.nodes} whole nodes with {plural(job.gpus_per_node, 'GPU')}; {whole} {'is' if whole == 1 else 'are'} free."


def earliest_reservation(
    job_id: int, nodes: int, gpus_per_node: int, candidates: Iterable[tuple[str, int, list[tuple[float, int]]]], now: float
) -> Reservation | None:
    """The `nodes` nodes that can hold the job soonest, by the wall-time ends of what runs on them.

    `candidates`: (node, GPUs free now, sorted [(end, GPUs freed)] of what runs on it). A gang needs its
    nodes whole (the last end); a single-node job, enough GPUs freed. The reservation starts when the
    last chosen node is ready. EASY keeps one reservation and no holds, so it needs no timeline
    (the fair-share policy plans on policy.timeline).
    """
    ready: list[tuple[float, str]] = []
    for name, free, ends in candidates:
        if nodes > 1:
            ready.append((ends[-1][0] if ends else now, name))
            continue
        at = now
        for end, gpus in ends:
            if free >= gpus_per_node:
                break
            free, at = free + gpus, end
        if free >= gpus_per_node:
            ready.append((at, name))
    if len(ready) < nodes:
        return None
    ready.sort()
    chosen = ready[:nodes]
    return Reservation(job_id, tuple(name for _, name in chosen), max(at for at, _ in chosen))
