"""Inputs that used to answer 500 now get a clear 4xx, and a database that is away gets a JSON 503 with a retry hint."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from apikit.json_limits import MAX_JSON_DEPTH, json_depth_error
from jobs.models import Job
from tests.conftest import job_payload, session_for
from tests.live_server import free_port, start_gunicorn

DEEP = ("[" * 1000 + "]" * 1000).encode()


def test_json_depth_is_measured_outside_strings() -> None:
    assert json_depth_error(b'{"a": [[["[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["]]]}') is None
    assert json_depth_error(("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH).encode()) is None
    assert json_depth_error(("[" * (MAX_JSON_DEPTH + 1)).encode()) is not None
    assert json_depth_error(b'{"a": "\\"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}') is None


@pytest.mark.parametrize("path", ["/api/v1/auth/token/", "/api/v1/jobs/", "/api/v1/jobs/1/telemetry/"])
def test_deeply_nested_json_is_a_400_logged_in_or_not(client, path: str) -> None:
    response = client.post(path, DEEP, content_type="application/json")
    assert response.status_code == 400
    assert "nests deeper than" in response.json()["detail"]


def test_deeply_nested_json_is_a_400_for_a_signed_in_submit_and_creates_nothing(api, sim) -> None:
    response = api.post("/api/v1/jobs/", DEEP, content_type="application/json")
    assert response.status_code == 400
    assert not Job.objects.exists()


def test_a_nul_in_the_query_string_is_a_400(admin_api) -> None:
    response = admin_api.get("/api/v1/usage/", {"user": "\x00"})
    assert response.status_code == 400
    assert response.json() == {"detail": "The query string contains a NUL character."}


@pytest.mark.parametrize("query", [{"end": "9999-12-31"}, {"start": "0001-01-01"}, {"start": "2026-01-01", "end": "3000-01-01"}])
def test_report_dates_out_of_range_are_a_400_naming_the_field(admin_api, query) -> None:
    response = admin_api.get("/api/v1/usage/report/", query)
    assert response.status_code == 400
    assert set(response.json()) <= {"start", "end"} and "1970-01-01" in json.dumps(response.json())


@pytest.mark.parametrize("path", ["/api/v1/jobs/abc/", "/api/v1/jobs/1.5/", "/api/v1/no-such-thing/", "/api/v1/jobs/abc/cancel/x/"])
def test_unknown_api_paths_answer_json_404(api, path: str) -> None:
    response = api.get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert "detail" in response.json()


def test_an_unknown_page_still_gets_the_html_page(client, db) -> None:
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_an_unknown_priority_class_names_the_choices(api, sim) -> None:
    response = api.post("/api/v1/jobs/", job_payload(priority_class="urgent"), format="json")
    assert response.status_code == 400
    assert response.json()["priority_class"] == ["Unknown priority class 'urgent'; choose one of production, normal, preemptible."]


def test_the_schema_documents_errors_and_strict_bodies(api) -> None:
    schema = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    submit = schema["paths"]["/api/v1/jobs/"]["post"]["responses"]
    assert {"201", "400", "401", "403", "404", "413", "429", "503"} <= set(submit)
    assert submit["400"]["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/ValidationErrors"
    request = schema["components"]["schemas"]["JobSubmitRequest"]
    assert request["additionalProperties"] is False
    assert request["properties"]["command"]["minItems"] == 1
    assert schema["components"]["schemas"]["PriorityClassEnum"]["enum"] == ["production", "normal", "preemptible"]
    cancel = schema["paths"]["/api/v1/jobs/{id}/cancel/"]["post"]["responses"]
    assert cancel["409"]["content"]["application/json"]["schema"]["$ref"] == "#/components/schemas/ErrorDetail"
    for path in ("/api/v1/jobs/", "/api/v1/jobs/array/"):  # the same Idempotency-Key with another body
        assert schema["paths"][path]["post"]["responses"]["409"]["content"]["application/json"]["schema"]["$ref"].endswith("ErrorDetail")


def test_a_blank_or_formatted_string_is_any_of_the_two_so_an_empty_webhook_validates_once(api) -> None:
    """`NotifyRequest.webhook` was `oneOf` [uri, maxLength 0]: "" matched both for a validator that does not check
    `format`, which then refused every notifications answer with an empty webhook."""
    schemas = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["components"]["schemas"]
    assert not any({"type": "string", "maxLength": 0} in node.get("oneOf", []) for node in _objects(schemas))
    for name in ("Notify", "NotifyRequest"):
        webhook = schemas[name]["properties"]["webhook"]
        assert len(webhook["anyOf"]) == 2
        for value in ("", "https://hooks.example.org/muster"):
            jsonschema.validate(value, webhook)  # no format checker: both branches match "", as many validators see it


def _objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


def test_with_the_database_away_the_api_answers_json_503_and_pages_a_plain_503(tmp_path: Path) -> None:
    """A real server whose PostgreSQL is unreachable (nothing listens on its port)."""
    env = {**os.environ, "DATABASE_URL": f"postgres://muster:muster@127.0.0.1:{free_port()}/muster", "MUSTER_DATA_DIR": str(tmp_path)}
    web, api = start_gunicorn(env, tmp_path / "web.log")
    api.token = "x" * 40  # looking the token up is what needs the database
    try:
        status, body = api.call("GET", "/api/v1/jobs/")
        assert status == 503, body
        status, body = api.call("POST", "/api/v1/jobs/", job_payload())
        assert status == 503 and b"database cannot be reached" in body
        with pytest.raises(urllib.error.HTTPError) as page:
            urllib.request.urlopen(api.base + "/", timeout=30)
        assert page.value.code == 503
        assert page.value.headers["Retry-After"] == "30"
        assert b"briefly unavailable" in page.value.read()
        request = urllib.request.Request(api.base + "/api/v1/queue/", headers={"Authorization": f"Token {api.token}"})
        with pytest.raises(urllib.error.HTTPError) as queue:
            urllib.request.urlopen(request, timeout=30)
        assert queue.value.code == 503 and queue.value.headers["Retry-After"] == "30"
        assert json.loads(queue.value.read())["detail"].startswith("The database cannot be reached")
    finally:
        web.terminate()
        web.wait(20)


def test_the_submit_form_refuses_gpu_runtime_variables_and_creates_nothing(user, sim) -> None:
    form = {
        "name": "peek",
        "image": "busybox",
        "command": "nvidia-smi",
        "env": "NCCL_DEBUG=INFO\nNVIDIA_VISIBLE_DEVICES=all",
        "nodes": "1",
        "gpus_per_node": "1",
        "wall_time_minutes": "10",
        "priority_class": "normal",
        "max_restarts": "0",
    }
    response = session_for(user).post("/jobs/new/", form)
    assert response.status_code == 200
    assert "NVIDIA_VISIBLE_DEVICES cannot be set by a job: these variables steer the GPU runtime" in response.content.decode()
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    ("body", "kind"), [("null", "null"), ("[1, 2]", "a list"), ('"x"', "a string"), ("4", "a number"), ("true", "true")]
)
def test_json_that_is_no_object_is_a_400_saying_the_body_must_be_one_on_every_endpoint(
    api, admin_api, user, submit, body: str, kind: str
) -> None:
    """`null` released a held job (200) while validate, tokens and notifications said "No data provided", naming nothing."""
    job_id = submit(nodes=1, gpus_per_node=1)["id"]
    assert api.post(f"/api/v1/jobs/{job_id}/hold/").status_code == 200
    said = {
        "detail": 'The body must be a JSON object ({"field": value, ...}), not '
        f"{kind}; an action that takes nothing takes no body, or {{}}."
    }
    writes = [
        (api, "post", f"/api/v1/jobs/{job_id}/release/"),
        (api, "post", f"/api/v1/jobs/{job_id}/cancel/"),
        (api, "post", "/api/v1/jobs/"),
        (api, "post", "/api/v1/jobs/validate/"),
        (api, "post", "/api/v1/jobs/estimate/"),
        (api, "post", "/api/v1/tokens/"),
        (api, "put", "/api/v1/notifications/"),
        (admin_api, "patch", "/api/v1/quotas/users/alice/"),
    ]
    for client, method, url in writes:
        response = client.generic(method.upper(), url, body, content_type="application/json")
        assert (response.status_code, response.json()) == (400, said), (method, url)
    assert Job.objects.get(pk=job_id).hold  # still held: nothing was done
    assert Job.objects.count() == 1
    # No body at all is still none, what release takes.
    assert api.post(f"/api/v1/jobs/{job_id}/release/", "", content_type="application/json").status_code == 200


def test_every_operation_documents_406_and_every_body_operation_415(api) -> None:
    """A client generated from the schema met a 415 (curl's -d sends a form; a script forgot its Content-Type) and a 406
    (an Accept header of XML) that no operation listed, so a validating client took them for a broken server."""
    paths = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    operations = [(method, path, op) for path, item in paths.items() for method, op in item.items() if "responses" in op]
    assert [(m, p) for m, p, op in operations if "406" not in op["responses"]] == []
    bodies = [(m, p, op) for m, p, op in operations if m in ("post", "put", "patch")]
    assert bodies and [(m, p) for m, p, op in bodies if "415" not in op["responses"]] == []
    submit = paths["/api/v1/jobs/"]["post"]["responses"]["415"]["content"]["application/json"]["schema"]["$ref"]
    assert submit.endswith("ErrorDetail")
    assert "415" not in paths["/api/v1/jobs/"]["get"]["responses"]  # a read sends no body


@pytest.mark.parametrize(
    ("content_type", "said"),
    [
        ("", "no Content-Type"),
        ("text/plain", "Content-Type 'text/plain'"),
        ("application/x-www-form-urlencoded", "'application/x-www-form-urlencoded'"),
    ],
)
def test_a_body_that_is_not_json_is_a_415_saying_what_to_send(api, content_type: str, said: str) -> None:
    response = api.generic("POST", "/api/v1/jobs/", json.dumps(job_payload()), content_type=content_type)
    assert response.status_code == 415
    detail = response.json()["detail"]
    assert detail.startswith("The body must be sent as application/json;") and said in detail
    assert not Job.objects.exists()


def test_an_accept_header_the_api_cannot_answer_is_a_406_naming_what_it_answers(api) -> None:
    response = api.get("/api/v1/jobs/", HTTP_ACCEPT="application/xml")
    assert response.status_code == 406
    assert response.json() == {
        "detail": "This endpoint answers application/json or text/html; the Accept header asked for 'application/xml'."
    }
    logs = api.get("/api/v1/jobs/1/logs/", HTTP_ACCEPT="image/png")
    assert logs.status_code == 406 and "text/plain" in logs.json()["detail"]


def test_the_schema_documents_retry_after_and_the_submits_headers_that_the_answers_carry(api, sim) -> None:
    """README promised `Location`, `Idempotent-Replayed: true` and `Retry-After`; the schema named none of them, so a
    client generated from it could not follow a new job, tell a replay from a new submit, or know how long to wait."""
    paths = api.get("/api/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    for item in paths.values():
        for op in item.values():
            for code in ("429", "503"):
                if code in op.get("responses", {}):
                    assert op["responses"][code]["headers"]["Retry-After"]["schema"]["type"] == "integer"
    for path in ("/api/v1/jobs/", "/api/v1/jobs/array/"):
        headers = paths[path]["post"]["responses"]["201"]["headers"]
        assert headers["Location"]["required"] is True
        assert headers["Idempotent-Replayed"]["schema"] == {"type": "string", "enum": ["true"]}
    assert "headers" not in paths["/api/v1/tokens/"]["post"]["responses"]["201"]  # no Idempotency-Key there

    first = api.post("/api/v1/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    again = api.post("/api/v1/jobs/", job_payload(), format="json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert first.status_code == again.status_code == 201
    assert first["Location"].endswith(f"/api/v1/jobs/{first.json()['id']}/") and "Idempotent-Replayed" not in first
    assert again["Idempotent-Replayed"] == "true" and again["Location"] == first["Location"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b'{"name":', "The body is not valid JSON: Expecting value at line 1, column 9."),
        (b'{"name": "a",}', "The body is not valid JSON: Expecting property name enclosed in double quotes at line 1, column 14."),
        (b'{"name": "\xff"}', "The body is not UTF-8 text (byte 0xff at offset 10): send JSON in UTF-8."),
    ],
)
def test_a_body_that_is_not_json_says_where_in_muster_words(api, body: bytes, said: str) -> None:
    # DRF's "JSON parse error - Expecting value: line 1 column 9 (char 8)".
    response = api.generic("POST", "/api/v1/jobs/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"detail": said}
    assert not Job.objects.exists()


def test_a_method_an_endpoint_lacks_is_a_405_naming_those_it_takes(api, sim) -> None:
    # DRF's 'Method "PUT" not allowed.' named none: PUT on a job read as "no update", where PATCH is one.
    job = api.post("/api/v1/jobs/", job_payload(), format="json").json()
    response = api.put(f"/api/v1/jobs/{job['id']}/", job_payload(), format="json")
    assert response.status_code == 405 and response["Allow"]
    assert response.json() == {"detail": f"PUT is not taken here; /api/v1/jobs/{job['id']}/ takes GET or PATCH."}
    assert api.get(f"/api/v1/jobs/{job['id']}/cancel/").json()["detail"].endswith("cancel/ takes POST.")
