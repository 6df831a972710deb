"""The what-if pages (admins only): runs side by side, the form that starts one, a run's progress and report, and
cancelling or deleting a run (POST)."""

from __future__ import annotations

import json
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.static import static
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from jobs.models import Node, NodeState
from replay.report import render_html, summary_table
from replay.trace import TraceError
from telemetry.staticfiles import PLOTLY_JS
from whatif.compare import assumption_rows
from whatif.forms import WhatIfForm
from whatif.models import WhatIfRun
from whatif.services import RunEnded, RunNotEnded, RunRequest, history_trace, whatif_cancel, whatif_delete, whatif_start

PAGE_SIZE = 25
# How often a run's page asks for its progress while it is queued or running.
REFRESH_MS = 2000
# Columns in a comparison at most: each run brings one per policy.
MAX_COMPARED = 6


def _staff_only(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Only admins run what-if replays.")


def _site_nodes() -> int | None:
    """The nodes of whole GPUs: the replay's cluster is of those (the shared nodes' GPUs take slices only)."""
    return Node.objects.exclude(state=NodeState.GONE).filter(sharing="").count() or None


@login_required
def whatif_list(request: HttpRequest) -> HttpResponse:
    _staff_only(request)
    if request.method == "POST":
        form = WhatIfForm(request.POST, request.FILES)
        if form.is_valid():
            run = _start(request, form)
            if run is not None:
                messages.success(request, f"What-if run {run.pk} is queued.")
                return redirect("whatif:detail", pk=run.pk)
    else:
        form = WhatIfForm(initial={"nodes": _site_nodes()})
    runs = WhatIfRun.objects.defer("trace", "figures").select_related("created_by")
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "whatif/list.html", {"form": form, "page": page})


def _start(request: HttpRequest, form: WhatIfForm) -> WhatIfRun | None:
    data = form.cleaned_data
    start, end = form.range()
    if data["source"] == WhatIfRun.Source.UPLOAD:
        trace, name = data["trace_text"], data["trace_file"].name
    else:
        trace = history_trace(start, end)
        first, last = data.get("start"), data.get("end")
        name = f"this site's jobs, {first or 'the beginning'} to {last or 'today'}"
    run_request = RunRequest(
        source=data["source"],
        trace_name=name,
        trace=trace,
        policies=tuple(data["policies"]),
        nodes=data.get("nodes"),
        load=data.get("load"),
        start=start,
        end=end,
        assumptions=form.assumptions(),
        changes=data["settings"],
    )
    try:
        return whatif_start(run_request, actor=request.user, http_request=request)
    except TraceError as exc:
        form.add_error("trace_file" if data["source"] == WhatIfRun.Source.UPLOAD else None, f"The trace has a bad row: {exc}")
    except ValueError as exc:
        form.add_error(None, str(exc))
    return None


@login_required
@require_GET
def whatif_detail(request: HttpRequest, pk: int) -> HttpResponse:
    _staff_only(request)
    run = get_object_or_404(WhatIfRun.objects.defer("trace").select_related("created_by", "cancelled_by"), pk=pk)
    summaries = run.policy_summaries
    context: dict[str, Any] = {
        "run": run,
        "percent": round(100 * run.progress),
        "table": summary_table(summaries) if summaries else [],
        "columns": [s.get("policy", "?") for s in summaries],
        "figures": run.figures or [],
        # whatif.runs.replay_policies: no submit window, so no offered load (the table's dash)
        "no_load": bool(summaries) and all(s.get("load") is None for s in summaries),
        "plotly_js": static(PLOTLY_JS),
        "live": {"url": reverse("whatif:progress", args=[run.pk]), "status": run.status, "refresh_ms": REFRESH_MS},
    }
    return render(request, "whatif/detail.html", context)


@login_required
@require_GET
def whatif_progress(request: HttpRequest, pk: int) -> JsonResponse:
    _staff_only(request)
    run = get_object_or_404(WhatIfRun.objects.only("status", "progress", "error"), pk=pk)
    return JsonResponse({"status": run.status, "progress": run.progress, "error": run.error})


@login_required
@require_GET
def whatif_report(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's report as one self-contained HTML file (opens offline), as a download."""
    _staff_only(request)
    run = get_object_or_404(WhatIfRun.objects.defer("trace"), pk=pk, status=WhatIfRun.Status.DONE)
    summary = run.summary or {}
    page = render_html(
        summary.get("policies", []),
        run.figures or [],
        assumptions=summary.get("assumptions", []),
        settings_used=summary.get("settings", {}),
        trace_name=run.trace_name,
        title=f"What-if run {run.pk}",
    )
    response = HttpResponse(page, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="whatif-{run.pk}-report.html"'
    return response


@login_required
@require_GET
def whatif_summary(request: HttpRequest, pk: int) -> HttpResponse:
    _staff_only(request)
    run = get_object_or_404(WhatIfRun.objects.only("summary", "status"), pk=pk, status=WhatIfRun.Status.DONE)
    response = HttpResponse(json.dumps(run.summary, indent=2), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="whatif-{run.pk}-summary.json"'
    return response


@login_required
@require_GET
def whatif_compare(request: HttpRequest) -> HttpResponse:
    """Finished runs side by side: one column per (run, policy)."""
    _staff_only(request)
    ids = [int(x) for x in request.GET.getlist("run") if x.isdigit()][:MAX_COMPARED]
    runs = list(WhatIfRun.objects.defer("trace", "figures").filter(pk__in=ids, status=WhatIfRun.Status.DONE).order_by("pk"))
    if len(runs) < 2:
        messages.error(request, "Choose two or more finished runs to compare.")
        return redirect("whatif:list")
    columns, summaries = [], []
    for run in runs:
        for summary in run.policy_summaries:
            columns.append(f"run {run.pk}: {summary.get('policy', '?')}")
            summaries.append(summary)
    context = {"runs": runs, "columns": columns, "table": summary_table(summaries), "assumptions": assumption_rows(runs)}
    return render(request, "whatif/compare.html", context)


# Any admin may cancel or delete any run, as any admin may start one and sees them all (docs/admin.md).
@login_required
@require_POST
def whatif_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    _staff_only(request)
    get_object_or_404(WhatIfRun.objects.only("pk"), pk=pk)
    try:
        whatif_cancel(run_id=pk, actor=request.user, http_request=request)
    except RunEnded as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"What-if run {pk} is cancelled.")
    return redirect("whatif:detail", pk=pk)


@login_required
@require_POST
def whatif_delete_view(request: HttpRequest, pk: int) -> HttpResponse:
    _staff_only(request)
    get_object_or_404(WhatIfRun.objects.only("pk"), pk=pk)
    try:
        whatif_delete(run_id=pk, actor=request.user, http_request=request)
    except RunNotEnded as exc:
        messages.error(request, str(exc))
        return redirect("whatif:detail", pk=pk)
    messages.success(request, f"What-if run {pk} is deleted.")
    return redirect("whatif:list")
