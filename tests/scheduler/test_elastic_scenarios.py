"""Elastic jobs end to end on the simulated cluster (16 nodes x 8 GPUs) and PostgreSQL: start, grow, shrink, charge."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.models import Allocation, Job, JobResize, SimulatedPod
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState
from quotas.models import UsageCharge
from tests.conftest import SimHarness, job_payload


def live_nodes(job_id: int) -> list[str]:
    return list(Allocation.objects.filter(job_id=job_id, released_at__isnull=True).order_by("rank").values_list("node__name", flat=True))


def test_an_elastic_job_starts_on_what_is_free_then_grows_when_nodes_free_up(sim: SimHarness, submit: Any, api: APIClient) -> None:
    filler = submit(nodes=12, simulate={"duration_seconds": 20})["id"]
    sim.cycle()
    elastic = submit(nodes=None, min_nodes=2, max_nodes=8, wall_time_seconds=7200, simulate={"duration_seconds": 600})
    assert (elastic["nodes"], elastic["min_nodes"], elastic["max_nodes"]) == (8, 2, 8)
    sim.cycle()
    job = Job.objects.get(pk=elastic["id"])
    assert job.state == JobState.SCHEDULED and job.nodes == 4 and len(live_nodes(job.pk)) == 4
    pod = SimulatedPod.objects.get(job_id=job.pk, rank=0)
    assert (pod.env["MUSTER_MIN_NODES"], pod.env["MUSTER_MAX_NODES"]) == ("2", "8")
    sim.advance(2)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING

    sim.advance(25)  # the filler ends; its nodes stay idle after the walk: the elastic job grows onto four of them
    assert Job.objects.get(pk=filler).state == JobState.SUCCEEDED
    job.refresh_from_db()
    assert job.nodes == 8 and len(live_nodes(job.pk)) == 8
    (resize,) = JobResize.objects.filter(job=job)
    assert (resize.from_nodes, resize.to_nodes, len(resize.added), resize.removed) == (4, 8, 4, [])
    assert resize.reason == "Grew onto whole nodes left idle: from 4 to 8 nodes."
    assert sorted(SimulatedPod.objects.filter(job_id=job.pk).values_list("rank", flat=True)) == list(range(8))
    sim.advance(2)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING  # the grown ranks started; nothing counted as failed
    detail = api.get(f"/api/v1/jobs/{job.pk}/").json()
    assert detail["nodes"] == 8 and detail["resizes"][0]["to_nodes"] == 8 and len(detail["assigned_nodes"]) == 8

    sim.advance(700)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED
    # Charged for what it held, when: 4 nodes from its placement, 8 from the growth.
    grown_at = resize.at
    expected = 4 * (grown_at - job.scheduled_at).total_seconds() + 8 * (job.finished_at - grown_at).total_seconds()
    node_seconds = sum(UsageCharge.objects.filter(job=job).values_list("node_seconds", flat=True))
    assert node_seconds == pytest.approx(expected)


@pytest.mark.usefixtures("classes_open")
def test_an_elastic_job_shrinks_for_a_production_gang_instead_of_being_preempted(
    sim: SimHarness, submit: Any, settings: Any, api: APIClient
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 60
    elastic = submit(nodes=None, min_nodes=4, max_nodes=16, wall_time_seconds=7200, simulate={"duration_seconds": 900})["id"]
    sim.cycle()
    sim.advance(2)  # running
    sim.advance(120)  # past the minimum run time
    assert Job.objects.get(pk=elastic).nodes == 16
    urgent = submit(nodes=6, priority_class="production", simulate={"duration_seconds": 30})["id"]
    sim.cycle()
    job = Job.objects.get(pk=elastic)
    assert job.state == JobState.RUNNING and job.nodes == 10
    (resize,) = JobResize.objects.filter(job=job)
    assert resize.reason == f"Shrunk for job {urgent}, which has priority: from 16 to 10 nodes."
    # Its last six ranks went; rank 0 (the rendezvous host) stayed.
    assert sorted(SimulatedPod.objects.filter(job_id=elastic).values_list("rank", flat=True)) == list(range(10))
    assert set(job_assigned_nodes(Job.objects.get(pk=urgent))) == set(resize.removed)
    assert not Job.objects.get(pk=elastic).events.filter(to_state=JobState.PREEMPTED).exists()
    sim.advance(2)
    sim.advance(40)  # the gang ends; the elastic job grows back onto its nodes
    job.refresh_from_db()
    assert job.nodes == 16 and job.state == JobState.RUNNING
    assert JobResize.objects.filter(job=job).count() == 2


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"min_nodes": 2}, "max_nodes", "An elastic job gives both min_nodes and max_nodes."),
        ({"min_nodes": 4, "max_nodes": 4}, "max_nodes", "max_nodes (4) must be more than min_nodes (4)."),
        ({"nodes": 3, "min_nodes": 2, "max_nodes": 8}, "nodes", "An elastic job's nodes is its max_nodes (8); leave it out."),
        ({"nodes": None, "min_nodes": 2, "max_nodes": 40}, "nodes", "it may grow to 40; ask for a max_nodes the cluster has"),
        ({"nodes": None}, "nodes", "This field is required."),
    ],
)
def test_bad_elastic_asks_are_refused_and_nothing_is_written(
    sim: SimHarness, api: APIClient, overrides: dict[str, Any], field: str, message: str
) -> None:
    response = api.post("/api/v1/jobs/", job_payload(**overrides), format="json")
    assert response.status_code == 400, response.content
    assert message in str(response.json()), response.json()
    assert not Job.objects.exists()


def test_an_elastic_gpu_slice_is_refused(settings: Any, db: None, api: APIClient) -> None:
    from tests.conftest import make_sim

    make_sim(settings, shared="time-slicing:4:1")
    payload = job_payload(nodes=None, min_nodes=1, max_nodes=2, gpus_per_node=1, gpu_fraction=0.25)
    response = api.post("/api/v1/jobs/", payload, format="json")
    assert response.status_code == 400
    assert "it cannot be elastic" in str(response.json())


def test_the_submit_form_makes_an_elastic_job_and_its_page_shows_the_range_and_resizes(sim: SimHarness, submit: Any, user: Any) -> None:
    from tests.conftest import session_for
    from tests.frontend.forms import submit_form

    client = session_for(user)
    refused = client.post("/jobs/new/", submit_form(nodes="40", min_nodes="2"))
    assert "it may grow to 40" in refused.content.decode() and not Job.objects.exists()
    response = client.post("/jobs/new/", submit_form(nodes="8", min_nodes="2", wall_time_minutes="120"))
    assert response.status_code == 302, response.content.decode()[:3000]
    job = Job.objects.get()
    assert (job.min_nodes, job.max_nodes, job.nodes) == (2, 8, 8)
    filler = submit(nodes=12, simulate={"duration_seconds": 20})["id"]
    Job.objects.filter(pk=filler).update(submitted_at=job.submitted_at.replace(year=2000))  # first in line
    sim.cycle()
    sim.advance(2)
    sim.advance(25)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "2 to 8 nodes (elastic, 8 now) \u00d7 8 GPUs" in page
    assert "4 → 8" in page and "Grew onto whole nodes left idle: from 4 to 8 nodes." in page
