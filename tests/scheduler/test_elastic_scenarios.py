"""Elastic jobs end to end on the simulated cluster (16 nodes x 8 GPUs) and PostgreSQL: start, grow, shrink, charge."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from muster_client import render
from rest_framework.test import APIClient

from jobs.cluster import PodPhase
from jobs.models import Allocation, Job, JobResize, SimulatedPod
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState
from quotas.models import UsageCharge
from scheduler.cycle import run_cycle
from tests.conftest import SimHarness, client_for, job_payload, session_for
from tests.frontend.forms import submit_form
from tests.scheduler.test_cycle import AlteredPodCluster, CordonedCluster


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


def test_an_elastic_jobs_pods_grown_ones_too_ask_for_every_gpu_of_the_nodes_it_holds_whole(sim: SimHarness, submit: Any) -> None:
    filler = submit(nodes=14, simulate={"duration_seconds": 20})["id"]
    sim.cycle()
    elastic = submit(nodes=None, min_nodes=1, max_nodes=4, gpus_per_node=2, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(2)
    assert list(SimulatedPod.objects.filter(job_id=elastic).values_list("gpus", flat=True)) == [8, 8]
    sim.advance(25)  # the filler ends: it grows onto two more nodes
    assert Job.objects.get(pk=filler).state == JobState.SUCCEEDED and Job.objects.get(pk=elastic).nodes == 4
    assert sorted(SimulatedPod.objects.filter(job_id=elastic).values_list("rank", "gpus")) == [(r, 8) for r in range(4)]
    assert set(Allocation.objects.filter(job_id=elastic, released_at__isnull=True).values_list("gpus", flat=True)) == {8}


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


def test_the_submit_preview_names_the_jobs_a_production_job_would_preempt_and_shrink(
    sim: SimHarness, submit: Any, settings: Any, user: Any, admin_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It said only "preempting 1 job"; an admin about to throw away another team's GPU-hours sees which, and that an
    elastic job is shrunk too (by 6 nodes: with the 4 the stopped job frees, 10 are enough)."""
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 60
    plain = submit(name="plain-4", nodes=4, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    elastic = submit(name="wide", nodes=None, min_nodes=4, max_nodes=12, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(120)  # both running, past the minimum run time
    monkeypatch.setattr("scheduler.estimate.timezone.now", sim.clock)  # the form's estimate is of the simulated now
    html = session_for(admin_user).post("/jobs/new/estimate/", submit_form(nodes="10", priority_class="production")).json()["html"]
    who = user.get_username()
    assert f"preempting job {plain} (plain-4, {who}) and shrinking job {elastic} (wide, {who}) from 12 to 6 nodes." in html
    # The API (and so `muster submit --test-only`) names them alike.
    body = client_for(admin_user).post("/api/v1/jobs/estimate/", job_payload(nodes=10, priority_class="production"), format="json")
    start = body.json()["start"]
    assert (start["preempts"], start["stopped"]) == (1, [{"id": plain, "name": "plain-4", "owner": who}])
    assert start["shrunk"] == [{"id": elastic, "name": "wide", "owner": who, "from_nodes": 12, "to_nodes": 6}]
    told = render.estimate_text(body.json())
    assert f"preempting job {plain} (plain-4, {who}) and shrinking job {elastic} (wide, {who}) from 12 to 6 nodes)." in told


def grown_to_eight(sim: SimHarness, submit: Any) -> Job:
    """An elastic 2..8 job running on 4 nodes that has just grown onto 4 more (their pods created, not yet running)."""
    submit(nodes=12, simulate={"duration_seconds": 20})
    sim.cycle()
    elastic = submit(nodes=None, min_nodes=2, max_nodes=8, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(25)
    job = Job.objects.get(pk=elastic)
    assert (job.state, job.nodes) == (JobState.RUNNING, 8)
    return job


def test_a_rank_it_grew_by_that_never_runs_is_let_go_after_the_launch_timeout_and_it_grows_again_later(
    sim: SimHarness, submit: Any, settings: Any, api: APIClient
) -> None:
    """A grown rank kube-scheduler never binds, for a cause Muster cannot see: the job read "running" while the node
    stayed held and charged for good. Now the rank goes after the launch timeout, the job runs on with the nodes it had,
    and it does not grow onto the same trouble again until the longest launch backoff has passed."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 60
    settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS = 300
    job = grown_to_eight(sim, submit)
    first_four = live_nodes(job.pk)[:4]
    message = "0/18 nodes are available: 1 Insufficient cpu."
    stuck = AlteredPodCluster(sim.cluster, job.pk, 5, phase=PodPhase.PENDING, node_name="", reason="Unschedulable", message=message)
    run_cycle(backend=stuck, now=sim.clock())
    assert Job.objects.get(pk=job.pk).nodes == 8  # may yet be bound: the launch timeout decides
    sim.clock.advance(61)
    run_cycle(backend=stuck, now=sim.clock())
    job.refresh_from_db()
    assert (job.state, job.nodes, job.restarts, job.attempt) == (JobState.RUNNING, 5, 0, 1)
    assert len(live_nodes(job.pk)) == 5 and live_nodes(job.pk)[:4] == first_four
    again = sim.clock() + timedelta(seconds=300)
    why = (
        f"Rank 5 it grew by was not running 60 s after it was started: {message.rstrip('.')}; shrunk back from 8 to 5 nodes. "
        f"It grows again from {again:%Y-%m-%d %H:%M:%S} UTC."
    )
    assert JobResize.objects.filter(job=job).last().reason == why
    assert job.state_reason == why
    assert sorted(SimulatedPod.objects.filter(job_id=job.pk).values_list("rank", flat=True)) == list(range(5))
    assert api.get(f"/api/v1/jobs/{job.pk}/").json()["nodes"] == 5

    sim.advance(60)  # three nodes idle, but it is held back
    assert Job.objects.get(pk=job.pk).nodes == 5
    sim.advance(250)  # the hold is over
    job.refresh_from_db()
    assert (job.state, job.nodes) == (JobState.RUNNING, 8)
    assert JobResize.objects.filter(job=job).last().reason == "Grew onto whole nodes left idle: from 5 to 8 nodes."
    assert job.state_reason == "Grew onto whole nodes left idle: from 5 to 8 nodes."


def test_a_rank_it_grew_by_onto_a_node_cordoned_since_is_let_go_at_once_and_it_grows_elsewhere(sim: SimHarness, submit: Any) -> None:
    """The cycle sees the cordoned node, so no hold: in the same cycle it grows onto idle nodes, not that one."""
    job = grown_to_eight(sim, submit)
    node = Allocation.objects.get(job=job, rank=6, released_at__isnull=True).node.name
    message = "0/18 nodes are available: 1 node(s) were unschedulable."
    unbound = dict(phase=PodPhase.PENDING, node_name="", reason="Unschedulable", message=message)
    run_cycle(backend=CordonedCluster(sim.cluster, job.pk, 6, node, **unbound), now=sim.clock())
    job.refresh_from_db()
    shrunk, grown = JobResize.objects.filter(job=job).order_by("id")[1:]
    why = f"{node} is cordoned, so the pods it grew by cannot all be bound (rank 6: {message.rstrip('.')}); "
    assert (shrunk.from_nodes, shrunk.to_nodes, shrunk.reason) == (8, 6, f"{why}shrunk back from 8 to 6 nodes.")
    assert (grown.from_nodes, grown.to_nodes, job.state, job.restarts, job.launch_not_before) == (6, 8, JobState.RUNNING, 0, None)
    assert node not in live_nodes(job.pk) and len(live_nodes(job.pk)) == 8


def test_a_rank_it_grew_by_whose_image_cannot_be_pulled_is_let_go_and_the_job_runs_on(sim: SimHarness, submit: Any) -> None:
    job = grown_to_eight(sim, submit)
    pulling = AlteredPodCluster(sim.cluster, job.pk, 7, phase=PodPhase.PENDING, reason="ImagePullBackOff", message="Back-off pulling image")
    report = run_cycle(backend=pulling, now=sim.clock())
    job.refresh_from_db()
    assert report.requeued == [] and (job.state, job.nodes, job.launch_failures) == (JobState.RUNNING, 7, 0)
    assert job.state_reason.startswith("Rank 7 it grew by on ")
    assert " could not start: Back-off pulling image; shrunk back from 8 to 7 nodes. It grows again from " in job.state_reason


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"min_nodes": 2}, "max_nodes", "An elastic job gives both min_nodes and max_nodes."),
        ({"min_nodes": 4, "max_nodes": 3}, "max_nodes", "max_nodes (3) must be at least min_nodes (4)."),
        ({"nodes": 3, "min_nodes": 2, "max_nodes": 8}, "nodes", "An elastic job's nodes is its max_nodes (8); leave it out."),
        (
            {"nodes": None, "min_nodes": 17, "max_nodes": 40},
            "min_nodes",
            "The job needs at least 17 nodes with at least 8 GPUs each, but the whole cluster has 16 such nodes (128 GPUs in all).",
        ),
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


def test_a_range_whose_ends_are_equal_is_a_plain_job_of_that_many_nodes_as_dash_n_4_4_is(
    sim: SimHarness, api: APIClient, user: Any
) -> None:
    """min_nodes 4 and max_nodes 4 was refused ("must be more than"), though `muster submit -N 4-4` is 4 nodes, as sbatch."""
    body = api.post("/api/v1/jobs/", job_payload(nodes=None, min_nodes=4, max_nodes=4), format="json").json()
    assert (body["nodes"], body["min_nodes"], body["max_nodes"]) == (4, None, None), body
    assert api.post("/api/v1/jobs/validate/", job_payload(nodes=4, min_nodes=4, max_nodes=4), format="json").status_code == 200
    # The form alike: at least 4 of Nodes 4 is a job on 4 nodes.
    response = session_for(user).post("/jobs/new/", submit_form(nodes="4", min_nodes="4"))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(Job.objects.order_by("pk").values_list("nodes", "min_nodes", "max_nodes")) == [(4, None, None), (4, None, None)]
    sim.cycle()
    assert Job.objects.filter(state=JobState.SCHEDULED, nodes=4).count() == 2  # placed as plain 4-node gangs


CUT = (
    "Asked for 2 to 40 nodes; the cluster has 16 nodes with at least 8 GPUs now, so it may grow to 16 for now, and further "
    "if nodes are added."
)


def test_a_range_beyond_the_cluster_is_taken_as_asked_and_every_answer_says_how_far_it_grows_for_now(
    sim: SimHarness, api: APIClient, user: Any
) -> None:
    """`-N 2-40` on 16 nodes was refused as if the job needed 40 ("it may grow to 40; ask for a max_nodes the cluster
    has"); sbatch takes it when its least fits. It is stored as asked (it grows onto nodes added later), runs on the 16
    there are, and the dry run, the estimate, the submit and the form say so."""
    wide = job_payload(nodes=None, min_nodes=2, max_nodes=40, wall_time_seconds=7200, simulate={"duration_seconds": 600})
    check = api.post("/api/v1/jobs/validate/", wide, format="json")
    assert check.status_code == 200 and check.json() == {"valid": True, "count": 1, "note": CUT}, check.content
    estimate = api.post("/api/v1/jobs/estimate/", wide, format="json").json()
    assert estimate["accepted"] and estimate["note"] == CUT
    assert {"name": "cluster", "status": "ok", "text": f"Fits this cluster. {CUT}"} in estimate["limits"]
    start = estimate["start"]
    assert (start["kind"], start["nodes"], start["min_nodes"], start["max_nodes"]) == ("now", 16, 2, 40)
    body = api.post("/api/v1/jobs/", wide, format="json").json()
    assert (body["nodes"], body["min_nodes"], body["max_nodes"]) == (40, 2, 40), body
    assert body["events"][0]["reason"] == f"Submitted by alice. {CUT}"
    sim.cycle()
    assert len(live_nodes(body["id"])) == 16
    assert Job.objects.get(pk=body["id"]).max_nodes == 40  # what it may grow to once the cluster has more
    # Cut to its least on today's cluster, it stays elastic (it grows when nodes join), unlike -N 16-16.
    least = api.post("/api/v1/jobs/", job_payload(nodes=None, min_nodes=16, max_nodes=40), format="json").json()
    assert (least["nodes"], least["min_nodes"], least["max_nodes"]) == (40, 16, 40), least
    assert least["events"][0]["reason"].endswith(
        "the cluster has 16 nodes with at least 8 GPUs now, so it runs on 16 for now, and grows if nodes are added."
    )
    # The form alike: Nodes 40, at least 2.
    browser = session_for(user)
    response = browser.post("/jobs/new/", submit_form(nodes="40", min_nodes="2", wall_time_minutes="120"))
    assert response.status_code == 302, response.content.decode()[:3000]
    job = Job.objects.latest("pk")
    assert (job.min_nodes, job.max_nodes, job.nodes) == (2, 40, 40)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert f"Job {job.pk} submitted. {CUT}" in page


@pytest.mark.parametrize("least", [2, 16])
def test_a_range_beyond_the_cluster_grows_onto_nodes_added_to_the_cluster_later(
    sim: SimHarness, submit: Any, api: APIClient, least: int
) -> None:
    """`-N 2-40` on 16 nodes was stored as 2-16 (and `-N 16-40` as a plain 16): when a node pool grew or a drained rack
    came back, the job stayed on 16 nodes for good although it asked for up to 40. It grows onto them now, and its
    pods' torchrun keeps the range asked (a rendezvous of 2:16 would leave the nodes it grows onto outside it)."""
    job_id = submit(nodes=None, min_nodes=least, max_nodes=40, wall_time_seconds=7200, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    assert len(live_nodes(job_id)) == 16
    sim.advance(2)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    assert SimulatedPod.objects.get(job_id=job_id, rank=0).env["MUSTER_MAX_NODES"] == "40"
    sim.advance(30)
    assert len(live_nodes(job_id)) == 16 and not JobResize.objects.filter(job_id=job_id).exists()  # no more nodes yet

    sim.cluster.nodes = 20  # the node pool grows by four
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert job.nodes == 20 and len(live_nodes(job_id)) == 20 and (job.min_nodes, job.max_nodes) == (least, 40)
    (resize,) = JobResize.objects.filter(job=job)
    assert resize.reason == "Grew onto whole nodes left idle: from 16 to 20 nodes."
    sim.advance(2)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING  # the grown ranks started; nothing counted as failed
    detail = api.get(f"/api/v1/jobs/{job_id}/").json()
    assert (detail["nodes"], detail["min_nodes"], detail["max_nodes"], len(detail["assigned_nodes"])) == (20, least, 40, 20)


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
    refused = client.post("/jobs/new/", submit_form(nodes="40", min_nodes="17"))
    assert "The job needs at least 17 nodes" in refused.content.decode() and not Job.objects.exists()
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


def test_the_page_of_a_gang_asking_part_of_each_node_says_it_holds_the_nodes_whole(sim: SimHarness, submit: Any, user: Any) -> None:
    """2-4 nodes of 4 GPUs on 8-GPU nodes is charged 32 GPUs; `muster show` said so, the page only "x 4 GPUs"."""
    from tests.conftest import session_for

    client = session_for(user)
    elastic = submit(nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=4, simulate={"duration_seconds": 600})["id"]
    fixed = submit(nodes=2, gpus_per_node=4, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(2)
    page = client.get(f"/jobs/{elastic}/").content.decode()
    assert "2 to 4 nodes (elastic, 4 now) \u00d7 4 GPUs; holds 32 GPUs, its 4 nodes whole, as usage counts them" in page
    page = client.get(f"/jobs/{fixed}/").content.decode()
    assert "2 nodes \u00d7 4 GPUs = 8 GPUs; holds 16 GPUs, its 2 nodes whole, as usage counts them" in page


def test_a_pending_pod_of_a_running_job_that_is_not_elastic_is_left_to_its_operator(sim: SimHarness, submit: Any, settings: Any) -> None:
    """An MPI operator recreating a worker shows a Pending rank under a running job: that is no growth to undo."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 60
    job_id = submit(nodes=2, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    recreated = AlteredPodCluster(sim.cluster, job_id, 1, phase=PodPhase.PENDING, node_name="", reason="", message="")
    sim.clock.advance(120)
    run_cycle(backend=recreated, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.nodes) == (JobState.RUNNING, 2) and not JobResize.objects.filter(job=job).exists()
    assert sorted(SimulatedPod.objects.filter(job_id=job_id).values_list("rank", flat=True)) == [0, 1]


@pytest.mark.usefixtures("classes_open")
def test_the_output_of_ranks_a_shrink_took_away_can_be_read_and_a_rank_it_never_had_is_refused(
    sim: SimHarness, submit: Any, settings: Any, api: APIClient, user: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 60
    elastic = submit(nodes=None, min_nodes=4, max_nodes=16, wall_time_seconds=7200, simulate={"duration_seconds": 900})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(120)
    submit(nodes=6, priority_class="production", simulate={"duration_seconds": 600})
    sim.cycle()  # shrunk from 16 to 10: ranks 10 to 15 kept as they went
    assert Job.objects.get(pk=elastic).nodes == 10
    detail = api.get(f"/api/v1/jobs/{elastic}/").json()
    assert detail["attempts"] == [{"attempt": 1, "ranks": list(range(16))}]  # the live ranks 0 to 9 too
    url = f"/api/v1/jobs/{elastic}/logs/"
    for query in ({"rank": 13}, {"rank": 13, "attempt": 1}):
        kept = api.get(url, query).json()
        assert kept["source"] == "stored" and f"job {elastic} attempt 1 rank 13" in kept["logs"]
    live = api.get(url, {"rank": 9}).json()
    assert live["source"] == "live" and f"job {elastic} attempt 1 rank 9" in live["logs"]
    bad = api.get(url, {"rank": 16})
    assert bad.status_code == 400 and bad.json() == {"rank": ["Attempt 1 of the job had ranks 0 to 15."]}
    html = session_for(user).get(f"/jobs/{elastic}/?rank=13").content.decode()
    assert f"job {elastic} attempt 1 rank 13" in html and 'href="?rank=15&amp;attempt=1#job-logs"' in html


@pytest.mark.usefixtures("classes_open")
def test_a_preempted_elastic_job_asks_for_its_most_again_while_its_history_keeps_what_it_held(
    sim: SimHarness, submit: Any, settings: Any, api: APIClient, user: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    submit(nodes=12, simulate={"duration_seconds": 3600})
    sim.cycle()
    elastic = submit(
        nodes=None, min_nodes=2, max_nodes=8, priority_class="preemptible", wall_time_seconds=7200, simulate={"duration_seconds": 3600}
    )["id"]
    sim.cycle()
    sim.advance(60)
    assert Job.objects.get(pk=elastic).nodes == 4  # all that was free
    urgent = submit(nodes=4, priority_class="production", simulate={"duration_seconds": 3600})["id"]
    assert elastic in sim.cycle().preempted
    detail = api.get(f"/api/v1/jobs/{elastic}/").json()
    assert (detail["state"], detail["nodes"], detail["gpus"], detail["assigned_nodes"]) == ("PENDING", 8, 64, [])
    queued = api.get("/api/v1/queue/").json()["results"]
    assert next(q for q in queued if q["id"] == elastic)["nodes"] == 8
    assert Job.objects.get(pk=urgent).state in (JobState.SCHEDULED, JobState.RUNNING)
    # What it held stays in its history: its attempt's allocations, the ledger, the output kept.
    assert detail["attempts"] == [{"attempt": 1, "ranks": [0, 1, 2, 3]}]
    assert Allocation.objects.filter(job_id=elastic, attempt=1).count() == 4
    charged = sum(UsageCharge.objects.filter(job_id=elastic).values_list("node_seconds", flat=True))
    assert charged == pytest.approx(4 * 60, rel=0.05)
    html = session_for(user).get(f"/jobs/{elastic}/").content.decode()
    assert "sim-node" in html.split('data-testid="attempts"', 1)[1]  # the attempt's nodes


def test_an_elastic_job_that_loses_a_rank_above_its_minimum_runs_on_shrunk_not_requeued(sim: SimHarness, submit: Any) -> None:
    """Rank 3 of 4 deleted by hand requeued all four: a restart from the last checkpoint, wherever nodes were free."""
    submit(nodes=12, simulate={"duration_seconds": 3600})  # leaves four nodes
    sim.cycle()
    job_id = submit(nodes=None, min_nodes=2, max_nodes=4, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job_id).nodes == 4
    kept = dict(SimulatedPod.objects.filter(job_id=job_id, rank__in=[0, 1]).values_list("rank", "pk"))
    SimulatedPod.objects.filter(job_id=job_id, rank=2).delete()
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt, job.restarts) == (JobState.RUNNING, 1, 0)
    shrunk, grown = JobResize.objects.filter(job=job).order_by("pk")
    assert shrunk.reason.startswith(
        "1 of 4 pods (rank 2) was deleted outside Muster (an eviction or by hand) under attempt 1; shrunk from 4 to 2 nodes"
    )
    # Its nodes are free again, so the same cycle grows it back; ranks 0 and 1 ran on throughout.
    assert grown.reason.startswith("Grew onto whole nodes left idle") and job.nodes == 4
    assert dict(SimulatedPod.objects.filter(job_id=job_id, rank__in=[0, 1]).values_list("rank", "pk")) == kept
    # Below its minimum there is no running on: it is requeued as before.
    SimulatedPod.objects.filter(job_id=job_id, rank=1).delete()
    sim.cycle()
    job.refresh_from_db()
    assert job.attempt == 2 and job.restarts == 0


@pytest.mark.usefixtures("classes_open")
def test_a_shrink_the_cluster_refuses_does_not_stop_the_launches_after_it(
    sim: SimHarness, submit: Any, settings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A teardown of shrunk ranks that raised (a role without the verb) stopped the cycle after its decisions were
    committed: the production gang the shrink was for was never launched."""
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 60
    elastic = submit(nodes=None, min_nodes=4, max_nodes=16, wall_time_seconds=7200, simulate={"duration_seconds": 900})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(120)

    def refused(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("pods is forbidden: cannot delete resource")

    monkeypatch.setattr(sim.cluster, "teardown_ranks", refused)
    urgent = submit(nodes=6, priority_class="production", simulate={"duration_seconds": 30})["id"]
    report = sim.cycle()
    assert report.ran and Job.objects.get(pk=elastic).nodes == 10
    assert Job.objects.get(pk=urgent).state in (JobState.SCHEDULED, JobState.RUNNING)
    assert f"resizing job {elastic} on the cluster failed" in caplog.text
