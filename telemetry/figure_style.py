"""One look for every Muster chart: the job page's telemetry and the scheduler dashboard.

Figures are Plotly figure JSON built as plain dicts (graph objects cost more than the page),
drawn by `telemetry/charts.js` with the bundled plotly.js.

Layout rules every chart follows, so nothing overlaps at any width:
- both axes have `automargin`: Plotly widens the margins to fit the tick labels and the axis
  titles, so a long label (a node name, "400 GB/s") is never cut or drawn under its title;
- the legend sits at the bottom of the figure (`yref: container`) and pushes the bottom margin
  up, so it never covers the time axis' title however many rows it wraps to; the figure grows by
  the legend's estimated height (`legend_height`) so the plot keeps its size;
- a chart with nothing to draw is an `empty_figure`: no axes (a date axis with no data reads
  "Jan 2000"), just the reason, in the chart's own box.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from replay.report import blank_figure

COLORS = ("#3056d3", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
GRID = "#eaecf0"
# Legend rows: the width a horizontal legend is assumed to wrap at (a 1440 px page's chart is ~1,150 px wide),
# and the height of a row.
LEGEND_WIDTH = 1000
LEGEND_ROW = 20


def legend_height(names: Iterable[str], *, width: int = LEGEND_WIDTH) -> int:
    """About how tall a horizontal legend of these entries is, in pixels (0 for none)."""
    rows, used = 0, float(width)
    for name in names:
        entry = 46 + 6.5 * len(name)  # the line sample, the text at 12 px, the gap to the next
        if used + entry > width:
            rows += 1
            used = 0
        used += entry
    return rows * LEGEND_ROW + (10 if rows else 0)


def base_layout(title: str, *, height: int = 300, date_axis: bool = True, legend: Iterable[str] = ()) -> dict[str, Any]:
    """A chart's layout: title at the left, a UTC time axis (or a plain one), the legend below it.

    `height` is the chart without its legend; `legend` (the names it shows) adds the legend's rows.
    """
    # The time axis' labels a little below it: its first label, centred on the axis' start, clears the y axis' "0".
    xaxis: dict[str, Any] = {"gridcolor": GRID, "automargin": True, "ticklabelstandoff": 6}
    if date_axis:
        xaxis.update({"type": "date", "title": {"text": "time (UTC)", "standoff": 6}})
    return {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        "height": height + legend_height(legend),
        # Starting margins: the axes and the legend push them out as far as their labels need (automargin).
        "margin": {"l": 12, "r": 20, "t": 40, "b": 8},
        "xaxis": xaxis,
        "yaxis": {"gridcolor": GRID, "automargin": True},
        "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0, "xanchor": "left"},
        "hovermode": "x unified" if date_axis else "closest",
        # Not a named template: those are resolved by plotly.py's graph objects, which the pages skip.
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
    }


def empty_figure(title: str, message: str) -> dict[str, Any]:
    """A chart with no data: its title and why there is nothing to draw, without empty axes."""
    return blank_figure(base_layout(title, height=130, date_axis=False), message)
