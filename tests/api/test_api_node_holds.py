"""`POST /api/v1/nodes/hold/` and `/release/` refuse an empty or oversized list in their own words."""

from __future__ import annotations

from rest_framework.test import APIClient

from jobs.models import Node


def test_an_empty_or_oversized_node_list_is_refused_in_words_and_holds_nothing(admin_api: APIClient) -> None:
    # DRF's own words read "Ensure this field has at least 1 elements."
    for url, body in (("/api/v1/nodes/hold/", {"reason": "PSU swap"}), ("/api/v1/nodes/release/", {})):
        response = admin_api.post(url, {"nodes": [], **body}, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["nodes"] == ["Name at least one node: nothing was held or released."]
    many = [f"gpu-{i}" for i in range(1001)]
    response = admin_api.post("/api/v1/nodes/hold/", {"nodes": many, "reason": "PSU swap"}, format="json")
    assert response.json()["nodes"] == ["At most 1,000 nodes at once: nothing was held or released."]
    assert not Node.objects.filter(held=True).exists()
