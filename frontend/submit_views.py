"""The submit form: every mistake shown at once, a live estimate of the start beside Submit, and what was typed kept
through Back and through a sign-in when the session expired."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.requests import AuthenticatedHttpRequest
from api.jobs.serializers import JobSubmitSerializer, submit_problems
from frontend.form_stash import form_stash, form_unstash
from frontend.forms import JobForm
from jobs.arrays import index_ranges
from jobs.dependencies import dependencies_save
from jobs.selectors import jobs_visible_to, shared_pools
from jobs.services import job_fit_elastic_range, job_submit, job_submit_array, priority_classes_for
from notify.services import asks_json, job_notify_save, preference_of
from quotas.limits import effective_limits
from quotas.selectors import volumes_of_teams_of
from scheduler.estimate import job_estimate


def _job_form(request: AuthenticatedHttpRequest, data: QueryDict | None, initial: dict[str, Any] | None = None) -> JobForm:
    teams = list(request.user.teams.order_by("name"))
    wall_limits = [(None, effective_limits(user=request.user))] + [(t.name, effective_limits(team=t)) for t in teams]
    return JobForm(
        data,
        initial=initial,
        team_names=[t.name for t in teams],
        volumes=volumes_of_teams_of(request.user),
        shared_pools=[str(pool) for pool in shared_pools()],
        notify_default=asks_json(preference_of(request.user)),
        has_email=bool(request.user.email),
        priority_classes=priority_classes_for(request.user, [t.name for t in teams]),
        wall_time_limits=[
            (team, f"your quota (user {limits.name})" if team is None else f"the quota of your team {team}", limits.max_wall_time_seconds)
            for team, limits in wall_limits
            if limits.max_wall_time_seconds is not None
        ],
    )


def _checked(form: JobForm, request: AuthenticatedHttpRequest) -> dict[str, Any] | None:
    """Every mistake at once, each beside its field: the form's own (text into the API's shape), the API serializer's,
    and the cluster's size and the owner's limits over whatever is valid. The submit's spec when there is none."""
    form.is_valid()
    # The plain HttpRequest (the serializer reads only `.user`). A bare DRF `Request(request)` has no
    # authenticators: its `.user` is AnonymousUser, and reading it sets the Django request's user to that too.
    serializer = JobSubmitSerializer(data=form.api_payload(), context={"request": request})
    errors, spec = submit_problems(serializer, request.user)
    form.add_api_errors(errors)
    return spec if form.is_valid() else None


def job_new(request: HttpRequest) -> HttpResponse:
    if not request.user.is_authenticated:
        if request.method == "POST":
            # The session ran out while the form was open: keep what was typed for after the sign-in (never sent).
            form_stash(request, request.POST)
        return redirect_to_login(request.get_full_path())
    user_request: AuthenticatedHttpRequest = request  # type: ignore[assignment]  # signed in, checked above
    if request.method != "POST":
        return _blank_form(user_request)
    form = _job_form(user_request, request.POST)
    spec = _checked(form, user_request)
    if spec is not None:
        notify = spec.pop("notify", None)
        after = spec.pop("dependencies", [])
        # An elastic most beyond the cluster is kept; the page says how far it grows for now (job_submit says it too).
        spec, cut = job_fit_elastic_range(spec)
        indices: list[int] = form.cleaned_data.get("array") or []
        try:
            with transaction.atomic():
                # An array is one submit of one job per index, all or none, as POST /api/v1/jobs/array/ makes it.
                jobs = (
                    job_submit_array(owner=user_request.user, indices=indices, **spec)
                    if indices
                    else [job_submit(owner=user_request.user, **spec)]
                )
                dependencies_save(jobs, after)
                if notify is not None:
                    for job in jobs:
                        job_notify_save(job, notify)
        except DjangoValidationError as exc:  # the world changed since the check (a node went, a quota was lowered)
            form.add_api_errors(exc.message_dict)
        else:
            if indices:
                array_id = jobs[0].array_id
                said = f"Array {array_id} submitted: {len(jobs)} job{'s' if len(jobs) != 1 else ''}, {array_id}_[{index_ranges(indices)}]."
                messages.success(request, f"{said} {cut}" if cut else said)
                return redirect(f"{reverse('frontend:job-list')}?array={array_id}")
            job = jobs[0]
            messages.success(request, f"Job {job.pk} submitted. {cut}" if cut else f"Job {job.pk} submitted.")
            return redirect("frontend:job-detail", pk=job.pk)
    return _page(user_request, form)


def _blank_form(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The form to fill in: what was typed before a sign-in, else a job's fields to clone (?clone=<id>), else defaults."""
    kept = form_unstash(request)
    if kept is not None:
        form = _job_form(request, None)
        initial = {name: field.widget.value_from_datadict(kept, {}, form.add_prefix(name)) for name, field in form.fields.items()}
        return _page(request, _job_form(request, None, initial), restored=True)
    clone = request.GET.get("clone", "").strip()
    source = jobs_visible_to(request.user).filter(pk=int(clone)).first() if clone.isdigit() else None
    # A job that is not there, or not the user's to see, is said (as the API's 404 says it), not an empty form unexplained.
    missing = clone if clone and source is None else ""
    return _page(request, _job_form(request, None, JobForm.initial_from(source) if source else None), cloned=source, clone_missing=missing)


def _page(request: AuthenticatedHttpRequest, form: JobForm, **context: Any) -> HttpResponse:
    return render(request, "frontend/job_new.html", {"form": form, **context})


@require_POST
def job_new_estimate(request: HttpRequest) -> HttpResponse:
    """The form's fields as they stand (posted by the page as they change): would it be accepted, which limits hold
    it, and when would it start (`scheduler.estimate`). JSON with the panel's HTML; writes nothing."""
    if not request.user.is_authenticated:
        return JsonResponse({"signed_out": True}, status=401)
    user_request: AuthenticatedHttpRequest = request  # type: ignore[assignment]  # signed in, checked above
    form = _job_form(user_request, request.POST)
    spec = _checked(form, user_request)
    indices = form.cleaned_data.get("array") or None if spec is not None else None
    estimate = job_estimate(owner=user_request.user, spec=spec, indices=indices) if spec is not None else None
    errors = form.errors_as_shown()
    html = render_to_string("frontend/job_new_estimate.html", {"estimate": estimate, "errors": errors}, request=request)
    return JsonResponse(
        {
            "html": html,
            "accepted": estimate is not None and estimate.accepted,
            "fits_limits": estimate is not None and estimate.fits_limits,
            "start": estimate.start.kind if estimate else "unknown",
            "errors": len(errors),
        }
    )
