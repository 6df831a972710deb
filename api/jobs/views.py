"""The jobs, nodes and queue resources. Thin: they validate, call a service, serialize."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import QuerySet, prefetch_related_objects
from django.http import Http404, StreamingHttpResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.generics import ListAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from accounts.requests import api_user
from accounts.throttling import CheckpointRateThrottle, DryRunRateThrottle
from api.idempotency import IDEMPOTENCY_PARAMETER, REPLAYED_HEADER, Submitted, idempotency_key, submit_once
from api.jobs.filters import JobFilter, NodeFilter
from api.jobs.serializers import (
    CheckpointReportSerializer,
    CheckpointSerializer,
    EstimateSerializer,
    JobArrayCancelledSerializer,
    JobArrayCancelSerializer,
    JobArrayEndedSerializer,
    JobArraySerializer,
    JobArraySubmitSerializer,
    JobArrayUpdatedSerializer,
    JobArrayUpdateSerializer,
    JobCancelSerializer,
    JobCheckSerializer,
    JobDetailSerializer,
    JobRequeueSerializer,
    JobsCancelledSerializer,
    JobsCancelSerializer,
    JobSerializer,
    JobSubmitSerializer,
    JobUpdateSerializer,
    LogsQuerySerializer,
    LogsSerializer,
    NodeSerializer,
    NotifySerializer,
    QueueEntrySerializer,
    SubmitCheckSerializer,
    queue_summary,
    submit_problems,
)
from api.telemetry.authentication import IsAuthenticatedOrJobToken, JobTokenIfPresented
from apikit.pagination import NodePagination, QueuePagination
from apikit.renderers import JsonErrorsMixin, PlainTextRenderer
from apikit.serializers import refuse_a_body
from apikit.viewsets import VisibleViewSet
from jobs.attempts import job_attempts
from jobs.checkpoints import CheckpointInvalid, job_checkpoint_report
from jobs.dependencies import Asked, dependencies_save
from jobs.errors import ArrayEnded, ArrayIndicesMissing, ArrayNotFound, JobNotStarted, JobNotUpdatable
from jobs.logs import job_logs, job_logs_follow, never_started
from jobs.models import ClusterHealth, Job, Node
from jobs.selectors import jobs_visible_to, nodes_with_usage
from jobs.services import (
    job_cancel,
    job_cancel_array,
    job_cancel_many,
    job_fit_elastic_range,
    job_hold,
    job_release,
    job_requeue_by,
    job_submit,
    job_submit_array,
    job_submit_check,
    job_update,
)
from notify.services import asks_json, job_notify_save, preference_of, preference_save
from scheduler.estimate import job_estimate
from scheduler.queue import queue_counts, queue_entries, queue_jobs
from telemetry.tokens import JobTokenAuth

NO_BODY = OpenApiResponse(description="A body was sent (it takes none, or `{}`): nothing was done")


class JobViewSet(JsonErrorsMixin, mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, VisibleViewSet):
    filterset_class = JobFilter
    visible_to = staticmethod(jobs_visible_to)

    def get_queryset(self) -> QuerySet[Job]:
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events").select_related("notify")
        return queryset

    def get_serializer_class(self) -> type:
        if self.action == "create":
            return JobSubmitSerializer
        if self.action == "list":
            return JobSerializer
        return JobDetailSerializer

    @extend_schema(
        request=JobSubmitSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={201: JobDetailSerializer, 409: None},
        description="Queue a job. With an `Idempotency-Key`, a retry of the same request gets the same job (201, "
        "`Idempotent-Replayed: true`) and the same key with another body is a 409.",
    )
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = JobSubmitSerializer(data=request.data, context=self.get_serializer_context())
        owner = api_user(request)
        _valid_or_every_problem(serializer, owner)
        spec = dict(serializer.validated_data)
        notify = spec.pop("notify", None)
        after = spec.pop("dependencies", [])
        submitted = submit_once(request, owner, lambda: _queued(lambda: [job_submit(owner=owner, **spec)], after, notify))
        if submitted.created:
            # The row just written, answered from memory: a new job has its one event and nothing else yet.
            job = submitted.created[0]
            prefetch_related_objects([job], "events")
        else:
            job = self.get_queryset().prefetch_related("events").select_related("notify").get(pk=submitted.job_ids[0])
        response = Response(JobDetailSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)
        response["Location"] = request.build_absolute_uri(reverse("job-detail", args=[job.pk]))
        return _mark_replayed(response, submitted)

    @extend_schema(
        request=JobArraySubmitSerializer,
        parameters=[IDEMPOTENCY_PARAMETER],
        responses={201: JobArraySerializer, 409: None},
        description="Queue one job per index of `array` (`sbatch --array`'s syntax), in one transaction: all or none, "
        "checked once. Each element's pods find MUSTER_ARRAY_ID and MUSTER_ARRAY_INDEX in their environment.",
    )
    @action(detail=False, methods=["post"])
    def array(self, request: Request) -> Response:
        serializer = JobArraySubmitSerializer(data=request.data, context=self.get_serializer_context())
        owner = api_user(request)
        _valid_or_every_problem(serializer, owner)
        spec = dict(serializer.validated_data)
        indices = spec.pop("array")
        notify = spec.pop("notify", None)
        after = spec.pop("dependencies", [])
        submitted = submit_once(
            request, owner, lambda: _queued(lambda: job_submit_array(owner=owner, indices=indices, **spec), after, notify)
        )
        jobs = list(self.get_queryset().filter(pk__in=submitted.job_ids).order_by("array_index"))
        array_id = jobs[0].array_id
        elements = JobSerializer(jobs, many=True, context=self.get_serializer_context()).data
        data = {"array_id": array_id, "count": len(jobs), "jobs": elements}
        response = Response(data, status=status.HTTP_201_CREATED)
        response["Location"] = request.build_absolute_uri(f"{reverse('job-list')}?array={array_id}")
        return _mark_replayed(response, submitted)

    @extend_schema(
        request=JobCheckSerializer,
        responses={200: SubmitCheckSerializer},
        description="A dry run of a submit (`array` optional): 200 when it would be accepted now (the fields, the "
        "cluster's size, the owner's limits, a malformed `Idempotency-Key`), else the 400 the submit would get. "
        "Writes nothing, and uses no key.",
    )
    @action(detail=False, methods=["post"], throttle_classes=[DryRunRateThrottle])
    def validate(self, request: Request) -> Response:
        serializer = JobCheckSerializer(data=request.data, context=self.get_serializer_context())
        _valid_or_every_problem(serializer, api_user(request))
        idempotency_key(request)  # the submit refuses a malformed key before it looks at the owner's limits
        spec = dict(serializer.validated_data)
        spec.pop("notify", None)
        count = len(spec.pop("array", [None]))
        spec, cut = job_fit_elastic_range(spec)
        job_submit_check(owner=api_user(request), **spec)
        return Response({"valid": True, "count": count, **({"note": cut} if cut else {})})

    @extend_schema(
        request=JobCheckSerializer,
        responses={200: EstimateSerializer},
        description="`sbatch --test-only`: the body of a submit, validated as a submit is (400 alike), then whether it "
        "would be accepted, which of the owner's limits it meets, and when it would start: the scheduling cycle's own "
        "plan of the current queue with this job added. With `array`, as `sbatch --test-only --array`: the array is "
        "checked as its submit checks it, and `start` is its first element's (`array_index`). Writes nothing.",
    )
    @action(detail=False, methods=["post"], throttle_classes=[DryRunRateThrottle])
    def estimate(self, request: Request) -> Response:
        serializer = JobCheckSerializer(data=request.data, context=self.get_serializer_context())
        _valid_or_every_problem(serializer, api_user(request))
        spec = dict(serializer.validated_data)
        indices = spec.pop("array", None)
        estimate = job_estimate(owner=api_user(request), spec=spec, indices=indices)
        return Response(EstimateSerializer(estimate).data)

    @extend_schema(
        request=JobCancelSerializer,
        responses={
            200: JobDetailSerializer,
            400: OpenApiResponse(description="A field it does not take, or a reason over 300 characters: nothing was done"),
            409: None,
        },
        description='`scancel`: a pending job leaves the queue, a running one is stopped. No body, or `{"reason": ...}`: why, '
        "added to the job's reason for its owner to read.",
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        comment = _reason_given(request)
        return self._detail(job_cancel(job=self.get_object(), by=api_user(request), comment=comment, request=request))

    @extend_schema(
        request=JobRequeueSerializer,
        responses={
            200: JobDetailSerializer,
            400: OpenApiResponse(description="A field it does not take, or a reason over 300 characters: nothing was done"),
            409: OpenApiResponse(description="The job is not placed or running (pending: queued already; ended: resubmit it)"),
        },
        description="`scontrol requeue`: stop a placed or running job and put it back in the queue, in the place its submit "
        "time gives it. Its pods are deleted; what it ran is charged; none of its restarts is spent and it counts as no "
        'preemption. No body, or `{"reason": ..., "hold": true}`: why, added to its reason, and to hold it too '
        "(scontrol requeuehold). Someone else's job (an admin) is audited (job.requeue).",
    )
    @action(detail=True, methods=["post"])
    def requeue(self, request: Request, pk: str | None = None) -> Response:
        body = JobRequeueSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        given = body.validated_data
        comment, hold = given.get("reason", ""), given["hold"]
        job = job_requeue_by(job=self.get_object(), by=api_user(request), comment=comment, hold=hold, request=request)
        # As the requeue left it: read again, a cycle may have placed it since, and its attempt read as the next one.
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(
        request=None,
        responses={
            200: JobDetailSerializer,
            400: NO_BODY,
            409: OpenApiResponse(
                description="The job is not PENDING (placed, running or ended): only a pending job can be held; or an admin "
                "holds it and you are not one: it is not yours to hold or release"
            ),
        },
        description="`scontrol hold`: keep a pending job in the queue but never start it until released. It keeps its "
        "place (its age); its reason reads HELD, with no estimated start and no reservation, and it blocks nobody. Its "
        "owner's hold its owner or an admin may release; an admin's hold on someone else's job (audited) only an admin. "
        "Holding a job held so already changes nothing.",
    )
    @action(detail=True, methods=["post"])
    def hold(self, request: Request, pk: str | None = None) -> Response:
        refuse_a_body(request.data)
        job = job_hold(job=self.get_object(), by=api_user(request), request=request)
        return self._detail(job)

    @extend_schema(
        request=None,
        responses={
            200: JobDetailSerializer,
            400: NO_BODY,
            403: OpenApiResponse(description="An admin holds it and you are its owner: only an admin can release it"),
            409: OpenApiResponse(description="The job is not held (or no longer pending): nothing to release"),
        },
        description="`scontrol release`: a held job may start from the next scheduling cycle, in the place its age gives it.",
    )
    @action(detail=True, methods=["post"])
    def release(self, request: Request, pk: str | None = None) -> Response:
        refuse_a_body(request.data)
        job = job_release(job=self.get_object(), by=api_user(request), request=request)
        return self._detail(job)

    @extend_schema(
        request=JobUpdateSerializer,
        responses={
            200: JobDetailSerializer,
            400: OpenApiResponse(
                description="A field an update does not take (named), a value a submit would refuse, or one the owner's "
                "limits refuse (every reason at once): nothing was changed"
            ),
            409: OpenApiResponse(description="The job is not PENDING: a placed or running job's wall time is not changed here"),
        },
        description="`scontrol update JobId=42 TimeLimit=2:00:00 Name=x Dependency=afterok:5`: change a pending job "
        "before it starts: `name`, `wall_time_seconds`, `priority_class`, `max_restarts`, `preemptible`, `dependencies` "
        "(any of them; nothing else). Each is checked as a submit checks it, against the owner's limits (an owner may "
        "raise a wall time up to their most; an admin may give a class kept for some); `dependencies` replaces what it "
        "waits for (`[]` clears it), and is refused if a job would come to wait on itself, directly or through the "
        "jobs it waits for. One job, an array's element by its own id; a whole array is "
        "`POST /api/v1/jobs/update-array/`. Written to the job's history; someone else's job (an admin) is audited "
        "(job.update). Its estimated start is cleared until the next scheduling cycle, which reads the new values.",
    )
    def partial_update(self, request: Request, pk: str | None = None) -> Response:
        serializer = JobUpdateSerializer(data=request.data, context=self.get_serializer_context())
        if not serializer.is_valid():
            raise ValidationError(serializer.every_problem())
        job = self.get_object()
        job_update(job_ids=[job.pk], by=api_user(request), changes=serializer.validated_data, request=request)
        return self._detail(job)

    @extend_schema(
        request=JobArrayUpdateSerializer,
        responses={
            200: JobArrayUpdatedSerializer,
            400: OpenApiResponse(description="A field is wrong, or an index is not the array's: nothing was changed"),
            404: OpenApiResponse(description="No such array, or none you may see"),
            409: OpenApiResponse(description="An element asked for is not pending, or (no indices) none is: nothing was changed"),
        },
        description="`scontrol update JobId=4` of array 4: the fields of `PATCH /api/v1/jobs/{id}/` for every pending "
        "element, or those of `indices` (each must be pending), in one transaction: all of them or none.",
    )
    @action(detail=False, methods=["post"], url_path="update-array", url_name="update-array")
    def update_array(self, request: Request) -> Response:
        serializer = JobArrayUpdateSerializer(data=request.data, context=self.get_serializer_context())
        if not serializer.is_valid():
            raise ValidationError(serializer.every_problem())
        given = dict(serializer.validated_data)
        array_id, indices = given.pop("array_id"), given.pop("indices", None)
        elements = {
            index: (pk, state)
            for pk, index, state in jobs_visible_to(api_user(request)).filter(array_id=array_id).values_list("pk", "array_index", "state")
        }
        if not elements:
            raise ArrayNotFound(array_id)
        if indices is not None and (missing := set(indices) - set(elements)):
            lists = f"GET /api/v1/jobs/?array={array_id} lists its elements"
            named = {
                str(i): [f"Array {array_id} has no element {index}; nothing was updated ({lists})."]
                for i, index in enumerate(indices)
                if index in missing
            }
            raise ValidationError({"indices": named})
        if indices is not None:
            targets = [elements[index][0] for index in sorted(set(indices))]
        else:
            targets = [pk for pk, state in elements.values() if state == "PENDING"]
            if not targets:
                raise JobNotUpdatable(f"Array {array_id} has no pending element; nothing was updated (only a pending job can be).")
        done = job_update(job_ids=targets, by=api_user(request), changes=given, request=request)
        updated = sorted(self._fresh(done), key=lambda job: job.array_index or 0)
        data = {"array_id": array_id, "name": updated[0].name, "updated": updated}
        return Response(JobArrayUpdatedSerializer(data, context=self.get_serializer_context()).data)

    def _detail(self, job: Job) -> Response:
        """The job as its detail reads it, after an action changed it (cancel, hold, release)."""
        job = self.get_queryset().prefetch_related("events").select_related("held_by", "notify").get(pk=job.pk)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(
        request=JobsCancelSerializer,
        responses={200: JobsCancelledSerializer, 400: OpenApiResponse(description="A field is wrong; nothing was cancelled")},
        description="`scancel 12 13 17`: cancel the jobs of `ids` in one transaction, so the nodes the first ones free "
        "never go to the next one of the list in between (cancelled one by one, a cycle could place it). Not all or "
        "nothing: a job that had ended, or an id that is no job you may see, is left out and listed (`ended`, "
        "`not_found`). Counted as one write by the throttle.",
    )
    @action(detail=False, methods=["post"], url_path="cancel-many", url_name="cancel-many")
    def cancel_many(self, request: Request) -> Response:
        serializer = JobsCancelSerializer(data=request.data)
        if not serializer.is_valid():
            raise ValidationError(serializer.every_problem())
        done = job_cancel_many(
            job_ids=serializer.validated_data["ids"],
            comment=serializer.validated_data.get("reason", ""),
            by=api_user(request),
            request=request,
        )
        data = {"cancelled": self._fresh(done.cancelled), "ended": self._fresh(done.ended), "not_found": done.not_found}
        return Response(JobsCancelledSerializer(data).data)

    @extend_schema(
        request=JobArrayCancelSerializer,
        responses={
            200: JobArrayCancelledSerializer,
            400: OpenApiResponse(
                description="A field is wrong, or `indices` names elements the array does not have (each "
                "by its position in `indices`); nothing was cancelled"
            ),
            404: OpenApiResponse(description="No such array, or none you may see"),
            409: OpenApiResponse(JobArrayEndedSerializer, description="Every element asked for had already ended: nothing to cancel"),
        },
        description="`scancel 4`: cancel every element of array 4 not ended yet, or those of `indices` (`scancel "
        "4_[1-3]`), in one transaction: all of them or none. Elements asked for that had already ended are listed in "
        "`ended`, not refused; only when nothing is left to cancel is it a 409. Counted as one write by the throttle.",
    )
    @action(detail=False, methods=["post"], url_path="cancel-array", url_name="cancel-array")
    def cancel_array(self, request: Request) -> Response:
        serializer = JobArrayCancelSerializer(data=request.data)
        if not serializer.is_valid():
            raise ValidationError(serializer.every_problem())
        array_id, indices = serializer.validated_data["array_id"], serializer.validated_data.get("indices")
        try:
            comment = serializer.validated_data.get("reason", "")
            done = job_cancel_array(array_id=array_id, indices=indices, comment=comment, by=api_user(request), request=request)
        except ArrayIndicesMissing as exc:
            # Each missing index named at its place in `indices`, as DRF names a list's bad items (`indices.2`).
            assert indices is not None  # only indices asked for can be missing
            lists = f"GET /api/v1/jobs/?array={array_id} lists its elements"
            named = {
                str(i): [f"Array {array_id} has no element {index}; nothing was cancelled ({lists})."]
                for i, index in enumerate(indices)
                if index in set(exc.missing)
            }
            raise ValidationError({"indices": named}) from exc
        except ArrayEnded as exc:
            ended = JobArrayEndedSerializer(
                {"detail": str(exc), "array_id": exc.array_id, "name": exc.name, "cancelled": [], "ended": self._fresh(exc.ended)}
            )
            return Response(ended.data, status=status.HTTP_409_CONFLICT)
        data = {"array_id": done.array_id, "name": done.name, "cancelled": self._fresh(done.cancelled), "ended": self._fresh(done.ended)}
        return Response(JobArrayCancelledSerializer(data).data)

    def _fresh(self, jobs: list[Any]) -> list[Job]:
        """The jobs read again as the list reads them (owner, team and allocations with them), in the order given."""
        by_id = self.get_queryset().in_bulk([job.pk for job in jobs])
        return [by_id[job.pk] for job in jobs]

    @extend_schema(
        request=CheckpointReportSerializer,
        responses={
            200: CheckpointSerializer,
            400: OpenApiResponse(description="A field is wrong (unknown, in the future, before this attempt was placed); nothing stored"),
            403: OpenApiResponse(description="Another job's token, or a user who does not own the job"),
            409: OpenApiResponse(description="The job is not running, or the report is from another attempt"),
            429: OpenApiResponse(description="Over MUSTER_THROTTLE_CHECKPOINTS for this job"),
        },
        description="Report that the job wrote a checkpoint: its pods (`Authorization: Bearer $MUSTER_TELEMETRY_TOKEN`, to "
        "`$MUSTER_CHECKPOINT_URL`) or its owner. A preemption then throws away only the work since it, and chooses its "
        "victims by that; the job's page shows it. The attempt's latest report stands; an earlier one changes nothing.",
    )
    @action(
        detail=True,
        methods=["post"],
        authentication_classes=[JobTokenIfPresented, *api_settings.DEFAULT_AUTHENTICATION_CLASSES],
        permission_classes=[IsAuthenticatedOrJobToken],
        throttle_classes=[CheckpointRateThrottle, *api_settings.DEFAULT_THROTTLE_CLASSES],
    )
    def checkpoint(self, request: Request, pk: str | None = None) -> Response:
        job_id = self._reporting_for(request)
        report = CheckpointReportSerializer(data=request.data)
        report.is_valid(raise_exception=True)
        try:
            checkpoint = job_checkpoint_report(job_id, **report.validated_data)
        except CheckpointInvalid as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        return Response(CheckpointSerializer(checkpoint).data)

    def _reporting_for(self, request: Request) -> int:
        """The job a checkpoint report may be for: a job token's own job, or a job the signed-in user owns."""
        if isinstance(request.auth, JobTokenAuth):
            if str(request.auth.job_id) != self.kwargs["pk"]:
                raise PermissionDenied("This token belongs to another job.")
            return request.auth.job_id
        job = self.get_object()
        if job.owner_id != request.user.pk:
            raise PermissionDenied("Only the job's owner, or its pods with its token, report its checkpoints.")
        return job.pk

    @extend_schema(
        parameters=[LogsQuerySerializer],
        responses={(200, "application/json"): LogsSerializer, (200, "text/plain"): OpenApiTypes.STR, 409: None, 503: None},
    )
    @action(detail=True, methods=["get"], renderer_classes=[*api_settings.DEFAULT_RENDERER_CLASSES, PlainTextRenderer])
    def logs(self, request: Request, pk: str | None = None) -> Response | StreamingHttpResponse:
        """A rank's output of one attempt: live from the cluster while it runs, as kept when it ended; `follow` streams it.
        As JSON with what it is (attempt, source, truncated), or the output alone for `Accept: text/plain`; `follow`
        streams text/plain whatever is accepted."""
        job = self.get_object()
        params = {k: v for k, v in request.query_params.items() if k != api_settings.URL_FORMAT_OVERRIDE}  # negotiation's
        query = LogsQuerySerializer(data=params, context={"job": job})
        query.is_valid(raise_exception=True)
        rank, tail, attempt = query.validated_data["rank"], query.validated_data["tail"], query.validated_data.get("attempt")
        if query.validated_data["follow"]:
            if job.attempt == 0:
                raise JobNotStarted(never_started(job))
            stream = job_logs_follow(job, rank=rank, tail=tail, attempt=attempt)
            response = StreamingHttpResponse(stream, content_type="text/plain; charset=utf-8")
            # Proxies must pass each piece on as it comes (nginx buffers otherwise).
            response["X-Accel-Buffering"] = "no"
            response["Cache-Control"] = "no-store"
            return response
        logs = job_logs(job, rank=rank, tail=tail, attempt=attempt)
        if request.accepted_renderer.format == PlainTextRenderer.format:
            return Response(logs.text)
        return Response(
            {
                "job": job.pk,
                "attempt": logs.attempt,
                "rank": rank,
                "logs": logs.text,
                "source": logs.source,
                "truncated": logs.truncated,
                "note": logs.note,
                "ended": next((a.end_line for a in job_attempts(job) if a.number == logs.attempt), ""),
            }
        )


def _mark_replayed(response: Response, submitted: Submitted) -> Response:
    if submitted.replayed:
        response[REPLAYED_HEADER] = "true"
    return response


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    """The cluster's nodes as the last cycle saw them. The list's `cluster` says whether jobs can start on it and,
    when they cannot (unreachable, the jobs' namespace missing, Muster not allowed to create pods), why and since
    when, as every page's banner does."""

    serializer_class = NodeSerializer
    pagination_class = NodePagination
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_class = NodeFilter

    def get_queryset(self) -> QuerySet[Node]:
        return nodes_with_usage()

    def get_object(self) -> Node:
        try:
            return cast(Node, super().get_object())
        except Http404:
            # Named as the jobs' 404 names a job, not Django's "No Node matches the given query." (Every node is
            # shown to everyone signed in, so there is none they may not see.)
            raise NotFound(f"No node {self.kwargs[self.lookup_field]}.") from None

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        cast(NodePagination, self.paginator).summary = cluster_summary()
        return super().list(request, *args, **kwargs)


def cluster_summary() -> dict[str, Any]:
    """Whether jobs can start on the cluster now and, when not, why and since when: the nodes' `cluster`, and the queue's
    `summary.cluster` (its estimates are the last cycle's, stale while no cycle can place anything)."""
    health = ClusterHealth.objects.filter(pk=1).first()
    down = health is not None and not health.reachable
    return {
        "usable": not down,
        "problem": health.error if health and down else "",
        "since": health.down_since if health and down else None,
        "last_cycle_at": health.last_cycle_at if health else None,
    }


class QueueView(ListAPIView):
    """Pending jobs of every user in the order the last scheduling cycle considered them: position, priority
    breakdown, why each waits and when it is expected to start (and what that estimate means), as that cycle
    stored them; jobs submitted since come last with no position (not yet planned). `summary` counts the whole
    queue, and the jobs running within and over their owners' quotas."""

    serializer_class = QueueEntrySerializer
    pagination_class = QueuePagination
    filter_backends: list[type] = []

    def get_queryset(self) -> QuerySet[Job]:
        return queue_jobs()

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        paginator = cast(QueuePagination, self.paginator)
        counts = queue_counts()
        paginator.summary, paginator.total = {**queue_summary(counts), "cluster": cluster_summary()}, counts.pending
        page = paginator.paginate_queryset(self.get_queryset(), request, view=self) or []
        return paginator.get_paginated_response(self.get_serializer(queue_entries(page), many=True).data)


def _valid_or_every_problem(serializer: JobSubmitSerializer, owner: User) -> None:
    """A submit's body is refused with every reason at once: a missing wall time used to hide a refused class, an
    elastic slice or a quota until it was given."""
    if not serializer.is_valid():
        errors, _ = submit_problems(serializer, owner)
        raise ValidationError(errors)


def _reason_given(request: Request) -> str:
    """A cancel's or requeue's `{"reason": ...}` (none: empty), refused with a 400 if it is not that."""
    body = JobCancelSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    return str(body.validated_data.get("reason", ""))


def _queued(submit: Callable[[], list[Job]], after: list[Asked], notify: dict[str, Any] | None) -> list[Job]:
    """The submit's jobs with their dependencies and notify asks, in one transaction: a job committed before its
    dependencies could be started by a cycle in between."""
    with transaction.atomic():
        jobs = submit()
        if after:
            dependencies_save(jobs, after)
        return _with_notify(jobs, notify)


def _with_notify(jobs: list[Job], notify: dict[str, Any] | None) -> list[Job]:
    """The submit's `notify` as each job's own asks, in the submit's transaction (submit_once's, or this one)."""
    if notify is not None:
        with transaction.atomic():
            for job in jobs:
                job_notify_save(job, notify)
    return jobs


class NotifyPreferenceView(APIView):
    """Your default for your jobs' notifications (a submit's `notify` says otherwise for its job)."""

    permission_classes = [IsAuthenticated]

    @extend_schema(responses={200: NotifySerializer})
    def get(self, request: Request) -> Response:
        return Response(asks_json(preference_of(api_user(request))))

    @extend_schema(request=NotifySerializer, responses={200: NotifySerializer})
    def put(self, request: Request) -> Response:
        serializer = NotifySerializer(data=request.data, context={"request": request})
        serializer.is_valid(raise_exception=True)
        return Response(asks_json(preference_save(api_user(request), serializer.validated_data)))
