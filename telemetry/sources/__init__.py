"""Telemetry sources: one interface (base.py), chosen by MUSTER_TELEMETRY_SOURCE."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from telemetry.sources.base import JobTarget, RankPlacement, Series, TelemetrySource, TelemetryUnavailable

__all__ = ["JobTarget", "RankPlacement", "Series", "TelemetrySource", "TelemetryUnavailable", "get_source"]


def get_source() -> TelemetrySource:
    """The source chosen by MUSTER_TELEMETRY_SOURCE: `simulated` (default) or `prometheus`."""
    if settings.MUSTER_TELEMETRY_SOURCE == "simulated":
        from telemetry.sources.simulated import SimulatedTelemetry

        return SimulatedTelemetry.from_settings()
    if settings.MUSTER_TELEMETRY_SOURCE == "prometheus":
        from telemetry.sources.prometheus import PrometheusTelemetry

        return PrometheusTelemetry.from_settings()
    raise ImproperlyConfigured(f"MUSTER_TELEMETRY_SOURCE={settings.MUSTER_TELEMETRY_SOURCE!r}: choose simulated or prometheus.")
