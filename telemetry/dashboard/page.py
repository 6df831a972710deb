"""The dashboard page's context: the numbers and, for each that has data, its figure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
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
    gpus,
    latency,
    node_grid,
    queue_depth,
    quota_standing,
    starvation,
    window_for,
)


def dashboard_context(viewer: User | AnonymousUser, window_key: str | None = None, *, now: datetime | None = None) -> dict[str, Any]:
    """Numbers and figures for frontend/dashboard.html. A figure is left out (and the page says why) when it has no data."""
    now = now or timezone.now()
    window = window_for(window_key)
    depth = queue_depth(window, now)
    lat = latency(window, now)
    starve = starvation(now)
    standing = quota_standing(viewer)
    g = gpus(window, now, viewer)
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
        "queue": depth,
        "has_history": has_history,
        "latency": lat,
        "percentiles": [{"p": p, "seconds": lat["overall"][p]} for p in PERCENTILES],
        "starvation": starve,
        "standing": standing,
        "gpus": g,
        "figures": figures,
        "figure_ids": {f["id"] for f in figures},
        "nodes": nodes,
        "gpus_free": sum(n.gpus_free for n in nodes),
        "gpus_total": sum(n.gpus_total for n in nodes),
    }
