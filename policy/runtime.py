"""A running job's expected end, from its owner's recent jobs: what a waiting job's expected start is read from.

Reservations and backfill plan by wall times, since a job may run to its limit and a promise must hold.
An expected start need not: users ask for more time than they use, and by much the same margin job
after job. The prediction is the one of Tsafrir, Etsion and Feitelson ("Backfilling using
system-generated predictions rather than user runtime estimates", IEEE TPDS 2007): the mean run time
of the owner's last two finished jobs of its kind (a GPU slice, one node, several nodes: `runtime_kind`), never above
the job's own wall time (none before the owner has two). A job that runs past its
prediction is expected half-way from now to its wall-time end (RunningJob.likely_end), which on the replay
brought expected starts closer than its wall time did (docs/replay-findings.md, "Estimated starts").
"""

from __future__ import annotations

from collections.abc import Sequence

# How many of the owner's most recent finished jobs the prediction averages.
RECENT_JOBS = 2

# The kinds of job a prediction reads only its own kind's run times from: a slice of a GPU, one node, several nodes. Two
# finished 30-second notebook slices made each of an owner's ten queued 2-hour gangs expected to take 30 seconds.
SLICE, ONE_NODE, SEVERAL_NODES = "slice", "node", "nodes"


def runtime_kind(*, nodes: int, shares_gpu: bool = False, elastic: bool = False) -> str:
    """Which of its owner's run times a job's prediction reads (its own kind's)."""
    if shares_gpu:
        return SLICE
    return SEVERAL_NODES if nodes > 1 or elastic else ONE_NODE


def expected_runtime(recent_runtimes: Sequence[float], wall_seconds: float) -> float | None:
    """Seconds a job asking `wall_seconds` is expected to run, from its owner's latest run times (newest first); None
    with fewer than RECENT_JOBS of them (the job is then expected to run its wall time).

    One run says too little: a new user's five-second smoke test made each of their 58 queued two-hour jobs expected
    to run five seconds, so the queue page promised all of them within a minute."""
    recent = [max(0.0, r) for r in recent_runtimes[:RECENT_JOBS]]
    if len(recent) < RECENT_JOBS:
        return None
    return min(wall_seconds, sum(recent) / len(recent))
