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


@dataclass
class FakeRecord:
    job: FakeJob
    first_start: float | None


@dataclass(frozen=True)
class FakeCluster:
    nodes: int = 2
    gpus_per_node: int = 8


@dataclass
class FakeResult:
    policy: str
    cluster: FakeCluster = field(default_factory=FakeCluster)
    records: list[FakeRecord] = field(default_factory=list)
    samples: list[tuple[float, int, int, dict[str, float]]] = field(default_factory=list)


def fake_result(policy: str, delay: float) -> FakeResult:
    records = [
        FakeRecord(FakeJob(T0, 2, 16), T0 + delay),
        FakeRecord(FakeJob(T0 + 60, 1, 8), T0 + 60 + 2 * delay),
        FakeRecord(FakeJob(T0 + 120, 1, 2), T0 + 120),
        FakeRecord(FakeJob(T0 + 180, 1, 1), None),
    ]
    samples = [(T0, 16, 1, {"a": 16.0}), (T0 + 600, 8, 0, {"a": 4.0, "b": 4.0}), (T0 + 1200, 0, 0, {})]
    return FakeResult(policy, records=records, samples=samples)


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
