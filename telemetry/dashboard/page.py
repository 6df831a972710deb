"""The dashboard page's context: the numbers and, for each that has data, its figure; and what its poller redraws.

The page (`frontend/dashboard.html`, its body in `telemetry/dashboard_body.html`) keeps itself
current in place: `telemetry/dashboard.js` asks the page's own URL with `live=1` every
MUSTER_DASHBOARD_REFRESH_SECONDS for `dashboard_live`'s JSON, swaps in the new body around the
charts it already has and redraws those with Plotly.react, so a zoom or a hidden series survives.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.http import HttpRequest
from django.template.loader import render_to_string
from django.utils import timezone

from telemetry.dashboard.figures import (
    allocation_figure,
    latency_figure,
    queue_figure,
    quota_figure,
    starvation_figure,
    team_usage_figure,
    used_figure,
)
from telemetry.dashboard.selectors import (
    PERCENTILES,
    WINDOWS,
    cluster_free,
    first_data,
    gpus,
    latency,
    node_grid,
    queue_depth,
    quota_standing,
    span_for,
    starvation,
    window_for,
)
from telemetry.live_use import cluster_gpu_use


def dashboard_context(viewer: User | AnonymousUser, window_key: str | None = None, *, now: datetime | None = None) -> dict[str, Any]:
    """Numbers and figures for frontend/dashboard.html. A figure is left out (and the page says why) when it has no data."""
    now = now or timezone.now()
    window = window_for(window_key)
    span = span_for(window, now, first_data())
    depth = queue_depth(window, now, span)
    lat = latency(window, now, span)
    starve = starvation(now)
    standing = quota_standing(viewer)
    g = gpus(window, now, viewer, span)
    figures: list[dict[str, Any]] = []
    has_history = depth["changes"] > 0 or depth["pending_now"] or depth["active_now"]
    if has_history:
        figures.append({"id": "dashboard-queue", "figure": queue_figure(depth)})
    if lat["count"]:
        figures.append({"id": "dashboard-latency", "figure": latency_figure(lat)})
    if starve["rows"]:
        figures.append({"id": "dashboard-starvation", "figure": starvation_figure(starve)})
    if standing["teams"]:
        figures.append({"id": "dashboard-quota", "figure": quota_figure(standing)})
    if g["total"] or any(g["allocated"]):
        figures.append({"id": "dashboard-allocation", "figure": allocation_figure(g)})
    if g["team_hours"]:
        figures.append({"id": "dashboard-teams", "figure": team_usage_figure(g["team_hours"])})
    if g["used"]["jobs"]:
        figures.append({"id": "dashboard-used", "figure": used_figure(g["used"])})
    nodes = node_grid()
    return {
        "window": window,
        "windows": list(WINDOWS.values()),
        "now": now,
        "span": span,
        "refresh_seconds": settings.MUSTER_DASHBOARD_REFRESH_SECONDS,
        "live": {"refresh_ms": settings.MUSTER_DASHBOARD_REFRESH_SECONDS * 1000},
        "queue": depth,
        "has_history": has_history,
        "latency": lat,
        "percentiles": [{"p": p, "seconds": lat["overall"][p]} for p in PERCENTILES],
        "starvation": starve,
        "standing": standing,
        "gpus": g,
        "use_now": cluster_gpu_use(now),
        "figures": figures,
        "figure_ids": {f["id"] for f in figures},
        "nodes": nodes,
        "free": cluster_free(nodes),
    }


def dashboard_live(request: HttpRequest, context: dict[str, Any]) -> dict[str, Any]:
    """What the page's poller redraws: the figures, and the page's body around them (numbers, empty states, nodes)."""
    return {
        "figures": context["figures"],
        "html": render_to_string("telemetry/dashboard_body.html", context, request=request),
        "updated": context["now"].isoformat(),
    }
