"""Synthetic clusters and queues for the scheduler benchmark and the property tests' scale checks."""

from __future__ import annotations

import random

from policy.model import Account, NodeView, PendingJob, RunningJob, Snapshot, team_key, user_key

# (nodes, GPUs per node) and how often each shape is asked for: mostly small jobs, a tail of big gangs.
SHAPES = [
    ((1, 1), 30),
    ((1, 2), 15),
    ((1, 4), 15),
    ((1, 8), 15),
    ((2, 8), 10),
    ((4, 8), 7),
    ((8, 8), 4),
    ((16, 8), 2),
    ((32, 8), 1),
    ((64, 8), 1),
]
# What is already running: 2,000 of these average ~3.6 GPUs, so they fill ~90% of 1,000 x 8 GPUs.
RUNNING_SHAPES = [((1, 1), 40), ((1, 2), 25), ((1, 4), 20), ((1, 8), 10), ((2, 8), 3), ((4, 8), 2)]


def synthetic_snapshot(*, nodes: int = 1000, gpus: int = 8, running: int = 2000, pending: int = 10_000, seed: int = 1) -> Snapshot:
    rnd = random.Random(seed)
    now = 1_800_000_000.0
    users = [f"u{i:03d}" for i in range(200)]
    teams = [f"t{i:02d}" for i in range(20)]
    team_of = {u: teams[i % len(teams)] for i, u in enumerate(users)}
    shapes, weights = zip(*SHAPES, strict=True)
    run_shapes, run_weights = zip(*RUNNING_SHAPES, strict=True)
    free = {f"n{i:04d}": gpus for i in range(nodes)}
    names = sorted(free)
    running_jobs: list[RunningJob] = []
    job_id = 0
    misses = 0
    # Fill the cluster with running jobs: whole nodes for gangs, packed GPUs for small jobs.
    while len(running_jobs) < running:
        (n, g) = rnd.choices(run_shapes, run_weights)[0]
        sample = rnd.sample(names, min(len(names), 64))
        if n == 1:
            chosen = [x for x in sample if free[x] >= g][:1]
        else:
            chosen = [x for x in sample if free[x] == gpus][:n]
        if len(chosen) < n:
            misses += 1
            if misses > 100 * running:
                raise ValueError(f"cannot fit {running} running jobs on {nodes} x {gpus} GPUs")
            continue
        job_id += 1
        held = (g,) if n == 1 else tuple(gpus for _ in chosen)
        for x, h in zip(chosen, held, strict=True):
            free[x] -= h
        user = rnd.choice(users)
        start = now - rnd.uniform(0, 86400)
        running_jobs.append(
            RunningJob(
                id=job_id,
                node_names=tuple(chosen),
                gpus_held=held,
                class_rank=rnd.choice([0, 1, 1, 1, 2]),
                started_at=start,
                ends_at=start + rnd.choice([3600, 4 * 3600, 24 * 3600, 72 * 3600]),
                user=user,
                team=team_of[user],
                preemptible=rnd.random() < 0.2,
                over_quota=rnd.random() < 0.05,
            )
        )
    node_views = tuple(NodeView(name=x, gpus_total=gpus, gpus_free=free[x], rack=f"r{int(x[1:]) // 40:02d}") for x in names)
    pending_jobs = []
    for _ in range(pending):
        job_id += 1
        (n, g) = rnd.choices(shapes, weights)[0]
        user = rnd.choice(users)
        pending_jobs.append(
            PendingJob(
                id=job_id,
                nodes=n,
                gpus_per_node=g,
                class_rank=rnd.choice([0, 1, 1, 1, 2]),
                submitted_at=now - rnd.uniform(0, 3 * 86400),
                user=user,
                team=team_of[user],
                preemptible=rnd.random() < 0.2,
                wall_seconds=rnd.choice([1800, 3600, 4 * 3600, 24 * 3600]),
            )
        )
    accounts = {}
    for u in users:
        accounts[user_key(u)] = Account(
            key=user_key(u),
            max_gpus=rnd.choice([None, 64, 128, 256]),
            weight=rnd.choice([1.0, 1.0, 2.0]),
            usage_gpu_seconds=rnd.uniform(0, 5e6),
            usage_node_seconds=rnd.uniform(0, 6e5),
        )
    for t in teams:
        accounts[team_key(t)] = Account(
            key=team_key(t),
            max_gpus=rnd.choice([None, 512, 1024]),
            node_hours_left=(budget := rnd.choice([None, None, 500.0, 5000.0])),
            budget_resets_at=now + 10 * 86400,
            node_hours_per_period=budget,
            weight=rnd.choice([1.0, 2.0, 4.0]),
            usage_gpu_seconds=rnd.uniform(0, 5e7),
            usage_node_seconds=rnd.uniform(0, 6e6),
        )
    return Snapshot(nodes=node_views, pending=tuple(pending_jobs), running=tuple(running_jobs), accounts=accounts, now=now)
