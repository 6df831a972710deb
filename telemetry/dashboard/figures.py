"""The dashboard's Plotly figures, drawn from `telemetry.dashboard.selectors`' numbers in the shared chart style."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from telemetry.dashboard.selectors import PERCENTILES
from telemetry.figure_style import COLORS, GRID, base_layout

Figure = dict[str, Any]


def _layout(
    title: str, *, height: int = 300, date_axis: bool = True, legend: Sequence[str] = (), span: Sequence[int] = ()
) -> dict[str, Any]:
    layout = base_layout(title, height=height, date_axis=date_axis, legend=legend)
    layout["yaxis"] = {**layout["yaxis"], "rangemode": "tozero"}
    if span:
        # The time axis runs from the first data (or the window's start) to now. Included in the autorange rather
        # than set as the range: a set range would replace the reader's zoom at every update; this moves with it.
        # Clipped at the start too: the latency chart's markers would otherwise pad it to before the first data.
        layout["xaxis"] = {**layout["xaxis"], "autorangeoptions": {"include": list(span), "clipmin": span[0]}}
    return layout


def _line(x: list[int], y: Sequence[float | None], name: str, color: str, *, shape: str = "hv", mode: str = "lines") -> dict[str, Any]:
    # Markers are drawn whole at the axes' edges (the latency of the first interval sits on the time axis' start).
    line = {"color": color, "width": 1.6, "shape": shape}
    return {"type": "scatter", "x": x, "y": list(y), "mode": mode, "name": name, "line": line, "cliponaxis": False}


# Counts of jobs or GPUs: the axis reaches at least this high, so a quiet cluster's ticks are whole numbers
# (0-4 in ones), not 0-1 in fifths of a job.
COUNT_AXIS: dict[str, Any] = {"rangemode": "tozero", "autorangeoptions": {"include": [0, 4]}}


def queue_figure(depth: dict[str, Any]) -> Figure:
    layout = _layout("Queue depth (most jobs at once per interval)", legend=["pending", "scheduled or running"], span=depth["range"])
    layout["yaxis"] = {**layout["yaxis"], **COUNT_AXIS, "title": {"text": "jobs"}}
    data = [
        _line(depth["x"], depth["pending"], "pending", COLORS[1]),
        _line(depth["x"], depth["active"], "scheduled or running", COLORS[0]),
    ]
    return {"data": data, "layout": layout}


def latency_figure(lat: dict[str, Any]) -> Figure:
    names = [f"p{p}" for p in PERCENTILES]
    layout = _layout("Scheduling latency, queued to started (percentiles per interval)", legend=names, span=lat["range"])
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "seconds"}}
    data = [_line(lat["x"], lat["series"][p], f"p{p}", COLORS[i], shape="linear", mode="lines+markers") for i, p in enumerate(PERCENTILES)]
    return {"data": data, "layout": layout}


def starvation_figure(starve: dict[str, Any]) -> Figure:
    rows = list(reversed(starve["rows"]))  # longest at the top of a horizontal bar chart
    hours = [r["wait_seconds"] / 3600 for r in rows]
    threshold_h = starve["threshold_seconds"] / 3600
    layout = _layout("Longest current waits", height=max(220, 60 + 24 * len(rows)), date_axis=False)
    layout["xaxis"] = {"gridcolor": GRID, "title": {"text": "hours waiting"}, "rangemode": "tozero", "automargin": True}
    # The starvation threshold as a vertical line: jobs past it are owed a reservation.
    layout["shapes"] = [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": threshold_h,
            "x1": threshold_h,
            "y0": 0,
            "y1": 1,
            "line": {"color": "#b42318", "dash": "dash"},
        }
    ]
    bar = {
        "type": "bar",
        "orientation": "h",
        "x": [round(h, 3) for h in hours],
        "y": [f"{r['job'].pk} {r['job'].name}"[:40] for r in rows],
        "marker": {"color": ["#b42318" if r["starving"] else COLORS[1] for r in rows]},
        "hovertemplate": "%{y}: %{x:.2f} h<extra></extra>",
        "name": "waiting",
    }
    return {"data": [bar], "layout": layout}


def quota_figure(standing: dict[str, Any]) -> Figure:
    legend = ["within quota", "beyond quota (preempted first)"]
    layout = _layout("GPUs held within quota and borrowed beyond it, per team", date_axis=False, legend=legend)
    layout["legend"] = {**layout["legend"], "traceorder": "normal"}
    layout["barmode"] = "stack"
    layout["yaxis"] = {**layout["yaxis"], **COUNT_AXIS, "title": {"text": "GPUs"}}
    data = [
        {"type": "bar", "x": standing["teams"], "y": standing["within_by_team"], "name": "within quota", "marker": {"color": COLORS[0]}},
        {
            "type": "bar",
            "x": standing["teams"],
            "y": standing["over_by_team"],
            "name": "beyond quota (preempted first)",
            "marker": {"color": COLORS[5]},
        },
    ]
    return {"data": data, "layout": layout}


def allocation_figure(g: dict[str, Any]) -> Figure:
    layout = _layout(
        "GPUs allocated (mean per interval) of the cluster's GPUs", legend=["allocated", "total (nodes reported now)"], span=g["range"]
    )
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "GPUs"}}
    data = [
        _line(g["x"], g["allocated"], "allocated", COLORS[0], shape="hv"),
        {
            **_line(g["x"], [g["total"]] * len(g["x"]), "total (nodes reported now)", "#667085", shape="linear"),
            "line": {"dash": "dot", "color": "#667085"},
        },
    ]
    return {"data": data, "layout": layout}


def team_usage_figure(team_hours: dict[str, float]) -> Figure:
    layout = _layout("GPU-hours per team", date_axis=False)
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": "GPU-hours"}}
    data = [
        {
            "type": "bar",
            "x": list(team_hours),
            "y": [round(h, 2) for h in team_hours.values()],
            "marker": {"color": COLORS[2]},
            "name": "GPU-hours",
            "hovertemplate": "%{x}: %{y:.2f} GPU-h<extra></extra>",
        }
    ]
    return {"data": data, "layout": layout}


def gpu_time_unit(allocated_hours: float) -> tuple[float, str]:
    """How to say GPU time of this size: (per GPU-hour, unit). Under a GPU-hour in GPU-minutes, so runs of a few minutes
    do not read "0.0 of 0.0 GPU-hours" (the page's sentence and the chart say it alike)."""
    return (1.0, "GPU-hours") if allocated_hours >= 1 else (60.0, "GPU-minutes")


def gpu_time_figures(value: float) -> str:
    """A GPU time to one decimal, or to two significant figures under one: 12.5, 0.26, 0.0042; 0 for none."""
    if value == 0:
        return "0"
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.2g}"


def _bar(value: float) -> float:
    """A bar's height: two decimals, three significant figures under one (a small team's 0.0042 is not 0)."""
    return round(value, 2) if abs(value) >= 1 else float(f"{value:.3g}")


def used_figure(used: dict[str, Any]) -> Figure:
    per_hour, unit = gpu_time_unit(used["total_allocated_hours"])
    legend = ["allocated", "used (GPU utilisation x time)"]
    layout = _layout(f"Allocated vs used {unit} of runs that ended (telemetry summaries)", date_axis=False, legend=legend)
    layout["barmode"] = "group"
    layout["yaxis"] = {**layout["yaxis"], "title": {"text": unit}}
    hover = "%{x}: %{y:.3~g} " + unit + "<extra>%{fullData.name}</extra>"
    data = [
        {
            "type": "bar",
            "x": used["teams"],
            "y": [_bar(h * per_hour) for h in used["allocated_hours"]],
            "name": "allocated",
            "marker": {"color": COLORS[0]},
            "hovertemplate": hover,
        },
        {
            "type": "bar",
            "x": used["teams"],
            "y": [_bar(h * per_hour) for h in used["busy_hours"]],
            "name": "used (GPU utilisation x time)",
            "marker": {"color": COLORS[2]},
            "hovertemplate": hover,
        },
    ]
    return {"data": data, "layout": layout}
