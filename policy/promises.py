"""The reservations of the previous cycle, held again before anyone else is placed: promises that persist.

Each kept reservation is held on its nodes at its start or earlier (work there ended before its wall
time). Only lost capacity under it (a node gone, drained or shrunk; its nodes no longer free by the
start) moves it later: it is then left to the walk to reserve anew, with the reason why it moved.
With every promise held, the earliest ones may move to other nodes where they would start earlier,
each searched with all the others in place, so a move never pushes another promise later.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from policy.model import PendingJob, Reservation, when
from policy.timeline import FittingNodes, Hold, NeedOn, NodeFits, Timelines, earliest_common_start, earliest_start

# Bounds the work: each move search looks at every node.
MAX_MOVE_SEARCHES = 64


def hold(timelines: Timelines, job: PendingJob, names: tuple[str, ...], start: float, need_on: NeedOn) -> Reservation:
    """Hold the job's GPUs on `names` from `start` for its wall time."""
    for name in names:
        timelines.hold(name, Hold(start, job.id, start + job.wall_seconds, need_on(job, name)))
    return Reservation(job.id, names, start)


def keep_promises(
    reservations: Iterable[Reservation],
    jobs: Mapping[int, PendingJob],
    timelines: Timelines,
    node_fits: NodeFits,
    fitting_nodes: FittingNodes,
    now: float,
    need_on: NeedOn,
) -> tuple[dict[int, Reservation], dict[int, str]]:
    """Hold the previous cycle's reservations of jobs that still wait: (job id -> kept reservation, job id -> why it moved)."""
    kept: dict[int, Reservation] = {}
    moved: dict[int, str] = {}
    for old in sorted(reservations, key=lambda r: (r.start, r.job_id)):
        job = jobs.get(old.job_id)
        if job is None or job.id in kept:
            continue
        gone = [n for n in old.node_names if not node_fits(job, n)]
        if gone or len(old.node_names) != job.nodes:
            lost = ", ".join(gone or old.node_names)
            moved[job.id] = f"its reservation for {when(old.start)} was lost with {lost} (gone, drained or changed)"
            continue
        options = {n: timelines.starts(n, need_on(job, n), job.wall_seconds, now) for n in old.node_names}
        found = earliest_common_start(options, job.nodes)
        if found is None or found[0] > max(old.start, now) + 1e-6:
            # Its nodes are not free by the promised start: capacity was lost under it (a running job's wall
            # time extended, or the nodes' GPUs shrank). The walk finds it a new reservation.
            moved[job.id] = f"its nodes are no longer free by {when(old.start)}"
            continue
        kept[job.id] = hold(timelines, job, tuple(old.node_names), max(found[0], now), need_on)
    for promise in sorted(kept.values(), key=lambda r: (r.start, r.job_id))[:MAX_MOVE_SEARCHES]:
        if promise.start <= now:
            continue
        job = jobs[promise.job_id]
        timelines.release(job.id, promise.node_names)
        found = earliest_start(timelines, job, fitting_nodes(job), now, need_on)
        if found is not None and found[0] < promise.start - 1e-6:
            kept[job.id] = hold(timelines, job, tuple(found[1]), found[0], need_on)
        else:
            kept[job.id] = hold(timelines, job, promise.node_names, promise.start, need_on)
    return kept, moved
