"""The telemetry section of the job page: options from the query string, series read once, figures and flags.

`frontend.views.job_detail` calls `job_telemetry_context`; the template
`frontend/job_telemetry.html` draws what it returns with the plotly.js of the installed
plotly package. Query parameters (all optional): `run` (attempt), `range` (15m, 1h, 6h, 24h,
all: the last part of the run), `view` (job, node, gpu) and `node` (which node's GPUs the gpu
view shows). The job page refuses a `range` or `view` it does not offer (`telemetry_query_errors`,
a 400 naming those it does); `run` and `node` fall back to the latest run and its first node,
as the page's own links carry them from one run to another that may lack them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.templatetags.static import static

from jobs.models import Job
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import samples_mean, step_for
from telemetry.efficiency import judging_seconds, site_efficiency_flags, too_short_to_judge
from telemetry.figure_style import empty_figure
from telemetry.figures import CHARTS, heatmap_figure, line_figure, max_points, memory_capacity, not_applicable
from telemetry.selectors import RunReader, job_runs, job_target, job_telemetry_summary, slice_held
from telemetry.sources import TelemetrySource, TelemetryUnavailable, get_source
from telemetry.staticfiles import PLOTLY_JS

RANGES = {"15m": 15 * 60, "1h": 3600, "6h": 6 * 3600, "24h": 24 * 3600}
RANGE_LABELS = {"15m": "last 15 min", "1h": "last hour", "6h": "last 6 h", "24h": "last 24 h", "all": "whole run"}
VIEWS = {"job": "whole job", "node": "per node", "gpu": "per GPU"}


def lines_note(view: str, *, gpus: int, nodes: int, node: str) -> str:
    """What the charts' lines are, said above them: the whole job's shaded band was in no legend, so a reader could
    not tell a spread across GPUs from an error bar or a forecast."""
    if view == "node":
        return f"One line per node ({nodes}): the mean of that node's GPUs."
    if view == "gpu":
        more = "; Node picks another node" if nodes > 1 else ""
        return f"One line per GPU of {node}{more}."
    if gpus <= 1:
        return "Each line is the job's one GPU."
    return (
        f"Each line is the mean of the job's {gpus} GPUs; the shaded band around it spans the lowest to the highest "
        "GPU at each point, so one GPU that lags or spikes shows. Per node and per GPU draw them one by one."
    )


def telemetry_query_errors(params: Mapping[str, str]) -> dict[str, list[str]]:
    """Each chart option in `params` the page does not offer (`range`, `view`), with the values it does; empty when
    they are absent (or empty) or offered. Such a value was shown as the default: a mistyped link read as if obeyed."""
    errors = {}
    for name, offered, what in (("range", (*RANGES, "all"), "time range"), ("view", tuple(VIEWS), "view")):
        asked = params.get(name, "")
        if asked and asked not in offered:
            errors[name] = [f'"{asked}" is not a {what} the charts offer; choose one of {", ".join(offered)}.']
    return errors


@dataclass(frozen=True)
class Options:
    attempt: int
    range: str
    view: str
    node: str


def _options(params: Mapping[str, str], attempts: list[int], nodes_of: Callable[[int], list[str]]) -> Options:
    run = params.get("run", "")
    attempt = int(run) if run.isdigit() and int(run) in attempts else attempts[-1]
    nodes = nodes_of(attempt)
    range_ = params.get("range", "all")
    view = params.get("view", "job")
    node = params.get("node", "")
    return Options(
        attempt=attempt,
        range=range_ if range_ in RANGES else "all",
        view=view if view in VIEWS else "job",
        node=node if node in nodes else (nodes[0] if nodes else ""),
    )


def _link(params: Mapping[str, str], **changes: object) -> str:
    """The page's query string with some telemetry options changed, keeping the others (e.g. the logs' rank)."""
    merged = {k: v for k, v in params.items() if v != ""}
    merged.update({k: str(v) for k, v in changes.items()})
    return "?" + urlencode(merged) + "#telemetry"


def shared_gpu_note(job: Job) -> str:
    """For a GPU slice: whose activity its GPU charts show. DCGM reports a MIG instance on its own; a time-sliced or
    MPS GPU only as a whole, so those charts are the whole GPU's, other jobs' work included."""
    allocation = job.allocations.select_related("node").filter(gpu_slot__isnull=False).order_by("-attempt").first()
    if allocation is None:
        return ""
    node, where = allocation.node, f"GPU {allocation.gpu_slot} of {allocation.node.name}"
    if node.sharing == "mig":
        return f"This job holds a MIG slice ({allocation.gpus:.3g} of {where}): its charts are its own instance's."
    return (
        f"This job holds a {allocation.gpus:g} {node.sharing} share of {where} (Muster's count; the device plugin picks the "
        "physical GPU). Its charts show that whole GPU, shared with other jobs: DCGM cannot split a shared GPU's activity by job."
    )


def job_telemetry_context(
    job: Job, params: Mapping[str, str], *, now: datetime | None = None, source: TelemetrySource | None = None
) -> dict[str, Any]:
    """Everything the job page's telemetry section shows: figures (as Plotly JSON), flags, summary and controls."""
    runs = job_runs(job)
    context: dict[str, Any] = {"plotly_js": static(PLOTLY_JS), "summary": job_telemetry_summary(job), "figures": []}
    context["shared_gpu"] = shared_gpu_note(job)
    if not runs:
        context["message"] = (
            "No telemetry: the job ended without running." if job.is_finished else "No telemetry yet: the job has not started running."
        )
        return context
    attempts = [r.attempt for r in runs]
    by_attempt = {r.attempt: r for r in runs}
    targets = {}

    def nodes_of(attempt: int) -> list[str]:
        targets[attempt] = job_target(job, by_attempt[attempt])
        return [r.node for r in targets[attempt].ranks]

    options = _options(params, attempts, nodes_of)
    run = by_attempt[options.attempt]
    nodes = [r.node for r in targets[options.attempt].ranks]
    gpus_per_node = [r.gpus for r in targets[options.attempt].ranks]
    node = options.node
    reader = RunReader.open(job, run, source or get_source(), now=now)
    start, end = reader.window()
    run_seconds = end - start
    if options.range in RANGES:
        start = max(start, end - RANGES[options.range])
    line_step = reader.step_for(step_for(end - start, reader.resolution, settings.MUSTER_TELEMETRY_MAX_POINTS))
    heat_step = reader.step_for(step_for(end - start, reader.resolution, settings.MUSTER_TELEMETRY_HEATMAP_COLUMNS))
    level = Level(options.view)
    context.update(
        run=run,
        running=run.ended is None,
        origin=reader.origin,
        step_seconds=line_step,
        options=options,
        nodes=nodes,
        runs=[{"attempt": a, "link": _link(params, run=a), "current": a == options.attempt} for a in attempts],
        ranges=[
            {
                "label": RANGE_LABELS[k],
                "link": _link(params, range=k),
                "current": k == options.range,
                # A range as long as the run or longer draws the whole run: offered as a link, it looked like another view.
                "whole_run": k in RANGES and RANGES[k] >= run_seconds,
            }
            for k in (*RANGES, "all")
        ],
        views=[{"label": label, "link": _link(params, view=k), "current": k == options.view} for k, label in VIEWS.items()],
        node_links=[{"label": n, "link": _link(params, view="gpu", node=n), "current": n == node} for n in nodes],
        lines_note=lines_note(options.view, gpus=sum(gpus_per_node), nodes=len(nodes), node=node),
    )
    try:
        heat = reader.read(METRICS["gpu_util"], level=Level.GPU, start=start, end=end, step=heat_step)
        figures = [("heatmap", heatmap_figure(heat))]
        tensor_job = None
        for chart in CHARTS:
            if chart.multi_node_only and len(nodes) < 2:
                continue
            reason = not_applicable(chart, gpus_per_node)
            if reason:
                # Said in the chart's box rather than drawn as an empty axis or a line at zero.
                figures.append((chart.key, empty_figure(chart.title, reason)))
                continue
            by_metric = {
                key: reader.read(METRICS[key], level=level, start=start, end=end, step=line_step, node=node if level == Level.GPU else None)
                for key in chart.metrics
            }
            if level == Level.JOB and "tensor_active" in by_metric:
                tensor_job = by_metric["tensor_active"]
            pushed = reader.pushed_nccl(start=start, end=end, step=line_step) if chart.key == "nccl" else None
            capacity = memory_capacity(targets[options.attempt].ranks) if chart.key == "memory" else None
            figures.append((chart.key, line_figure(chart, by_metric, pushed=pushed, capacity=capacity)))
        if tensor_job is None:
            tensor_job = reader.read(METRICS["tensor_active"], level=Level.JOB, start=start, end=end, step=line_step)
    except TelemetryUnavailable as exc:
        context["error"] = f"Telemetry is unavailable: {exc}"
        return context
    summary = context["summary"]
    if summary is not None and reader.stored and options.range == "all" and summary.attempts and summary.attempts[-1] == run.attempt:
        context["flags"] = summary.flags  # the stored run's flags, from its full-resolution series
    else:
        flags = site_efficiency_flags(
            gpu_util=heat, tensor_active_mean=samples_mean(s.buckets for s in tensor_job), slice_share=slice_held(job)
        )
        context["flags"] = [f.as_dict() for f in flags]
    context["too_short"] = too_short_to_judge(heat, settings.MUSTER_TELEMETRY_IDLE_SECONDS)
    context["judging_seconds"] = judging_seconds(settings.MUSTER_TELEMETRY_IDLE_SECONDS, heat[0].buckets.step if heat else 0)
    # A stored run keeps where its samples came from: a simulated one is still no real GPU's.
    context["stored_from"] = reader.stored_from()
    context["figures"] = [{"id": f"telemetry-{key}", "figure": fig} for key, fig in figures]
    context["max_points"] = max((max_points(f["figure"]) for f in context["figures"]), default=0)
    return context
