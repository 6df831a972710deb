"""Series of one run combined per node and for the whole job, and clipped/coarsened for a read."""

from __future__ import annotations

from collections.abc import Iterable

from telemetry.catalogue import Level
from telemetry.downsampling import clip, coarsen, combine
from telemetry.sources.base import Series


def roll_up(series: Iterable[Series], level: Level) -> list[Series]:
    """GPU series as node series (each node's GPUs combined), or node/GPU series as one job series.

    Combining keeps every sample: the mean over all GPUs' samples, the lowest minimum, the highest maximum.
    """
    series = list(series)
    if not series:
        return []
    finest = series[0].level
    if level == finest or (level == Level.GPU):
        return series
    first = series[0]
    if level == Level.NODE:
        by_node: dict[str, list[Series]] = {}
        for s in series:
            by_node.setdefault(s.node, []).append(s)
        return [
            Series(
                first.metric,
                Level.NODE,
                node,
                -1,
                group[0].rank,
                combine(s.buckets for s in group),
                group[0].sample_seconds,
                group[0].origin,
                group[0].attempt,
            )
            for node, group in by_node.items()
        ]
    whole = combine(s.buckets for s in series)
    if not len(whole):
        return []
    return [Series(first.metric, Level.JOB, "", -1, None, whole, first.sample_seconds, first.origin, first.attempt)]


def reshape(series: Iterable[Series], *, start: float, end: float, step: int) -> list[Series]:
    """The same series limited to [start, end) and coarsened to `step` (a multiple of their step)."""
    out = []
    for s in series:
        buckets = coarsen(clip(s.buckets, start, end), step)
        out.append(Series(s.metric, s.level, s.node, s.gpu, s.rank, buckets, s.sample_seconds, s.origin, s.attempt))
    return out
