"""`?format=`, DRF's own query parameter: a format the endpoint does not have is a 400 naming it, never a 404."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient


def test_a_format_the_endpoint_does_not_have_is_a_400_naming_it(api: APIClient, submit: Any) -> None:
    """`GET /api/v1/jobs/?format=csv` answered 404 "Not found." on an endpoint that exists."""
    job_id = submit()["id"]
    for url in ("/api/v1/jobs/", f"/api/v1/jobs/{job_id}/", "/api/v1/nodes/", "/api/v1/queue/"):
        response = api.get(url, {"format": "csv"})
        assert response.status_code == 400, (url, response.status_code)
        assert response.json() == {"format": ["Unknown format 'csv': this endpoint answers json or api (the browsable HTML API)."]}, url
        assert api.get(url, {"format": "json"}).status_code == 200, url


def test_the_schema_keeps_its_own_formats(db: None) -> None:
    assert APIClient().get("/api/schema/", {"format": "json"}).status_code == 200
    assert APIClient().get("/api/schema/", {"format": "yaml"}).status_code == 200


def test_a_format_the_schema_does_not_have_is_a_400_in_json_naming_json_and_yaml(db: None) -> None:
    """`/api/schema/?format=xml` answered in YAML, with DRF's internals: `format:\n- string: 'Unknown format ...'\n  code: invalid`."""
    for accept in ({}, {"HTTP_ACCEPT": "application/json"}, {"HTTP_ACCEPT": "application/vnd.oai.openapi"}):
        response = APIClient().get("/api/schema/", {"format": "xml"}, **accept)
        assert response.status_code == 400
        assert response["Content-Type"] == "application/json"
        assert response.json() == {"format": ["Unknown format 'xml': this endpoint answers yaml or json."]}
