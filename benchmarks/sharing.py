"""How much more runs at once with GPU sharing: the policy on a cluster mixing sub-GPU and whole-node work.

The same cluster (16 nodes x 8 GPUs) and the same stream of jobs run twice through `policy.schedule`, a cycle at
every arrival and every end, until every job has ended (arrivals and lengths seeded):

- without sharing: every node whole; a job needing a quarter of a GPU takes a whole one;
- with sharing: two of the nodes time-sliced, 4 slices per GPU (64 quarter-GPU slices); the other 14 whole.

Over 48 hours arrive: quarter-GPU jobs (notebooks, evaluation: 0.5-3 h) at 30 an hour, whole-node jobs (8 GPUs,
2-8 h) at 2.4 an hour and two-node gangs (4-12 h) at 0.2 an hour; about what the 16 nodes can hold. Prints one
JSON line per run: jobs running at once (time-weighted mean and peak, over the 48 hours of arrivals), the mean
wait of each kind, and GPU-hours held; then the ratios.

    python -m benchmarks.sharing
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, replace

from policy.model import NodeView, PendingJob, RunningJob, Snapshot
from policy.schedule import schedule

HOUR = 3600.0
NODES, GPUS = 16, 8
SHARED_NODES, SLICES = 2, 4


@dataclass(frozen=True)
class Work:
    job: PendingJob
    seconds: float
    kind: str


ARRIVAL_HOURS = 48.0


def workload(seed: int = 7) -> list[Work]:
    """Poisson arrivals of each kind over ARRIVAL_HOURS; `submitted_at` is the arrival."""
    rng = random.Random(seed)
    kinds = (
        ("quarter", 30.0, 1, 1, (0.5, 3.0), 4 * HOUR),
        ("node", 2.4, 1, 8, (2.0, 8.0), 9 * HOUR),
        ("gang", 0.2, 2, 8, (4.0, 12.0), 13 * HOUR),
    )
    work: list[Work] = []
    for kind, per_hour, nodes, gpus, (low, high), wall in kinds:
        at = rng.expovariate(per_hour) * HOUR
        while at < ARRIVAL_HOURS * HOUR:
            job = PendingJob(len(work), nodes, gpus, 1, submitted_at=at, user=f"u{len(work) % 12}", wall_seconds=wall)
            if kind == "quarter":
                job = replace(job, gpu_fraction=0.25)
            work.append(Work(job, rng.uniform(low, high) * HOUR, kind))
            at += rng.expovariate(per_hour) * HOUR
    return work


def cluster(sharing: bool) -> list[NodeView]:
    nodes = []
    for i in range(NODES):
        if sharing and i >= NODES - SHARED_NODES:
            nodes.append(NodeView(f"n{i:02d}", GPUS, 0, sharing="time-slicing", slices_per_gpu=SLICES, slice_gpus=1 / SLICES))
        else:
            nodes.append(NodeView(f"n{i:02d}", GPUS, GPUS))
    return nodes


def run(sharing: bool) -> dict[str, float]:
    work = workload()
    if not sharing:  # a quarter-GPU job takes a whole GPU
        work = [replace(w, job=replace(w.job, gpu_fraction=0.0)) if w.kind == "quarter" else w for w in work]
    by_id = {w.job.id: w for w in work}
    arrivals = sorted(work, key=lambda w: w.job.submitted_at)
    pending: dict[int, PendingJob] = {}
    running: dict[int, tuple[RunningJob, float, int | None]] = {}
    nodes = cluster(sharing)
    now, peak, job_seconds, started, gpu_seconds, arrived = 0.0, 0, 0.0, {}, 0.0, 0
    window = ARRIVAL_HOURS * HOUR
    while arrived < len(arrivals) or pending or running:
        while arrived < len(arrivals) and arrivals[arrived].job.submitted_at <= now:
            pending[arrivals[arrived].job.id] = arrivals[arrived].job
            arrived += 1
        used = {n.name: [0] * n.gpus_total for n in nodes}
        free = {n.name: n.gpus_total for n in nodes}
        for r, _, slot in running.values():
            if slot is None:
                for name, gpus in zip(r.node_names, r.gpus_held, strict=True):
                    free[name] -= int(gpus)
            else:
                used[r.node_names[0]][slot] += 1
        views = tuple(replace(n, slices_used=tuple(used[n.name])) if n.sharing else replace(n, gpus_free=free[n.name]) for n in nodes)
        snap = Snapshot(nodes=views, pending=tuple(pending.values()), running=tuple(r for r, _, _ in running.values()), now=now)
        for p in schedule(snap).placements:
            job = pending.pop(p.job_id)
            started[p.job_id] = now
            held = RunningJob(p.job_id, p.node_names, p.gpus_held, job.class_rank, now, now + job.wall_seconds, user=job.user)
            running[p.job_id] = (held, now + by_id[p.job_id].seconds, p.gpu_slot)
        if now < window:
            peak = max(peak, len(running))
        # On to the next arrival or end.
        nexts = [end for _, end, _ in running.values()]
        if arrived < len(arrivals):
            nexts.append(arrivals[arrived].job.submitted_at)
        if not nexts:
            break
        later = min(nexts)
        job_seconds += len(running) * max(0.0, min(later, window) - now)
        now = later
        for job_id in [j for j, (_, end, _) in running.items() if end <= now]:
            r, end, _ = running.pop(job_id)
            gpu_seconds += r.gpus * (end - r.started_at)

    def mean_wait(kind: str) -> float:
        waits = [started[w.job.id] - w.job.submitted_at for w in work if w.kind == kind]
        return sum(waits) / len(waits) / HOUR

    return {
        "sharing": sharing,
        "jobs": len(work),
        "mean_jobs_running": round(job_seconds / window, 1),
        "peak_jobs_running": peak,
        "quarter_mean_wait_h": round(mean_wait("quarter"), 2),
        "node_mean_wait_h": round(mean_wait("node"), 2),
        "gang_mean_wait_h": round(mean_wait("gang"), 2),
        "gpu_hours_held": round(gpu_seconds / HOUR, 1),
    }


def main() -> None:
    without, with_sharing = run(False), run(True)
    print(json.dumps({"case": "without sharing", **without}))
    print(json.dumps({"case": "with sharing", **with_sharing}))
    ratios = {
        "mean_jobs_running": round(with_sharing["mean_jobs_running"] / without["mean_jobs_running"], 2),
        "peak_jobs_running": round(with_sharing["peak_jobs_running"] / without["peak_jobs_running"], 2),
        "gpu_hours_held": round(with_sharing["gpu_hours_held"] / without["gpu_hours_held"], 2),
    }
    print(json.dumps({"case": "ratios (with sharing / without)", **ratios}))


if __name__ == "__main__":
    main()
