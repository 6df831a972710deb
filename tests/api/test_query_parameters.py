"""Query parameters: one rule for every endpoint, read from the schema, and owners and teams the list cannot have.

The job list ignored `?bogus=1`, and `?stat=RUNNING` (a typo) listed every job; `?owner=nosuch` listed none, which a
script reads as "no jobs". Four of the suite's own tests asked for `?page_size=100`, which DRF never read.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from tests.accounts.factories import UserFactory
from tests.conftest import job_payload
from tests.quotas.factories import TeamFactory


def _operations() -> list[tuple[str, str, list[str]]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    return [
        (method.upper(), path, sorted(p["name"] for p in op.get("parameters", []) if p["in"] == "query"))
        for path, ops in schema["paths"].items()
        for method, op in ops.items()
    ]


OPERATIONS = _operations()


@pytest.mark.parametrize(("method", "path", "documented"), OPERATIONS, ids=[f"{m} {p}" for m, p, _ in OPERATIONS])
def test_every_operation_refuses_a_parameter_it_does_not_document(
    admin_api: APIClient, method: str, path: str, documented: list[str]
) -> None:
    url = re.sub(r"\{[^}]+\}", "1", path) + "?bogus=1&limit_=5"
    response = admin_api.generic(method, url, "{}", content_type="application/json")
    assert response.status_code == 400, (method, path, response.status_code)
    takes = f"takes {', '.join(documented)}" if documented else "takes no query parameters"
    why = [f"Unknown query parameter; {method} {path} {takes}."]
    assert response.json() == {"bogus": why, "limit_": why}


def test_a_typo_in_a_filter_no_longer_lists_every_job(api: APIClient, submit: Any) -> None:
    submit()
    assert api.get("/api/v1/jobs/", {"state": "RUNNING"}).json()["count"] == 0
    refused = api.get("/api/v1/jobs/", {"stat": "RUNNING"})
    assert refused.status_code == 400 and "stat" in refused.json()
    # What every list takes besides its filters: pages and the format.
    assert api.get("/api/v1/jobs/", {"limit": 5, "offset": 0, "format": "json"}).status_code == 200
    assert api.head("/api/v1/jobs/", {"bogus": 1}).status_code == 400


def test_a_page_takes_what_the_api_does_not(client: Any, user: Any) -> None:
    """The rule is the API's: a page's own query (the job list's ?sort=, its live parts) is the page's."""
    client.force_login(user)
    assert client.get("/", {"sort": "-id", "bogus": 1}).status_code == 200


def test_an_owner_the_list_cannot_have_is_refused_naming_who_it_can(api: APIClient, admin_api: APIClient, submit: Any, user: Any) -> None:
    submit()
    mine = api.get("/api/v1/jobs/", {"owner": user.username})
    assert mine.status_code == 200 and mine.json()["count"] == 1
    refused = api.get("/api/v1/jobs/", {"owner": "bob"})
    assert refused.status_code == 400
    assert refused.json() == {"owner": [f"You can list only your own jobs ({user.username}); bob is not you."]}

    assert admin_api.get("/api/v1/jobs/", {"owner": user.username}).json()["count"] == 1
    UserFactory(username="carol")  # a user with no jobs: an empty list, not a refusal
    carol = admin_api.get("/api/v1/jobs/", {"owner": "carol"})
    assert carol.status_code == 200 and carol.json()["count"] == 0
    nosuch = admin_api.get("/api/v1/jobs/", {"owner": "nosuch"})
    assert nosuch.status_code == 400
    assert nosuch.json() == {"owner": [f"Unknown owner nosuch; the owners of jobs are {user.username}."]}


def test_a_team_the_list_cannot_have_is_refused_naming_the_teams(api: APIClient, admin_api: APIClient, user: Any) -> None:
    TeamFactory(name="vision").members.add(user)
    TeamFactory(name="speech")
    assert api.get("/api/v1/jobs/", {"team": "vision"}).status_code == 200
    assert api.get("/api/v1/jobs/", {"team": "speech"}).json() == {"team": ["No team speech of yours; your teams are vision."]}
    assert admin_api.get("/api/v1/jobs/", {"team": "speech"}).status_code == 200
    assert admin_api.get("/api/v1/jobs/", {"team": "nosuch"}).json() == {"team": ["Unknown team nosuch; the teams are speech, vision."]}
    # A name with a % in it is said as sent (django-filter %-formats its messages: this was a 500).
    assert admin_api.get("/api/v1/jobs/", {"team": "a%sb%w"}).json() == {"team": ["Unknown team a%sb%w; the teams are speech, vision."]}


def test_the_audit_lists_job_is_documented_as_the_whole_number_it_reads(admin_api: APIClient) -> None:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    (job,) = [p for p in schema["paths"]["/api/v1/audit/"]["get"]["parameters"] if p["name"] == "job"]
    assert job["schema"] == {"type": "integer"}  # it said number, and job=1.5 is a 400
    assert admin_api.get("/api/v1/audit/", {"job": "1.5"}).status_code == 400


def test_the_submits_site_bounds_are_in_the_schema() -> None:
    from django.conf import settings

    schema = SchemaGenerator().get_schema(request=None, public=True)["components"]["schemas"]["JobSubmitRequest"]["properties"]
    assert schema["max_restarts"]["maximum"] == settings.MUSTER_MAX_RESTARTS
    assert schema["wall_time_seconds"]["maximum"] == settings.MUSTER_MAX_WALL_TIME_SECONDS


def test_every_documented_path_is_under_the_prefix_the_check_reads() -> None:
    """The check skips every other path without building the schema (a page's first query paid 1.2 s for it)."""
    from apikit.query_parameters import API_PREFIX

    assert all(path.startswith(API_PREFIX) for _, path, _ in OPERATIONS)


def test_the_schema_the_check_reads_is_built_as_a_worker_boots_not_by_the_first_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first API request with a query in each gunicorn worker paid 1.2 s to generate the schema."""
    from django.core.handlers.wsgi import WSGIHandler

    import apikit.query_parameters as check

    monkeypatch.setattr(check, "_paths", None)
    WSGIHandler()  # what config/wsgi.py makes as a worker imports it
    assert check._paths is not None and any(path.template == "/api/v1/jobs/" for path in check._paths)


def test_limit_and_offset_are_documented_with_the_least_the_server_takes(api: APIClient) -> None:
    """Both were documented as any integer: a client generated from the schema sent `limit=0`, which is a 400."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    pages = [
        {p["name"]: p for p in op.get("parameters", []) if p["name"] in ("limit", "offset")}
        for ops in schema["paths"].values()
        for op in ops.values()
    ]
    pages = [found for found in pages if found]
    assert len(pages) >= 7  # jobs, nodes, queue, both quotas, tokens, audit
    for found in pages:
        assert found["limit"]["schema"] == {"type": "integer", "minimum": 1}
        assert found["offset"]["schema"] == {"type": "integer", "minimum": 0}
        assert "500" in found["limit"]["description"]
    assert api.get("/api/v1/jobs/", {"limit": 0}).status_code == 400
    assert api.get("/api/v1/jobs/", {"offset": -1}).status_code == 400
    assert api.get("/api/v1/jobs/", {"limit": 1, "offset": 0}).status_code == 200


def test_a_page_past_the_end_is_empty_and_its_previous_link_is_the_last_page(api: APIClient, sim: Any) -> None:
    """`?offset=1000&limit=2` of 5 jobs answered `previous` offset 998, another empty page; the schema said a page past
    the end was a 404, which the API never answered."""
    for n in range(5):
        assert api.post("/api/v1/jobs/", job_payload(name=f"j{n}"), format="json").status_code == 201
    page = api.get("/api/v1/jobs/", {"limit": 2, "offset": 1000}).json()
    assert page["count"] == 5 and page["results"] == [] and page["next"] is None
    last = api.get(page["previous"]).json()
    assert [job["name"] for job in last["results"]] == ["j1", "j0"] and last["next"] is None
    assert api.get("/api/v1/jobs/", {"limit": 10, "offset": 7}).json()["previous"].endswith("/api/v1/jobs/?limit=10")
    assert api.get("/api/v1/jobs/", {"limit": 2, "offset": 2}).json()["previous"].endswith("?limit=2")  # DRF's as before
    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert "past the end" not in str(schema["paths"]["/api/v1/jobs/"]["get"]["responses"]["404"])
