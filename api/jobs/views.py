"""The jobs, nodes and queue resources. Thin: they validate, call a service, serialize."""

from __future__ import annotations

from typing import cast

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.generics import ListAPIView
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.requests import api_user
from api.jobs.filters import JobFilter
from api.jobs.serializers import (
    JobDetailSerializer,
    JobSerializer,
    JobSubmitSerializer,
    LogsQuerySerializer,
    LogsSerializer,
    NodeSerializer,
    QueueEntrySerializer,
    queue_summary,
)
from apikit.pagination import QueuePagination
from apikit.viewsets import VisibleViewSet
from jobs.models import Job, Node
from jobs.selectors import job_logs, jobs_visible_to, nodes_with_usage
from jobs.services import job_cancel, job_submit
from scheduler.queue import queue_counts, queue_entries, queue_jobs


class JobViewSet(mixins.CreateModelMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, VisibleViewSet):
    filterset_class = JobFilter
    visible_to = staticmethod(jobs_visible_to)

    def get_queryset(self) -> QuerySet[Job]:
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = queryset.prefetch_related("events")
        return queryset

    def get_serializer_class(self) -> type:
        if self.action == "create":
            return JobSubmitSerializer
        if self.action == "list":
            return JobSerializer
        return JobDetailSerializer

    @extend_schema(request=JobSubmitSerializer, responses={201: JobDetailSerializer})
    def create(self, request: Request, *args: object, **kwargs: object) -> Response:
        serializer = JobSubmitSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        job = job_submit(owner=api_user(request), **serializer.validated_data)
        job = self.get_queryset().prefetch_related("events").get(pk=job.pk)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: JobDetailSerializer, 409: None})
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        job = job_cancel(job=self.get_object(), by=api_user(request), request=request)
        job = self.get_queryset().prefetch_related("events").get(pk=job.pk)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(parameters=[LogsQuerySerializer], responses={200: LogsSerializer, 409: None, 503: None})
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str | None = None) -> Response:
        """A rank's pod logs of the job's latest attempt, read from the cluster."""
        job = self.get_object()
        query = LogsQuerySerializer(data=request.query_params.dict(), context={"job": job})
        query.is_valid(raise_exception=True)
        rank, tail = query.validated_data["rank"], query.validated_data["tail"]
        text = job_logs(job, rank=rank, tail=tail)
        return Response({"job": job.pk, "attempt": job.attempt, "rank": rank, "logs": text})


class NodeViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = NodeSerializer
    lookup_field = "name"
    lookup_value_regex = "[^/]+"
    filterset_fields = ["rack", "state"]

    def get_queryset(self) -> QuerySet[Node]:
        return nodes_with_usage()


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
        paginator.summary = queue_summary(queue_counts())
        page = paginator.paginate_queryset(self.get_queryset(), request, view=self) or []
        return paginator.get_paginated_response(self.get_serializer(queue_entries(page), many=True).data)
