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
range. Values are shown in a unit that suits the figure (`scale_for`: byte rates in kB/s to
TB/s by the largest value, memory in GiB) and rounded for display; the API returns them as
stored. A chart with nothing to draw says why (`telemetry.figure_style.empty_figure`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from telemetry.catalogue import METRICS, Level, Metric
from telemetry.downsampling import Buckets
from telemetry.figure_style import COLORS, base_layout, empty_figure
from telemetry.sources.base import RankPlacement, Series

BAND_ALPHA = "33"
PUSHED_COLOR = "#101828"
# A chart's second metric (RX beside TX, tensor-core beside SM activity) is dashed, so it shows even where it lies
# exactly on the first.
SECOND_DASH = "dash"


@dataclass(frozen=True)
class Chart:
    key: str
    title: str
    metrics: tuple[str, ...]
    # What the chart's box says while it has nothing to draw.
    empty: str
    multi_node_only: bool = False
    # Its job- and node-level lines are means per GPU, said in the title: GPU memory read as the job's total.
    per_gpu: bool = False


# The job page's line charts, in order.
CHARTS = (
    Chart("gpu_util", "GPU utilisation", ("gpu_util",), "GPU utilisation appears when the job's GPUs report it (DCGM)."),
    Chart(
        "activity",
        "SM and tensor-core activity",
        ("sm_active", "tensor_active"),
        "SM and tensor-core activity appear when the job's GPUs report them (DCGM profiling metrics).",
    ),
    Chart("memory", "GPU memory used", ("fb_used",), "GPU memory appears when the job's GPUs report it (DCGM).", per_gpu=True),
    Chart("pcie", "PCIe TX / RX", ("pcie_tx", "pcie_rx"), "PCIe traffic appears when the job's GPUs report it (DCGM)."),
    Chart("nvlink", "NVLink TX / RX", ("nvlink_tx", "nvlink_rx"), "NVLink traffic appears when the job's GPUs report it (DCGM)."),
    Chart(
        "network",
        "Inter-node network (InfiniBand) TX / RX",
        ("ib_tx", "ib_rx"),
        "Inter-node traffic appears when the job's nodes report it (node exporter's InfiniBand counters).",
        multi_node_only=True,
    ),
    Chart(
        "nccl",
        "NCCL bus bandwidth",
        ("nccl_busbw",),
        "NCCL bus bandwidth appears when the job reports it: once its first collectives run "
        "(NCCL Inspector, or the job pushing its own numbers).",
    ),
)
HEATMAP_TITLE = "GPU utilisation per node and GPU"
HEATMAP_EMPTY = "Each GPU's utilisation appears when the job's GPUs report it (DCGM)."

# Byte rates are shown in the decimal unit that suits the figure's largest value (ticks read "400 MB/s", never
# "0.4 GB/s" nor "200 mB/s"); a figure whose values are all below 1 kB/s (an all-zero series) gets 0-1 kB/s.
_BYTE_RATES = {"B/s": 1.0, "GB/s": 1e9}
_PREFIXES = ("", "k", "M", "G", "T")
# Labelled heatmap rows: every row up to this many, then one label per node.
HEATMAP_LABELLED_ROWS = 128
# Tall enough for its colour bar and time axis however few the rows.
HEATMAP_MIN_HEIGHT = 220
# Node names longer than this are shortened in row labels (the full name is in the hover). Long enough for the
# simulated shared nodes' "sim-time-slicing-000" and a usual "dgx-h100-rack12-node-008" whole (18 cut them mid-word:
# "sim-time…icing-000"); the margin widens to fit (automargin).
HEATMAP_NAME_CHARS = 24


# A GPU's memory by product, for the memory chart's capacity line. The product label usually says it
# ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"); these are the products whose name does not and whose memory
# is one size (an "NVIDIA-A100-SXM4" without its size may be 40 or 80 GB: no line rather than a wrong one).
# Nominal GB, which the GPUs have in GiB (an H100's 80 GB is 81,559 MiB), so the line is at that many GiB.
_MODEL_MEMORY_GB = (("GH200", 96.0), ("H200", 141.0), ("H100 NVL", 94.0), ("H100", 80.0), ("L40S", 48.0), ("L40", 48.0), ("L4", 24.0))
_GB_IN_NAME = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*GB(?![a-z])", re.IGNORECASE)
CAPACITY_COLOR = "#c92a2a"


@dataclass(frozen=True)
class Capacity:
    """A GPU's memory, drawn on the memory chart as a line the axis reaches: how close to full its GPUs ran."""

    mib: float
    label: str


def model_memory_gb(model: str) -> float | None:
    """A GPU product's memory in (nominal) GB: from its name ("H100 80GB"), else the table of one-size products."""
    found = _GB_IN_NAME.search(model)
    if found:
        return float(found.group(1))
    words = " " + re.sub(r"[^A-Z0-9]+", " ", model.upper()) + " "
    return next((gb for name, gb in _MODEL_MEMORY_GB if f" {name} " in words), None)


def memory_capacity(placements: Iterable[RankPlacement]) -> Capacity | None:
    """The memory of each GPU (or GPU slice) a run held, when it is known and one size for all of them (else None).

    A slice with guaranteed memory (MIG) is charted as its instance: its memory is the slice's. A slice without
    (time-sliced, MPS) is charted as its whole GPU, so the line is the GPU's."""
    sizes: set[tuple[float, str]] = set()
    for p in placements:
        if p.slice_memory_mib:
            sizes.add((p.slice_memory_mib, f"{p.slice_memory_mib * 2**20 / 1e9:.3g} GB per slice"))
            continue
        gb = model_memory_gb(p.gpu_model)
        if gb is None:
            return None
        sizes.add((gb * 1024, f"{gb:g} GB per GPU ({p.gpu_model})"))
    if len(sizes) != 1:
        return None
    mib, label = sizes.pop()
    return Capacity(mib, label)


def per_gpu_title(title: str, levels: set[Level]) -> str:
    """A per-GPU chart's title saying what its lines are: at job level the mean of the GPUs, per node each node's."""
    if Level.JOB in levels:
        return f"{title} per GPU (mean of the GPUs; band: lowest to highest GPU)"
    if Level.NODE in levels:
        return f"{title} per GPU (each node's mean)"
    return f"{title} per GPU"


def x_ms(buckets: Buckets) -> list[int]:
    """Bucket starts in milliseconds since the epoch: what a Plotly date axis reads, in fewer bytes than ISO text."""
    step, first = buckets.step * 1000, buckets.first
    return [(first + i) * step for i in range(len(buckets))]


def rounded(values: Sequence[float], counts: Sequence[int], decimals: int) -> list[float | None]:
    """Values for a trace: None where a bucket has no samples (Plotly breaks the line there)."""
    if decimals <= 0:
        return [round(v) if c else None for v, c in zip(values, counts, strict=True)]
    return [round(v, decimals) if c else None for v, c in zip(values, counts, strict=True)]


@dataclass(frozen=True)
class Scale:
    """How one figure shows a metric's values: divided by `divisor`, `suffix` after every tick and hover value."""

    divisor: float
    suffix: str
    decimals: int
    hover: str
    yaxis: dict[str, Any]

    def values(self, values: Sequence[float], counts: Sequence[int]) -> list[float | None]:
        if self.divisor == 1:
            return rounded(values, counts, self.decimals)
        d, decimals = self.divisor, self.decimals
        return [round(v / d, decimals) if c else None for v, c in zip(values, counts, strict=True)]


def scale_for(metric: Metric, peak: float | None) -> Scale:
    """The unit, ticks and hover of a chart of `metric` whose largest value is `peak` (None: no data)."""
    if metric.unit == "%":
        return Scale(1, "%", metric.decimals, "%{y:.1f}%", {"ticksuffix": "%", "range": [0, 100]})
    if metric.unit == "ratio":
        # Whole percents only where the ticks are at least a percent apart: a small ratio (tensor cores at 2%)
        # would read 0%, 0%, 1%, 1%, 2%.
        ticks = ".0%" if (peak or 0.0) >= 0.05 else ".2~%"
        return Scale(1, "", metric.decimals, "%{y:.1%}", {"tickformat": ticks, "rangemode": "tozero"})
    if metric.unit in _BYTE_RATES:
        base = _BYTE_RATES[metric.unit]
        peak_bytes = (peak or 0.0) * base
        power = 1 if peak_bytes < 1000 else min(len(_PREFIXES) - 1, int(math.log10(peak_bytes) // 3))
        suffix = f" {_PREFIXES[power]}B/s"
        yaxis: dict[str, Any] = {"ticksuffix": suffix, "exponentformat": "none", "rangemode": "tozero"}
        if peak_bytes < 1000:
            yaxis["range"] = [0, 1]  # an all-zero (or all but) byte rate: 0-1 kB/s, not Plotly's -1 to 1 in millibytes
        return Scale(1000**power / base, suffix, 3, "%{y:.3~g}" + suffix, yaxis)
    if metric.unit == "MiB":
        return Scale(1024, " GiB", 2, "%{y:.1f} GiB", {"ticksuffix": " GiB", "rangemode": "tozero"})
    suffix = f" {metric.unit}"
    hover = "%{y:,." + str(max(0, metric.decimals)) + "f}" + suffix
    return Scale(1, suffix, metric.decimals, hover, {"ticksuffix": suffix, "rangemode": "tozero"})


def _peak(series: Series, band: bool) -> float | None:
    b = series.buckets
    return max((v for v, c in zip(b.max if band else b.mean, b.count, strict=True) if c), default=None)


def band_outline(x: Sequence[int], low: Sequence[float | None], high: Sequence[float | None]) -> tuple[list[int], list[float | None]]:
    """The band between `low` and `high` as closed outlines, one per run of buckets with samples, split by gaps.

    Drawn with `fill: toself`, which closes each segment of a trace on itself: two traces filled `tonexty` would
    bridge a gap (a job that stops reporting for a while) with a wedge from one side of it to the other.
    """
    bx: list[int] = []
    by: list[float | None] = []
    i, n = 0, len(x)
    while i < n:
        if high[i] is None:
            i += 1
            continue
        j = i
        while j < n and high[j] is not None:
            j += 1
        if bx:
            bx.append(x[i])
            by.append(None)  # a gap: the next outline is a shape of its own
        bx.extend(x[i:j])
        by.extend(high[i:j])
        bx.extend(reversed(x[i:j]))
        by.extend(reversed(low[i:j]))
        i = j
    return bx, by


def line_mode(y: Sequence[float | None]) -> str:
    """ "lines", or "lines+markers" when some value has no neighbour to join: Plotly draws a line through two points
    or more, so a lone one (a run of a few seconds, a sample between gaps) would not show at all."""
    for i, v in enumerate(y):
        if v is not None and (i == 0 or y[i - 1] is None) and (i + 1 == len(y) or y[i + 1] is None):
            return "lines+markers"
    return "lines"


def band_traces(series: Series, scale: Scale, name: str, color: str, *, dash: str = "solid") -> list[dict[str, object]]:
    """A mean line inside its min-max band: the band's outline, then the line of len(buckets) points."""
    b = series.buckets
    x = x_ms(b)
    bx, by = band_outline(x, scale.values(b.min, b.count), scale.values(b.max, b.count))
    band = {
        "type": "scatter",
        "x": bx,
        "y": by,
        "mode": "lines",
        "fill": "toself",
        "fillcolor": color + BAND_ALPHA,
        "line": {"width": 0, "color": color},
        "hoverinfo": "skip",
        "showlegend": False,
        "legendgroup": name,
        "name": f"{name} min-max",
    }
    y = scale.values(b.mean, b.count)
    mean: dict[str, object] = {
        "type": "scatter",
        "x": x,
        "y": y,
        "mode": line_mode(y),
        "marker": {"size": 5},
        "line": {"width": 1.6, "color": color, "dash": dash},
        "legendgroup": name,
        "name": name,
        "hovertemplate": f"{name}: {scale.hover}<extra></extra>",
    }
    return [band, mean]


Figure = dict[str, Any]


def _name(metric: Metric, series: Series, *, several: bool, one_node: bool) -> str:
    """A line's legend entry: the metric at job level; the node, or the GPU within the chart's one node, below it."""
    if series.level == Level.JOB:
        return f"{metric.label} ({series.origin})" if metric.key == "nccl_busbw" else metric.label
    where = f"GPU {series.gpu}" if series.gpu >= 0 and one_node else series.label
    return f"{metric.short} {where}" if several else where


def line_figure(
    chart: Chart, series_by_metric: dict[str, list[Series]], *, pushed: Series | None = None, capacity: Capacity | None = None
) -> Figure:
    """One chart: per metric, a band and mean line at job level, or one line per node or GPU.

    `capacity` (GPU memory): a dotted line at it, labelled, and the axis up to it. With nothing to draw (no series,
    or only empty buckets) it is an `empty_figure` saying why.
    """
    metrics = [METRICS[k] for k in chart.metrics]
    entries = [(metric, s) for metric in metrics for s in series_by_metric.get(metric.key, [])]
    peaks = [p for metric, s in entries if (p := _peak(s, s.level == Level.JOB)) is not None]
    if pushed is not None and (p := _peak(pushed, False)) is not None:
        peaks.append(p)
    title = per_gpu_title(chart.title, {s.level for _, s in entries}) if chart.per_gpu else chart.title
    gpu_nodes = {s.node for _, s in entries if s.level == Level.GPU}
    one_node = len(gpu_nodes) == 1
    if one_node:
        first = next(s for _, s in entries if s.level == Level.GPU)
        title = f"{title} · {first.node} (rank {first.rank})"
    if not peaks:
        return empty_figure(title, chart.empty)
    scale = scale_for(metrics[0], max(peaks))
    traces: list[dict[str, object]] = []
    several = len(metrics) > 1
    for m, metric in enumerate(metrics):
        dash = SECOND_DASH if m else "solid"
        for i, series in enumerate(series_by_metric.get(metric.key, [])):
            name = _name(metric, series, several=several, one_node=one_node)
            if series.level == Level.JOB:
                traces.extend(band_traces(series, scale, name, COLORS[m % len(COLORS)], dash=dash))
                continue
            b = series.buckets
            y = scale.values(b.mean, b.count)
            traces.append(
                {
                    "type": "scatter",
                    "x": x_ms(b),
                    "y": y,
                    "mode": line_mode(y),
                    "marker": {"size": 4},
                    # The same colour for one GPU's (or node's) lines of every metric; the dash tells the metrics apart.
                    "line": {"width": 1.2, "color": COLORS[i % len(COLORS)], "dash": dash},
                    "name": name,
                    "hovertemplate": f"{name}: {scale.hover}<extra></extra>",
                }
            )
    if pushed is not None:
        b = pushed.buckets
        traces.append(
            {
                "type": "scatter",
                "x": x_ms(b),
                "y": scale.values(b.mean, b.count),
                "mode": "lines+markers",
                "marker": {"size": 4},
                "line": {"width": 1.2, "color": PUSHED_COLOR},
                "name": "pushed by the job",
                "hovertemplate": f"pushed: {scale.hover}<extra></extra>",
            }
        )
    legend = [str(t["name"]) for t in traces if t.get("showlegend") is not False]
    layout = base_layout(title, legend=legend)
    layout["yaxis"] = {**layout["yaxis"], **scale.yaxis}
    if capacity is not None:
        full = capacity.mib / scale.divisor
        # The axis reaches the capacity (and any sample above it: a line off the chart would hide that).
        top = max(full, max(peaks) / scale.divisor)
        layout["yaxis"]["range"] = [0, top * 1.08]
        layout["shapes"] = [
            {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": full, "y1": full,
             "line": {"color": CAPACITY_COLOR, "width": 1.2, "dash": "dot"}}
        ]  # fmt: skip
        layout["annotations"] = [
            {"xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": full, "yanchor": "bottom", "showarrow": False,
             "text": capacity.label, "font": {"size": 11, "color": CAPACITY_COLOR}}
        ]  # fmt: skip
    if len(traces) > 12:
        # Dozens of lines: a unified hover box would cover the chart.
        layout["hovermode"] = "closest"
    return {"data": traces, "layout": layout}


def _short_names(nodes: Sequence[str]) -> dict[str, str]:
    """Node names as row labels: a domain all of them share dropped, and the middle of a long one elided."""
    names = list(dict.fromkeys(nodes))
    suffix = ""
    if names and all("." in n for n in names):
        tails = {n[n.index(".") :] for n in names}
        if len(tails) == 1:
            suffix = tails.pop()
    short = {}
    for n in names:
        s = n[: len(n) - len(suffix)] if suffix else n
        if len(s) > HEATMAP_NAME_CHARS:
            keep = HEATMAP_NAME_CHARS - 1
            s = s[: keep // 2] + "…" + s[len(s) - (keep - keep // 2) :]
        short[n] = s
    return short


def heatmap_figure(series: list[Series], *, title: str = HEATMAP_TITLE) -> Figure:
    """Rows: every GPU (by rank, then GPU index); columns: time buckets; colour: mean utilisation (%).

    Every row is labelled ("node · GPU n", the node's name shortened when long; the full label is in the hover),
    with rows tall enough to read; past HEATMAP_LABELLED_ROWS GPUs, each node's first row is labelled instead.
    Each column is centred on its bucket, so the time axis starts where the first bucket does.
    """
    series = [s for s in series if len(s.buckets)]
    if not any(s.buckets.samples for s in series):
        return empty_figure(title, HEATMAP_EMPTY)
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
    x = [(first + i) * step * 1000 + step * 500 for i in range(length)]
    rows = len(series)
    short = _short_names([s.node for s in series])
    if rows <= HEATMAP_LABELLED_ROWS:
        tickvals, ticktext = labels, [f"{short[s.node]} · GPU {s.gpu}" if s.gpu >= 0 else short[s.node] for s in series]
        row_px, font = (16, 11) if rows <= 32 else (12, 10)
    else:
        firsts = [i for i, s in enumerate(series) if i == 0 or s.node != series[i - 1].node]
        tickvals, ticktext = [labels[i] for i in firsts], [short[series[i].node] for i in firsts]
        row_px, font = max(2, min(12, 1200 // rows)), 10
    layout = base_layout(title, height=max(HEATMAP_MIN_HEIGHT, 100 + rows * row_px))
    layout["yaxis"] = {
        **layout["yaxis"],
        "autorange": "reversed",
        "tickmode": "array",
        "tickvals": tickvals,
        "ticktext": ticktext,
        "tickfont": {"size": font},
        "showgrid": False,
    }
    layout["xaxis"] = {**layout["xaxis"], "showgrid": False}
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
        "ygap": 1 if rows <= 64 else 0,
    }
    return {"data": [heatmap], "layout": layout}


def not_applicable(chart: Chart, gpus_per_node: Sequence[int]) -> str:
    """Why a chart can have nothing to show for a job of this shape ("" when it can): said instead of drawing zeros."""
    if chart.key == "nccl" and sum(gpus_per_node) <= 1:
        return "A single-GPU job runs no NCCL collectives: there is no bus bandwidth to chart."
    if chart.key == "nvlink" and gpus_per_node and max(gpus_per_node) <= 1:
        return "No NVLink traffic: with one GPU per node, a GPU has no NVLink peer to talk to."
    return ""


def max_points(figure: Figure) -> int:
    """The most time points any trace of a figure carries (points of a line, columns of a heatmap; a band's outline
    passes each of its time points twice)."""
    return max((len(set(t["x"])) if t.get("fill") == "toself" else len(t.get("x") or []) for t in figure["data"]), default=0)
