"""An estimated start for every waiting job: the queue planned forward as it is expected to run.

After the cycle's walk, the waiting jobs without a reservation are planned in priority order, each at
the earliest window of its wall time in which it fits around the running jobs, the reservations, and
the jobs planned before it, as `squeue --start` does for Slurm's backfill plan. The timelines are the
expected ones (policy.schedule._likely_timelines): running jobs, reserved jobs and the jobs planned
before it go at their predicted run times (policy/runtime.py) where there is one, else at their wall
times; the wall times alone made every estimate late by what jobs leave unused of theirs. A job the walk
would shrink elastic jobs for is also planned on the ranks they could give up (`sooner`): it starts when the
rest of its nodes free up, not at their ends.
Nothing here changes a decision: a planned start is an estimate that moves when higher-priority work
arrives or work ends early; only a reservation is a promise.

The work is bounded: at most `plan_jobs` jobs are planned; the rest are told they start after the
last planned start (ESTIMATE_AFTER). A job held by its limits is planned from when they let it run
(its owner's running jobs and the jobs planned before it leave its quota room, what they leave of its
budget fits it, now or from the renewal), or gets no estimate when that cannot be known.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TypeVar

from policy.model import ESTIMATE_AFTER, ESTIMATE_NONE, ESTIMATE_PLANNED, ESTIMATE_RESERVED, NOT_EXAMINED, PendingJob, Waiting
from policy.sharing import Slices
from policy.timeline import INF, FittingNodes, Hold, NeedOn, Timelines, at_count_th_first_start, earliest_common_start

# (job, its reason code, an instant) -> the earliest at or after it that its limits let it start, or None when that
# cannot be known.
NotBefore = Callable[[PendingJob, str, float], float | None]
# (job, its planned start): what the job is planned to use of its limits (its owners' quotas and budgets) from then on.
UseLimits = Callable[[PendingJob, float], None]
# Where a planned job goes: the nodes of a whole-GPU job, the node of a slice.
Where = TypeVar("Where")
# (job, its reason code, the instant its plan starts from, its plan's start or INF, whether its limits let it start at an
# instant) -> an earlier start and its nodes, where the policy would shrink elastic jobs for it then; else None.
Sooner = Callable[[PendingJob, str, float, float, Callable[[float], bool]], tuple[float, list[str]] | None]


def forecast(
    waiting: Sequence[Waiting],
    jobs: Mapping[int, PendingJob],
    timelines: Timelines,
    now: float,
    plan_jobs: int,
    need_on: NeedOn,
    not_before: NotBefore,
    use_limits: UseLimits,
    fitting_nodes: FittingNodes,
    slices: Slices,
    sooner: Sooner | None = None,
) -> tuple[Waiting, ...]:
    """`waiting` with an estimated start for each job (in its order, the priority order). Adds holds to `timelines`.

    `sooner`: an earlier start than the plan's for a job the policy would shrink elastic jobs for (they give up nodes
    long before their ends), planned on those nodes from then."""
    out: list[Waiting] = []
    planned = 0
    last: float | None = None
    planner = _Planner(timelines, need_on, fitting_nodes)
    for wait in waiting:
        job = jobs[wait.job_id]
        if wait.estimate == ESTIMATE_RESERVED:
            out.append(wait)
            continue
        if job.shares_gpu:
            # Over the slices (policy/sharing.py), not the whole GPUs planned here; in the same order, so the jobs before
            # it in the queue use its owners' limits first whatever their kind. Unbounded: a slice is cheap to plan.
            out.append(_plan_slice(wait, job, slices, now, not_before, use_limits))
            continue
        if wait.reason_code == NOT_EXAMINED or planned >= plan_jobs:
            out.append(wait.estimated(last, ESTIMATE_AFTER if last is not None else ESTIMATE_NONE))
            continue
        after = not_before(job, wait.reason_code, now)
        if after is None:
            out.append(wait)
            continue
        planned += 1
        found = _within_limits(partial(planner.earliest, job), job, wait.reason_code, after, not_before)
        if sooner is not None:
            allowed = partial(_limits_let_start, not_before, job, wait.reason_code)
            found = sooner(job, wait.reason_code, after, INF if found is None else found[0], allowed) or found
        if found is None:
            out.append(wait)
            continue
        start, chosen = found
        use_limits(job, start)
        # Jobs planned after it see it gone at its expected end (the timelines are the expected ones, not the wall
        # times promises are held by); it still needs a window of its wall time, as the walk places it.
        ends = start + job.likely_seconds
        for name in chosen:
            timelines.hold(name, Hold(start, job.id, ends, need_on(job, name)))
        last = start if last is None else max(last, start)
        out.append(wait.estimated(start, ESTIMATE_PLANNED))
    return tuple(out)


def _limits_let_start(not_before: NotBefore, job: PendingJob, code: str, at: float) -> bool:
    return not_before(job, code, at) == at


def _plan_slice(wait: Waiting, job: PendingJob, slices: Slices, now: float, not_before: NotBefore, use_limits: UseLimits) -> Waiting:
    after = not_before(job, wait.reason_code, now) if wait.reason_code != NOT_EXAMINED else None
    found = _within_limits(partial(slices.earliest, job), job, wait.reason_code, after, not_before) if after is not None else None
    if found is None:
        return wait
    start, name = found
    slices.hold(name, start, job.wall_seconds)
    use_limits(job, start)
    return wait.estimated(start, ESTIMATE_PLANNED)


def _within_limits(
    earliest: Callable[[float], tuple[float, Where] | None], job: PendingJob, code: str, after: float, not_before: NotBefore
) -> tuple[float, Where] | None:
    """The first window `earliest` finds from `after` on that the job's limits let it start in (and where it is).

    The window found may start where the jobs planned before it fill its owners' quota: then the next one from
    where the limits let it start. Each turn starts later, at a window's start or a quota's change, so it ends.
    """
    while True:
        found = earliest(after)
        if found is None or found[0] == after:  # the limits let it start at `after`
            return found
        allowed = not_before(job, code, found[0])
        if allowed == found[0]:
            return found
        if allowed is None:
            return None
        after = allowed


# The version of a heap entry that holds a lower bound, not a start worked out: never a node's version.
_BOUND = -1


class _Planner:
    """Earliest starts over many jobs of few shapes, reworking only the nodes a planned job changed.

    Gives what `policy.timeline.earliest_start` gives over every node that is large enough: a single-node
    job the node that frees soonest (then the smaller node, then the name); a gang the first instant
    enough whole nodes are free together.

    Both read a node's windows only when they must: each node waits at a lower bound on its first start (the
    first instant it has the GPUs free, not before `after`; the same for every wall time, and planned jobs'
    holds only raise it) until no node worked out starts before that bound.
    """

    def __init__(self, timelines: Timelines, need_on: NeedOn, fitting_nodes: FittingNodes) -> None:
        self.timelines = timelines
        self.need_on = need_on
        self.fitting_nodes = fitting_nodes
        # (GPUs, wall, after, RDMA, whole nodes) -> heap of (earliest start, node GPUs, node, node version when worked
        # out, or _BOUND while the start is only the node's bound).
        self.singles: dict[tuple[int, float, float, int, bool], list[tuple[float, int, str, int]]] = {}
        # (GPUs per node, RDMA, whole nodes) -> (the first instant the node has the GPUs free, its GPUs, its name) of
        # every node a rank fits on, as it was when first asked: planned jobs' holds only raise it, so it stays a bound.
        self.first_free: dict[tuple[int, int, bool], list[tuple[float, int, str]]] = {}
        # (GPUs per node, RDMA, whole nodes, wall, after) -> a gang's options.
        self.gangs: dict[tuple[int, int, bool, float, float], _GangOptions] = {}

    def earliest(self, job: PendingJob, after: float) -> tuple[float, list[str]] | None:
        tl = self.timelines
        if job.nodes == 1:
            key = (job.gpus_per_node, job.wall_seconds, after, job.rdma_per_node, job.whole_nodes)
            heap = self.singles.get(key)
            if heap is None:
                heap = [(self._bound(free, job, after), total, n, _BOUND) for free, total, n in self._first_free(job)]
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
        gang = self.gangs.get(shape)
        if gang is None:
            bounds = [(self._bound(free, job, after), n) for free, _, n in self._first_free(job)]
            heapq.heapify(bounds)
            gang = self.gangs[shape] = _GangOptions(len(tl.changed_nodes), bounds)
        else:
            for name in {n for n in tl.changed_nodes[gang.seen :] if n in gang.options}:
                gang.work_out(name, self._starts(job, name, after))
            gang.seen = len(tl.changed_nodes)
        count, bounds, firsts = job.nodes, gang.bounds, gang.firsts
        # Every node that may open by the count-th earliest first start worked out, so that start is the count-th
        # earliest of all nodes' (earliest_common_start's shortcut); every node, where that is not the answer.
        while bounds and (len(firsts) < count or bounds[0][0] <= firsts[count - 1][0]):
            name = heapq.heappop(bounds)[1]
            gang.work_out(name, self._starts(job, name, after))
        if len(firsts) < count:
            return None
        found = at_count_th_first_start(gang.options, count, firsts, latest_open=True)
        if found is None:
            while bounds:
                name = heapq.heappop(bounds)[1]
                gang.work_out(name, self._starts(job, name, after))
            return earliest_common_start(gang.options, count, firsts, latest_open=True)
        return found

    def _starts(self, job: PendingJob, name: str, after: float) -> list[tuple[float, float]]:
        return self.timelines.starts(name, self.need_on(job, name), job.wall_seconds, after)

    @staticmethod
    def _bound(first_free: float, job: PendingJob, after: float) -> float:
        # A window of no time may open where the GPUs are not free (it ends as they are taken): no bound but `after`.
        return max(after, first_free) if job.wall_seconds > 0 else after

    def _first_free(self, job: PendingJob) -> list[tuple[float, int, str]]:
        key = (job.gpus_per_node, job.rdma_per_node, job.whole_nodes)
        found = self.first_free.get(key)
        if found is None:
            tl = self.timelines
            found = [(tl.first_free(n, self.need_on(job, n)), tl.total[n], n) for n in self.fitting_nodes(job)]
            self.first_free[key] = found
        return found


class _GangOptions:
    """A gang's options for one shape: the nodes worked out (their start intervals, and their first starts in order),
    the rest at their bounds, and how far into the timelines' log of changed nodes they are up to date."""

    def __init__(self, seen: int, bounds: list[tuple[float, str]]) -> None:
        self.seen = seen
        self.bounds = bounds
        self.options: dict[str, list[tuple[float, float]]] = {}
        self.firsts: list[tuple[float, str]] = []

    def work_out(self, name: str, starts: list[tuple[float, float]]) -> None:
        old = self.options.get(name)
        if old:
            del self.firsts[bisect_left(self.firsts, (old[0][0], name))]
        self.options[name] = starts
        if starts:
            insort(self.firsts, (starts[0][0], name))
