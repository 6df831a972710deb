"""Filters for the telemetry section of the job page: bytes, ratios and bandwidths read by people."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django import template

from telemetry.dashboard.figures import gpu_time_figures, gpu_time_unit

register = template.Library()

_PREFIXES = ("", "k", "M", "G", "T", "P", "E")


@register.filter
def si_bytes(value: float | None) -> str:
    """1234567890 -> '1.23 GB' (decimal prefixes, as network and PCIe bandwidths are quoted)."""
    if value is None:
        return "—"
    value = float(value)
    index = 0
    while abs(value) >= 1000 and index < len(_PREFIXES) - 1:
        value /= 1000
        index += 1
    return f"{value:.3g} {_PREFIXES[index]}B"


@register.filter
def ratio_percent(value: float | None) -> str:
    """0.4567 -> '45.7%'."""
    return "—" if value is None else f"{float(value) * 100:.1f}%"


@register.filter
def percent(value: float | None) -> str:
    """45.67 -> '45.7%'."""
    return "—" if value is None else f"{float(value):.1f}%"


@register.filter
def mib(value: float | None) -> str:
    """61440 -> '61,440 MiB (60.0 GiB)'."""
    return "—" if value is None else f"{float(value):,.0f} MiB ({float(value) / 1024:.1f} GiB)"


@register.filter
def used_of_allocated(used: Mapping[str, Any]) -> str:
    """The dashboard's runs that ended: '4.0 of 8.0 GPU-hours'; under a GPU-hour '0.26 of 2.2 GPU-minutes', not
    '0.0 of 0.0 GPU-hours'."""
    per_hour, unit = gpu_time_unit(used["total_allocated_hours"])
    busy, allocated = used["total_busy_hours"] * per_hour, used["total_allocated_hours"] * per_hour
    return f"{gpu_time_figures(busy)} of {gpu_time_figures(allocated)} {unit}"
