"""Browser pages. They read through selectors and write through the same services as the API."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST
from rest_framework.request import Request

from frontend.forms import JobForm
from jobs.api.serializers import JobSubmitSerializer
from jobs.errors import JobFinished
from jobs.selectors import job_assigned_nodes, jobs_visible_to, nodes_with_usage, queue_jobs
from jobs.services import job_cancel, job_submit
from jobs.states import ACTIVE_STATES, JobState


@login_required
def job_list(request: HttpRequest) -> HttpResponse:
    jobs = jobs_visible_to(request.user)
    state = request.GET.get("state", "")
    if state in JobState.values:
        jobs = jobs.filter(state=state)
    page = Paginator(jobs, 25).get_page(request.GET.get("page"))
    return render(request, "frontend/job_list.html", {"page": page, "state": state, "states": JobState.values})


@login_required
def job_new(request: HttpRequest) -> HttpResponse:
    team_names = list(request.user.teams.values_list("name", flat=True))
    form = JobForm(request.POST or None, team_names=team_names)
    if request.method == "POST" and form.is_valid():
        serializer = JobSubmitSerializer(data=form.api_payload(), context={"request": Request(request)})
        if serializer.is_valid():
            try:
                job = job_submit(owner=request.user, **serializer.validated_data)
            except DjangoValidationError as exc:
                form.add_api_errors(exc.message_dict)
            else:
                messages.success(request, f"Job {job.pk} submitted.")
                return redirect("frontend:job-detail", pk=job.pk)
        else:
            form.add_api_errors(serializer.errors)
    return render(request, "frontend/job_new.html", {"form": form})


@login_required
def job_detail(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(jobs_visible_to(request.user).prefetch_related("events"), pk=pk)
    position = None
    if job.state == JobState.PENDING:
        position = next((i for i, j in enumerate(queue_jobs(), start=1) if j.pk == job.pk), None)
    return render(
        request,
        "frontend/job_detail.html",
        {
            "job": job,
            "assigned_nodes": job_assigned_nodes(job),
            "queue_position": position,
            "live": job.state in ACTIVE_STATES or job.state == JobState.PENDING,
        },
    )


@login_required
@require_POST
def job_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    job = get_object_or_404(jobs_visible_to(request.user), pk=pk)
    try:
        job_cancel(job=job, by=request.user)
    except JobFinished as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.pk} cancelled.")
    return redirect("frontend:job-detail", pk=pk)


@login_required
def cluster_view(request: HttpRequest) -> HttpResponse:
    nodes = list(nodes_with_usage())
    for node in nodes:
        node.gpus_free = max(0, node.gpus_total - (node.gpus_held or 0))
    total = sum(n.gpus_total for n in nodes)
    free = sum(n.gpus_free for n in nodes)
    queue = queue_jobs()
    return render(request, "frontend/cluster.html", {"nodes": nodes, "gpus_total": total, "gpus_free": free, "queue": queue})
