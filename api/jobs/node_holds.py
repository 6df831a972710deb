"""Holding and releasing nodes over the API (Slurm's `scontrol update NodeName=gpu-07 State=DRAIN Reason=...` and
`State=RESUME`), for admins who script it: the same service as Django admin's node list (jobs.node_holds), each node on
the audit trail. Several nodes in one request are held or released in one transaction, all or none."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.requests import api_user
from apikit.serializers import StrictSerializer
from jobs.models import Node, NodeState
from jobs.node_holds import nodes_hold, nodes_release

# As Django admin's hold form: the reason is what users waiting for the node read beside HELD.
REASON_MAX = 200


class NodeNamesSerializer(StrictSerializer):
    nodes = serializers.ListField(
        child=serializers.CharField(max_length=253),
        min_length=1,
        max_length=1000,
        help_text="The nodes' names (1 to 1,000).",
        # DRF's own words read "Ensure this field has at least 1 elements."
        error_messages={
            "min_length": "Name at least one node: nothing was held or released.",
            "max_length": "At most 1,000 nodes at once: nothing was held or released.",
        },
    )


class NodeHoldSerializer(NodeNamesSerializer):
    reason = serializers.CharField(
        max_length=REASON_MAX,
        error_messages={"blank": "Say why the nodes are held: users waiting for them read this."},
        help_text="Why (required, up to 200 characters): shown beside HELD to users whose jobs wait for the nodes.",
    )


def _nodes(request: Request, serializer_class: type[NodeNamesSerializer]) -> tuple[list[Node], dict[str, Any]]:
    if not api_user(request).is_staff:
        raise PermissionDenied("Only admins hold and release nodes.")
    serializer = serializer_class(data=request.data)
    serializer.is_valid(raise_exception=True)
    names = list(dict.fromkeys(serializer.validated_data["nodes"]))
    found = {n.name: n for n in Node.objects.exclude(state=NodeState.GONE).filter(name__in=names)}
    if missing := [name for name in names if name not in found]:
        # All or none: a typo in one name holds none of them, as a job array's cancel names each missing index.
        raise ValidationError({"nodes": [f"No node {', '.join(missing)} in the cluster: nothing was held or released."]})
    return [found[name] for name in names], dict(serializer.validated_data)


class NodeHoldView(APIView):
    @extend_schema(
        tags=["nodes"],
        request=NodeHoldSerializer,
        responses={
            200: inline_serializer(
                "NodesHeld",
                {
                    "held": serializers.ListField(child=serializers.CharField()),
                    "reworded": serializers.ListField(child=serializers.CharField()),
                    "unchanged": serializers.ListField(child=serializers.CharField()),
                    "running": serializers.DictField(child=serializers.ListField(child=serializers.IntegerField())),
                    "message": serializers.CharField(),
                },
            ),
            400: OpenApiResponse(description="No reason, or a node the cluster does not have: nothing was held"),
            403: OpenApiResponse(description="Not an admin"),
        },
        description="Hold nodes out of placement with one reason (`scontrol update State=DRAIN Reason=...`): nothing new is "
        "placed there; jobs running there run to their end (`running`: the jobs on each). A node held already takes the new "
        "reason (`reworded`). Admins only; each node on the audit trail (node.hold, node.update).",
    )
    def post(self, request: Request) -> Response:
        nodes, data = _nodes(request, NodeHoldSerializer)
        result = nodes_hold(nodes=nodes, reason=data["reason"], by=api_user(request), request=request)
        message = result.summary()
        if result.running:
            message += f" Jobs keep running there until they end: {result.running_text()}."
        return Response(
            {"held": result.held, "reworded": result.reworded, "unchanged": result.unchanged, "running": result.running, "message": message}
        )


class NodeReleaseView(APIView):
    @extend_schema(
        tags=["nodes"],
        request=NodeNamesSerializer,
        responses={
            200: inline_serializer(
                "NodesReleased",
                {
                    "released": serializers.ListField(child=serializers.CharField()),
                    "not_held": serializers.ListField(child=serializers.CharField()),
                },
            ),
            400: OpenApiResponse(description="A node the cluster does not have: nothing was released"),
            403: OpenApiResponse(description="Not an admin"),
        },
        description="Release held nodes (`scontrol update State=RESUME`): new work may be placed there again, with a fresh "
        "failure count. Nodes not held are listed apart (`not_held`) and left as they were. Admins only; audited (node.release).",
    )
    def post(self, request: Request) -> Response:
        nodes, _ = _nodes(request, NodeNamesSerializer)
        released, not_held = nodes_release(nodes=nodes, by=api_user(request), request=request)
        return Response({"released": released, "not_held": not_held})
