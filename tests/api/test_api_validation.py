"""Bad input to POST /api/v1/jobs/: a clear 400 (or 413) naming the field, and nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from jobs.models import Allocation, Job, JobEvent
from tests.conftest import job_payload, make_sim
from tests.quotas.factories import TeamFactory

JOBS = "/api/v1/jobs/"
MAX_WALL = 14 * 24 * 3600  # settings.MUSTER_MAX_WALL_TIME_SECONDS unless the environment changes it


@pytest.fixture
def nothing_written(sim: Any) -> Iterator[None]:
    """Asserts the request under test wrote no job, event or allocation."""
    before = (Job.objects.count(), JobEvent.objects.count(), Allocation.objects.count())
    yield
    assert (Job.objects.count(), JobEvent.objects.count(), Allocation.objects.count()) == before


def post(client: APIClient, payload: Any) -> Any:
    return client.post(JOBS, payload, format="json")


def messages(errors: Any) -> str:
    """Every message in a (possibly nested) DRF error body, joined."""
    if isinstance(errors, dict):
        return " ".join(messages(v) for v in errors.values())
    if isinstance(errors, list):
        return " ".join(messages(v) for v in errors)
    return str(errors)


def assert_rejected(response: Any, field: str, *words: str) -> Any:
    assert response.status_code == 400, (response.status_code, response.content)
    body = response.json()
    assert field in body, body
    text = messages(body[field])
    assert text.strip(), body
    for word in words:
        assert word.lower() in text.lower(), (word, text)
    return body


# --- fields one by one ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides,field,words",
    [
        ({"nodes": 0}, "nodes", ["greater than or equal to 1"]),
        ({"nodes": -3}, "nodes", ["greater than or equal to 1"]),
        ({"nodes": "two"}, "nodes", ["integer"]),
        ({"nodes": 1.5}, "nodes", ["integer"]),
        ({"gpus_per_node": 0}, "gpus_per_node", ["greater than or equal to 1"]),
        ({"gpus_per_node": 9}, "gpus_per_node", ["9", "largest node has 8"]),
        ({"nodes": 1, "gpus_per_node": 9}, "gpus_per_node", ["largest node has 8"]),
        ({"nodes": 17, "gpus_per_node": 8}, "nodes", ["17 nodes", "whole cluster has 16", "128 GPUs"]),
        ({"nodes": 17, "gpus_per_node": 1}, "nodes", ["17 nodes", "whole cluster has 16"]),
        ({"nodes": 1, "rdma_per_node": 2}, "rdma_per_node", ["spanning nodes"]),
        ({"rdma_per_node": -1}, "rdma_per_node", ["greater than or equal to 0"]),
        ({"rdma_per_node": 9}, "rdma_per_node", ["No node has 9 RDMA devices", "most any node has is 8"]),
        ({"nodes": 9, "rdma_per_node": 8}, "nodes", ["9 nodes", "8 RDMA devices", "whole cluster has 8"]),
        ({"wall_time_seconds": 0}, "wall_time_seconds", ["greater than or equal to 1"]),
        ({"wall_time_seconds": -60}, "wall_time_seconds", ["greater than or equal to 1"]),
        ({"wall_time_seconds": MAX_WALL + 1}, "wall_time_seconds", ["maximum", str(MAX_WALL)]),
        ({"command": []}, "command", ["empty"]),
        ({"command": [""]}, "command", ["empty"]),
        ({"command": ["   ", "train.py"]}, "command", ["empty"]),
        ({"command": "torchrun train.py"}, "command", ["list"]),
        ({"command": {"argv": ["python"]}}, "command", ["list"]),
        ({"command": [["python"]]}, "command", ["string"]),
        ({"command": ["x" * 40_000, "y" * 40_000]}, "command", ["limit"]),
        ({"name": ""}, "name", ["blank"]),
        ({"name": "   "}, "name", []),
        ({"name": "x" * 101}, "name", ["100"]),
        ({"name": "bad\nname"}, "name", ["printable"]),
        # Invisible: a zero-width space reads as a blank name, a bidi override reverses what follows it on every page.
        ({"name": "\u200b"}, "name", ["printable", "invisible"]),
        ({"name": "\u202eevil"}, "name", ["printable"]),
        ({"name": "a\u2066b\u2069"}, "name", ["printable"]),
        ({"env": {"1ABC": "x"}}, "env", ["1ABC", "not a valid variable name"]),
        ({"env": {"A-B": "x"}}, "env", ["A-B", "not a valid variable name"]),
        ({"env": {"": "x"}}, "env", ["not a valid variable name"]),
        ({"env": {"A\n": "x"}}, "env", ["not a valid variable name"]),
        ({"env": {"NAÏVE": "x"}}, "env", ["not a valid variable name"]),
        ({"env": {"MASTER_ADDR": "10.0.0.1"}}, "env", ["MASTER_ADDR", "set by Muster"]),
        ({"env": {"WORLD_SIZE": "4"}}, "env", ["WORLD_SIZE", "set by Muster"]),
        ({"env": {"PET_RDZV_ENDPOINT": "muster-7-1-0.muster-7-1.muster-jobs.svc:29400"}}, "env", ["PET_RDZV_ENDPOINT", "set by Muster"]),
        ({"env": {"MUSTER_X": "1"}}, "env", ["MUSTER_X", "set by Muster"]),
        ({"env": {"NVIDIA_VISIBLE_DEVICES": "all"}}, "env", ["NVIDIA_VISIBLE_DEVICES", "GPU runtime"]),
        ({"env": {"NVIDIA_DRIVER_CAPABILITIES": "all"}}, "env", ["NVIDIA_DRIVER_CAPABILITIES", "GPU runtime"]),
        ({"env": {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}}, "env", ["CUDA_VISIBLE_DEVICES", "GPU runtime"]),
        ({"env": {"LD_PRELOAD": "/tmp/x.so"}}, "env", ["LD_PRELOAD", "dynamic loader"]),
        ({"env": {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}}, "env", ["KUBERNETES_SERVICE_HOST", "Kubernetes client"]),
        ({"env": {"RANK": "0"}}, "env", ["RANK", "rendezvous"]),
        ({"env": {"LOCAL_RANK": "0"}}, "env", ["LOCAL_RANK", "rendezvous"]),
        ({"env": {"OMPI_MCA_btl": "tcp"}}, "env", ["OMPI_MCA_btl", "rendezvous"]),
        ({"env": ["A=1"]}, "env", ["must be an object", "not a list"]),
        ({"env": "A=1"}, "env", ["must be an object", "not the string"]),
        # JSON carries types: a value of the wrong one is refused, not coerced as a form's string would be.
        ({"name": 123}, "name", ["must be a string", "not the number 123"]),
        ({"gpus_per_node": "8"}, "gpus_per_node", ["must be an integer", "not the string '8'"]),
        ({"gpus_per_node": True}, "gpus_per_node", ["must be an integer", "not true"]),
        ({"wall_time_seconds": 3600.5}, "wall_time_seconds", ["must be an integer", "3600.5"]),
        ({"preemptible": "yes"}, "preemptible", ["must be true or false", "not the string 'yes'"]),
        ({"preemptible": 1}, "preemptible", ["must be true or false", "not the number 1"]),
        ({"command": ["python", 3]}, "command", ["must be a string", "not the number 3"]),
        ({"env": {"A": 1}}, "env", ["must be a string", "not the number 1"]),
        ({"env": {"A": {"nested": 1}}}, "env", ["string"]),
        ({"env": {f"V{i}": "x" for i in range(257)}}, "env", ["256"]),
        ({"priority_class": "urgent"}, "priority_class", ["urgent", "production", "normal", "preemptible"]),
        ({"priority_class": ""}, "priority_class", []),
        ({"max_restarts": 11}, "max_restarts", ["10"]),
        ({"max_restarts": -1}, "max_restarts", ["greater than or equal to 0"]),
        ({"team": "nope"}, "team", ["nope", "not a member"]),
        ({"simulate": {"duration_seconds": -1}}, "simulate", ["greater than or equal to 0"]),
        ({"simulate": {"exit_code": 256}}, "simulate", ["255"]),
        ({"simulate": "fast"}, "simulate", ["dictionary"]),
    ],
    ids=lambda v: None if not isinstance(v, dict) else ",".join(f"{k}={str(x)[:20]}" for k, x in v.items()),
)
def test_bad_field_is_rejected(api: APIClient, nothing_written: None, overrides: dict[str, Any], field: str, words: list[str]) -> None:
    assert_rejected(post(api, job_payload(**overrides)), field, *words)


def test_one_message_names_every_refused_variable_of_a_kind_and_nccl_tuning_stays_allowed(api: APIClient, nothing_written: None) -> None:
    env = {"NVIDIA_VISIBLE_DEVICES": "all", "CUDA_VISIBLE_DEVICES": "0", "LD_PRELOAD": "x.so", "NCCL_DEBUG": "INFO"}
    errors = post(api, job_payload(env=env)).json()["env"]
    assert errors == [
        "CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES cannot be set by a job: these variables steer the GPU runtime (docs/security.md).",
        "LD_PRELOAD cannot be set by a job: these variables steer the dynamic loader (docs/security.md).",
    ]


def test_nccl_and_ordinary_variables_are_accepted(api: APIClient, sim: Any) -> None:
    env = {"NCCL_DEBUG": "INFO", "NCCL_IB_HCA": "mlx5", "HF_HOME": "/data/hf", "PYTHONUNBUFFERED": "1"}
    response = post(api, job_payload(env=env))
    assert response.status_code == 201, response.content
    assert response.json()["env"] == env


@pytest.mark.parametrize("field", ["name", "image", "command", "nodes", "gpus_per_node", "wall_time_seconds", "env", "priority_class"])
def test_null_is_rejected(api: APIClient, nothing_written: None, field: str) -> None:
    payload = job_payload()
    payload[field] = None
    assert_rejected(post(api, payload), field, "null")


def test_site_maximum_wall_time_follows_the_setting(api: APIClient, nothing_written: None, settings: Any) -> None:
    settings.MUSTER_MAX_WALL_TIME_SECONDS = 600
    assert_rejected(post(api, job_payload(wall_time_seconds=601)), "wall_time_seconds", "600", "601")


def test_wall_time_at_the_site_maximum_is_accepted(api: APIClient, sim: Any) -> None:
    response = post(api, job_payload(wall_time_seconds=settings.MUSTER_MAX_WALL_TIME_SECONDS))
    assert response.status_code == 201, response.content


@pytest.mark.parametrize("field", ["name", "image", "command", "nodes", "gpus_per_node", "wall_time_seconds"])
def test_required_field_missing(api: APIClient, nothing_written: None, field: str) -> None:
    payload = job_payload()
    del payload[field]
    assert_rejected(post(api, payload), field, "required")


def test_every_bad_field_is_reported_at_once(api: APIClient, nothing_written: None) -> None:
    body = post(api, job_payload(nodes=0, image="Bad Image", command=[], env={"1X": ""})).json()
    assert {"nodes", "image", "command", "env"} <= set(body)


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/array/", "/api/v1/jobs/validate/", "/api/v1/jobs/estimate/"])
def test_a_missing_field_does_not_hide_the_refusals_of_the_others(
    api: APIClient, sim: Any, settings: Any, nothing_written: None, url: str
) -> None:
    """Only "wall_time_seconds: This field is required." was said; the class kept for others and the elastic slice
    were refused one request later."""
    settings.MUSTER_PRIORITY_CLASS_ACCESS = {"production": {"ops"}}
    payload = job_payload(priority_class="production", min_nodes=2, max_nodes=8, gpu_fraction=0.5, array="0-3")
    for field in ("wall_time_seconds", "nodes") + (() if "array" in url else ("array",)):
        del payload[field]
    body = api.post(url, payload, format="json").json()
    assert body["wall_time_seconds"] == ["This field is required."]
    assert body["priority_class"][0].startswith("The production class is kept for admins and jobs of team ops")
    assert body["min_nodes"] == ["A GPU slice is a single-node job; it cannot be elastic."]


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/jobs/validate/", "/api/v1/jobs/estimate/"])
@pytest.mark.parametrize(
    "body",
    [
        # Nodes and the command missing: only they were said ("every mistake at once" dropped every valid field).
        {"name": "a", "image": "busybox", "gpus_per_node": 9, "wall_time_seconds": 60},
        {"name": "a", "image": "Bad Image", "command": ["x"], "gpus_per_node": 9, "wall_time_seconds": 60},
        {"name": "a", "image": "Bad Image", "command": ["x"], "nodes": 0, "gpus_per_node": 9, "wall_time_seconds": 60},
        {"name": "a", "image": "busybox", "command": ["x"], "min_nodes": 4, "max_nodes": 2, "gpus_per_node": 9, "wall_time_seconds": 60},
    ],
    ids=["no-command-no-nodes", "bad-image-no-nodes", "bad-image-nodes-0", "elastic-backwards"],
)
def test_gpus_per_node_beyond_every_node_is_said_whatever_else_is_wrong(
    api: APIClient, sim: Any, nothing_written: None, url: str, body: dict[str, Any]
) -> None:
    errors = api.post(url, body, format="json").json()
    assert errors["gpus_per_node"] == ["No node has 9 GPUs; the largest node has 8."], errors
    assert set(errors) - {"gpus_per_node"}  # and the other mistakes beside it


def test_a_missing_nodes_and_gpus_per_node_are_both_said(api: APIClient, nothing_written: None) -> None:
    body = job_payload(image="Bad Image")
    del body["nodes"], body["gpus_per_node"]
    errors = post(api, body).json()
    assert errors["nodes"] == errors["gpus_per_node"] == ["This field is required."]
    assert "image" in errors


@pytest.mark.parametrize("ask", [{"gpu_fraction": 0.25}, {"gpu_memory_gb": 10}, {"gpu_fraction": 0.25, "nodes": 1}])
def test_a_gpu_slice_needs_neither_nodes_nor_gpus_per_node(api: APIClient, settings: Any, ask: dict[str, Any]) -> None:
    """1 is the only value a slice's nodes and gpus_per_node may take; `muster submit` and the form gave it, the API
    answered "This field is required." for each."""
    make_sim(settings, shared="mps:4:1")
    body = job_payload(name="notebook", **{"nodes": None, "gpus_per_node": None, **ask})
    assert api.post("/api/v1/jobs/validate/", body, format="json").json() == {"valid": True, "count": 1}
    created = post(api, body)
    assert created.status_code == 201, created.content
    job = created.json()
    assert (job["nodes"], job["gpus_per_node"], job["gpus"]) == (1, 1, 1)


@pytest.mark.parametrize(
    "ask,field,said",
    [
        ({"gpus_per_node": 2}, "gpus_per_node", "A GPU slice is a share of one GPU: gpus_per_node must be 1."),
        ({"nodes": 2}, "nodes", "A GPU slice is for a single-node job: ask for 1 node, or for whole GPUs."),
    ],
)
def test_a_gpu_slice_of_more_than_one_gpu_or_node_is_still_refused(
    api: APIClient, settings: Any, ask: dict[str, Any], field: str, said: str
) -> None:
    make_sim(settings, shared="mps:4:1")
    body = job_payload(gpu_fraction=0.25, **{"nodes": None, "gpus_per_node": None, **ask})
    assert post(api, body).json() == {field: [said]}
    assert not Job.objects.exists()


def test_a_wrong_gpu_fraction_is_said_for_itself_not_as_gpus_per_node_missing(api: APIClient, nothing_written: None) -> None:
    errors = post(api, job_payload(nodes=None, gpus_per_node=None, gpu_fraction=1.5)).json()
    assert set(errors) == {"gpu_fraction"}, errors


# --- image references ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        "UPPER/case",
        "Ubuntu",
        "has space",
        "",
        "nvcr.io/x:tag:bad",
        "ubuntu:",
        "ubuntu:täg",
        "ubuntu@sha256:abc",
        "/leading/slash",
        "trailing/",
        "nvcr.io/nvidia/pytorch:24.05-py3\nrm -rf /",
        "a" * 513,
    ],
)
def test_invalid_image_reference_is_rejected(api: APIClient, nothing_written: None, image: str) -> None:
    body = assert_rejected(post(api, job_payload(image=image)), "image")
    if 0 < len(image) <= 512:
        assert "not a valid container image reference" in messages(body["image"])


@pytest.mark.parametrize(
    "image",
    [
        "ubuntu",
        "ubuntu:22.04",
        "library/ubuntu",
        "nvcr.io/nvidia/pytorch:24.05-py3",
        "localhost:5000/a/b@sha256:" + "0123456789abcdef" * 4,
        "registry.example.com:443/team/img:v1.2",
        "ghcr.io/org/sub_group/my-image__x:latest",
        "Registry.Example.com/team/img",
        "localhost/img",
        "myregistry:5000/img:1",
        "[::1]:5000/img",
    ],
)
def test_valid_image_reference_is_accepted(api: APIClient, sim: Any, image: str) -> None:
    response = post(api, job_payload(image=image))
    assert response.status_code == 201, response.content
    assert response.json()["image"] == image
    assert Job.objects.get(pk=response.json()["id"]).image == image


# --- unknown fields ------------------------------------------------------------------------------


def test_unknown_top_level_field_is_rejected(api: APIClient, nothing_written: None) -> None:
    body = assert_rejected(post(api, job_payload(gpu_count=8)), "gpu_count", "unknown field")
    assert set(body) == {"gpu_count"}


def test_an_array_sent_to_the_jobs_endpoint_is_told_where_arrays_go(api: APIClient, nothing_written: None) -> None:
    body = post(api, job_payload(array="0-3")).json()
    assert body == {"array": ["An array is submitted to POST /api/v1/jobs/array/ (muster submit --array), one job per index."]}


def test_unknown_field_inside_simulate_is_rejected(api: APIClient, nothing_written: None) -> None:
    body = assert_rejected(post(api, job_payload(simulate={"duration_seconds": 5, "exitcode": 1})), "simulate")
    assert body["simulate"] == {"exitcode": ["Unknown field."]}


@pytest.mark.parametrize("field", ["state", "owner", "id", "assigned_nodes", "gpus"])
def test_read_only_fields_cannot_be_set(api: APIClient, nothing_written: None, field: str) -> None:
    # Fields of the answer: said to be read-only, not unknown (`gpus`, the job's total, too).
    assert_rejected(post(api, job_payload(**{field: "x"})), field, "read-only")


# --- team ----------------------------------------------------------------------------------------


def test_team_the_user_is_not_in_is_rejected(api: APIClient, other_user: Any, nothing_written: None) -> None:
    TeamFactory(name="vision").members.add(other_user)
    assert_rejected(post(api, job_payload(team="vision")), "team", "vision", "not a member")


def test_single_team_member_submits_for_it_by_default(api: APIClient, user: Any, sim: Any) -> None:
    TeamFactory(name="vision").members.add(user)
    response = post(api, job_payload())
    assert response.status_code == 201, response.content
    assert response.json()["team"] == "vision"


# --- bodies that are not a job -------------------------------------------------------------------


def test_oversized_body_is_refused(api: APIClient, nothing_written: None) -> None:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    payload = job_payload(env={"BIG": "x" * (limit + 1)})
    response = post(api, payload)
    assert response.status_code == 413, response.content
    assert str(limit) in response.json()["detail"]


def test_body_just_under_the_limit_gets_field_errors_not_413(api: APIClient, nothing_written: None) -> None:
    # Large but within DATA_UPLOAD_MAX_MEMORY_SIZE: parsed, then refused by the env size check.
    payload = job_payload(env={"BIG": "x" * (100 * 1024)})
    assert len(json.dumps(payload)) < settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    assert_rejected(post(api, payload), "env")


@pytest.mark.parametrize("body", ["{not json", '{"name": "x",}', "", "\x00\x01"])
def test_malformed_json_is_a_400(api: APIClient, nothing_written: None, body: str) -> None:
    response = api.post(JOBS, body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert response.json()


@pytest.mark.parametrize("body", [[job_payload()], "a job", 42, None])
def test_json_that_is_not_an_object_is_a_400(api: APIClient, nothing_written: None, body: Any) -> None:
    response = api.post(JOBS, json.dumps(body), content_type="application/json")
    assert response.status_code == 400, response.content
    assert "non_field_errors" in response.json() or "detail" in response.json()


def test_form_encoded_body_is_unsupported(api: APIClient, nothing_written: None) -> None:
    response = api.post(JOBS, {"name": "x", "image": "ubuntu"}, format="multipart")
    assert response.status_code == 415


def test_valid_payload_after_rejections_still_works(api: APIClient, sim: Any) -> None:
    assert post(api, job_payload(nodes=0)).status_code == 400
    response = post(api, job_payload())
    assert response.status_code == 201
    assert Job.objects.count() == 1 and JobEvent.objects.count() == 1
