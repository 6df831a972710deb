"""A node back from NotReady settles before it takes new work: one that flaps would fail gang after gang."""

from __future__ import annotations

from datetime import UTC, timedelta
from typing import Any

from django.test import Client
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework.test import APIClient

from jobs.cluster.base import ClusterNode
from jobs.models import Node, NodeState
from jobs.services import nodes_sync
from scheduler.snapshot import node_views
from telemetry.dashboard.selectors import gpus_free_for_work, node_grid


def schedulable(now: Any) -> dict[str, bool]:
    return {view.name: view.schedulable for view in node_views(now)}


def test_a_node_back_from_not_ready_takes_new_work_only_after_settling(db: None, settings: Any) -> None:
    settings.MUSTER_NODE_SETTLE_SECONDS = 120
    settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS = 60
    start = timezone.now()
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)], now=start)
    assert schedulable(start) == {"a": True, "b": True}, "nodes seen for the first time take work at once"
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8, ready=False)], now=start)
    assert Node.objects.get(name="b").state == NodeState.NOT_READY and schedulable(start)["b"] is False
    back_at = start + timedelta(seconds=61)  # past the grace: its gangs were given up
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)], now=back_at)
    back = Node.objects.get(name="b")
    assert back.state == NodeState.READY and back.ready_since == back_at
    assert schedulable(back_at) == {"a": True, "b": False}
    later = back_at + timedelta(seconds=5)
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)], now=later)  # still Ready: the clock keeps running
    assert Node.objects.get(name="b").ready_since == back.ready_since
    assert schedulable(back_at + timedelta(seconds=121)) == {"a": True, "b": True}


def test_a_node_not_ready_for_less_than_the_grace_takes_new_work_at_once(db: None, settings: Any) -> None:
    """After an API server outage of 90 s every node's lease read stale for a few seconds: all of them settled, and
    nothing started anywhere for two minutes, while their gangs (within the grace) ran on."""
    settings.MUSTER_NODE_SETTLE_SECONDS = 120
    settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS = 60
    start = timezone.now()
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)], now=start)
    nodes_sync(cluster_nodes=[ClusterNode("a", 8, ready=False), ClusterNode("b", 8, ready=False)], now=start)
    soon = start + timedelta(seconds=8)
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)], now=soon)
    assert schedulable(soon) == {"a": True, "b": True}
    assert Node.objects.filter(ready_since__isnull=False).count() == 0


def test_a_node_that_left_the_cluster_and_came_back_settles_too(db: None, settings: Any) -> None:
    """A Node object deleted and registered again (a kubelet restarted, a machine replaced under the same name) took
    gangs at once, as if it had never gone."""
    settings.MUSTER_NODE_SETTLE_SECONDS = 120
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])
    nodes_sync(cluster_nodes=[ClusterNode("a", 8)])
    assert Node.objects.get(name="b").state == NodeState.GONE
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])
    back = Node.objects.get(name="b")
    assert back.state == NodeState.READY and back.ready_since is not None
    assert schedulable(timezone.now()) == {"a": True, "b": False}
    assert schedulable(back.ready_since + timedelta(seconds=121)) == {"a": True, "b": True}


def test_the_snapshot_says_why_each_node_takes_no_new_work(db: None, settings: Any) -> None:
    """What a waiting job's reason names beside each node that takes no new work."""
    settings.MUSTER_NODE_SETTLE_SECONDS = 120
    nodes_sync(cluster_nodes=[ClusterNode(name, 8) for name in "abcdef"])
    nodes_sync(cluster_nodes=[ClusterNode(name, 8) for name in "abcdf"])  # e leaves the cluster
    Node.objects.filter(name="d").update(held=True)
    nodes_sync(
        cluster_nodes=[
            ClusterNode("a", 8, schedulable=False, closed_by="tainted gpu=broken:NoSchedule"),
            ClusterNode("b", 8, schedulable=False),
            ClusterNode("c", 8, ready=False),
            ClusterNode("d", 8),
            ClusterNode("e", 8),
            ClusterNode("f", 8),
        ]
    )
    why = {view.name: view.closed_why for view in node_views(timezone.now())}
    settles = Node.objects.get(name="e").ready_since + timedelta(seconds=120)
    assert why == {
        "a": "tainted gpu=broken:NoSchedule",
        "b": "cordoned",
        "c": "not ready",
        "d": "held by an admin",
        "e": f"settling until {settles.astimezone(UTC):%Y-%m-%d %H:%M} UTC",
        "f": "",
    }
    # Only a node closed for a while opens at a known time, which the queue's estimates count it from.
    opens = {view.name: view.opens_at for view in node_views(timezone.now())}
    assert opens == {"a": None, "b": None, "c": None, "d": None, "e": settles.timestamp(), "f": None}


def test_a_settling_node_says_so_on_the_node_list_the_cluster_page_and_the_dashboard(
    db: None, settings: Any, api: APIClient, client: Client, user: Any
) -> None:
    """It read READY with every GPU free while a waiting job was told no GPU was."""
    settings.MUSTER_NODE_SETTLE_SECONDS = 600
    went = timezone.now() - timedelta(seconds=settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS + 1)
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8, ready=False)], now=went)
    nodes_sync(cluster_nodes=[ClusterNode("a", 8), ClusterNode("b", 8)])
    back = Node.objects.get(name="b")
    shown = {n["name"]: n for n in api.get("/api/v1/nodes/").json()["results"]}
    assert shown["a"]["settling_until"] is None
    settles = parse_datetime(shown["b"]["settling_until"])
    assert settles == back.ready_since + timedelta(seconds=600)
    client.force_login(user)
    page = client.get("/cluster/").content.decode()
    assert page.count('data-testid="node-settling"') == 1 and f"SETTLING until {timezone.localtime(settles):%H:%M}" in page
    assert gpus_free_for_work(node_grid()) == 8  # node a's alone, as the queue's reasons count them
    settings.MUSTER_NODE_SETTLE_SECONDS = 0
    assert api.get("/api/v1/nodes/").json()["results"][1]["settling_until"] is None
    assert gpus_free_for_work(node_grid()) == 16
