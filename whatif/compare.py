"""What the compared runs assumed, side by side, each difference marked: two runs of the same trace on the same
cluster differ only here (the runtime cap, the resume mode, quotas, the policy settings...), and their headers alone
read the same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobs.amounts import duration
from whatif.models import WhatIfRun

DASH, TIMES = "\u2013", "\u00d7"
RESUME = {"restart": "restart from zero", "checkpoint": "resume from the last checkpoint"}


@dataclass(frozen=True)
class AssumptionRow:
    label: str
    values: tuple[str, ...]  # one per run, in the runs' order

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def _seconds(value: Any) -> str:
    return "none" if value is None else f"{duration(value)} ({value:g} s)"


def _setting(value: Any) -> str:
    return str(value)  # as the list and a run's page show a setting: preemption=False, starvation_seconds=600.0


def _assumptions(run: WhatIfRun) -> dict[str, str]:
    p, a = run.parameters, run.parameters.get("assumptions", {})
    shown = {
        "trace": run.trace_name,
        "jobs": f"{run.trace_jobs:,}",
        "cluster": f"{p.get('nodes')} nodes {TIMES} {a.get('gpus_per_node')} GPUs",
        "sized for an offered load of": DASH if p.get("load") is None else f"{p['load']:g}",
        "policies": ", ".join(run.policies),
        "wall time rounding": _seconds(a.get("wall_round_seconds")),
        "runtime cap": _seconds(a.get("runtime_cap_seconds")),
        "a preempted job": RESUME.get(a.get("resume", ""), str(a.get("resume"))),
        "quotas and borrowing": _yes(a.get("tenant_quotas")),
        "every job preemptible": _yes(a.get("all_preemptible")),
        "changed settings": ", ".join(f"{k}={_setting(v)}" for k, v in p.get("changes", {}).items()) or "none (the site's)",
    }
    return shown


def assumption_rows(runs: Sequence[WhatIfRun]) -> list[AssumptionRow]:
    """The runs' assumptions, one row each; then every policy setting whose value differs between the runs (the site's
    settings may have changed between two runs that changed none of their own)."""
    each = [_assumptions(run) for run in runs]
    rows = [AssumptionRow(label, tuple(shown[label] for shown in each)) for label in each[0]] if each else []
    configs = [run.parameters.get("config", {}) for run in runs]
    names = sorted({name for config in configs for name in config})
    for name in names:
        values = tuple(DASH if name not in config else _setting(config[name]) for config in configs)
        if len(set(values)) > 1:
            rows.append(AssumptionRow(f"setting {name}", values))
    return rows
