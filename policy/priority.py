"""Multifactor priority: a weighted sum of fair share, age, priority class, size and short wall time.

Every factor is in [0, 1]; the weights (settings) say how much each counts.

- fair share: 2^(-U/S) for the owner, times the same for the owner's team, where
  U is the account's dominant share of the cluster's recent capacity (the larger of
  its decayed GPU-seconds over the GPU-seconds the cluster gives in a decay window,
  and the same of node-seconds; of capacity, not of everyone's usage as Slurm's
  normalized usage: using GPUs no one else wanted costs little) and S its normalised
  shares (its weight over the weights of the accounts with work in the queue or
  on the cluster). An account that used exactly its share gets 0.5; an idle one 1.
- age: time in the queue over `age_max_seconds`, capped at 1. Requeued jobs keep
  their submit time.
- class: 1 for the highest priority class, 0 for the lowest.
- size: the job's share of the cluster's whole GPUs (`whole_gpus`: not the shared
  nodes', which take GPU slices only), so large gangs are not starved by a stream of
  small jobs. An elastic job's size is its least (min_nodes): it is not starved, it
  starts on what is free, and weighed at its most it went ahead of an older gang that
  fitted and then took every free node itself.
- short: 1 for a wall time of an hour or less, 0 at `short_max_seconds`, log scale
  between: shortest-job-first within the other factors, which cuts the mean wait most
  (docs/scheduling.md has the replay's figures).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from policy.model import Account, PendingJob, PolicyConfig, Priority, RunningJob, Snapshot, team_key, user_key

HOUR = 3600.0


def cluster_gpus(snapshot: Snapshot) -> int:
    """The GPUs Muster shares among its users: those of schedulable nodes, less what pods it did not start hold. Fair
    share's capacity: the ledger charges a GPU slice its share of a GPU, so the shared nodes' GPUs are capacity too."""
    return sum(n.gpus_total - n.gpus_foreign for n in snapshot.nodes if n.schedulable) or 1


def whole_gpus(snapshot: Snapshot) -> int:
    """`cluster_gpus` without the shared nodes' (time-sliced, MPS, MIG): the whole GPUs a gang can be given, the size
    factor's denominator. As Slurm's job size factor is a job's share of the partition it can run in: the shared nodes
    take GPU slices only (policy/sharing.py), so counting them made a job asking every whole GPU (128 on `make run`'s
    cluster, as the cluster page says) read 128/144 = 0.89, never 1, and each job's size shrink as slices were added."""
    return sum(n.gpus_total - n.gpus_foreign for n in snapshot.nodes if n.schedulable and not n.sharing) or 1


def prioritize(snapshot: Snapshot, config: PolicyConfig) -> dict[int, Priority]:
    cluster = whole_gpus(snapshot)
    usage = usage_ratios(snapshot, config)

    def fair(key: str, kind: str) -> float:
        return 2 ** -usage(key, kind)

    classes = max(config.class_count - 1, 1)
    w_fair, w_age, w_class, w_size = config.weight_fair_share, config.weight_age, config.weight_class, config.weight_size
    w_short = config.weight_short
    shorts: dict[float, float] = {}
    age_max = config.age_max_seconds
    # The factors depend on the job only through its owners, submit time, class, size and wall time: computed once per value.
    owners: dict[tuple[str, str | None], float] = {}
    ranks: dict[int, float] = {}
    sizes: dict[int, float] = {}
    result: dict[int, Priority] = {}
    for job in snapshot.pending:
        owner = (job.user, job.team)
        fair_share = owners.get(owner)
        if fair_share is None:
            fair_share = owners[owner] = fair(user_key(job.user), "user") * (fair(team_key(job.team), "team") if job.team else 1.0)
        age = min(1.0, max(0.0, snapshot.now - job.submitted_at) / age_max) if age_max > 0 else 1.0
        rank = ranks.get(job.class_rank)
        if rank is None:
            rank = ranks[job.class_rank] = max(0.0, 1.0 - job.class_rank / classes)
        # An elastic job at its least, the gang it must be given (its limits and reservation are at its least too).
        gpus = job.start_shape().gpus
        size = sizes.get(gpus)
        if size is None:
            size = sizes[gpus] = min(1.0, gpus / cluster)
        short = shorts.get(job.wall_seconds)
        if short is None:
            short = shorts[job.wall_seconds] = short_factor(job.wall_seconds, config.short_max_seconds)
        fair_w, age_w, class_w, size_w, short_w = fair_share * w_fair, age * w_age, rank * w_class, size * w_size, short * w_short
        weighted = {
            "fair_share": (fair_share, fair_w),
            "age": (age, age_w),
            "class": (rank, class_w),
            "size": (size, size_w),
            "short": (short, short_w),
        }
        # Added in the factors' order from 0, as sum() over them did: the same float.
        total = 0 + fair_w + age_w + class_w + size_w + short_w
        result[job.id] = Priority(total=total, factors=weighted)
    return result


def usage_ratios(snapshot: Snapshot, config: PolicyConfig) -> Callable[[str, str], float]:
    """U/S per account: its dominant share of the cluster's recent capacity over its share of it (1: exactly its share).

    The fair-share factor is 2^(-U/S); preemption for fair share compares the ratios themselves.
    """
    gpus = cluster_gpus(snapshot)
    cluster_nodes = sum(1 for n in snapshot.nodes if n.schedulable) or 1
    window = config.half_life_seconds / math.log(2)
    active = _active_accounts(snapshot)
    # Summed in a fixed order, so float rounding cannot depend on the order the snapshot lists jobs in.
    weight_sums = {kind: sum(_account(snapshot, k).weight for k in sorted(keys)) or 1.0 for kind, keys in active.items()}
    cache: dict[str, float] = {}

    def ratio(key: str, kind: str) -> float:
        if key not in cache:
            account = _account(snapshot, key)
            used = max(account.usage_gpu_seconds / (gpus * window), account.usage_node_seconds / (cluster_nodes * window))
            share = account.weight / weight_sums[kind]
            cache[key] = used / share if share > 0 else math.inf
        return cache[key]

    return ratio


def short_factor(wall_seconds: float, short_max_seconds: float) -> float:
    """1 for a wall time of an hour or less, falling with the log of the wall time to 0 at `short_max_seconds`.

    Log scale because wall times span minutes to weeks: 1 h against 2 h counts as much as 1 day against 2 days.
    """
    if short_max_seconds <= HOUR:
        return 1.0
    hours = max(wall_seconds, HOUR) / HOUR
    return max(0.0, 1.0 - math.log(hours) / math.log(short_max_seconds / HOUR))


def priority_order(snapshot: Snapshot, config: PolicyConfig, priorities: dict[int, Priority] | None = None) -> list[PendingJob]:
    """Highest priority first; ties go to the older job, then the lower id (a total order)."""
    priorities = priorities if priorities is not None else prioritize(snapshot, config)
    return sorted(snapshot.pending, key=lambda j: (-priorities[j.id].total, j.submitted_at, j.id))


def _account(snapshot: Snapshot, key: str) -> Account:
    return snapshot.accounts.get(key) or Account(key=key)


def _active_accounts(snapshot: Snapshot) -> dict[str, set[str]]:
    users: set[str] = set()
    teams: set[str] = set()
    jobs: tuple[PendingJob | RunningJob, ...] = (*snapshot.pending, *snapshot.running)
    for job in jobs:
        users.add(user_key(job.user))
        if job.team:
            teams.add(team_key(job.team))
    return {"user": users, "team": teams}
