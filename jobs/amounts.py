"""Amounts as people read them: GPUs (counted in floats, since a GPU slice holds a share of one), counts of things, and
durations."""

from __future__ import annotations

from policy.model import plural

__all__ = ["duration", "gpu_amount", "plural"]


def gpu_amount(value: float | int | None) -> float | int:
    """32.0 reads 32; a share keeps three decimals (0.25, 0.143); None is 0."""
    if not value:
        return 0
    value = round(float(value), 3)  # rounded first: 7.9999999 (shares summed) reads 8, not 8.0
    return int(value) if value.is_integer() else value


def duration(seconds: float | int | None) -> str:
    """3600 -> '1 h', 5400 -> '1 h 30 min', 90 -> '1 min 30 s': the two largest units, as the pages (the `duration` filter)
    and the messages of a limit say a time."""
    if seconds is None:
        return ""
    total = round(float(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")) if n]
    return " ".join(parts[:2]) or "0 s"
