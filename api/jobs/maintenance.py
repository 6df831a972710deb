"""Planned maintenance of nodes over the API (Slurm's `scontrol create reservation ... flags=maint`, `scontrol show
reservation`, `scontrol delete reservation`): over jobs.maintenance, each node on
the audit trail. Everyone signed in may list the windows (users waiting for the nodes read them); admins schedule and
cancel them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.requests import api_user
from api.jobs.node_holds import REASON_MAX, NodeNamesSerializer
from jobs.maintenance import MaintenanceError, maintenance_cancel, maintenance_create, maintenance_in_the_way, maintenance_not_over
from jobs.models import MaintenanceWindow, Node, NodeState
from policy.nodelist import hostlist

# As Slurm's reservations: long enough for a hall's power work, short enough that a typo in the end (a year for a day)
# is caught rather than taking nodes away for good.
MAX_DURATION = timedelta(days=31)


class MaintenanceCreateSerializer(NodeNamesSerializer):
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=253),
        min_length=1,
        max_length=1000,
        help_text="The nodes' names (1 to 1,000).",
        error_messages={
            "min_length": "Name at least one node: nothing was scheduled.",
            "max_length": "At most 1,000 nodes at once: nothing was scheduled.",
        },
    )
    start = serializers.DateTimeField(help_text="When the nodes go into maintenance (ISO 8601; now or later).")
    end = serializers.DateTimeField(required=False, help_text="When they come back (give this or duration_seconds).")
    duration_seconds = serializers.IntegerField(
        required=False,
        min_value=60,
        max_value=int(MAX_DURATION.total_seconds()),
        help_text="How long it lasts, in seconds (or give end): a minute to 31 days.",
        error_messages={
            "min_value": "A window lasts at least a minute (60).",
            "max_value": f"A window lasts at most {MAX_DURATION.days} days ({int(MAX_DURATION.total_seconds())}): schedule another.",
        },
    )
    reason = serializers.CharField(
        max_length=REASON_MAX,
        error_messages={"blank": "Say why the nodes go into maintenance: users waiting for them read this."},
        help_text="Why (required, up to 200 characters): shown to users whose jobs wait for the nodes.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        end, duration = attrs.get("end"), attrs.pop("duration_seconds", None)
        if (end is None) == (duration is None):
            raise ValidationError({"end": ["Give the end or duration_seconds, one of them."]})
        try:
            attrs["end"] = end if end is not None else attrs["start"] + timedelta(seconds=duration)
        except OverflowError:  # a start at the end of year 9999: no end can follow it
            raise ValidationError({"end": ["The end would be after the year 9999."]}) from None
        if attrs["end"] - attrs["start"] > MAX_DURATION:
            raise ValidationError({"end": [f"A window lasts at most {MAX_DURATION.days} days: schedule another after it."]})
        return attrs


class MaintenanceWindowSerializer(serializers.ModelSerializer[MaintenanceWindow]):
    nodes = serializers.SerializerMethodField(help_text="The nodes' names.")
    nodelist = serializers.SerializerMethodField(help_text="The nodes as squeue writes them: gpu-[07-08].")
    start = serializers.DateTimeField(source="starts_at")
    end = serializers.DateTimeField(source="ends_at")
    on = serializers.SerializerMethodField(help_text="Whether it is on now (its nodes take no new work).")
    created_by = serializers.SlugRelatedField[Any](slug_field="username", read_only=True)
    running = serializers.SerializerMethodField(
        help_text="The jobs running on its nodes now, by node: those still there at the start run on through it."
    )

    class Meta:
        model = MaintenanceWindow
        fields = ["id", "nodes", "nodelist", "start", "end", "reason", "on", "created_by", "created_at", "running"]

    def get_nodes(self, window: MaintenanceWindow) -> list[str]:
        return [n.name for n in window.nodes.all()]

    def get_nodelist(self, window: MaintenanceWindow) -> str:
        return hostlist(self.get_nodes(window))

    def get_on(self, window: MaintenanceWindow) -> bool:
        return window.starts_at <= timezone.now() < window.ends_at

    def get_running(self, window: MaintenanceWindow) -> dict[str, list[int]]:
        return maintenance_in_the_way(window)


def _admin(request: Request) -> None:
    if not api_user(request).is_staff:
        raise PermissionDenied("Only admins schedule and cancel maintenance.")


class MaintenanceListView(APIView):
    @extend_schema(
        tags=["nodes"],
        responses={200: MaintenanceWindowSerializer(many=True)},
        description="The maintenance windows not over yet and not cancelled, earliest first (`scontrol show reservation`).",
    )
    def get(self, request: Request) -> Response:
        return Response(MaintenanceWindowSerializer(maintenance_not_over(), many=True).data)

    @extend_schema(
        tags=["nodes"],
        request=MaintenanceCreateSerializer,
        responses={
            201: MaintenanceWindowSerializer,
            400: OpenApiResponse(
                description="No reason, a node the cluster does not have, a start in the past, an end not after the start, "
                "or a node in another window that overlaps: nothing was scheduled"
            ),
            403: OpenApiResponse(description="Not an admin"),
        },
        description="Schedule maintenance of nodes from `start` to `end` (or for `duration_seconds`), as `scontrol create "
        "reservation flags=maint`: before the start no job whose wall time would reach it starts there (shorter ones "
        "still backfill), from the start nothing new does, and at the end the nodes take work again by themselves. Jobs "
        "running there at the start run on (`running`). Windows on a node may not overlap. Admins only; audited "
        "(node.maintenance, one entry per node).",
    )
    def post(self, request: Request) -> Response:
        _admin(request)
        serializer = MaintenanceCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        names = list(dict.fromkeys(data["nodes"]))
        found = {n.name: n for n in Node.objects.exclude(state=NodeState.GONE).filter(name__in=names)}
        if missing := [name for name in names if name not in found]:
            raise ValidationError({"nodes": [f"No node {', '.join(missing)} in the cluster: nothing was scheduled."]})
        try:
            window = maintenance_create(
                nodes=[found[n] for n in names],
                starts_at=data["start"],
                ends_at=data["end"],
                reason=data["reason"],
                by=api_user(request),
                request=request,
            )
        except MaintenanceError as exc:
            raise ValidationError({"detail": [str(exc)]}) from exc
        return Response(MaintenanceWindowSerializer(maintenance_not_over().get(pk=window.pk)).data, status=201)


class MaintenanceCancelView(APIView):
    @extend_schema(
        tags=["nodes"],
        request=None,
        responses={
            200: MaintenanceWindowSerializer,
            400: OpenApiResponse(description="Cancelled already, or over"),
            403: OpenApiResponse(description="Not an admin"),
            404: OpenApiResponse(description="No such window"),
        },
        description="Cancel a maintenance window (`scontrol delete reservation`): one not started never takes its nodes; "
        "one on now ends at once. Admins only; audited (node.maintenance_cancel, one entry per node).",
    )
    def post(self, request: Request, pk: int) -> Response:
        _admin(request)
        # A number past the column's range is no window either (the database would refuse it with a 500).
        window = MaintenanceWindow.objects.filter(pk=pk).first() if pk < 2**63 else None
        if window is None:
            raise NotFound(f"No maintenance window {pk}.")
        try:
            window = maintenance_cancel(window=window, by=api_user(request), request=request)
        except MaintenanceError as exc:
            raise ValidationError({"detail": [str(exc)]}) from exc
        return Response(MaintenanceWindowSerializer(window).data)
