"""A 404 under /api/v1/ names what was asked for in one wording, never Django's "No Job matches the given query."."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from tests.jobs.factories import NodeFactory


def test_a_job_and_its_sub_resources_are_not_found_in_the_same_words(api: APIClient, other_api: APIClient, submit: Any) -> None:
    job_id = submit()["id"]
    said = {
        url: other_api.get(url, {"metric": "gpu_util"} if url.endswith("metrics/") else {}).json()["detail"]
        for url in (f"/api/v1/jobs/{job_id}/", f"/api/v1/jobs/{job_id}/metrics/", f"/api/v1/jobs/{job_id}/logs/")
    }
    assert set(said.values()) == {f"No job {job_id} (or none that you may see)."}, said


def test_a_node_that_does_not_exist_is_named(api: APIClient) -> None:
    NodeFactory(name="gpu-01")
    assert api.get("/api/v1/nodes/gpu-01/").status_code == 200
    response = api.get("/api/v1/nodes/nosuch/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No node nosuch."}
