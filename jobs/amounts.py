"""Amounts as people read them: GPUs (counted in floats, since a GPU slice holds a share of one), and counts of things."""

from __future__ import annotations

from policy.model import plural

__all__ = ["gpu_amount", "plural"]


def gpu_amount(value: float | int | None) -> float | int:
    """32.0 reads 32; a share keeps three decimals (0.25, 0.143); None is 0."""
    if not value:
        return 0
    value = round(float(value), 3)  # rounded first: 7.9999999 (shares summed) reads 8, not 8.0
    return int(value) if value.is_integer() else value
