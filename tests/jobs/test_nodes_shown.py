"""A job's nodes as its page and the API show them: one rule (jobs.selectors.job_nodes_shown) for both."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.selectors import job_nodes_shown, job_racks_shown
from tests.conftest import client_for, session_for
from tests.jobs.factories import JobFactory, NodeFactory, hours_ago


def page_nodes(html: str) -> list[str]:
    found = re.search(r'<dd data-testid="assigned-nodes">(.*?)</dd>', html, re.S)
    assert found, "no Nodes on the job page"
    return re.findall(r'<span class="node">rank \d+: ([^<]+)</span>', found.group(1))


@pytest.mark.parametrize(
    ("traits", "shown"),
    [
        ({"running": True}, ["gpu-a", "gpu-b"]),
        ({"scheduled": True}, ["gpu-a", "gpu-b"]),
        ({"finished": True}, ["gpu-a", "gpu-b"]),
        # Back in the queue after a run (requeued, preempted): the last attempt's nodes are not its own any more.
        ({"attempt": 1, "held__released_at": hours_ago(1)}, []),
    ],
    ids=["running", "scheduled", "ended", "back-in-the-queue"],
)
def test_the_page_and_the_api_show_the_same_nodes(db: None, traits: dict[str, Any], shown: list[str]) -> None:
    nodes = [NodeFactory(name="gpu-a", rack="r1"), NodeFactory(name="gpu-b", rack="r2")]
    job = JobFactory(nodes=2, held=nodes, **traits)
    assert job_nodes_shown(job) == shown
    assert job_racks_shown(job) == ([("r1", 1), ("r2", 1)] if shown else [])

    assert client_for(job.owner).get(f"/api/v1/jobs/{job.pk}/").json()["assigned_nodes"] == shown
    html = session_for(job.owner).get(f"/jobs/{job.pk}/").content.decode()
    assert page_nodes(html) == shown
    assert ('data-testid="assigned-racks"' in html) == bool(shown)
    if not shown:
        assert "none now: back in the queue" in html
