"""Counts in refusals read as English: "1 GPU", "1 node", never "1 GPUs" (jobs.amounts.plural)."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from jobs.amounts import plural
from quotas.models import Quota
from tests.conftest import job_payload


def test_plural_is_singular_for_exactly_one() -> None:
    assert [plural(n, "node") for n in (0, 1, 2)] == ["0 nodes", "1 node", "2 nodes"]
    assert plural(0.25, "GPU") == "0.25 GPUs" and plural(1, "such node") == "1 such node"


def test_a_job_bigger_than_the_cluster_is_refused_in_the_singular_where_it_is_one(api: APIClient, sim: Any) -> None:
    response = api.post("/api/v1/jobs/", job_payload(nodes=17, gpus_per_node=1), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["nodes"] == [
        "The job needs 17 nodes with at least 1 GPU each, but the whole cluster has 16 such nodes (128 GPUs in all)."
    ]
    response = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=1, rdma_per_node=9), format="json")
    assert response.json()["rdma_per_node"] == ["No node has 9 RDMA devices; the most any node has is 8."]


def test_a_quota_refusal_of_one_gpu_says_one_gpu(api: APIClient, user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=0)
    response = api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=1), format="json")
    assert response.status_code == 400, response.content
    assert response.json()["gpus_per_node"][0].startswith("The job needs 1 GPU; your quota (user alice) allows at most 0 at once.")
