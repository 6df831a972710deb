"""Browser pages. They read through selectors and write through the same services as the API."""

from __future__ import annotations

import hashlib
import re
from dataclasses import fields

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.requests import AuthenticatedHttpRequest
from api.jobs.filters import JobFilter
from api.jobs.serializers import JobSubmitSerializer
from frontend.forms import JobForm
from jobs.cluster import ClusterUnavailable
from jobs.errors import JobFinished, JobNotStarted
from jobs.logs import job_logs
from jobs.models import Job
from jobs.selectors import job_assigned_nodes, job_visible_to, jobs_visible_to, shared_pools
from jobs.services import ResourceAsk, job_cancel, job_check_fits_cluster, job_submit
from jobs.states import ACTIVE_STATES, JobState
from notify.services import asks_json, job_notify_save, preference_of
from quotas.selectors import volumes_of_teams_of
from scheduler.queue import queue_counts, queue_entries, queue_entry, queue_jobs
from telemetry.dashboard.page import dashboard_context, dashboard_live
from telemetry.dashboard.selectors import node_grid
from telemetry.page import job_telemetry_context
from telemetry.staticfiles import PLOTLY_JS


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    """Jobs as squeue and sacct show them, filtered by name, state, owner (admins) and submit date; the rows of
    active jobs keep up in place (?rows=1 answers just the rows, for the page's poller)."""
    params = request.GET.copy()
    if not getattr(request.user, "is_staff", False):
        params.pop("owner", None)
    since = params.get("submitted_after", "")
    filtering = params.copy()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", since):
        filtering["submitted_after"] = f"{since}T00:00:00+00:00"  # the date field's day, from midnight UTC
    # jobs_visible_to prefetches the allocations with their nodes: the running jobs' node lists.
    jobs = JobFilter(filtering, queryset=jobs_visible_to(request.user)).qs.select_related("owner")
    page = Paginator(jobs, 25).get_page(request.GET.get("page"))
    rows = [(job, _run_time(job), job_assigned_nodes(job) if job.state in ACTIVE_STATES else []) for job in page.object_list]
    live = any(job.state in ACTIVE_STATES or job.state == JobState.PENDING for job in page.object_list)
    context = {"page": page, "rows": rows, "now": timezone.now(), "live": live}
    if request.GET.get("rows") == "1":
        html = render_to_string("frontend/job_rows.html", context, request=request)
        return JsonResponse({"html": html, "live": live, "updated": timezone.now().strftime("%H:%M:%S")})
    filters = {key: request.GET.get(key, "") for key in ("name", "state", "owner", "submitted_after")}
    query = params.urlencode()
    context.update(
        filters=filters,
        states=JobState.values,
        live_url=f"{reverse('frontend:job-list')}?{query}&rows=1" if query else f"{reverse('frontend:job-list')}?rows=1",
        live_refresh_ms=settings.MUSTER_LIVE_REFRESH_SECONDS * 1000,
        live_refresh_seconds=settings.MUSTER_LIVE_REFRESH_SECONDS,
    )
    return render(request, "frontend/job_list.html", context)


@login_required
def job_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    team_names = list(request.user.teams.values_list("name", flat=True))
    volumes = volumes_of_teams_of(request.user)
    # Clone: the form filled in from a job the user can see (?clone=<id>), to change and submit as a new job.
    clone = request.GET.get("clone", "")
    source = jobs_visible_to(request.user).filter(pk=int(clone)).first() if clone.isdigit() else None
    form = JobForm(
        request.POST if request.method == "POST" else None,
        initial=JobForm.initial_from(source) if source else None,
        team_names=team_names,
        volumes=volumes,
        shared_pools=[str(pool) for pool in shared_pools()],
        notify_default=asks_json(preference_of(request.user)),
    )
    if request.method == "POST":
        # The form turns text into the API's shape, the API's serializer validates it; both run on
        # every post, so all the mistakes in a submission are shown at once, each beside its field.
        form.is_valid()
        # The plain HttpRequest (the serializer reads only `.user`). A bare DRF `Request(request)` has no
        # authenticators: its `.user` is AnonymousUser, and reading it sets the Django request's user to that too.
        serializer = JobSubmitSerializer(data=form.api_payload(), context={"request": request})
        errors = {} if serializer.is_valid() else dict(serializer.errors)
        data = form.cleaned_data
        if "nodes" in data and "gpus_per_node" in data and not {f.name for f in fields(ResourceAsk)} & set(errors):
            errors.update(_cluster_fit_errors(ResourceAsk.of(data)))
        form.add_api_errors(errors)
        if form.is_valid():
            try:
                spec = dict(serializer.validated_data)
                notify = spec.pop("notify", None)
                with transaction.atomic():
                    job = job_submit(owner=request.user, **spec)
                    if notify is not None:
                        job_notify_save(job, notify)
            except DjangoValidationError as exc:
                form.add_api_errors(exc.message_dict)
            else:
                messages.success(request, f"Job {job.pk} submitted.")
                return redirect("frontend:job-detail", pk=job.pk)
    return render(request, "frontend/job_new.html", {"form": form, "cloned": source})


def _cluster_fit_errors(ask: ResourceAsk) -> dict[str, list[str]]:
    """What `job_submit` would say about the job's size, asked early to show it with the other errors."""
    try:
        job_check_fits_cluster(ask)
    except DjangoValidationError as exc:
        return exc.message_dict
    return {}


LOG_TAIL_LINES = 200


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(jobs_visible_to(request.user).prefetch_related("events"), pk=pk)
    entry = simulated_run = None
    if settings.MUSTER_CLUSTER == "simulated":
        simulate = job.simulate or {}
        simulated_run = (simulate.get("duration_seconds", settings.MUSTER_SIM_DEFAULT_DURATION_SECONDS), simulate.get("exit_code", 0))
    if job.state == JobState.PENDING:
        # What the last cycle stored on the job: no other job is read.
        entry = queue_entry(job)
    logs = _logs(job, request.GET)
    return render(
        request,
        "frontend/job_detail.html",
        {
            "job": job,
            "run_time": _run_time(job),
            "assigned_nodes": job_assigned_nodes(job),
            "queue_entry": entry,
            "logs": logs,
            "simulated_run": simulated_run,
            "live": job.state in ACTIVE_STATES or job.state == JobState.PENDING,
            "live_refresh_seconds": settings.MUSTER_LIVE_REFRESH_SECONDS,
            "live_page": {
                "url": reverse("frontend:job-live", args=[job.pk]),
                "state": job.state,
                "attempt": job.attempt,
                "refresh_ms": settings.MUSTER_LIVE_REFRESH_SECONDS * 1000,
            },
            "telemetry": job_telemetry_context(job, request.GET),
        },
    )


def _run_time(job: Job) -> dict[str, float | None] | None:
    """How long it has held its GPUs (placement on: what the wall time counts) and, while it holds them, what is left."""
    placed = job.scheduled_at or job.started_at
    if placed is None or not job.attempt or not (job.is_active or job.is_finished):
        return None
    end = job.finished_at if job.is_finished else timezone.now()
    elapsed = max(0.0, ((end or timezone.now()) - placed).total_seconds())
    left = max(0.0, job.wall_time_seconds - elapsed) if job.state in ACTIVE_STATES else None
    return {"elapsed": elapsed, "left": left}


@login_required
@require_GET
def job_live(request: HttpRequest, pk: int) -> JsonResponse:
    """What the page of a running job redraws in place, without a reload: its state, telemetry and logs.

    A whole-page reload every few seconds would throw away the reader's zoom on the charts and
    re-render everything; the page script polls this with the page's own query string instead,
    and reloads only when `state` is no longer the one it shows.
    """
    job = get_object_or_404(jobs_visible_to(request.user), pk=pk)
    body: dict[str, object] = {"state": job.state, "attempt": job.attempt}
    if job.state != JobState.RUNNING:
        return JsonResponse(body)
    # Everyone watching a large job asks for the same figures every few seconds: render them once per half
    # interval (what it shows depends only on the job, its attempt and the page's options, all in the key).
    query = hashlib.sha256(request.GET.urlencode().encode()).hexdigest()[:16]
    key = f"job-live:{job.pk}:{job.submitted_at.timestamp()}:{job.attempt}:{query}"
    parts = cache.get(key)
    if parts is None:
        telemetry = job_telemetry_context(job, request.GET)
        logs = _logs(job, request.GET)
        parts = {
            "figures": telemetry["figures"],
            "flags": telemetry.get("flags", []),
            "telemetry_status_html": render_to_string("frontend/telemetry_status.html", {"telemetry": telemetry}),
            "logs_html": "" if logs is None else render_to_string("frontend/job_logs.html", {"job": job, "logs": logs}),
        }
        cache.set(key, parts, timeout=max(1, settings.MUSTER_LIVE_REFRESH_SECONDS // 2))
    return JsonResponse({**body, **parts})


def _logs(job: Job, query: QueryDict) -> dict[str, object] | None:
    """The last lines of one rank's output in one attempt (the latest by default), or why there are none; None before
    the job first starts."""
    rank_param, attempt_param = query.get("rank", "0"), query.get("attempt", "")
    rank = int(rank_param) if rank_param.isdigit() and int(rank_param) < job.nodes else 0
    attempt = int(attempt_param) if attempt_param.isdigit() and 1 <= int(attempt_param) <= job.attempt else job.attempt
    try:
        logs = job_logs(job, rank=rank, tail=LOG_TAIL_LINES, attempt=attempt)
        text, error, note, source, truncated = logs.text, "", logs.note, logs.source, logs.truncated
    except JobNotStarted:
        return None
    except ClusterUnavailable as exc:
        text, error, note, source, truncated = "", f"The cluster cannot be reached: {exc}", "", "none", False
    return {
        "rank": rank,
        "ranks": range(job.nodes),
        "attempt": attempt,
        "attempts": range(1, job.attempt + 1),
        "text": text,
        "error": error,
        "note": note,
        "source": source,
        "truncated": truncated,
        "tail": LOG_TAIL_LINES,
    }


@login_required
@require_POST
def job_cancel_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(jobs_visible_to(request.user), pk=pk)
    try:
        job_cancel(job=job, by=request.user, request=request)
    except JobFinished as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.pk} cancelled.")
    return redirect("frontend:job-detail", pk=pk)


QUEUE_PAGE_SIZE = 100


@login_required
def cluster_view(request: HttpRequest) -> HttpResponse:
    nodes = node_grid()
    total = sum(n.gpus_total for n in nodes)
    free = sum(n.gpus_free for n in nodes)
    # The queue as the last cycle stored it, a page at a time: a long queue costs one page of rows and a few counts.
    page = Paginator(queue_jobs(), QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    entries = queue_entries(page)
    visible = {e.job.pk for e in entries if job_visible_to(e.job, request.user)}
    holders = {job_id for n in nodes for job_id in n.jobs}
    visible_jobs = set(jobs_visible_to(request.user).filter(pk__in=holders).values_list("pk", flat=True)) if holders else set()
    return render(
        request,
        "frontend/cluster.html",
        {
            "nodes": nodes,
            "gpus_total": total,
            "gpus_free": free,
            "counts": queue_counts(),
            "entries": entries,
            "page": page,
            "visible": visible,
            "visible_jobs": visible_jobs,
        },
    )


@login_required
def dashboard_view(request: HttpRequest) -> HttpResponse:
    """The cluster and scheduler dashboard (everyone signed in; per-team figures follow the usage report's rule)."""
    context = {**dashboard_context(request.user, request.GET.get("window")), "plotly_js": PLOTLY_JS}
    if request.GET.get("live") == "1":  # the page's poller (telemetry/dashboard.js): redrawn in place
        return JsonResponse(dashboard_live(request, context))
    return render(request, "frontend/dashboard.html", context)
