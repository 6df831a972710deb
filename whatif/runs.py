"""Replaying a trace under several policies: what the command and the what-if task both run. No Django here.

`replay_policies` runs the pure core (replay.simulator, replay.metrics) once per policy on one cluster and
reports progress over all of them; `settings_used` is what the report lists as the settings of the run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from policy.model import PolicyConfig
from replay.load import nodes_for_load
from replay.metrics import summarize
from replay.simulator import POLICIES, ClusterSpec, SimResult, simulate
from replay.trace import Assumptions, TraceJob

# progress(policy, fraction of that policy done, fraction of the whole run done)
Progress = Callable[[str, float, float], None]
# A cap of 0 s (or less) would cut every run to nothing, not mean "no cap": the form and the command refuse it alike.
RUNTIME_CAP_NOT_POSITIVE = "A runtime cap must be above 0 s: 0 would cut every run to nothing."


def runtime_cap_check(seconds: float | None, *, no_cap: str) -> float | None:
    """`seconds` if it is a cap (above 0), None for no cap; for 0 or less, ValueError saying so and how to ask for no
    cap (`no_cap`, as the form or the command says it)."""
    if seconds is not None and not seconds > 0:
        raise ValueError(f"{RUNTIME_CAP_NOT_POSITIVE} {no_cap}")
    return seconds


def parse_policies(value: str | Iterable[str]) -> tuple[str, ...]:
    names = [p.strip() for p in (value.split(",") if isinstance(value, str) else value) if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    if unknown or not names:
        raise ValueError(f"unknown policy {', '.join(unknown) or '(none given)'}; choose from {', '.join(POLICIES)}")
    return tuple(dict.fromkeys(names))


def cluster_for(jobs: Sequence[TraceJob], *, nodes: int | None, load: float | None, gpus_per_node: int) -> ClusterSpec:
    """The simulated cluster: `nodes` of `gpus_per_node` GPUs, or as many as make the trace's offered load `load`."""
    if (nodes is None) == (load is None):
        raise ValueError("give the cluster's size as either a node count or an offered load, not both")
    if nodes is None:
        assert load is not None
        if load <= 0:
            raise ValueError("the offered load must be above 0")
        nodes = nodes_for_load(jobs, load, gpus_per_node)
    if nodes < 1:
        raise ValueError("the cluster needs at least one node")
    widest = max((j.nodes for j in jobs), default=0)
    if widest > nodes:
        raise ValueError(f"the trace has a job on {widest} nodes, more than the cluster's {nodes}: it could never run")
    return ClusterSpec(nodes=nodes, gpus_per_node=gpus_per_node)


def submit_window(jobs: Sequence[TraceJob]) -> float:
    """Seconds from the trace's first submit to its last: the window its offered load spreads its work over."""
    return max(j.submit for j in jobs) - min(j.submit for j in jobs) if jobs else 0.0


def settings_used(cluster: ClusterSpec, config: PolicyConfig, assumptions: Assumptions, *, load: float | None = None) -> dict[str, Any]:
    used: dict[str, Any] = {"nodes": cluster.nodes, "gpus_per_node": cluster.gpus_per_node}
    if load is not None:
        used["offered_load_asked"] = load
    used.update({f"assumption.{k}": v for k, v in dataclasses.asdict(assumptions).items()})
    used.update({f"policy.{k}": v for k, v in dataclasses.asdict(config).items()})
    return used


def replay_policies(
    jobs: Sequence[TraceJob],
    *,
    policies: Sequence[str],
    cluster: ClusterSpec,
    config: PolicyConfig,
    assumptions: Assumptions,
    progress: Progress | None = None,
) -> tuple[list[dict[str, Any]], list[SimResult]]:
    """Each policy's summary (with `wall_seconds`, how long its simulation took) and its full result, in order."""
    summaries: list[dict[str, Any]] = []
    results: list[SimResult] = []
    for i, policy in enumerate(policies):

        def step(fraction: float, policy: str = policy, i: int = i) -> None:
            if progress is not None:
                fraction = min(1.0, max(0.0, fraction))
                progress(policy, fraction, (i + fraction) / len(policies))

        began = time.monotonic()
        step(0.0)
        result = simulate(jobs, cluster=cluster, policy=policy, config=config, assumptions=assumptions, progress=step)
        summary = summarize(result, config=config)
        if not submit_window(jobs) > 0:
            # Offered load is the trace's work over its submit window; with every job submitted at one moment (one job,
            # say) there is none, and replay.load.offered_load's 0.0 read "offered load 0.00" beside a utilisation of
            # 1.6%. Not defined: the report shows a dash, and the run's page says why.
            summary["load"] = None
        summary["wall_seconds"] = time.monotonic() - began
        step(1.0)
        summaries.append(summary)
        results.append(result)
    return summaries, results
