"""One look for every Muster chart: the job page's telemetry and the scheduler dashboard.

Figures are Plotly figure JSON built as plain dicts (graph objects cost more than the page),
drawn by `telemetry/charts.js` with the bundled plotly.js.
"""

from __future__ import annotations

from typing import Any

COLORS = ("#3056d3", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
GRID = "#eaecf0"


def base_layout(title: str, *, height: int = 300, date_axis: bool = True) -> dict[str, Any]:
    """A chart's layout: title at the left, a UTC time axis (or a plain one), legend below."""
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "xaxis": {"type": "date", "title": {"text": "time (UTC)"}, "gridcolor": GRID} if date_axis else {"gridcolor": GRID},
        "yaxis": {"gridcolor": GRID},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified" if date_axis else "closest",
        # Not a named template: those are resolved by plotly.py's graph objects, which the pages skip.
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
    }
