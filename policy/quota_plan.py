"""One account's GPU quota over time, as the forecast plans the queue forward.

The walk holds a job whose owners' quotas are full (QUOTA_GPUS) until their running jobs end. Planning the queue
forward (policy/forecast.py), the jobs planned before it use the same quota from their planned starts to their
expected ends: a quota that fits one job at a time has its waiting jobs planned one after another, not all at the
first end of a running job.
"""

from __future__ import annotations

from bisect import insort
from collections.abc import Iterable

# GPUs are counted in fractions for slices: a sum that should be the limit may come out a hair above it.
_EPSILON = 1e-9


class QuotaPlan:
    """GPUs of one account's quota in use from each instant on: now, then changed by ends and planned starts."""

    def __init__(self, limit: float, in_use: float, ends: Iterable[tuple[float, float]]) -> None:
        self.limit = limit
        self.in_use = in_use
        # (instant, change in GPUs in use): the ends of what holds the quota now, then planned starts and ends.
        self.changes: list[tuple[float, float]] = sorted((at, -gpus) for at, gpus in ends)
        # The GPUs of every planned job together: the quota never holds more than `in_use` plus them (ends only free it).
        self.planned = 0.0

    def earliest(self, needs: float, after: float, seconds: float) -> float | None:
        """The first instant at or after `after` from which `needs` more GPUs stay within the limit for `seconds`.

        None when that never comes (more than the limit, or held beyond every known end). One pass over the
        changes: a window that breaks the limit at some instant can only open after it.
        """
        if needs > self.limit + _EPSILON:
            return None
        changes, room = self.changes, self.limit - needs + _EPSILON
        if self.in_use + self.planned <= room:
            return after  # room at every instant: most accounts, most of the time
        used, i = self.in_use, 0
        while i < len(changes) and changes[i][0] <= after:
            used += changes[i][1]
            i += 1
        start = after
        while True:
            if used > room:
                if i == len(changes):
                    return None
                start = changes[i][0]
                used, i = _apply_instant(changes, i, used)
                continue
            # It fits at `start`: it must still fit at every change before its end.
            j, ahead = i, used
            while j < len(changes) and changes[j][0] < start + seconds:
                at = changes[j][0]
                ahead, j = _apply_instant(changes, j, ahead)
                if ahead > room:
                    start, used, i = at, ahead, j
                    break
            else:
                return start

    def hold(self, gpus: float, start: float, end: float) -> None:
        """A job planned to use `gpus` of the quota from `start` to `end`."""
        insort(self.changes, (start, gpus))
        insort(self.changes, (end, -gpus))
        self.planned += gpus


def _apply_instant(changes: list[tuple[float, float]], i: int, used: float) -> tuple[float, int]:
    """Every change at the instant of `changes[i]` applied: the GPUs in use after it, and the index past it."""
    at = changes[i][0]
    while i < len(changes) and changes[i][0] == at:
        used += changes[i][1]
        i += 1
    return used, i
