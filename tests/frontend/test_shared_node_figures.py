"""A shared node's free GPUs read the same on the cluster page, the dashboard, `GET /api/v1/nodes/` and `muster nodes`."""

from __future__ import annotations

import io
import re
from typing import Any

import pytest
from django.core.management import call_command
from muster_client import render
from rest_framework.test import APIClient

from jobs.models import Node
from tests.conftest import SimHarness, job_payload, make_sim, session_for


@pytest.fixture
def shared_sim(db: None, settings: Any) -> SimHarness:
    """16 whole nodes of 8 GPUs, a time-sliced node (4 slices per GPU) and a MIG node (7 per GPU)."""
    return make_sim(settings, shared="time-slicing:4:1,mig:1g.10gb:1")


def card(page: str, name: str) -> str:
    return page.split(f"<strong>{name}</strong>", 1)[1].split('<div class="node-card', 1)[0]


def cells(card_html: str) -> list[str]:
    return re.findall(r'<span class="(\w+)"></span>', card_html.split('<div class="gpus" aria-hidden="true">', 1)[1].split("</div>", 1)[0])


def test_a_shared_nodes_free_gpus_and_slices_read_alike_on_the_page_the_api_and_the_cli(
    shared_sim: SimHarness, api: APIClient, user: Any
) -> None:
    # Five quarter-GPU jobs: four fill GPU 0 of the time-sliced node, the fifth opens GPU 1. A whole node is taken too.
    for _ in range(5):
        payload = job_payload(nodes=1, gpus_per_node=1, gpu_fraction=0.25, simulate={"duration_seconds": 3600})
        assert api.post("/api/v1/jobs/", payload, format="json").status_code == 201
    assert api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=8), format="json").status_code == 201
    shared_sim.cycle()
    # Pods Muster did not start hold two 1g.10gb slices of the MIG node.
    Node.objects.filter(name="sim-mig-000").update(slices_foreign=2)

    api_nodes = {n["name"]: n for n in api.get("/api/v1/nodes/?limit=100").json()["results"]}
    ts, mig = api_nodes["sim-time-slicing-000"], api_nodes["sim-mig-000"]
    assert (ts["gpus_free"], ts["slices_free"]) == (6.75, 27)
    assert (mig["gpus_free"], mig["slices_free"]) == (7.714, 54)

    page = session_for(user).get("/cluster/").content.decode()
    # The figure the API gives, with the slices free; the cells still show which GPUs have a slice held.
    ts_card, mig_card = card(page, "sim-time-slicing-000"), card(page, "sim-mig-000")
    assert "6.75 / 8 GPUs free · 27 of 32 slices free" in ts_card and "time-slicing" in ts_card
    assert cells(ts_card) == ["used"] * 2 + ["free"] * 6
    assert "7.714 / 8 GPUs free · 54 of 56 slices free" in mig_card
    assert cells(mig_card) == ["other"] + ["free"] * 7
    # A whole-GPU node reads as before.
    assert "8 / 8 GPUs free" in card(page, "sim-node-015") and "slices" not in card(page, "sim-node-015")

    # The total is whole-GPU work's (a shared node takes none); the shared nodes' free shares are said apart.
    sentence = "18 nodes, 120 of 128 GPUs free for whole-GPU jobs; on 2 shared nodes (GPU slices only), 14.464 of 16 GPUs free."
    assert sentence in page
    assert "A shared node (time-slicing, MPS or MIG) takes GPU slices only." in page
    assert sentence in session_for(user).get("/dashboard/").content.decode()

    # `muster nodes` reads the API and says the same, row by row and in total.
    text = render.nodes_text(list(api_nodes.values()))
    assert text.splitlines()[-1] == sentence.rstrip(".")
    ts_row = next(line for line in text.splitlines() if line.startswith("sim-time-slicing-000"))
    assert "6.75/8" in ts_row and "27 of 32 slices free" in ts_row


def test_a_slice_job_says_the_share_it_holds_where_its_owners_usage_counts_it(shared_sim: SimHarness, api: APIClient, user: Any) -> None:
    """A MIG node's smallest slice is 1/7 of a GPU: a job asking at least 0.1 holds 0.143, which usage counts, while the
    job said `gpus: 1` and `muster jobs` read `1x0.1`."""
    mig = api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=1, gpu_fraction=0.1, gpu_isolation=True), format="json").json()
    whole = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=8), format="json").json()
    assert api.get(f"/api/v1/jobs/{mig['id']}/").json()["gpus_held"] is None  # queued: holds nothing
    shared_sim.cycle()
    listed = {j["id"]: j for j in api.get("/api/v1/jobs/").json()["results"]}
    assert (listed[mig["id"]]["gpus"], listed[mig["id"]]["gpus_held"]) == (1, 0.143)
    assert (listed[whole["id"]]["gpus"], listed[whole["id"]]["gpus_held"]) == (16, 16)
    assert api.get("/api/v1/usage/").json()["user"]["usage"]["gpus_in_use"] == 16.143
    assert render.shape(listed[mig["id"]]) == "1x0.143(0.1)" and render.shape(listed[whole["id"]]) == "2x8"
    assert render.gpus(listed[mig["id"]]).endswith("; holds 0.143 of a GPU now")
    page = session_for(user).get(f"/jobs/{mig['id']}/").content.decode()
    assert "A GPU slice: at least 0.1 of a GPU, isolated (MIG); holds 0.143 of a GPU now" in page
    assert "0.143 GPU (asked 0.1 GPU)" in session_for(user).get("/").content.decode()


def test_the_size_factor_counts_the_128_whole_gpus_the_cluster_page_says_not_the_shared_nodes(
    shared_sim: SimHarness, api: APIClient, user: Any
) -> None:
    """A job asking every whole GPU read a size of 0.889 (128 of 144: the shared nodes' 16 GPUs counted), beside a
    cluster page of 128 GPUs; a gang can never be given a shared node's GPUs. Now it is 1, and 2 nodes 16/128."""
    assert api.post("/api/v1/jobs/", job_payload(nodes=15, gpus_per_node=8), format="json").status_code == 201
    shared_sim.cycle()  # one whole node left: the gangs below wait, with a priority
    every = api.post("/api/v1/jobs/", job_payload(nodes=16, gpus_per_node=8), format="json").json()["id"]
    two = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=8, wall_time_seconds=3600 * 24 * 7), format="json").json()["id"]
    shared_sim.cycle()
    assert "18 nodes, 8 of 128 GPUs free for whole-GPU jobs" in session_for(user).get("/cluster/").content.decode()
    size = {job_id: api.get(f"/api/v1/jobs/{job_id}/").json()["priority"]["factors"]["size"] for job_id in (every, two)}
    assert size[every]["value"] == 1.0 and size[two]["value"] == 16 / 128
    page = session_for(user).get(f"/jobs/{every}/").content.decode()
    assert re.search(r"<tr><td>Size</td><td>1\.000</td><td>100\.0</td></tr>", page)
    # `make run` says the same when it starts: it read "18 nodes, 144 GPUs".
    said = io.StringIO()
    call_command("muster_bootstrap", "--nodes-only", stdout=said)
    assert said.getvalue() == "cluster: simulated, 18 nodes, 128 GPUs for whole-GPU jobs; 16 more on 2 shared nodes (GPU slices only)\n"
