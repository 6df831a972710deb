"""A node back from NotReady settles before it takes new work: one that flaps would fail gang after gang."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from jobs.cluster.base import ClusterNode
from jobs.models import Node, NodeState
from jobs.services import nodes_sync
from scheduler.snapshot import node_views


def schedulable(now: Any) -> dict[str, bool]:
    return {view.name: view.schedulable for view in node_views(now)}


def test_a_node_back_from_not_ready_takes_new_work_only_after_settling(db: None, settings: Any) -> None:
    settings.MUSTER_NODE_SETTLE_SECONDS = 120
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])
    assert schedulable(timezone.now()) == {"a": True, "b": True}, "nodes seen for the first time take work at once"
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8, ready=False)])
    assert Node.objects.get(name="b").state == NodeState.NOT_READY and schedulable(timezone.now())["b"] is False
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])
    back = Node.objects.get(name="b")
    assert back.state == NodeState.READY and back.ready_since is not None
    assert schedulable(timezone.now()) == {"a": True, "b": False}
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])  # still Ready: the settling clock keeps running
    assert Node.objects.get(name="b").ready_since == back.ready_since
    assert schedulable(back.ready_since + timedelta(seconds=121)) == {"a": True, "b": True}
