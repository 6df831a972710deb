"""The what-if report: summary.json and one self-contained report.html (plotly.js inlined, so it opens offline).

Pure: no Django. `summary_table` is also the side-by-side table of the command's output and of the what-if page,
and `report_figures` the charts the page draws, so every place shows the same numbers the same way.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

# The site's chart look (telemetry/figure_style.py is Django-side, so the two constants are repeated here).
COLORS = ("#3056d3", "#e8590c", "#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#c2255c", "#5c940d")
GRID = "#eaecf0"
MUTED = "#667085"
OTHERS_COLOR = "#98a2b3"  # "others" in a tenant-share chart: grey, apart from every named tenant's colour
SIZE_CLASSES = (("gang", "gangs (several nodes)"), ("whole_node", "whole-node jobs"), ("sub_node", "sub-node jobs"))
POINTS = 600  # points per time series and per CDF in the charts: enough to read, small enough to embed
DASH = "\u2013"  # what a cell shows when the summary lacks the number
TENANT_LINES = len(COLORS)  # tenants drawn by name in the share charts, one colour each; the rest are summed as "others"
# A log axis has no 0: a wait under this ("started at once") is drawn at it.
AT_ONCE_SECONDS = 1.0
# The wait axis' ticks (seconds on a log axis, labelled as durations); past nine of them only the coarse ones.
WAIT_TICKS = (
    (1.0, "1 s"), (2.0, "2 s"), (5.0, "5 s"), (10.0, "10 s"), (30.0, "30 s"), (60.0, "1 min"), (120.0, "2 min"),
    (300.0, "5 min"), (600.0, "10 min"), (1800.0, "30 min"), (3600.0, "1 h"), (7200.0, "2 h"), (21600.0, "6 h"),
    (43200.0, "12 h"), (86400.0, "1 d"), (172800.0, "2 d"), (604800.0, "1 w"), (2592000.0, "30 d"), (31536000.0, "1 y"),
)  # fmt: skip
AXIS_PAD = 0.03  # the wait axis' margin either side, in decades
WAIT_TICKS_COARSE = {1.0, 10.0, 60.0, 600.0, 3600.0, 21600.0, 86400.0, 604800.0, 2592000.0, 31536000.0}


# What the report reads from the simulator's results (replay.simulator.SimResult and JobRecord), as read-only protocols.
class _Job(Protocol):
    @property
    def submit(self) -> float: ...
    @property
    def nodes(self) -> int: ...
    @property
    def gpus(self) -> int: ...
    @property
    def tenant(self) -> str: ...


class _Record(Protocol):
    @property
    def job(self) -> _Job: ...
    @property
    def first_start(self) -> float | None: ...
    @property
    def attempts(self) -> Sequence[tuple[float, float, int]]: ...  # every run: (start, end, GPUs held)


class _Cluster(Protocol):
    @property
    def nodes(self) -> int: ...
    @property
    def gpus_per_node(self) -> int: ...


class _Result(Protocol):
    @property
    def policy(self) -> str: ...
    @property
    def cluster(self) -> _Cluster: ...
    @property
    def records(self) -> Sequence[_Record]: ...


class _Assumptions(Protocol):
    def describe(self) -> list[str]: ...


# ---- formatting ---------------------------------------------------------------------------------------------------


def fmt_duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float) or math.isnan(seconds):
        return DASH
    s = float(seconds)
    if abs(s) < 120:
        return f"{s:.0f} s" if abs(s) >= 10 or s == 0 else f"{s:.1f} s"
    if abs(s) < 2 * 3600:
        return f"{s / 60:.1f} min"
    if abs(s) < 3 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:.1f} d"


def fmt_number(value: Any, digits: int = 2) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return DASH
    if isinstance(value, int):
        return f"{value:,}"
    if 0 < abs(value) < 0.5 * 10**-digits:
        # Not "0.00" beside a utilisation of 1.6%: a small figure keeps two significant digits.
        return f"{value:.2g}"
    return f"{value:,.{digits}f}"


def fmt_percent(value: Any) -> str:
    if not isinstance(value, int | float) or math.isnan(value):
        return DASH
    return f"{100 * value:.1f}%"


def _get(summary: Mapping[str, Any], *path: str) -> Any:
    value: Any = summary
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _stat(summary: Mapping[str, Any], metric: str, group: str, stat: str) -> Any:
    """jct/wait statistics: `{stat}` overall (or under "all"/"overall"), `{group: {stat}}` per size class."""
    block = summary.get(metric)
    if not isinstance(block, Mapping):
        return None
    if group == "all":
        for key in ("all", "overall"):
            if isinstance(block.get(key), Mapping):
                return block[key].get(stat)
        return block.get(stat)
    for key in ("split", "by_size"):
        if isinstance(block.get(key), Mapping):
            block = block[key]
    inner = block.get(group)
    return inner.get(stat) if isinstance(inner, Mapping) else None


def _per_call(summary: Mapping[str, Any]) -> str:
    buckets = _get(summary, "decision_cpu", "per_call_ms")
    if not isinstance(buckets, Mapping) or not buckets:
        return DASH

    def cell(value: Any) -> str:
        if isinstance(value, Mapping):  # {calls, mean, p99, max} in ms
            mean, p99, calls = (fmt_number(value.get(k), 2) for k in ("mean", "p99", "calls"))
            return f"mean {mean} ms, p99 {p99} ms ({calls} call{'' if value.get('calls') == 1 else 's'})"
        return f"{fmt_number(value, 2)} ms"

    return "; ".join(f"{name} waiting: {cell(value)}" for name, value in buckets.items())


def _min_share(summary: Mapping[str, Any]) -> str:
    ratio = _get(summary, "fair_share", "min_ratio")
    if ratio is None:
        return DASH
    where = [str(x) for x in (_get(summary, "fair_share", "min_tenant"), _get(summary, "fair_share", "min_day")) if x]
    text = fmt_number(ratio, 2) + (f" ({', '.join(where)})" if where else "")
    window = _get(summary, "fair_share", "window_min_ratio")
    if window is not None:
        text += f"; over the window {fmt_number(window, 2)} ({_get(summary, 'fair_share', 'window_min_tenant')})"
    return text


def _slips(summary: Mapping[str, Any]) -> str:
    count = _get(summary, "reservation_slips", "count")
    if count is None:
        return DASH
    if not count:
        return "0"
    mean, worst = _get(summary, "reservation_slips", "mean_seconds"), _get(summary, "reservation_slips", "max_seconds")
    return f"{fmt_number(count)} (mean {fmt_duration(mean)}, max {fmt_duration(worst)})"


def _eta(summary: Mapping[str, Any], when: str) -> str:
    block = _get(summary, "eta", when)
    if not isinstance(block, Mapping) or not block.get("n"):
        return DASH
    return f"mean error {fmt_duration(block.get('mae_seconds'))}, median {fmt_duration(block.get('median_abs_seconds'))} (n={block['n']:,})"


Row = tuple[str, Callable[[Mapping[str, Any]], str]]


def _rows() -> list[tuple[str, list[Row]]]:
    groups = [("all", "all jobs"), *SIZE_CLASSES]
    times: list[Row] = []
    for metric, name in (("wait", "wait"), ("jct", "JCT")):
        for group, label in groups:
            for stat in ("mean", "median", "p99"):
                times.append(
                    (f"{name} {stat}, {label}", lambda s, m=metric, g=group, st=stat: fmt_duration(_stat(s, m, g, st)))  # type: ignore[misc]
                )
    return [
        (
            "Run",
            [
                ("jobs", lambda s: fmt_number(s.get("jobs"))),
                ("cluster", lambda s: f"{fmt_number(s.get('nodes'))} nodes, {fmt_number(s.get('gpus'))} GPUs"),
                ("offered load", lambda s: fmt_number(s.get("load"), 2)),
            ],
        ),
        ("Wait and job completion time (JCT = wait + run)", times),
        (
            "Cluster",
            [
                ("bounded slowdown, mean (τ = 10 s)", lambda s: fmt_number(s.get("bounded_slowdown_mean"), 2)),
                ("GPU utilisation", lambda s: fmt_percent(s.get("utilisation"))),
                ("GPUs idle while jobs wait", lambda s: fmt_percent(s.get("idle_while_waiting"))),
                ("makespan", lambda s: fmt_duration(s.get("makespan_seconds"))),
                ("min tenant share ratio (tenant, day)", _min_share),
                ("preemptions", lambda s: fmt_number(s.get("preemptions"))),
                ("GPU-hours lost to preemption", lambda s: fmt_number(s.get("gpu_hours_lost"), 1)),
                ("reservation slips", _slips),
                ("start-time estimate at submit", lambda s: _eta(s, "at_submit")),
                ("start-time estimate while waiting", lambda s: _eta(s, "while_waiting")),
                ("start-time estimate from a reservation", lambda s: _eta(s, "reserved")),
            ],
        ),
        (
            "Cost of the policy",
            [
                ("policy calls", lambda s: fmt_number(_get(s, "decision_cpu", "calls"))),
                ("CPU per decision by queue length", _per_call),
                ("CPU in the policy, total", lambda s: fmt_duration(_get(s, "decision_cpu", "total_seconds"))),
                ("simulation CPU time", lambda s: fmt_duration(s.get("sim_cpu_seconds"))),
                ("simulation wall time", lambda s: fmt_duration(s.get("wall_seconds"))),
            ],
        ),
    ]


def summary_table(summaries: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """[(section, [(row label, [cell per summary])])]: the side-by-side table, one column per policy (or run)."""
    return [(section, [(label, [fn(s) for s in summaries]) for label, fn in rows]) for section, rows in _rows()]


HEADLINE = ("wait mean, all jobs", "wait p99, all jobs", "JCT mean, all jobs", "GPU utilisation", "min tenant share ratio (tenant, day)")


def headline_text(summaries: Sequence[Mapping[str, Any]]) -> str:
    """A few rows as plain text columns, for a terminal."""
    picked = [("policy", [str(s.get("policy", "?")) for s in summaries])]
    for _, rows in summary_table(summaries):
        picked += [(label, cells) for label, cells in rows if label in HEADLINE]
    widths = [max(len(label) for label, _ in picked)] + [max(len(cells[i]) for _, cells in picked) for i in range(len(summaries))]
    return "\n".join(
        "  ".join([label.ljust(widths[0]), *(cell.rjust(widths[i + 1]) for i, cell in enumerate(cells))]) for label, cells in picked
    )


# ---- figures ------------------------------------------------------------------------------------------------------


def _layout(title: str, *, date_axis: bool, x_title: str = "", y_title: str = "", height: int = 320) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "x": 0, "xanchor": "left", "font": {"size": 15}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 40},
        "xaxis": {"gridcolor": GRID, "automargin": True, "title": {"text": x_title or ("time (UTC)" if date_axis else "")}},
        "yaxis": {"gridcolor": GRID, "automargin": True, "title": {"text": y_title}},
        "legend": {"orientation": "h", "y": -0.25},
        "showlegend": True,  # with one trace too: its name says what the line is (n, started at once, the mean)
        "hovermode": "x unified" if date_axis else "closest",
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
    }
    if date_axis:
        layout["xaxis"]["type"] = "date"
    return layout


def _share_axis(layout: dict[str, Any]) -> dict[str, Any]:
    """A y axis of a share of the cluster: 0 to 100 %, whatever the data (never below 0 or past the whole)."""
    layout["yaxis"].update({"range": [0, 1], "tickformat": ".0%", "hoverformat": ".1%"})
    return layout


def empty_figure(title: str, message: str) -> dict[str, Any]:
    """A chart with nothing to draw: its title and why, without empty axes."""
    return blank_figure(_layout(title, date_axis=False, height=130), message)


def blank_figure(layout: dict[str, Any], message: str) -> dict[str, Any]:
    """`layout` as a chart with no data: no axes (a date axis with no data reads "Jan 2000"), just why, in the chart's own
    box. The what-if charts' and the telemetry pages' (telemetry.figure_style) alike."""
    layout["xaxis"] = {"visible": False}
    layout["yaxis"] = {"visible": False}
    layout["annotations"] = [
        {
            "text": message,
            "showarrow": False,
            "xref": "paper",
            "yref": "paper",
            "x": 0,
            "xanchor": "left",
            "y": 0.6,
            "font": {"size": 13, "color": MUTED},
        }
    ]
    layout["hovermode"] = False
    layout["meta"] = {"empty": True}
    return {"data": [], "layout": layout}


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S")


def size_class(nodes: int, gpus: int, gpus_per_node: int) -> str:
    if nodes > 1:
        return "gang"
    return "whole_node" if gpus >= gpus_per_node else "sub_node"


def _cdf(waits: Sequence[float], points: int = POINTS) -> tuple[list[float], list[float]]:
    """The empirical CDF of `waits` (seconds) as the corners of a step line ('hv'): (wait, share that waited at most it).

    A log axis has no 0: a wait under AT_ONCE_SECONDS is drawn at it. Tied waits are one corner (the share of all of
    them); past `points` distinct waits, `points` of them evenly (the last always) and the line holds between them.
    """
    values = sorted(max(w, AT_ONCE_SECONDS) for w in waits)
    n = len(values)
    if n == 0:
        return [], []
    corners = [i for i in range(n) if i + 1 == n or values[i + 1] != values[i]]
    if len(corners) > points:
        corners = sorted({corners[round(k * (len(corners) - 1) / (points - 1))] for k in range(points)})
    return [round(values[i], 3) for i in corners], [round((i + 1) / n, 5) for i in corners]


def _wait_ticks(longest: float) -> tuple[float, list[float], list[str]]:
    """A wait axis' end (the first tick past the longest wait, so its step shows; at least a minute) and its ticks."""
    top = next((t for t, _ in WAIT_TICKS if t > longest and t >= 60.0), longest)
    ticks = [(t, text) for t, text in WAIT_TICKS if t <= top]
    if len(ticks) > 9:
        ticks = [(t, text) for t, text in ticks if t in WAIT_TICKS_COARSE or t == top]
    return top, [t for t, _ in ticks], [text for _, text in ticks]


def _wait_figures(results: Sequence[_Result]) -> list[dict[str, Any]]:
    figures: list[dict[str, Any]] = []
    for group, label in SIZE_CLASSES:
        title = f"Wait, {label}: share of jobs that waited at most x"
        data: list[dict[str, Any]] = []
        longest = 0.0
        for i, r in enumerate(results):
            waits = [
                rec.first_start - rec.job.submit
                for rec in r.records
                if rec.first_start is not None and size_class(rec.job.nodes, rec.job.gpus, r.cluster.gpus_per_node) == group
            ]
            if not waits:
                continue
            x, y = _cdf(waits)
            longest = max(longest, x[-1])
            at_once = sum(1 for w in waits if w < AT_ONCE_SECONDS)
            name = f"{r.policy} (n={len(waits):,}" + (f", {at_once:,} started at once)" if at_once else ")")
            data.append({"name": name, "x": x, "y": y, "line": {"color": COLORS[i % len(COLORS)], "shape": "hv"}})
        if not data:
            figures.append({"id": f"cdf-wait-{group}", "figure": empty_figure(title, f"No {label} in this trace: no wait to draw.")})
            continue
        top, tickvals, ticktext = _wait_ticks(longest)
        for trace in data:
            # From the axis' start (at 0 unless some started at once) to its end, where every job has started.
            before = trace["x"][0] > AT_ONCE_SECONDS
            after = trace["x"][-1] < top
            x = [*([AT_ONCE_SECONDS] if before else []), *trace["x"], *([top] if after else [])]
            y = [*([0.0] if before else []), *trace["y"], *([1.0] if after else [])]
            trace.update(
                type="scatter",
                mode="lines",
                x=x,
                y=y,
                customdata=[fmt_duration(v) for v in x],
                hovertemplate="waited at most %{customdata}: %{y:.1%} of jobs",
            )
        layout = _layout(
            title, date_axis=False, x_title="wait (log scale; a job started at once, under 1 s, is drawn at 1 s)", y_title="share of jobs"
        )
        # A little room either side: the steps at 1 s and at the axis' end, and the end's tick label, stay in view.
        edges = [-AXIS_PAD, math.log10(top) + AXIS_PAD]
        layout["xaxis"].update({"type": "log", "range": edges, "tickvals": tickvals, "ticktext": ticktext})
        layout["yaxis"].update({"range": [0, 1.02], "tickformat": ".0%"})
        figures.append({"id": f"cdf-wait-{group}", "figure": {"data": data, "layout": layout}})
    return figures


def step_means(times: Sequence[float], values: Sequence[float], start: float, end: float, buckets: int) -> list[float]:
    """Time-weighted means over `buckets` equal spans of [start, end] of a step function (value i holds from times[i])."""
    width = (end - start) / buckets if end > start else 1.0
    sums = [0.0] * buckets
    for i, t0 in enumerate(times):
        t1 = times[i + 1] if i + 1 < len(times) else end
        t0, t1 = max(t0, start), min(t1, end)
        if t1 <= t0:
            continue
        b = min(buckets - 1, int((t0 - start) / width))
        while t0 < t1 and b < buckets:
            edge = min(t1, start + (b + 1) * width)
            sums[b] += values[i] * (edge - t0)
            t0, b = edge, b + 1
    return [s / width for s in sums]


def steps(changes: Iterable[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """A step function from (time, change) pairs: the times it changes at and its value from each."""
    times: list[float] = []
    values: list[float] = []
    level = 0.0
    for t, change in sorted(changes):
        level += change
        if times and times[-1] == t:
            values[-1] = level
        else:
            times.append(t)
            values.append(level)
    return times, values


def _changes(record: _Record) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """A job's GPUs held and its waiting (1 while it waits) as (time, change) pairs: every run it had (replay.metrics
    counts the same runs), and its waits from its submit to its first run and from a preemption to its next run."""
    held: list[tuple[float, float]] = []
    waiting: list[tuple[float, float]] = []
    since = record.job.submit
    for start, end, gpus in record.attempts:
        if start > since:
            waiting += [(since, 1.0), (start, -1.0)]
        held += [(start, float(gpus)), (end, -float(gpus))]
        since = end
    if not record.attempts:
        waiting.append((since, 1.0))
    return held, waiting


def _span(results: Sequence[_Result]) -> tuple[float, float]:
    """From the first submit to the last end of any run: each policy's makespan is inside it."""
    submits = [rec.job.submit for r in results for rec in r.records]
    ends = [end for r in results for rec in r.records for _, end, _ in rec.attempts]
    if not submits:
        return 0.0, 1.0
    start = min(submits)
    return start, max([*ends, start + 1.0])


def _time_figures(results: Sequence[_Result]) -> list[dict[str, Any]]:
    """Utilisation, the queue and each tenant's share over time, as means over POINTS equal spans of the replay.

    Read from every job's runs, not sampled: a policy's mean utilisation over its makespan is the table's figure.
    """
    start, end = _span(results)
    n = POINTS
    width = (end - start) / n
    grid = [_iso(start + (b + 0.5) * width) for b in range(n)]
    util, queue, shares = [], [], []
    most_waiting = 0.0
    for i, r in enumerate(results):
        gpus = max(1, r.cluster.nodes * r.cluster.gpus_per_node)
        line = {"color": COLORS[i % len(COLORS)]}
        held: list[tuple[float, float]] = []
        waiting: list[tuple[float, float]] = []
        by_tenant: dict[str, list[tuple[float, float]]] = {}
        for rec in r.records:
            job_held, job_waiting = _changes(rec)
            held += job_held
            waiting += job_waiting
            by_tenant.setdefault(rec.job.tenant, []).extend(job_held)
        first = min((rec.job.submit for rec in r.records), default=start)
        last = max((t for t, _ in held), default=first)
        gpu_seconds = sum(-t * change for t, change in held)  # each run: end x GPUs - start x GPUs
        mean = gpu_seconds / (gpus * (last - first)) if last > first else 0.0
        busy = step_means(*steps((t, c / gpus) for t, c in held), start, end, n)
        util.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{r.policy} (mean over its makespan {fmt_percent(mean)})",
                "x": grid,
                "y": [round(v, 4) for v in busy],
                "line": line,
            }
        )
        queued = step_means(*steps(waiting), start, end, n)
        most_waiting = max(most_waiting, *queued)
        queue.append({"type": "scatter", "mode": "lines", "name": r.policy, "x": grid, "y": [round(v, 2) for v in queued], "line": line})
        shares.append(_share_figure(r.policy, by_tenant, gpus, grid, start, end))
    util_layout = _share_axis(_layout("GPU utilisation over time", date_axis=True, y_title="busy GPUs / all GPUs"))
    queue_layout = _layout("Queue length over time (mean over each point's interval)", date_axis=True, y_title="jobs waiting")
    # Never below 0 jobs; a queue that stayed empty is a line at 0, on an axis up to 1.
    if most_waiting > 0:
        queue_layout["yaxis"]["rangemode"] = "tozero"
    else:
        queue_layout["yaxis"]["range"] = [0, 1]
    return [
        {"id": "utilisation", "figure": {"data": util, "layout": util_layout}},
        {"id": "queue", "figure": {"data": queue, "layout": queue_layout}},
        *shares,
    ]


def _share_figure(
    policy: str, by_tenant: Mapping[str, list[tuple[float, float]]], gpus: int, grid: list[str], start: float, end: float
) -> dict[str, Any]:
    """The tenants' GPUs over time, stacked: the TENANT_LINES that held the most GPU-seconds by name, the rest summed."""
    title = f"Share of the cluster's GPUs per tenant over time: {policy}"
    held = {tenant: sum(-t * change for t, change in changes) for tenant, changes in by_tenant.items()}
    named = sorted((t for t in held if held[t] > 0), key=lambda t: (-held[t], t))[:TENANT_LINES]
    others = [change for tenant, changes in by_tenant.items() if tenant not in named for change in changes]
    series = [(tenant, by_tenant[tenant], COLORS[j]) for j, tenant in enumerate(named)]
    if any(held[t] > 0 for t in by_tenant if t not in named):
        series.append(("others", others, OTHERS_COLOR))
    if not series:
        return {"id": f"share-{policy}", "figure": empty_figure(title, "No job ran: no tenant held a GPU.")}
    data = []
    for tenant, changes, color in series:
        share = step_means(*steps((t, c / gpus) for t, c in changes), start, end, len(grid))
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "stackgroup": "tenants",
                "name": tenant,
                "x": grid,
                "y": [round(v, 4) for v in share],
                "line": {"color": color, "width": 0.5},
            }
        )
    layout = _share_axis(_layout(title, date_axis=True, y_title="GPUs held / all GPUs"))
    return {"id": f"share-{policy}", "figure": {"data": data, "layout": layout}}


def report_figures(results: Sequence[_Result]) -> list[dict[str, Any]]:
    """The report's charts as Plotly figure JSON: [{"id", "figure": {"data", "layout"}}]."""
    return [*_wait_figures(results), *_time_figures(results)]


# ---- the files ----------------------------------------------------------------------------------------------------


def plotly_js() -> str:
    """The installed plotly package's bundled plotly.min.js (what the site serves too)."""
    import plotly

    return (Path(plotly.__file__).resolve().parent / "package_data" / "plotly.min.js").read_text(encoding="utf-8")


def _script_safe(text: str) -> str:
    # Inside <script>, only "</" can end the element early; "<\/" means the same to JavaScript and JSON.
    return text.replace("</", "<\\/")


def _e(value: Any) -> str:
    return html.escape(str(value))


CSS = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 1200px; padding: 0 1rem; color: #1f2328; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2rem; border-bottom: 1px solid #d0d7de; }
table { border-collapse: collapse; width: 100%; }
th, td { border: 1px solid #d0d7de; padding: .3rem .5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; } tr.section th { background: #f6f8fa; }
.muted { color: #59636e; } .chart { min-height: 320px; margin: 1rem 0; } code { background: #f6f8fa; padding: 0 .2rem; }
"""


def table_html(columns: Sequence[str], summaries: Sequence[Mapping[str, Any]]) -> str:
    parts = ["<table><thead><tr><th></th>", *(f"<th>{_e(c)}</th>" for c in columns), "</tr></thead><tbody>"]
    for section, rows in summary_table(summaries):
        parts.append(f'<tr class="section"><th colspan="{len(columns) + 1}">{_e(section)}</th></tr>')
        for label, cells in rows:
            parts.append(f"<tr><th>{_e(label)}</th>{''.join(f'<td class=num>{_e(c)}</td>' for c in cells)}</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def render_html(
    summaries: Sequence[Mapping[str, Any]],
    figures: Sequence[Mapping[str, Any]],
    *,
    assumptions: Iterable[str],
    settings_used: Mapping[str, Any],
    trace_name: str,
    title: str = "What-if replay",
) -> str:
    """The self-contained report page: no external script, style or font."""
    definitions = sorted({str(d) for s in summaries if (d := _get(s, "fair_share", "definition"))})
    settings_rows = "".join(f"<tr><th>{_e(k)}</th><td><code>{_e(v)}</code></td></tr>" for k, v in settings_used.items())
    charts = "".join(f'<div class="chart" id="{_e(f["id"])}"></div>' for f in figures)
    figure_json = _script_safe(json.dumps(list(figures), separators=(",", ":")))
    draw = (
        "JSON.parse(document.getElementById('figures').textContent).forEach(function (f) {"
        " Plotly.newPlot(f.id, f.figure.data, f.figure.layout, {displaylogo: false, responsive: true}); });"
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_e(title)}: {_e(trace_name)}</title><style>{CSS}</style></head>
<body>
<h1>{_e(title)}: {_e(trace_name)}</h1>
<p class="muted">Muster's scheduling policy and two baselines replayed on the same trace and cluster, in simulated time.</p>
<h2>Assumptions</h2>
<ul>{"".join(f"<li>{_e(a)}</li>" for a in assumptions)}</ul>
{"".join(f"<p><strong>Min tenant share ratio:</strong> {_e(d)}</p>" for d in definitions)}
<h2>Settings used</h2>
<table>{settings_rows}</table>
<h2>Side by side</h2>
{table_html([str(s.get("policy", "?")) for s in summaries], summaries)}
<h2>Charts</h2>
{charts}
<script type="application/json" id="figures">{figure_json}</script>
<script>{_script_safe(plotly_js())}</script>
<script>{draw}</script>
</body></html>
"""


def summary_document(
    summaries: Sequence[Mapping[str, Any]], *, assumptions: Iterable[str], settings_used: Mapping[str, Any], trace_name: str
) -> dict[str, Any]:
    return {"trace": trace_name, "assumptions": list(assumptions), "settings": dict(settings_used), "policies": list(summaries)}


def write_report(
    summaries: Sequence[Mapping[str, Any]],
    results: Sequence[_Result],
    *,
    out_dir: Path,
    assumptions: _Assumptions,
    settings_used: Mapping[str, Any],
    trace_name: str,
) -> tuple[Path, Path]:
    """Write out_dir/summary.json and out_dir/report.html; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    sentences = assumptions.describe()
    summary_path, report_path = out_dir / "summary.json", out_dir / "report.html"
    document = summary_document(summaries, assumptions=sentences, settings_used=settings_used, trace_name=trace_name)
    summary_path.write_text(json.dumps(document, indent=2, default=str) + "\n", encoding="utf-8")
    page = render_html(summaries, report_figures(results), assumptions=sentences, settings_used=settings_used, trace_name=trace_name)
    report_path.write_text(page, encoding="utf-8")
    return summary_path, report_path
