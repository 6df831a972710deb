"""Offered load: how much work a trace asks of a cluster, and the cluster size that makes it a given load."""

from __future__ import annotations

from collections.abc import Sequence

from replay.trace import TraceJob


def nodes_for_load(jobs: Sequence[TraceJob], load: float, gpus_per_node: int) -> int:
    """The node count at which the trace offers `load`.

    Offered load = sum(runtime x GPUs asked) / (window x cluster GPUs), window = last submit - first
    submit. Rounded to the nearest node, at least one node and at least the largest gang.
    """
    if not jobs or load <= 0:
        raise ValueError("need jobs and a positive load")
    window = max(j.submit for j in jobs) - min(j.submit for j in jobs)
    work = sum(j.runtime * j.gpus for j in jobs)
    largest = max(j.nodes for j in jobs)
    if window <= 0:
        return largest
    return max(1, largest, round(work / (window * load * gpus_per_node)))


def offered_load(jobs: Sequence[TraceJob], gpus: int) -> float:
    """sum(runtime x GPUs asked) / ((last submit - first submit) x cluster GPUs)."""
    window = max(j.submit for j in jobs) - min(j.submit for j in jobs) if jobs else 0.0
    return sum(j.runtime * j.gpus for j in jobs) / (window * gpus) if window > 0 and gpus > 0 else 0.0
