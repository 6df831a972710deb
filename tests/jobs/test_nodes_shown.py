"""A job's nodes as its page and the API show them: one rule (jobs.selectors.job_nodes_shown) for both."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.utils import timezone
from muster_client import render

from jobs.models import Job
from jobs.selectors import job_nodes_shown, job_racks_shown
from quotas.models import UsageCharge
from tests.conftest import client_for, job_payload, session_for
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


@pytest.mark.usefixtures("classes_open")
def test_a_job_cancelled_back_in_the_queue_shows_the_time_it_held_nodes_and_no_nodes(
    api: Any, other_api: Any, sim: Any, settings: Any, django_capture_on_commit_callbacks: Any, monkeypatch: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    sweep = api.post(
        "/api/v1/jobs/", job_payload(nodes=16, priority_class="preemptible", simulate={"duration_seconds": 3600}), format="json"
    ).json()["id"]
    sim.cycle()
    sim.advance(681)  # 11 min 21 s on 16 nodes
    other_api.post("/api/v1/jobs/", job_payload(nodes=4, priority_class="production", simulate={"duration_seconds": 3600}), format="json")
    assert sim.cycle().preempted == [sweep]
    sim.advance(573)  # back in the queue, then cancelled 9 min 33 s later
    monkeypatch.setattr(timezone, "now", sim.clock)  # the cancel on the simulated clock too
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{sweep}/cancel/").status_code == 200
    job = Job.objects.get(pk=sweep)
    charged = sum(UsageCharge.objects.filter(job=job).values_list("node_seconds", flat=True))
    body = api.get(f"/api/v1/jobs/{sweep}/").json()
    assert body["state"] == "CANCELLED" and body["assigned_nodes"] == []
    assert body["run_seconds"] == pytest.approx(charged / 16) and 680 <= body["run_seconds"] <= 683
    assert render.elapsed(body).startswith("11m")  # not 20m54s, until the cancel
    html = session_for(job.owner).get(f"/jobs/{sweep}/").content.decode()
    assert page_nodes(html) == [] and 'data-testid="assigned-racks"' not in html
    run_time = re.search(r'data-testid="run-time">(.*?)</dd>', html, re.S)
    assert run_time and "11 min" in run_time.group(1) and "20 min" not in run_time.group(1)
