"""Browser pages. They read through selectors and write through the same services as the API."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import InvalidPage, Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from accounts.requests import AuthenticatedHttpRequest
from api.jobs.filters import JobFilter
from api.jobs.serializers import JobUpdateSerializer
from frontend.errors import bad_query
from frontend.forms import JobUpdateForm
from frontend.live import LIVE_PARAM, is_live_poll, live_parts_response, page_query, render_parts, updated_at
from frontend.notify_views import job_notifications
from frontend.templatetags.muster import duration
from jobs.amounts import plural
from jobs.arrays import index_ranges
from jobs.attempts import job_attempts
from jobs.cluster import ClusterUnavailable
from jobs.dependencies import job_dependencies_shown
from jobs.errors import HoldNotYours, JobFinished, JobNotHoldable, JobNotRequeueable, JobNotStarted, JobNotUpdatable
from jobs.logs import job_attempt_ranks, job_logs, ranks_text
from jobs.models import Job
from jobs.selectors import (
    job_assigned_nodes,
    job_never_ran,
    job_nodes_shown,
    job_racks_shown,
    job_run_seconds,
    job_visible_to,
    jobs_visible_to,
    owners_job_visible_to,
    with_queued_at,
)
from jobs.services import (
    CANCEL_COMMENT_MAX,
    job_cancel,
    job_cancel_many,
    job_hold,
    job_release,
    job_requeue_by,
    job_update,
    priority_classes_for,
)
from jobs.sorting import JOB_LIST_DEFAULT, QUEUE_DEFAULT, Sorting, job_columns, queue_columns, sort_refusal
from jobs.states import ACTIVE_STATES, JobState
from quotas.limits import effective_limits
from quotas.selectors import job_filter_teams
from scheduler.queue import queue_counts, queue_entries, queue_entry, queue_jobs
from telemetry.dashboard.page import dashboard_context, dashboard_live
from telemetry.dashboard.selectors import cluster_free, node_grid
from telemetry.page import job_telemetry_context, telemetry_query_errors
from telemetry.staticfiles import PLOTLY_JS

# The parts of the job list that keep up in place (frontend.live).
JOB_LIST_PARTS = {"job-rows": "frontend/job_rows.html"}
# The job list's filters by the labels its form gives them (the others are the API's, written in the address).
FILTER_LABELS = {
    "name": "Name",
    "state": "State",
    "owner": "Owner",
    "team": "Team",
    "submitted_after": "Since",
    "array": "Array",
    "held": "Held",
    "ordering": "Sort",
}
# The filters the page keeps in its form and says when nothing matches them.
LIST_FILTERS = ("name", "state", "owner", "team", "submitted_after", "array", "held")
# Jobs per page of the job list.
JOB_LIST_PAGE_SIZE = 25


@login_required
def job_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Jobs as squeue and sacct show them, filtered by name, state, team, owner (admins) and submit date and sorted by any
    column (?sort=, jobs.sorting); the rows keep up in place while jobs on the page are queued or running
    (?parts=1 answers just the rows, for live_parts.js). The jobs not ended on the page have a box each for
    "Cancel selected" (job_list_cancel). A page past the end (?page=99) is a 404 that names the last page."""
    listed = _job_list_jobs(request.user, page_query(request))
    paginator = Paginator(listed.jobs, JOB_LIST_PAGE_SIZE)
    asked = request.GET.get("page", "")
    try:
        page = paginator.page(asked or 1)
        page_missing = ""
    except InvalidPage:
        # A page past the end (an old or edited link) is said with the last page, not answered with the last page as if asked.
        page = paginator.page(1)
        page_missing = asked
    shown = [] if page_missing else list(page.object_list)
    rows = [
        (job, _run_time(job), job_assigned_nodes(job) if job.state in ACTIVE_STATES else [], _may_cancel(job, request.user))
        for job in shown
    ]
    live = any(job.state in ACTIVE_STATES or job.state == JobState.PENDING for job in shown)
    context = {"page": page, "rows": rows, "now": timezone.now(), "live": live, "sort": listed.sort}
    if is_live_poll(request):
        return live_parts_response(request, JOB_LIST_PARTS, context, live=live)
    filters = {key: request.GET.get(key, "") for key in LIST_FILTERS}
    context.update(
        filters=filters,
        # What an empty list says, naming the filters that matched nothing (not "No jobs yet" under a filter).
        nothing_listed=_nothing_listed(filters, request.user) if not listed.errors and not page.object_list else None,
        # "The elements of array 20." only of an array there is (the viewer's): none is said as nothing_listed says it.
        array_shown=bool(filters["array"]) and bool(page.object_list),
        errors=listed.errors,
        teams=listed.teams,
        page_missing=page_missing,
        cancellable=any(may_cancel for *_, may_cancel in rows),
        # What "Cancel selected" comes back to: this list, as filtered, sorted and paged.
        list_query=page_query(request).urlencode(),
        # No job stays PREEMPTED (jobs.selectors.waiting_after_preemption): the page says what it lists instead.
        preempted_asked=JobState.PREEMPTED in (state.upper() for state in request.GET.getlist("state")),
        states=JobState.values,
        live_refresh_ms=settings.MUSTER_LIVE_REFRESH_SECONDS * 1000,
        live_refresh_seconds=settings.MUSTER_LIVE_REFRESH_SECONDS,
    )
    status = 400 if listed.errors else 404 if page_missing else 200
    return render(request, "frontend/job_list.html", context, status=status)


@dataclass(frozen=True)
class _Listed:
    """What the job list's query string asks for: the jobs (none while a filter is refused), the refusals by the
    form's labels, the teams it may be filtered by, and its order."""

    jobs: QuerySet[Job]
    errors: dict[str, list[str]]
    teams: list[str]
    sort: Sorting


def _job_list_jobs(user: User, query: QueryDict) -> _Listed:
    """The jobs of the job list as `query` (its filters and ?sort=) asks; what job_list shows and where "Cancel
    selected" sends its reader back to.

    One sort: the page's `?sort=` (its header links') or the API's name for it, `?ordering=` (a link written from an
    API call), read by the API's filter, so a sort it does not take is refused here in the API's words: `?ordering=`
    was checked and then not applied, and `?sort=bogus` quietly listed the default order."""
    params = query.copy()
    since = params.get("submitted_after", "")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", since):
        params["submitted_after"] = f"{since}T00:00:00+00:00"  # the date field's day, from midnight UTC
    asked = [value for value in (params.pop("sort", [""])[-1], params.get("ordering", "")) if value]
    # jobs_visible_to prefetches the allocations with their nodes: the running jobs' node lists.
    found = JobFilter(params, queryset=jobs_visible_to(user), viewer=user)
    # A filter it cannot read (?state=RUNING, an unknown team) is said, with no jobs: django-filter drops it, and every
    # job read as its answer.
    errors = {FILTER_LABELS.get(name, name): messages for name, messages in found.errors.items()}
    refused = next((sort_refusal(job_columns(), value) for value in asked if sort_refusal(job_columns(), value)), "")
    if refused:
        errors["Sort"] = [refused]
    elif len(set(asked)) > 1:
        errors["Sort"] = [f"Sort by one order: ?sort={asked[0]} and ?ordering={asked[1]} differ."]
    sort = Sorting(job_columns(), asked[0] if asked and not errors.get("Sort") else "", default=JOB_LIST_DEFAULT)
    jobs = sort.apply(with_queued_at(found.qs.select_related("owner")) if not errors else Job.objects.none())
    return _Listed(jobs=jobs, errors=errors, teams=job_filter_teams(user), sort=sort)


def _nothing_listed(filters: dict[str, str], user: User) -> dict[str, str]:
    """What an empty job list says, in the words of the filters that matched nothing ("No held jobs.", "No array 999
    (or none that you may see).") and the way out; "No jobs yet" only when nothing was filtered."""
    asked = {key: value for key, value in filters.items() if value}
    if not asked:
        return {"text": "", "link": ""}
    if asked.keys() == {"array"} and not jobs_visible_to(user).filter(array_id=asked["array"]).exists():
        return {"text": f"No array {asked['array']} (or none that you may see).", "link": "Show all"}
    held_asked = asked.get("held", "").strip().lower()
    held = "held" if held_asked in ("true", "1", "yes") else "not held" if held_asked in ("false", "0", "no") else ""
    if asked.keys() == {"state"} or (asked.keys() <= {"state", "held"} and held == "held"):
        # An adjective or two: "No held jobs.", "No PENDING jobs.", "No held PENDING jobs."
        words = " ".join(word for word in (held, asked.get("state", "")) if word)
        return {"text": f"No {words} jobs.", "link": "Show all states" if asked.keys() == {"state"} else "Show all"}
    said = {
        "name": f"name containing \u201c{asked.get('name')}\u201d",
        "state": f"state {asked.get('state')}",
        "held": held,
        "owner": f"owner {asked.get('owner')}",
        "team": f"team {asked.get('team')}",
        "submitted_after": f"submitted since {asked.get('submitted_after')}",
        "array": f"array {asked.get('array')}",
    }
    return {"text": f"No jobs match: {', '.join(said[key] for key in LIST_FILTERS if key in asked)}.", "link": "Show all"}


def _may_cancel(job: Job, user: User) -> bool:
    """A row's box for "Cancel selected": a job not ended that the viewer may cancel (the single cancel's rule)."""
    return not job.is_finished and job_visible_to(job, user)


LOG_TAIL_LINES = 200


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """A job's page; `?attempt=` picks the attempt whose logs it shows, `?range=` and `?view=` its charts (telemetry.page).
    A value it does not have is a 400 naming the parameter and the values there are (`job_query_errors`)."""
    job = get_object_or_404(jobs_visible_to(request.user).prefetch_related("events"), pk=pk)
    if errors := job_query_errors(job, request.GET):
        # The parameters refused dropped, the others kept: the page as it can be shown.
        kept = request.GET.copy()
        for name in errors:
            kept.pop(name, None)
        back = reverse("frontend:job-detail", args=[job.pk]) + (f"?{kept.urlencode()}" if kept else "")
        return bad_query(request, errors, back=back, back_label=f"Job {job.pk} without {' and '.join(f'?{name}=' for name in errors)}")
    return _job_page(request, job)


def _job_page(request: HttpRequest, job: Job, *, update_form: JobUpdateForm | None = None) -> HttpResponse:
    """The job page; `update_form` a pending job's Update as it was posted (its mistakes shown), else a blank one."""
    if update_form is None and job.state == JobState.PENDING:
        update_form = _update_form(request, job)
    simulated_run = None
    if settings.MUSTER_CLUSTER == "simulated":
        simulate = job.simulate or {}
        simulated_run = (simulate.get("duration_seconds", settings.MUSTER_SIM_DEFAULT_DURATION_SECONDS), simulate.get("exit_code", 0))
    logs = _logs(job, request.GET)
    return render(
        request,
        "frontend/job_detail.html",
        {
            **_job_parts_context(job, request.GET, request.user),
            "assigned_nodes": job_nodes_shown(job),
            "assigned_racks": job_racks_shown(job),
            "logs": logs,
            "simulated_run": simulated_run,
            "fair_share_preemption": settings.MUSTER_FAIR_SHARE_PREEMPTION,
            # What the policy counts against the bounds on preemptions (its PREEMPTED events, prefetched), and the bounds.
            "preempted": sum(1 for e in job.events.all() if e.to_state == JobState.PREEMPTED),
            "preemption_bounds": (settings.MUSTER_MAX_PREEMPTIONS, settings.MUSTER_MAX_FAIR_SHARE_PREEMPTIONS),
            "live": job.state in ACTIVE_STATES or job.state == JobState.PENDING,
            "live_refresh_seconds": settings.MUSTER_LIVE_REFRESH_SECONDS,
            "cancel_comment_max": CANCEL_COMMENT_MAX,
            "launch_max_failures": settings.MUSTER_LAUNCH_MAX_FAILURES,
            "updated": updated_at(),
            "live_page": {
                "url": reverse("frontend:job-live", args=[job.pk]),
                "state": job.state,
                "attempt": job.attempt,
                "refresh_ms": settings.MUSTER_LIVE_REFRESH_SECONDS * 1000,
            },
            "telemetry": job_telemetry_context(job, request.GET),
            "notifications": job_notifications(job),
            "notify_max_tries": settings.MUSTER_NOTIFY_MAX_TRIES,
            # Whoever sees a pending job's page may update it: its owner, or an admin (jobs_visible_to, the API's rule).
            "update_form": update_form,
        },
    )


def _update_form(request: HttpRequest, job: Job, data: QueryDict | None = None) -> JobUpdateForm:
    """A pending job's Update form: the classes the viewer may give it (an admin: any), and the wall-time limits of
    its owner and its team, said in minutes as the submit form says them."""
    mine = job.owner_id == request.user.pk
    limits = [
        (f"your quota (user {job.owner.username})" if mine else f"the quota of user {job.owner.username}", effective_limits(user=job.owner))
    ]
    if job.team is not None:
        limits.append((f"the quota of {'your ' if mine else ''}team {job.team.name}", effective_limits(team=job.team)))
    return JobUpdateForm(
        data,
        job=job,
        priority_classes=priority_classes_for(request.user, [job.team.name] if job.team else []),  # type: ignore[arg-type]
        wall_time_limits=[(None, whose, most.max_wall_time_seconds) for whose, most in limits if most.max_wall_time_seconds is not None],
    )


@login_required
@require_POST
def job_update_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """A pending job's Update: as `muster update` (`PATCH /api/v1/jobs/{id}/`, `jobs.services.job_update`), what was
    changed only, every mistake at once beside its field as the submit form says them; back to the page when done."""
    job = get_object_or_404(jobs_visible_to(request.user).prefetch_related("events"), pk=pk)
    form = _update_form(request, job, request.POST)
    form.is_valid()
    changes = form.changes()
    if not changes and form.is_valid():
        form.add_error(None, "Nothing was changed: change a field, then press Update.")
    if changes:
        serializer = JobUpdateSerializer(data=changes, context={"request": request})
        # The serializer's mistakes and, as the submit form says them whatever else is wrong, the wall-time limits.
        form.add_api_errors({} if serializer.is_valid() else serializer.every_problem())
        if form.is_valid():
            try:
                job_update(job_ids=[job.pk], by=request.user, changes=serializer.validated_data, request=request)
            except DjangoValidationError as exc:  # the owner's limits, with the job as it would be
                form.add_api_errors(exc.message_dict)
            except (JobNotUpdatable, JobFinished) as exc:  # it started or ended since the page was drawn
                messages.error(request, str(exc))
                return redirect("frontend:job-detail", pk=pk)
            else:
                job.refresh_from_db()
                messages.success(request, f"Job {job.pk} updated: {_updated_words(job, changes)}; the next scheduling cycle plans it so.")
                return redirect("frontend:job-detail", pk=pk)
    if job.state != JobState.PENDING:
        messages.error(request, f"Job {job.pk} is {job.state}: only a pending job can be updated.")
        return redirect("frontend:job-detail", pk=pk)
    return _job_page(request, job, update_form=form)


def _updated_words(job: Job, changes: dict[str, object]) -> str:
    """What the job asks now, of what was changed: `wall time 2 h, name train-v2`, as `muster update` says it."""
    said = {
        "name": lambda: f"name {job.name}",
        "wall_time_seconds": lambda: f"wall time {duration(job.wall_time_seconds)}",
        "priority_class": lambda: f"class {job.priority_class}",
        "max_restarts": lambda: f"max restarts {job.max_restarts}",
        "preemptible": lambda: "preemptible" if job.preemptible else "not preemptible",
    }
    return ", ".join(said[key]() for key in changes)


# The parts of a job's page that change while its state stays (frontend.live; job_live.js asks /live/ for them).
JOB_PARTS = {
    "job-status": "frontend/job_status.html",
    "run-time": "frontend/job_run_time.html",
    "job-attempts": "frontend/job_attempts.html",
    "job-dependencies": "frontend/job_dependencies.html",
}


def _job_parts_context(job: Job, query: QueryDict, viewer: User | AnonymousUser) -> dict[str, object]:
    """What JOB_PARTS draw: the job, its place in the queue while it waits (what the last cycle stored on it: no
    other job is read), its run time and its attempts (from its prefetched events and allocations), and its
    dependencies both ways, with the state of each job now (what it waits for changes while it waits)."""
    return {
        "job": job,
        "dependencies": job_dependencies_shown(job, viewer),
        "queue_entry": queue_entry(job),
        "run_time": _run_time(job),
        "attempts": job_attempts(job),
        "shown_attempt": _shown_attempt(job, query),
    }


def _run_time(job: Job) -> dict[str, float | bool | None] | None:
    """How long its latest attempt held its nodes (`job_run_seconds`: placement on, what the wall time counts) and, while
    it holds them, what is left; for an ended job that never ran, that it never started (its failed launches' moments
    on its nodes read "0 s", as if it had run)."""
    if job_never_ran(job):
        return {"elapsed": None, "left": None, "never_started": True}
    elapsed = job_run_seconds(job)
    if elapsed is None or not (job.is_active or job.is_finished):
        return None
    left = max(0.0, job.wall_time_seconds - elapsed) if job.state in ACTIVE_STATES else None
    return {"elapsed": elapsed, "left": left}


@login_required
@require_GET
def job_live(request: HttpRequest, pk: int) -> JsonResponse:
    """What the page of a queued, starting or running job redraws in place, without a reload: its state, the parts
    of the page that change (JOB_PARTS) and, while it runs, its telemetry and logs.

    A whole-page reload every few seconds would throw away the reader's scroll and zoom on the charts and
    re-render everything; the page script polls this with the page's own query string instead,
    and reloads only when `state` (or `attempt`) is no longer the one it shows.
    """
    job = get_object_or_404(jobs_visible_to(request.user).prefetch_related("events"), pk=pk)
    if errors := job_query_errors(job, request.GET):
        return JsonResponse(errors, status=400)  # the API's shape; the poller reloads, and the page says it
    parts = render_parts(request, JOB_PARTS, _job_parts_context(job, request.GET, request.user))
    body: dict[str, object] = {"state": job.state, "attempt": job.attempt, "updated": updated_at(), "parts": parts}
    if job.state != JobState.RUNNING:
        return JsonResponse(body)
    # Everyone watching a large job asks for the same figures every few seconds: render them once per half
    # interval (what it shows depends only on the job, its attempt and the page's options, all in the key).
    query = hashlib.sha256(request.GET.urlencode().encode()).hexdigest()[:16]
    key = f"job-live:{job.pk}:{job.submitted_at.timestamp()}:{job.attempt}:{query}"
    running = cache.get(key)
    if running is None:
        telemetry = job_telemetry_context(job, request.GET)
        logs = _logs(job, request.GET)
        running = {
            "figures": telemetry["figures"],
            "flags": telemetry.get("flags", []),
            "parts": {
                "telemetry-status": render_to_string("frontend/telemetry_status.html", {"telemetry": telemetry}),
                "job-logs": "" if logs is None else render_to_string("frontend/job_logs.html", {"job": job, "logs": logs}),
            },
        }
        cache.set(key, running, timeout=max(1, settings.MUSTER_LIVE_REFRESH_SECONDS // 2))
    return JsonResponse({**body, **running, "parts": {**parts, **running["parts"]}})


def job_query_errors(job: Job, query: QueryDict) -> dict[str, list[str]]:
    """What the job page refuses in its query, as the API refuses a bad parameter (400, the parameter named, the values
    it takes): an `attempt` the job has not had, a `rank` that attempt did not have, a chart `range` or `view` the page
    does not offer. They were read as
    the latest attempt and the whole run, so a mistyped or hand-edited link showed something else, unsaid. Empty
    values are left out, as the page's own links leave them."""
    errors = {}
    asked = query.get("attempt", "")
    if asked and not (asked.isdigit() and 1 <= int(asked) <= job.attempt):
        if job.attempt == 0:
            why = f"Job {job.pk} {'never started' if job.is_finished else 'has not started yet'}: it has no attempts."
        else:
            had = "1" if job.attempt == 1 else f"1 to {job.attempt}"
            why = f'"{asked}" is not an attempt of job {job.pk}; it has had {plural(job.attempt, "attempt")}: {had}.'
        errors["attempt"] = [why]
    elif rank_refused := _rank_refusal(job, query.get("rank", ""), int(asked) if asked else job.attempt):
        errors["rank"] = [rank_refused]
    return errors | telemetry_query_errors(query)


def _rank_refusal(job: Job, asked: str, attempt: int) -> str:
    """Why `?rank=` is no rank whose output the page can show, in the API's words (`GET .../logs/?rank=`): a rank the
    attempt did not have showed rank 0's output as if it were the one asked. "" for one it had, or none asked."""
    if not asked:
        return ""
    if attempt:
        shown = job_attempt_ranks(job).get(attempt)
        had = shown.had if shown else []
        said = f"attempt {attempt} of the job had ranks {ranks_text(had)}."
    else:
        had = list(range(job.nodes))
        said = f"the job has {plural(job.nodes, 'rank')}: {ranks_text(had)}."
    if asked.isdigit() and int(asked) in had:
        return ""
    return f'"{asked}" is not a rank of it; {said}'


def _shown_attempt(job: Job, query: QueryDict) -> int:
    """The attempt whose logs the page shows (?attempt=, else the latest; job_query_errors refused any other)."""
    asked = query.get("attempt", "")
    return int(asked) if asked.isdigit() and 1 <= int(asked) <= job.attempt else job.attempt


def _logs_link(query: QueryDict, **changes: int) -> str:
    """Another rank's or attempt's output: the page's other options kept (the charts' run, range and view) and the
    page opened at its logs. Such a link was `?attempt=1&rank=3` alone: the page came back at its top, the charts on
    their defaults, and the reader scrolled down past them again for each rank."""
    merged = {k: v for k, v in query.items() if v != ""}
    merged.update({k: str(v) for k, v in changes.items()})
    return "?" + urlencode(merged) + "#job-logs"


def _logs(job: Job, query: QueryDict) -> dict[str, object] | None:
    """The last lines of one rank's output in one attempt (the latest by default), or why there are none; None before
    the job first starts."""
    attempt = _shown_attempt(job, query)
    shown = job_attempt_ranks(job).get(attempt)
    # Every rank of the attempt whose output can be read: an elastic job's shrunk-away ranks too.
    ranks = (shown.readable or shown.had) if shown else list(range(job.nodes))
    rank_param = query.get("rank", "0")
    if rank_param.isdigit() and shown and int(rank_param) in shown.had:
        rank = int(rank_param)
    else:
        rank = ranks[0] if ranks else 0
    try:
        logs = job_logs(job, rank=rank, tail=LOG_TAIL_LINES, attempt=attempt)
        text, error, note, source, truncated = logs.text, "", logs.note, logs.source, logs.truncated
    except JobNotStarted:
        return None
    except ClusterUnavailable as exc:
        text, error, note, source, truncated = "", f"The cluster cannot be reached: {exc}", "", "none", False
    return {
        "rank": rank,
        "ranks": ranks,
        "rank_links": [(r, _logs_link(query, attempt=attempt, rank=r)) for r in ranks],
        "attempt": attempt,
        "attempts": range(1, job.attempt + 1),
        "attempt_links": [(a, _logs_link(query, attempt=a, rank=rank)) for a in range(1, job.attempt + 1)],
        "text": text,
        "error": error,
        "note": note,
        "source": source,
        "truncated": truncated,
        "tail": LOG_TAIL_LINES,
    }


def _job_action(
    request: AuthenticatedHttpRequest, pk: int, act: Callable[..., Job], refused: tuple[type[Exception], ...], done: str
) -> HttpResponse:
    """A job page's button (Cancel, Hold, Release, Requeue): the service's refusal in its words (the API's 409), else
    `done` (with the job as the service left it: `{pk}`, `{attempt}`); back to the page."""
    job = get_object_or_404(jobs_visible_to(request.user), pk=pk)
    try:
        after = act(job=job, by=request.user, request=request)
    except refused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, done.format(pk=after.pk, attempt=after.attempt))
    return redirect("frontend:job-detail", pk=pk)


@login_required
@require_POST
def job_cancel_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    # An admin cancelling someone's job may say why: its owner reads it in the job's reason.
    comment = request.POST.get("reason", "").strip()[:CANCEL_COMMENT_MAX]
    return _job_action(request, pk, partial(job_cancel, comment=comment), (JobFinished,), "Job {pk} cancelled.")


@login_required
@require_POST
def job_list_cancel(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The job list's "Cancel selected": `scancel 12 13 17` in one POST (`jobs.services.job_cancel_many`, each job as its
    page's Cancel does it: the same rule of who may, the same audit), back to the list as it was filtered with what was
    cancelled and what was not, and why. The page's script has asked first (`confirmed`); without script the POST
    first answers a page that asks, listing the jobs."""
    query = _list_query(request.POST.get("next", ""))
    asked, unreadable = _asked_ids(request.POST)
    if not asked and not unreadable:
        messages.error(request, "No jobs were selected: tick the box of each job to cancel, or the box above them for the whole page.")
        return redirect(_list_url(query))
    if request.POST.get("confirmed") != "1":
        return _cancel_confirm(request, asked, unreadable, query)
    done = job_cancel_many(job_ids=asked, by=request.user, request=request)
    if done.cancelled:
        messages.success(request, f"Cancelled {plural(len(done.cancelled), 'job')}: {jobs_named(done.cancelled)}.")
    for refusal in _not_cancelled(done.ended, done.not_found, unreadable):
        messages.error(request, refusal)
    return redirect(_list_url(_page_kept(query, request.user)))


def jobs_named(jobs: Sequence[Job]) -> str:
    """Jobs as the job list names them: a job of no array by its id, an array's elements as Slurm's `19_7`, several of
    one array `19_[7,14]`, each with its ids ("12, 19_[7,14] (jobs 20-21)"); the ids alone read as other jobs."""
    plain = [job.pk for job in jobs if job.array_id is None]
    arrays: dict[int, list[Job]] = {}
    for job in jobs:
        if job.array_id is not None:
            arrays.setdefault(job.array_id, []).append(job)
    said = [index_ranges(plain)] if plain else []
    for array_id, elements in sorted(arrays.items()):
        indices = sorted(job.array_index for job in elements if job.array_index is not None)
        name = f"{array_id}_{indices[0]}" if len(indices) == 1 else f"{array_id}_[{index_ranges(indices)}]"
        ids = index_ranges(job.pk for job in elements)
        said.append(f"{name} (job {ids})" if len(elements) == 1 else f"{name} (jobs {ids})")
    return ", ".join(said)


def _asked_ids(form: QueryDict) -> tuple[list[int], list[str]]:
    """The ids ticked (`job`), with every job listed on the page (`on_page`) when "all on this page" is ticked (`all`: so
    that box works without script), and the values that are no job id at all."""
    values = form.getlist("job") + (form.getlist("on_page") if form.get("all") else [])
    ids = sorted({int(value) for value in values if value.isdigit()})
    return ids, sorted({value for value in values if not value.isdigit()})


def _cancel_confirm(request: AuthenticatedHttpRequest, asked: list[int], unreadable: list[str], query: QueryDict) -> HttpResponse:
    """The one question before a cancel of many, for a browser without script: which jobs, and which cannot be."""
    found = {job.pk: job for job in jobs_visible_to(request.user).filter(pk__in=asked).select_related("owner")}
    ended = [job for job in found.values() if job.is_finished]
    if len(ended) == len(found):  # nothing to ask about: say what cannot be cancelled, as a confirmed cancel would
        for refusal in _not_cancelled(ended, [pk for pk in asked if pk not in found], unreadable):
            messages.error(request, refusal)
        return redirect(_list_url(query))
    context = {
        "jobs": [job for job in found.values() if not job.is_finished],
        "refusals": _not_cancelled(ended, [pk for pk in asked if pk not in found], unreadable),
        "list_query": query.urlencode(),
        "list_url": _list_url(query),
    }
    return render(request, "frontend/job_cancel_confirm.html", context)


def _not_cancelled(ended: Sequence[Job], not_found: Sequence[int], unreadable: Sequence[str]) -> list[str]:
    """Why some of the jobs asked for were not cancelled, in a single cancel's words: ended, or not found (someone
    else's job reads as one that does not exist)."""
    said = []
    if ended:
        # An array's element as the list names it, with its id: "19_7 (job 20, CANCELLED)".
        which = ", ".join(
            f"{job.array_id}_{job.array_index} (job {job.pk}, {job.state})" if job.array_id is not None else f"{job.pk} ({job.state})"
            for job in ended
        )
        said.append(f"Not cancelled, {plural(len(ended), 'job')} had already ended: {which}.")
    if not_found:
        said.append(f"Not cancelled, no such job (or none that you may see): {', '.join(map(str, not_found))}.")
    if unreadable:
        said.append(f"Not cancelled, not a job id: {', '.join(unreadable)}.")
    return said


def _list_query(text: str) -> QueryDict:
    """The job list's query string a form sent back (only ever a query string, so the answer stays on the list)."""
    query = QueryDict(text, mutable=True)
    query.pop(LIVE_PARAM, None)
    return query


def _list_url(query: QueryDict) -> str:
    return reverse("frontend:job-list") + (f"?{query.urlencode()}" if query else "")


def _page_kept(query: QueryDict, user: User) -> QueryDict:
    """The list's page after a cancel, its last if the cancel left fewer (a list of PENDING jobs shrinks)."""
    asked = query.get("page", "")
    if not asked.isdigit() or int(asked) <= 1:
        return query
    last = Paginator(_job_list_jobs(user, query).jobs, JOB_LIST_PAGE_SIZE).num_pages
    if int(asked) > last:
        query = query.copy()
        query["page"] = str(last)
    return query


@login_required
@require_POST
def job_hold_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The job page's Hold: as `muster hold` (`jobs.services.job_hold`)."""
    done = "Job {pk} held: it stays in the queue but is not started until released."
    return _job_action(request, pk, job_hold, (JobNotHoldable,), done)


@login_required
@require_POST
def job_release_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The job page's Release: as `muster release` (`jobs.services.job_release`)."""
    done = "Job {pk} released: it may start from the next scheduling cycle."
    return _job_action(request, pk, job_release, (JobNotHoldable, HoldNotYours), done)


@login_required
@require_POST
def job_requeue_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The job page's Requeue: as `muster requeue [--hold] [--reason]` (`jobs.services.job_requeue_by`), for a placed or
    running job; held in the same transaction when asked."""
    comment = request.POST.get("reason", "").strip()[:CANCEL_COMMENT_MAX]
    hold = request.POST.get("hold") == "1"
    if hold:
        done = "Job {pk} requeued and held: its attempt {attempt} was stopped; it is not started until released."
    else:
        done = "Job {pk} requeued: its attempt {attempt} was stopped; it waits in the queue again, in its place."
    return _job_action(request, pk, partial(job_requeue_by, comment=comment, hold=hold), (JobNotRequeueable,), done)


QUEUE_PAGE_SIZE = 100
# The cluster page is all parts: the nodes and the queue keep up in place (frontend.live).
CLUSTER_PARTS = {"cluster-nodes": "frontend/cluster_nodes.html", "queue": "frontend/cluster_queue.html"}


@login_required
def cluster_view(request: HttpRequest) -> HttpResponse:
    """Every node's GPUs and the jobs holding them, and the queue as the last cycle planned it (sortable, ?sort=);
    both keep up in place (?parts=1 answers them, for live_parts.js)."""
    asked = request.GET.get("sort", "")
    if refused := sort_refusal(queue_columns(), asked):
        # As the job list and the API refuse a sort they do not take: not the queue's order as if it were the one asked.
        kept = request.GET.copy()
        kept.pop("sort")
        back = reverse("frontend:cluster") + (f"?{kept.urlencode()}" if kept else "")
        return bad_query(request, {"sort": [refused]}, back=back, back_label="The cluster page in queue order")
    nodes = node_grid()
    sort = Sorting(queue_columns(), asked, default=QUEUE_DEFAULT)
    # The queue as the last cycle stored it, a page at a time: a long queue costs one page of rows and a few counts.
    page = Paginator(sort.apply(queue_jobs()), QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    entries = queue_entries(page)
    visible = {e.job.pk for e in entries if job_visible_to(e.job, request.user)}
    # The jobs on the nodes the viewer may open, by job_visible_to's rule on the owners the grid read with them: asking
    # the database with every running job's id in an IN list cost a query as long as the running jobs.
    visible_jobs = {
        job for n in nodes for job, owner in zip(n.jobs, n.job_owners, strict=True) if owners_job_visible_to(owner, request.user)
    }
    context = {
        "nodes": nodes,
        "free": cluster_free(nodes),
        "counts": queue_counts(),
        "entries": entries,
        "page": page,
        "sort": sort,
        "visible": visible,
        "visible_jobs": visible_jobs,
    }
    if is_live_poll(request):
        return live_parts_response(request, CLUSTER_PARTS, context, live=True)
    context.update(
        updated=updated_at(),
        live_refresh_ms=settings.MUSTER_LIVE_REFRESH_SECONDS * 1000,
        live_refresh_seconds=settings.MUSTER_LIVE_REFRESH_SECONDS,
    )
    return render(request, "frontend/cluster.html", context)


@login_required
def dashboard_view(request: HttpRequest) -> HttpResponse:
    """The cluster and scheduler dashboard (everyone signed in; per-team figures follow the usage report's rule)."""
    asked = request.GET.get("window")
    context = {**dashboard_context(request.user, asked), "plotly_js": PLOTLY_JS}
    # A window the page does not offer (a hand-edited link) is said, not silently shown as the default.
    context["unknown_window"] = asked if asked and asked != context["window"].key else ""
    if request.GET.get("live") == "1":  # the page's poller (telemetry/dashboard.js): redrawn in place
        return JsonResponse(dashboard_live(request, context))
    return render(request, "frontend/dashboard.html", context)
