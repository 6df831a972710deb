"""What a replay achieved: one JSON-able summary per run.

Definitions (times in seconds):

- JCT (job completion time) = end - submit; wait = first start - submit. Percentiles interpolate
  linearly between the closest ranks. Split by shape: "gang" (more than one node), "whole_node" (one
  node, all its GPUs) and "sub_node" (fewer GPUs than a node).
- bounded slowdown = max(1, JCT / max(runtime, 10 s)), averaged over jobs.
- utilisation = GPU-seconds held by jobs (every run, preempted ones too; a gang holds its nodes whole)
  / (makespan x cluster GPUs); makespan = last end - first submit. Without preemption every policy holds
  the same GPU-seconds, so it tells policies apart by their makespan alone: the one whose last long job
  starts later scores lower, whatever it left idle before.
- idle while waiting = GPU-seconds free while at least one job waited (before its first start, or again
  after a preemption) / (makespan x cluster GPUs): what the policy left unused that a queue was there for,
  whether by fragments no waiting job fits, by nodes drained for a reservation, or by holding jobs back.
- load = offered load: sum(runtime x GPUs asked) / ((last submit - first submit) x cluster GPUs).
- fair share: see FAIR_SHARE_DEFINITION.
- reservation slip: a job that got a reservation and started later than the first reservation's
  start (by more than one second).
- ETA: |estimated start - actual start|. At submit: the estimate the policy gave at the call right after
  the submit (jobs placed at once, or with no estimate, are not counted); while waiting: every sample,
  against the start that followed it; reserved: the samples that were a reservation's start (a promise).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from policy.model import ESTIMATE_RESERVED, PolicyConfig
from replay.load import offered_load
from replay.simulator import JobRecord, SimResult
from replay.trace import DEFAULT_CLASSES

DAY = 86400.0
TAU_SECONDS = 10.0
# Tenant-days whose demand is below this many GPU-hours are left out of the fair-share minimum.
FAIR_SHARE_MIN_DEMAND_GPU_HOURS = 1.0
SLIP_TOLERANCE_SECONDS = 1.0
QUEUE_BUCKETS = ((0, 9), (10, 99), (100, 999), (1000, 9999), (10000, None))

FAIR_SHARE_DEFINITION = (
    "Per tenant per UTC day: GPU-seconds the tenant's jobs held that day / its fair share that day. "
    "Its demand that day is the GPU-seconds its jobs could have used: the time each job was pending or running "
    "inside the day, times the GPUs it holds when running (a gang's whole nodes). The fair share is the max-min "
    "(water-filling) share of the cluster's GPU-seconds that day (GPUs x the part of the day inside the replay) "
    "among the tenants with demand that day, each with weight 1: every tenant gets min(demand, level), with the "
    "level such that the shares add up to min(capacity, total demand). "
    f"min_ratio is the smallest ratio over tenant-days with demand of at least {FAIR_SHARE_MIN_DEMAND_GPU_HOURS:g} GPU-hour; "
    "1 means every tenant got at least its fair share every day. Over the window, a tenant's ratio is the GPU-seconds "
    "it held over the days it had demand / the sum of its fair shares over those days (window_min_ratio: the smallest "
    "over tenants); a job that waits one day and runs the next counts for both, where a day alone cannot."
)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100), linear between the closest ranks; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def _stats(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "mean": sum(values) / len(values) if values else None,
        "median": percentile(values, 50),
        "p99": percentile(values, 99),
    }


def class_name(rank: int) -> str:
    """The priority class of a trace job's rank (DEFAULT_CLASSES; "other" below them all)."""
    return DEFAULT_CLASSES[rank] if 0 <= rank < len(DEFAULT_CLASSES) else "other"


def shape(record: JobRecord, gpus_per_node: int) -> str:
    job = record.job
    if job.nodes > 1:
        return "gang"
    return "whole_node" if job.gpus >= gpus_per_node else "sub_node"


# Wall-time buckets for where the waiting goes (upper bounds in hours; the last is open).
WALL_BUCKETS = ((1.0, "<=1h"), (4.0, "<=4h"), (24.0, "<=1d"), (float("inf"), ">1d"))


def wall_bucket(wall_seconds: float) -> str:
    return next(name for hours, name in WALL_BUCKETS if wall_seconds <= hours * 3600)


def waited_by_class(records: Sequence[JobRecord], gpus_per_node: int) -> dict[str, dict[str, dict[str, float]]]:
    """Hours waited until the first start, by shape (one_gpu apart from the other sub_node jobs) and wall-time bucket,
    and each bucket's part of the mean wait.

    The mean wait is one number over jobs of every shape and length; this says which of them it is made of, so a
    policy change can be judged by where it moves the waiting (docs/replay-findings.md).
    """
    # The jobs summarize's mean wait counts (started and ended), so the parts add up to it.
    started = [r for r in records if r.first_start is not None and r.end is not None]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for r in started:
        assert r.first_start is not None
        kind = "one_gpu" if r.job.nodes == 1 and r.job.gpus == 1 else shape(r, gpus_per_node)
        cell = out.setdefault(kind, {}).setdefault(wall_bucket(r.job.wall_seconds), {"jobs": 0, "waited_hours": 0.0, "of_mean_hours": 0.0})
        waited = (r.first_start - r.job.submit) / 3600
        cell["jobs"] += 1
        cell["waited_hours"] += waited
        cell["of_mean_hours"] += waited / len(started)
    return out


def held_gpus(record: JobRecord, gpus_per_node: int) -> int:
    job = record.job
    return job.nodes * gpus_per_node if job.nodes > 1 else job.gpus


def summarize(result: SimResult, *, config: PolicyConfig) -> dict[str, Any]:
    records = result.records
    gpn = result.cluster.gpus_per_node
    gpus = result.cluster.nodes * gpn
    first = min((r.job.submit for r in records), default=0.0)
    last = max((r.end for r in records if r.end is not None), default=first)
    makespan = last - first
    busy = sum((end - start) * held for r in records for start, end, held in r.attempts)

    jct: dict[str, list[float]] = defaultdict(list)
    wait: dict[str, list[float]] = defaultdict(list)
    by_class: dict[str, list[float]] = defaultdict(list)
    slowdowns = []
    for r in records:
        if r.end is None or r.first_start is None:
            continue
        kind = shape(r, gpn)
        for key in ("all", kind):
            jct[key].append(r.end - r.job.submit)
            wait[key].append(r.first_start - r.job.submit)
        by_class[class_name(r.job.class_rank)].append(r.first_start - r.job.submit)
        slowdowns.append(max(1.0, (r.end - r.job.submit) / max(r.job.runtime, TAU_SECONDS)))
    splits = ("gang", "whole_node", "sub_node")

    preempted: dict[str, int] = defaultdict(int)
    for r in records:
        preempted[class_name(r.job.class_rank)] += r.preemptions

    slips = []
    for r in records:
        if r.promised_start is None:
            continue
        made = r.promised_at if r.promised_at is not None else r.job.submit
        started = next((start for start, _, _ in r.attempts if start >= made), None)
        if started is not None and started > r.promised_start + SLIP_TOLERANCE_SECONDS:
            slips.append(started - r.promised_start)

    return {
        "policy": result.policy,
        "jobs": len(records),
        "nodes": result.cluster.nodes,
        "gpus": gpus,
        "load": offered_load([r.job for r in records], gpus),
        "makespan_seconds": makespan,
        "gpu_seconds_held": busy,
        "utilisation": busy / (makespan * gpus) if makespan > 0 and gpus else 0.0,
        "idle_while_waiting": idle_while_waiting(records, gpus) / (makespan * gpus) if makespan > 0 and gpus else 0.0,
        "jct": {**_stats(jct["all"]), "split": {k: _stats(jct[k]) for k in splits}},
        "wait": {
            **_stats(wait["all"]),
            "split": {k: _stats(wait[k]) for k in splits},
            "by_priority_class": {
                name: {**_stats(waits), "jobs": len(waits), "preemptions": preempted[name]} for name, waits in sorted(by_class.items())
            },
        },
        "waited_by_class": waited_by_class(records, gpn),
        "bounded_slowdown_mean": sum(slowdowns) / len(slowdowns) if slowdowns else None,
        "fair_share": fair_share(records, gpus_per_node=gpn, gpus=gpus),
        "preemptions": sum(r.preemptions for r in records),
        "gpu_hours_lost": sum(r.gpu_seconds_lost for r in records) / 3600,
        "reservation_slips": {
            "count": len(slips),
            "mean_seconds": sum(slips) / len(slips) if slips else 0.0,
            "max_seconds": max(slips, default=0.0),
        },
        "eta": _eta(records),
        "decision_cpu": _decision_cpu(result.decisions),
        "sim_cpu_seconds": result.cpu_seconds,
    }


def idle_while_waiting(records: Sequence[JobRecord], gpus: int) -> float:
    """GPU-seconds free while at least one job waited: each job waits from its submit to its first run and between runs."""
    events: list[tuple[float, int, int]] = []  # (time, change in GPUs held, change in jobs waiting)
    for r in records:
        waiting_since = r.job.submit
        for start, end, held in r.attempts:
            if start > waiting_since:
                events += [(waiting_since, 0, 1), (start, 0, -1)]
            events += [(start, held, 0), (end, -held, 0)]
            waiting_since = end
        if not r.attempts:
            events.append((waiting_since, 0, 1))
    idle, held, waiting = 0.0, 0, 0
    last = None
    for t, d_held, d_waiting in sorted(events):
        if last is not None and waiting > 0:
            idle += (t - last) * max(0, gpus - held)
        held, waiting, last = held + d_held, waiting + d_waiting, t
    return idle


def _errors(errors: list[float]) -> dict[str, float | int | None]:
    return {
        "n": len(errors),
        "mae_seconds": sum(errors) / len(errors) if errors else None,
        "median_abs_seconds": percentile(errors, 50),
    }


def _eta(records: Sequence[JobRecord]) -> dict[str, Any]:
    at_submit = [
        abs(r.predicted_at_submit - r.first_start) for r in records if r.predicted_at_submit is not None and r.first_start is not None
    ]
    waiting = []
    reserved = []
    for r in records:
        for at, predicted, kind in r.predictions:
            actual = next((start for start, _, _ in r.attempts if start >= at), None)
            if actual is not None:
                waiting.append(abs(predicted - actual))
                if kind == ESTIMATE_RESERVED:
                    reserved.append(abs(predicted - actual))
    return {"at_submit": _errors(at_submit), "while_waiting": _errors(waiting), "reserved": _errors(reserved)}


def _decision_cpu(decisions: Sequence[tuple[int, float]]) -> dict[str, Any]:
    buckets: dict[str, list[float]] = {}
    for lo, hi in QUEUE_BUCKETS:
        label = f"{lo}-{hi}" if hi is not None else f"{lo}+"
        times = [cpu for queue, cpu in decisions if queue >= lo and (hi is None or queue <= hi)]
        if times:
            buckets[label] = times
    return {
        "calls": len(decisions),
        "total_seconds": sum(cpu for _, cpu in decisions),
        "per_call_ms": {
            label: {"calls": len(t), "mean": 1000 * sum(t) / len(t), "p99": 1000 * (percentile(t, 99) or 0.0), "max": 1000 * max(t)}
            for label, t in buckets.items()
        },
    }


def _by_day(start: float, end: float, gpus: float, into: dict[int, float]) -> None:
    """Add gpus x the seconds of [start, end) inside each UTC day (day = floor(t / 86400))."""
    at = start
    while at < end:
        day = math.floor(at / DAY)
        piece = min(end, (day + 1) * DAY)
        into[day] += (piece - at) * gpus
        at = piece


def water_fill(demands: dict[str, float], capacity: float, weights: dict[str, float] | None = None) -> dict[str, float]:
    """Max-min fair shares: each gets min(demand, level x weight), the level set so they add up to min(capacity, total)."""
    weights = weights or {}
    shares = {}
    left = capacity
    order = sorted(demands, key=lambda t: (demands[t] / weights.get(t, 1.0), t))
    weight_left = sum(weights.get(t, 1.0) for t in order)
    for tenant in order:
        w = weights.get(tenant, 1.0)
        level = left / weight_left if weight_left > 0 else 0.0
        share = min(demands[tenant], level * w)
        shares[tenant] = share
        left -= share
        weight_left -= w
    return shares


def fair_share(records: Sequence[JobRecord], *, gpus_per_node: int, gpus: int) -> dict[str, Any]:
    demand: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    received: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    first = min((r.job.submit for r in records), default=0.0)
    last = max((r.end for r in records if r.end is not None), default=first)
    for r in records:
        if r.end is None:
            continue
        _by_day(r.job.submit, r.end, held_gpus(r, gpus_per_node), demand[r.job.tenant])
        for start, end, held in r.attempts:
            _by_day(start, end, held, received[r.job.tenant])
    days = sorted({d for per in demand.values() for d in per})
    rows = []
    threshold = FAIR_SHARE_MIN_DEMAND_GPU_HOURS * 3600
    for day in days:
        span = max(0.0, min(last, (day + 1) * DAY) - max(first, day * DAY))
        demands = {t: per[day] for t, per in demand.items() if per.get(day, 0.0) > 0}
        shares = water_fill(demands, span * gpus)
        for tenant in sorted(demands):
            got = received[tenant].get(day, 0.0)
            share = shares[tenant]
            rows.append(
                {
                    "tenant": tenant,
                    "day": datetime.fromtimestamp(day * DAY, UTC).date().isoformat(),
                    "demand_gpu_hours": demands[tenant] / 3600,
                    "fair_gpu_hours": share / 3600,
                    "received_gpu_hours": got / 3600,
                    "ratio": got / share if share > 0 else None,
                    "counted": demands[tenant] >= threshold and share > 0,
                }
            )
    counted = [row for row in rows if row["counted"]]
    worst = min(counted, key=lambda row: (row["ratio"], row["day"], row["tenant"])) if counted else None
    got_over: dict[str, float] = defaultdict(float)
    fair_over: dict[str, float] = defaultdict(float)
    for row in counted:
        got_over[str(row["tenant"])] += float(row["received_gpu_hours"])  # type: ignore[arg-type]
        fair_over[str(row["tenant"])] += float(row["fair_gpu_hours"])  # type: ignore[arg-type]
    window = {tenant: got_over[tenant] / fair_over[tenant] for tenant in sorted(fair_over) if fair_over[tenant] > 0}
    window_worst = min(window, key=lambda t: (window[t], t)) if window else None
    return {
        "window_min_ratio": window[window_worst] if window_worst else None,
        "window_min_tenant": window_worst,
        "window_per_tenant": window,
        "definition": FAIR_SHARE_DEFINITION,
        "min_demand_gpu_hours": FAIR_SHARE_MIN_DEMAND_GPU_HOURS,
        "min_ratio": worst["ratio"] if worst else None,
        "min_tenant": worst["tenant"] if worst else None,
        "min_day": worst["day"] if worst else None,
        "per_tenant_day": rows,
    }
