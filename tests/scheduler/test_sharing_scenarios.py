"""GPU slices end to end on the simulated cluster: submit, placement, pods, the ledger, quotas, refusals."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.models import Allocation, Job, SimulatedPod
from jobs.states import JobState
from quotas.models import Quota, UsageCharge
from scheduler.snapshot import slices_used
from tests.conftest import SimHarness, job_payload, make_sim

POOLS = "time-slicing:4:1,mps:2:1,mig:1g.10gb:1"


@pytest.fixture
def shared_sim(db: None, settings: Any) -> SimHarness:
    """The usual 16 whole nodes, plus one node of each sharing mode (8 GPUs each)."""
    return make_sim(settings, shared=POOLS)


def slice_job(api: APIClient, **overrides: Any) -> Any:
    payload = job_payload(nodes=1, gpus_per_node=1, command=["python", "eval.py"], **overrides)
    return api.post("/api/v1/jobs/", payload, format="json")


def test_nodes_report_their_sharing_and_free_slices(shared_sim: SimHarness, api: APIClient) -> None:
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/?limit=100").json()["results"]}
    ts, mps, mig = nodes["sim-time-slicing-000"], nodes["sim-mps-000"], nodes["sim-mig-000"]
    assert (ts["sharing"], ts["slices_per_gpu"], ts["slice_gpus"], ts["slice_memory_gb"], ts["slices_free"]) == (
        "time-slicing",
        4,
        0.25,
        0,
        32,
    )
    assert (mps["slice_gpus"], mps["slice_memory_gb"]) == (0.5, 40)
    assert (mig["sharing"], mig["slices_per_gpu"], mig["slice_memory_gb"]) == ("mig", 7, 10)
    assert nodes["sim-node-000"]["sharing"] == "" and nodes["sim-node-000"]["slices_free"] == 0


def test_quarter_gpu_jobs_pack_onto_one_gpu_run_to_the_end_and_are_charged_a_quarter(shared_sim: SimHarness, api: APIClient) -> None:
    ids = []
    for _ in range(5):
        response = slice_job(api, gpu_fraction=0.25, wall_time_seconds=7200, simulate={"duration_seconds": 3600})
        assert response.status_code == 201, response.content
        assert response.json()["gpu_fraction"] == 0.25
        ids.append(response.json()["id"])
    shared_sim.cycle()
    allocations = {a.job_id: a for a in Allocation.objects.filter(job_id__in=ids).select_related("node")}
    assert {a.node.name for a in allocations.values()} == {"sim-time-slicing-000"}
    assert all(a.gpus == 0.25 for a in allocations.values())
    # Four slices fill GPU 0 before GPU 1 is opened.
    assert sorted(a.gpu_slot for a in allocations.values()) == [0, 0, 0, 0, 1]
    pod = SimulatedPod.objects.get(job_id=ids[0])
    assert (pod.env["MUSTER_GPU_SHARING"], pod.env["MUSTER_GPU_SHARE"]) == ("time-slicing", "0.25")
    api_nodes = {n["name"]: n for n in api.get("/api/v1/nodes/?limit=100").json()["results"]}
    assert api_nodes["sim-time-slicing-000"]["slices_free"] == 27
    assert api_nodes["sim-time-slicing-000"]["gpus_free"] == 6.75

    shared_sim.advance(2)
    shared_sim.advance(3600)
    job = Job.objects.get(pk=ids[0])
    assert job.state == JobState.SUCCEEDED
    gpu_seconds = sum(UsageCharge.objects.filter(job=job).values_list("gpu_seconds", flat=True))
    node_seconds = sum(UsageCharge.objects.filter(job=job).values_list("node_seconds", flat=True))
    # Held from placement to the end it was noticed: 3602 s at a quarter of a GPU, a quarter GPU of an 8-GPU node.
    held = (job.finished_at - job.scheduled_at).total_seconds()
    assert gpu_seconds == pytest.approx(0.25 * held)
    assert node_seconds == pytest.approx(0.25 / 8 * held)


def test_memory_and_isolation_asks_go_to_the_modes_that_guarantee_them(shared_sim: SimHarness, api: APIClient) -> None:
    memory = slice_job(api, gpu_memory_gb=20).json()["id"]
    isolated = slice_job(api, gpu_fraction=0.1, gpu_isolation=True).json()["id"]
    shared_sim.cycle()
    on = {a.job_id: a.node.name for a in Allocation.objects.select_related("node")}
    assert on[memory] == "sim-mps-000"
    assert on[isolated] == "sim-mig-000"


def test_whole_gpu_jobs_never_take_a_shared_node(shared_sim: SimHarness, submit: Any) -> None:
    ids = [submit(nodes=1, gpus_per_node=8)["id"] for _ in range(17)]
    shared_sim.cycle()
    placed = Allocation.objects.filter(job_id__in=ids).select_related("node")
    assert placed.count() == 16
    assert not any(a.node.sharing for a in placed)
    waiting = Job.objects.get(pk=ids[-1])
    assert waiting.state == JobState.PENDING


def test_a_quota_counts_slices_exactly(shared_sim: SimHarness, api: APIClient, user: Any) -> None:
    Quota.objects.create(user=user, max_gpus=1)
    ids = [slice_job(api, gpu_fraction=0.25).json()["id"] for _ in range(5)]
    shared_sim.cycle()
    states = [Job.objects.get(pk=i).state for i in ids]
    assert states.count(JobState.SCHEDULED) == 4
    last = Job.objects.get(pk=ids[-1])
    assert last.pending_reason_code == "QUOTA_GPUS"
    assert "1 of 1 GPUs of the quota of user" in last.pending_reason and "this job needs 0.25" in last.pending_reason


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"nodes": 2, "gpu_fraction": 0.5}, "nodes", "A GPU slice is for a single-node job"),
        ({"gpus_per_node": 2, "gpu_fraction": 0.5}, "gpus_per_node", "gpus_per_node must be 1"),
        ({"gpu_fraction": 1.0}, "gpu_fraction", "less than or equal to 0.99"),
        ({"gpu_fraction": 0}, "gpu_fraction", "greater than or equal to 0.01"),
        ({"gpu_fraction": 0.5, "gpu_isolation": True}, "gpu_fraction", "No node offers a slice of at least 0.5 GPU, isolated (MIG)."),
        ({"gpu_memory_gb": 80}, "gpu_memory_gb", "No node offers a GPU slice with at least 80 GB of GPU memory."),
    ],
)
def test_bad_slice_asks_are_refused_with_the_reason_and_nothing_is_written(
    shared_sim: SimHarness, api: APIClient, overrides: dict[str, Any], field: str, message: str
) -> None:
    payload = {"nodes": 1, "gpus_per_node": 1, **overrides}
    response = api.post("/api/v1/jobs/", job_payload(**payload), format="json")
    assert response.status_code == 400, response.content
    errors = response.json()["fields"] if "fields" in response.json() else response.json()
    assert message in str(errors.get(field, errors)), errors
    assert not Job.objects.exists()


def test_without_shared_nodes_a_slice_is_refused_saying_to_ask_for_whole_gpus(sim: SimHarness, api: APIClient) -> None:
    response = slice_job(api, gpu_fraction=0.5)
    assert response.status_code == 400
    assert "No node here shares its GPUs: ask for whole GPUs." in str(response.json())


def test_the_submit_form_offers_a_gpu_slice_only_where_gpus_are_shared_and_submits_one(settings: Any, user: Any, db: None) -> None:
    from tests.conftest import session_for
    from tests.frontend.forms import submit_form

    client = session_for(user)
    make_sim(settings)
    assert 'name="gpu_fraction"' not in client.get("/jobs/new/").content.decode()  # nothing shared: no field
    make_sim(settings, shared=POOLS)
    page = client.get("/jobs/new/").content.decode()
    assert 'name="gpu_fraction"' in page and "time-slicing slices of 0.25 GPU (no memory guarantee) on 1 node" in page
    # Two GPUs and a share: the API's refusal, beside its field, and nothing written.
    refused = client.post("/jobs/new/", submit_form(nodes="1", gpus_per_node="2", gpu_fraction="0.5"))
    assert "gpus_per_node must be 1" in refused.content.decode() and not Job.objects.exists()
    response = client.post("/jobs/new/", submit_form(nodes="1", gpus_per_node="1", gpu_fraction="0.5", gpu_isolation=""))
    assert response.status_code == 302, response.content.decode()[:3000]
    job = Job.objects.get()
    assert (job.gpu_fraction, job.gpu_isolation, job.shares_gpu) == (0.5, False, True)


def test_a_slice_jobs_page_says_what_it_holds_and_whose_activity_its_charts_show(shared_sim: SimHarness, api: APIClient, user: Any) -> None:
    from tests.conftest import session_for

    time_sliced = slice_job(api, gpu_fraction=0.25).json()["id"]
    isolated = slice_job(api, gpu_fraction=0.1, gpu_isolation=True).json()["id"]
    shared_sim.cycle()
    shared_sim.advance(2)
    client = session_for(user)
    page = client.get(f"/jobs/{time_sliced}/").content.decode()
    assert "A GPU slice: at least 0.25 of a GPU" in page
    assert "This job holds a 0.25 time-slicing share of GPU 0 of sim-time-slicing-000" in page
    assert "Its charts show that whole GPU, shared with other jobs" in page
    mig = client.get(f"/jobs/{isolated}/").content.decode()
    assert "A GPU slice: at least 0.1 of a GPU, isolated (MIG)" in mig
    assert "This job holds a MIG slice (0.143 of GPU 0 of sim-mig-000): its charts are its own instance&#x27;s." in mig
    assert "0.25 GPU" in client.get("/").content.decode()
    # An idle flag charges each its slice as held, not a whole GPU (telemetry.efficiency).
    from telemetry.selectors import slice_held

    assert slice_held(Job.objects.get(pk=time_sliced)) == 0.25
    assert round(slice_held(Job.objects.get(pk=isolated)) or 0, 3) == 0.143


def test_slices_other_pods_hold_fill_the_fullest_gpus_first_and_never_overflow() -> None:
    # Muster's own slices stay where its allocations put them; the 5 others fill GPU 1 (the fullest), then GPU 0.
    assert slices_used(Counter({1: 2}), 3, 4, 5) == (3, 4, 0)
    assert slices_used(Counter(), 2, 4, 20) == (4, 4)
    assert slices_used(Counter(), 2, 4, 0) == ()
