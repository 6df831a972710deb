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


def test_the_node_list_filters_by_state_in_any_case_and_by_held(api: APIClient, admin_api: APIClient) -> None:
    """`?state=ready` was refused with django-filter's "Select a valid choice. ready is not one of the available
    choices.", and a script could not ask which nodes are held, after holding them with this API."""
    Node.objects.create(name="gpu-01", gpus_total=8, state="READY")
    Node.objects.create(name="gpu-02", gpus_total=8, state="CORDONED")
    Node.objects.create(name="gpu-03", gpus_total=8, state="READY")
    assert admin_api.post("/api/v1/nodes/hold/", {"nodes": ["gpu-03"], "reason": "PSU swap"}, format="json").status_code == 200

    def names(query: dict[str, str]) -> list[str]:
        response = api.get("/api/v1/nodes/", query)
        assert response.status_code == 200, response.content
        return sorted(node["name"] for node in response.json()["results"])

    assert names({"state": "ready"}) == names({"state": "READY"}) == ["gpu-01", "gpu-03"]
    assert names({"state": "Cordoned"}) == ["gpu-02"]
    assert names({"held": "true"}) == ["gpu-03"]
    assert names({"held": "false", "state": "ready"}) == ["gpu-01"]
    response = api.get("/api/v1/nodes/", {"state": "drained"})
    assert response.status_code == 400
    assert response.json() == {"state": ["Unknown node state DRAINED; the states are READY, CORDONED, NOT_READY, GONE."]}
    assert api.get("/api/v1/nodes/", {"held": "maybe"}).json() == {"held": ["Enter true or false."]}
