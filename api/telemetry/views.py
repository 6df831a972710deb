"""Telemetry resources of a job: push NCCL results (job token), read series (owner or staff). Thin: check, call, serialize."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, Throttled, UnsupportedMediaType, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from api.telemetry.authentication import HasJobToken, JobTokenAuthentication
from api.telemetry.serializers import MetricsQuerySerializer, MetricsSerializer, PushResultSerializer, series_data
from apikit.errors import Conflict, PayloadTooLarge
from jobs.selectors import jobs_visible_to
from telemetry.catalogue import Level
from telemetry.nccl_formats import PushInvalid, UnsupportedFormat
from telemetry.selectors import BadRead, NoRun, job_metric_read
from telemetry.services import PushRefused, telemetry_push
from telemetry.sources import TelemetryUnavailable, get_source
from telemetry.tokens import JobTokenAuth


class TelemetryUnavailableError(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "telemetry_unavailable"


class JobTelemetryPushView(APIView):
    """NCCL results pushed by a job's pods with the job's MUSTER_TELEMETRY_TOKEN (`Authorization: Bearer ...`).

    NCCL Inspector records as application/json (a record, a list, or {"records": [...]}) or
    application/x-ndjson; nccl-tests output as text/plain (`?coll=all_reduce` names the collective
    when the output does not). All or nothing: 400 names every problem and stores nothing.
    """

    authentication_classes = [JobTokenAuthentication]
    permission_classes = [HasJobToken]
    # The body is read raw: JSON, JSON lines or nccl-tests text, parsed and bounded by the service.
    parser_classes: list[type] = []

    # Only a push reads the job's token. Another method is answered as on every endpoint, a 405 (OPTIONS a 200),
    # rather than "Malformed telemetry token." of the user's token it came with.
    def get_authenticators(self) -> list[BaseAuthentication]:
        return super().get_authenticators() if self._pushing() else []

    def get_permissions(self) -> Sequence[Any]:
        return super().get_permissions() if self._pushing() else []

    def _pushing(self) -> bool:
        request = getattr(self, "request", None)  # None while the OpenAPI schema is generated: the push's own classes
        return request is None or (request.method or "").upper() == "POST"

    @extend_schema(
        request={"application/json": OpenApiTypes.OBJECT, "application/x-ndjson": OpenApiTypes.STR, "text/plain": OpenApiTypes.STR},
        parameters=[OpenApiParameter("coll", str, description="Collective of nccl-tests output (e.g. all_reduce).")],
        responses={
            201: PushResultSerializer,
            400: OpenApiResponse(description="Malformed; nothing stored"),
            401: None,
            403: OpenApiResponse(description="A token of another job"),
            409: OpenApiResponse(description="The job is not running"),
            413: None,
            415: None,
            429: OpenApiResponse(description="Too many pushes, or samples, for this job"),
        },
        auth=[],
    )
    def post(self, request: Request, pk: int) -> Response:
        if cast(JobTokenAuth, request.auth).job_id != pk:  # HasJobToken let only a job token through
            raise PermissionDenied("This telemetry token belongs to another job.")
        limit = settings.MUSTER_TELEMETRY_PUSH_MAX_BYTES
        too_large = PayloadTooLarge(f"The body is too large; a push is at most {limit} bytes.")
        declared = request.META.get("CONTENT_LENGTH") or "0"
        if declared.isdigit() and int(declared) > limit:
            raise too_large
        try:
            body = request.body
        except RequestDataTooBig as exc:
            raise too_large from exc
        if len(body) > limit:
            raise too_large
        try:
            stored = telemetry_push(job_id=pk, body=body, content_type=request.content_type or "", coll=request.query_params.get("coll"))
        except UnsupportedFormat as exc:
            raise UnsupportedMediaType(request.content_type or "", detail=str(exc)) from exc
        except PushInvalid as exc:
            raise ValidationError(exc.errors) from exc
        except PushRefused as exc:
            if exc.status == status.HTTP_429_TOO_MANY_REQUESTS:
                raise Throttled(wait=exc.retry_after, detail=str(exc)) from exc
            raise Conflict(str(exc)) from exc
        return Response({"job": pk, "stored": stored}, status=status.HTTP_201_CREATED)


class JobMetricsView(APIView):
    """One metric of one run of a job, per GPU, node or job, in time buckets (mean, min, max, samples).

    Stored series for a run that ended, live from the telemetry source while it runs. The same
    visibility as the job: its owner and staff; anyone else gets 404.
    """

    @extend_schema(
        parameters=[MetricsQuerySerializer],
        responses={
            200: MetricsSerializer,
            400: OpenApiResponse(description="A parameter is wrong, or asks what the job's runs do not have (a run, a node, a window)"),
            409: OpenApiResponse(description="The job has not run yet: it has no telemetry"),
            503: None,
        },
    )
    def get(self, request: Request, pk: int) -> Response:
        job = jobs_visible_to(request.user).prefetch_related("events").filter(pk=pk).first()
        if job is None:
            # In the job resource's words (VisibleViewSet), not Django's "No Job matches the given query."
            raise NotFound(f"No job {pk} (or none that you may see).")
        params = {k: v for k, v in request.query_params.items() if k != "format"}
        query = MetricsQuerySerializer(data=params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        try:
            read = job_metric_read(
                job,
                data["metric"],
                level=Level(data["level"]),
                source=get_source(),
                start=data.get("start"),
                end=data.get("end"),
                step=data.get("step"),
                node=data.get("node"),
                attempt=data.get("run"),
            )
        except NoRun as exc:
            raise Conflict(str(exc)) from exc
        except BadRead as exc:
            raise ValidationError({exc.field: [str(exc)]}) from exc
        except TelemetryUnavailable as exc:
            raise TelemetryUnavailableError(f"Telemetry is unavailable: {exc}") from exc
        metric = read.metric
        body = {
            "job": read.job,
            "run": read.run,
            "metric": metric.key,
            "name": metric.name,
            "label": metric.label,
            "unit": metric.unit,
            "level": read.level.value,
            "start": read.start,
            "end": read.end,
            "step": read.step,
            "resolution": read.resolution,
            "series": [series_data(s) for s in read.series],
        }
        # Up to a million numbers: serialised as they are (MetricsSerializer documents the shape).
        return Response(body)
