"""Plotly figures of a job's telemetry: a nodes x GPUs heatmap of utilisation, and line charts.

Builders take series already read and bucketed (so every trace has as many points as
buckets: at most MUSTER_TELEMETRY_MAX_POINTS) and return figures as Plotly's figure JSON
(`{"data": [...], "layout": {...}}`), which the page hands to plotly.js as they are. They are
plain dicts rather than `plotly.graph_objects.Figure`s because validating and deep-copying
~100,000 numbers per page through graph objects costs more than building them; the tests
validate every builder's output as graph objects (`tests/telemetry_helpers.py`), so a property
Plotly does not know fails there.

At job level each metric is a mean line inside a band from the lowest to the highest sample
of any GPU in the bucket, so a spike on one GPU for one sample still shows however long the
range. Values are rounded to the metric's display decimals; the API returns them unrounded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from telemetry.catalogue import METRICS, Level, Metric
from telemetry.downsampling import Buckets
from telemetry.figure_style import COLORS, base_layout
from telemetry.sources.base import Series

BAND_ALPHA = "33"
PUSHED_COLOR = "#101828"


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    metrics: tuple[str, ...]
    multi_node_only: bool = False


# The job page's line charts, in order.
CHARTS = (
    Chart("gpu_util", "GPU utilisation", ("gpu_util",)),
    Chart("activity", "SM and tensor-core activity", ("sm_active", "tensor_active")),
    Chart("memory", "GPU memory used", ("fb_used",)),
    Chart("pcie", "PCIe TX / RX", ("pcie_tx", "pcie_rx")),
    Chart("nvlink", "NVLink TX / RX", ("nvlink_tx", "nvlink_rx")),
    Chart("network", "Inter-node network (InfiniBand) TX / RX", ("ib_tx", "ib_rx"), multi_node_only=True),
    Chart("nccl", "NCCL bus bandwidth", ("nccl_busbw",)),
)


def x_ms(buckets: Buckets) -> list[int]:
    """Bucket starts in milliseconds since the epoch: what a Plotly date axis reads, in fewer bytes than ISO text."""
    step, first = buckets.step * 1000, buckets.first
    return [(first + i) * step for i in range(len(buckets))]


def rounded(values: Sequence[float], counts: Sequence[int], decimals: int) -> list[float | None]:
    """Values for a trace: None where a bucket has no samples (Plotly breaks the line there)."""
    if decimals <= 0:
        return [round(v) if c else None for v, c in zip(values, counts, strict=True)]
    return [round(v, decimals) if c else None for v, c in zip(values, counts, strict=True)]


def _yaxis(metric: Metric) -> dict[str, object]:
    if metric.unit == "ratio":
        return {"tickformat": ".0%", "rangemode": "tozero", "title": {"text": "active"}}
    if metric.unit == "%":
        return {"ticksuffix": "%", "range": [0, 100], "title": {"text": "%"}}
    if metric.unit == "B/s":
        return {"tickformat": ".2s", "ticksuffix": "B/s", "rangemode": "tozero", "title": {"text": "bytes/s"}}
    if metric.unit == "MiB":
        return {"tickformat": ",.0f", "rangemode": "tozero", "title": {"text": "MiB"}}
    return {"rangemode": "tozero", "title": {"text": metric.unit}}


def _hover(metric: Metric) -> str:
    if metric.unit == "ratio":
        return "%{y:.1%}"
    if metric.unit == "B/s":
        return "%{y:.3s}B/s"
    return "%{y:,." + str(max(0, metric.decimals)) + "f} " + metric.unit


def _layout(title: str, height: int = 300) -> dict[str, Any]:
    return base_layout(title, height=height)


def band_traces(series: Series, metric: Metric, name: str, color: str) -> list[dict[str, object]]:
    """Mean line inside a min-max band: three traces of len(buckets) points each."""
    b = series.buckets
    x = x_ms(b)
    band = {"type": "scatter", "x": x, "mode": "lines", "line": {"width": 0, "color": color}, "hoverinfo": "skip", "showlegend": False}
    low = {**band, "y": rounded(b.min, b.count, metric.decimals), "legendgroup": name, "name": f"{name} min"}
    high = {
        **band,
        "y": rounded(b.max, b.count, metric.decimals),
        "fill": "tonexty",
        "fillcolor": color + BAND_ALPHA,
        "legendgroup": name,
        "name": f"{name} max",
    }
    mean: dict[str, object] = {
        "type": "scatter",
        "x": x,
        "y": rounded(b.mean, b.count, metric.decimals),
        "mode": "lines",
        "line": {"width": 1.6, "color": color},
        "legendgroup": name,
        "name": name,
        "hovertemplate": f"{name}: {_hover(metric)}<extra></extra>",
    }
    return [low, high, mean]


Figure = dict[str, Any]


def line_figure(chart: Chart, series_by_metric: dict[str, list[Series]], *, pushed: Series | None = None) -> Figure:
    """One chart: per metric, a band and mean line at job level, or one line per node or GPU."""
    traces: list[dict[str, object]] = []
    metrics = [METRICS[k] for k in chart.metrics]
    color = 0
    for metric in metrics:
        for series in series_by_metric.get(metric.key, []):
            name = metric.label if series.level == Level.JOB else series.label
            if len(metrics) > 1 and series.level != Level.JOB:
                name = f"{metric.short} {name}"
            if series.level == Level.JOB:
                name = f"{metric.label} ({series.origin})" if metric.key == "nccl_busbw" else metric.label
                traces.extend(band_traces(series, metric, name, COLORS[color % len(COLORS)]))
            else:
                b = series.buckets
                traces.append(
                    {
                        "type": "scatter",
                        "x": x_ms(b),
                        "y": rounded(b.mean, b.count, metric.decimals),
                        "mode": "lines",
                        "line": {"width": 1.2, "color": COLORS[color % len(COLORS)]},
                        "name": name,
                        "hovertemplate": f"{name}: {_hover(metric)}<extra></extra>",
                    }
                )
            color += 1
    if pushed is not None:
        metric = METRICS["nccl_busbw"]
        b = pushed.buckets
        traces.append(
            {
                "type": "scatter",
                "x": x_ms(b),
                "y": rounded(b.mean, b.count, metric.decimals),
                "mode": "lines+markers",
                "marker": {"size": 4},
                "line": {"width": 1.2, "color": PUSHED_COLOR},
                "name": "pushed by the job",
                "hovertemplate": f"pushed: {_hover(metric)}<extra></extra>",
            }
        )
    layout = _layout(chart.title)
    layout["yaxis"] = {**layout["yaxis"], **_yaxis(metrics[0])}
    if len(traces) > 12:
        # Dozens of lines: a unified hover box would cover the chart.
        layout["hovermode"] = "closest"
    return {"data": traces, "layout": layout}


def heatmap_figure(series: list[Series], *, title: str = "GPU utilisation per node and GPU") -> Figure:
    """Rows: every GPU (by rank, then GPU index); columns: time buckets; colour: mean utilisation (%)."""
    series = [s for s in series if len(s.buckets)]
    if not series:
        return {"data": [], "layout": _layout(title, 200)}
    step = series[0].buckets.step
    first = min(s.buckets.first for s in series)
    length = max(s.buckets.first + len(s.buckets) for s in series) - first
    decimals = METRICS["gpu_util"].decimals
    z: list[list[float | None]] = []
    labels: list[str] = []
    for s in series:
        b = s.buckets
        pad = b.first - first
        row = [None] * pad + rounded(b.mean, b.count, decimals)
        z.append(row + [None] * (length - len(row)))
        labels.append(s.label)
    x = [(first + i) * step * 1000 for i in range(length)]
    layout = _layout(title, height=min(800, max(220, 90 + 9 * len(series))))
    layout["yaxis"] = {"autorange": "reversed", "showticklabels": len(series) <= 64, "tickfont": {"size": 9}}
    layout["hovermode"] = "closest"
    heatmap = {
        "type": "heatmap",
        "x": x,
        "y": labels,
        "z": z,
        "zmin": 0,
        "zmax": 100,
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": "%"}, "thickness": 12},
        "hovertemplate": "%{y}<br>%{x}<br>%{z:.1f}%<extra></extra>",
        "ygap": 1 if len(series) <= 64 else 0,
    }
    return {"data": [heatmap], "layout": layout}


def max_points(figure: Figure) -> int:
    """The most points any trace of a figure carries (time points for lines, time columns for heatmaps)."""
    return max((len(t.get("x") or []) for t in figure["data"]), default=0)
