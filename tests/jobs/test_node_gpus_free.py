"""A node that takes no new work (cordoned, tainted, NotReady, held) has no GPUs free: the API, the cluster page and
`muster nodes` say its idle ones apart, as their totals already did."""

from __future__ import annotations

from typing import Any

import pytest
from muster_client import render
from rest_framework.test import APIClient

from jobs.models import NodeState
from tests.conftest import session_for
from tests.jobs.factories import NodeFactory

pytestmark = pytest.mark.django_db


def card(page: str, name: str) -> str:
    return page.split(f"<strong>{name}</strong>", 1)[1].split('<div class="node-card', 1)[0]


def test_a_node_that_takes_no_work_reads_no_gpus_free_and_its_idle_ones(api: APIClient, user: Any) -> None:
    """`muster nodes` read "gpu-node-00 rack-a CORDONED 8/8" over "10 nodes, 0 of 64 GPUs free for whole-GPU jobs"."""
    NodeFactory(name="open")
    NodeFactory(name="cordoned", state=NodeState.CORDONED, closed_by="cordoned")
    NodeFactory(name="tainted", state=NodeState.CORDONED, closed_by="tainted maintenance=true:NoExecute")
    NodeFactory(name="not-ready", state=NodeState.NOT_READY)
    NodeFactory(name="held", held=True, held_reason="disk check")

    nodes = api.get("/api/v1/nodes/").json()["results"]
    assert {n["name"]: (n["gpus_free"], n["gpus_idle"]) for n in nodes} == {
        "open": (8, 8),
        "cordoned": (0, 8),
        "tainted": (0, 8),
        "not-ready": (0, 8),
        "held": (0, 8),
    }

    page = session_for(user).get("/cluster/").content.decode()
    assert "8 / 8 GPUs free" in card(page, "open") and "idle" not in card(page, "open")
    for name in ("cordoned", "tainted", "not-ready", "held"):
        assert "0 / 8 GPUs free <span" in card(page, name) and "(8 idle)" in card(page, name), name
    assert "5 nodes, 8 of 40 GPUs free." in page

    text = render.nodes_text(nodes).splitlines()
    rows = {line.split()[0]: line for line in text[1:-1]}
    assert rows["open"].split()[2:] == ["READY", "8/8"]
    for name in ("cordoned", "tainted", "not-ready", "held"):
        assert "0/8 (8 idle)" in rows[name], rows[name]
    assert text[-1].startswith("5 nodes, 8 of 40 GPUs free")
