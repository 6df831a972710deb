"""An estimated start for every waiting job: the queue planned forward as it is expected to run.

After the cycle's walk, the waiting jobs without a reservation are planned in priority order, each at
the earliest window of its wall time in which it fits around the running jobs, the reservations, and
the jobs planned before it, as `squeue --start` does for Slurm's backfill plan. The timelines are the
expected ones (policy.schedule._likely_timelines): running jobs, reserved jobs and the jobs planned
before it go at their predicted run times (policy/runtime.py) where there is one, else at their wall
times; the wall times alone made every estimate late by what jobs leave unused of theirs.
Nothing here changes a decision: a planned start is an estimate that moves when higher-priority work
arrives or work ends early; only a reservation is a promise.

The work is bounded: at most `plan_jobs` jobs are planned; the rest are told they start after the
last planned start (ESTIMATE_AFTER). A job held by its limits is planned from when they let it run
(its owner's running jobs end, its budget renews), or gets no estimate when that cannot be known.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from policy.model import ESTIMATE_AFTER, ESTIMATE_NONE, ESTIMATE_PLANNED, ESTIMATE_RESERVED, NOT_EXAMINED, PendingJob, Waiting
from policy.timeline import INF, Hold, NeedOn, NodeFits, Timelines, earliest_common_start, first_starts

# (job, its reason code) -> the earliest its limits let it start, or None when that cannot be known.
NotBefore = Callable[[PendingJob, str], float | None]


def forecast(
    waiting: Sequence[Waiting],
    jobs: Mapping[int, PendingJob],
    timelines: Timelines,
    now: float,
    plan_jobs: int,
    need_on: NeedOn,
    not_before: NotBefore,
    node_fits: NodeFits,
) -> tuple[Waiting, ...]:
    """`waiting` with an estimated start for each job (in its order, the priority order). Adds holds to `timelines`."""
    out: list[Waiting] = []
    planned = 0
    last: float | None = None
    planner = _Planner(timelines, need_on, node_fits)
    for wait in waiting:
        job = jobs[wait.job_id]
        # A GPU slice job was planned over the slices (policy/sharing.py), not over the whole GPUs planned here.
        if wait.estimate == ESTIMATE_RESERVED or job.shares_gpu:
            out.append(wait)
            continue
        if wait.reason_code == NOT_EXAMINED or planned >= plan_jobs:
            out.append(replace(wait, estimated_start=last, estimate=ESTIMATE_AFTER if last is not None else ESTIMATE_NONE))
            continue
        after = not_before(job, wait.reason_code)
        if after is None:
            out.append(wait)
            continue
        planned += 1
        found = planner.earliest(job, max(after, now))
        if found is None:
            out.append(wait)
            continue
        start, chosen = found
        # Jobs planned after it see it gone at its expected end (the timelines are the expected ones, not the wall
        # times promises are held by); it still needs a window of its wall time, as the walk places it.
        ends = start + job.likely_seconds
        for name in chosen:
            timelines.hold(name, Hold(start, job.id, ends, need_on(job, name)))
        last = start if last is None else max(last, start)
        out.append(replace(wait, estimated_start=start, estimate=ESTIMATE_PLANNED))
    return tuple(out)


# The version of a heap entry that holds a lower bound, not a start worked out: never a node's version.
_BOUND = -1


class _Planner:
    """Earliest starts over many jobs of few shapes, reworking only the nodes a planned job changed.

    Gives what `policy.timeline.earliest_start` gives over every node that is large enough: a single-node
    job the node that frees soonest (then the smaller node, then the name); a gang the first instant
    enough whole nodes are free together.
    """

    def __init__(self, timelines: Timelines, need_on: NeedOn, node_fits: NodeFits) -> None:
        self.timelines = timelines
        self.need_on = need_on
        self.node_fits = node_fits
        self.names = sorted(timelines.total)
        # (GPUs, wall, after) -> heap of (earliest start, node GPUs, node, node version when worked out).
        self.singles: dict[tuple[int, float, float, int, bool], list[tuple[float, int, str, int]]] = {}
        # (node, GPUs) -> (node version, the first instant that many are free there).
        self.first_free: dict[tuple[str, int], tuple[int, float]] = {}
        # (GPUs per node, RDMA, whole nodes, wall, after) -> (the changes seen, node -> start intervals, the nodes'
        # first starts in order): a gang's options, brought up to date from the timelines' log of changed nodes
        # instead of read again from every node.
        self.gang_options: dict[
            tuple[int, int, bool, float, float], tuple[int, dict[str, list[tuple[float, float]]], list[tuple[float, str]]]
        ] = {}

    def earliest(self, job: PendingJob, after: float) -> tuple[float, list[str]] | None:
        tl = self.timelines
        if job.nodes == 1:
            key = (job.gpus_per_node, job.wall_seconds, after, job.rdma_per_node, job.whole_nodes)
            heap = self.singles.get(key)
            if heap is None:
                # Each node enters at a bound (the first instant it has the GPUs free, not before `after`) and is worked
                # out when it comes to the top: the bound is the same for every wall time, and holds only raise it. (A
                # window of no time may open where the GPUs are not free: it ends as they are taken.)
                heap = [
                    (max(after, self._first_free(n, self.need_on(job, n))) if job.wall_seconds > 0 else after, tl.total[n], n, _BOUND)
                    for n in self.names
                    if self.node_fits(job, n)
                ]
                heapq.heapify(heap)
                self.singles[key] = heap
            while heap:
                t, total, name, version = heap[0]
                if version == tl.version.get(name, 0):
                    return None if t == INF else (t, [name])
                heapq.heapreplace(
                    heap, (tl.earliest(name, self.need_on(job, name), job.wall_seconds, after), total, name, tl.version.get(name, 0))
                )
            return None
        shape = (job.gpus_per_node, job.rdma_per_node, job.whole_nodes, job.wall_seconds, after)
        known = self.gang_options.get(shape)
        if known is None:
            options = {n: tl.starts(n, self.need_on(job, n), job.wall_seconds, after) for n in self.names if self.node_fits(job, n)}
            firsts = first_starts(options)
        else:
            seen, options, firsts = known
            for name in {n for n in tl.changed_nodes[seen:] if n in options}:
                old = options[name]
                if old:
                    del firsts[bisect_left(firsts, (old[0][0], name))]
                new = options[name] = tl.starts(name, self.need_on(job, name), job.wall_seconds, after)
                if new:
                    insort(firsts, (new[0][0], name))
        self.gang_options[shape] = (len(tl.changed_nodes), options, firsts)
        return earliest_common_start(options, job.nodes, firsts)

    def _first_free(self, name: str, gpus: int) -> float:
        version = self.timelines.version.get(name, 0)
        known = self.first_free.get((name, gpus))
        if known is None or known[0] != version:
            known = self.first_free[(name, gpus)] = (version, self.timelines.first_free(name, gpus))
        return known[1]
