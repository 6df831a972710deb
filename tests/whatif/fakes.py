"""A tiny SimResult-shaped result and metrics-shaped summary, for the report's tests (no simulation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

T0 = 1_500_000_000.0


@dataclass(frozen=True)
class FakeJob:
    submit: float
    nodes: int
    gpus: int
    tenant: str = "a"


@dataclass
class FakeRecord:
    job: FakeJob
    first_start: float | None
    attempts: list[tuple[float, float, int]] = field(default_factory=list)  # (start, end, GPUs held)


@dataclass(frozen=True)
class FakeCluster:
    nodes: int = 2
    gpus_per_node: int = 8


@dataclass
class FakeResult:
    policy: str
    cluster: FakeCluster = field(default_factory=FakeCluster)
    records: list[FakeRecord] = field(default_factory=list)


def fake_result(policy: str, delay: float) -> FakeResult:
    """A gang of tenant a waiting `delay` then running 10 min, a whole-node job of b waiting twice that and running
    10 min, a sub-node job of b starting at once and running 20 min, and one never started."""
    records = [
        FakeRecord(FakeJob(T0, 2, 16), T0 + delay, [(T0 + delay, T0 + delay + 600, 16)]),
        FakeRecord(FakeJob(T0 + 60, 1, 8, "b"), T0 + 60 + 2 * delay, [(T0 + 60 + 2 * delay, T0 + 660 + 2 * delay, 8)]),
        FakeRecord(FakeJob(T0 + 120, 1, 2, "b"), T0 + 120, [(T0 + 120, T0 + 1320, 2)]),
        FakeRecord(FakeJob(T0 + 180, 1, 1), None),
    ]
    return FakeResult(policy, records=records)


def fake_summary(policy: str, wait: float) -> dict[str, Any]:
    stats = {"mean": wait, "median": wait / 2, "p99": wait * 3}
    return {
        "policy": policy,
        "jobs": 4,
        "nodes": 2,
        "gpus": 16,
        "load": 0.5,
        "makespan_seconds": 1200.0,
        "utilisation": 0.5,
        "idle_while_waiting": 0.025,
        "jct": {**stats, "gang": stats, "whole_node": stats, "sub_node": stats},
        "wait": {**stats, "gang": stats, "whole_node": stats, "sub_node": stats},
        "bounded_slowdown_mean": 1.5,
        "fair_share": {
            "definition": "each tenant's GPU-hours over its fair share, per day",
            "min_ratio": 0.8,
            "min_tenant": "b",
            "min_day": "2017-07-14",
        },
        "preemptions": 1,
        "gpu_hours_lost": 0.5,
        "reservation_slips": {"count": 2, "mean_seconds": 30.0, "max_seconds": 50.0},
        "eta": {"at_submit": {"n": 3, "mae_seconds": 100.0, "median_abs_seconds": 80.0}, "while_waiting": {"n": 0}},
        "decision_cpu": {"calls": 10, "total_seconds": 0.01, "per_call_ms": {"0-9": 0.5, "10-99": 1.5}},
        "sim_cpu_seconds": 0.2,
        "wall_seconds": 0.25,
    }


class FakeAssumptions:
    def describe(self) -> list[str]:
        return ["A job asks for its runtime rounded up to the hour.", "Runtimes above 168 hours are cut to 168 hours."]
