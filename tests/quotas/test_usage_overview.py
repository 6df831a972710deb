"""Every account's use this budget period in one place, for admins (sreport's cluster AccountUtilizationByUser): the
quota lists of the API, filterable by team, and the Quotas page; each account as its own usage gives it."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from quotas.models import Quota
from tests.accounts.factories import UserFactory
from tests.conftest import session_for
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory, UsageChargeFactory


def test_an_admin_reads_every_accounts_use_and_one_teams_and_others_are_told_where_theirs_is(
    user: Any, admin_user: Any, api: APIClient, admin_api: APIClient
) -> None:
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    UserFactory(username="erin")
    Quota.objects.create(user=user, node_hours_per_period=30)
    UsageChargeFactory(job=JobFactory(owner=user, team=vision, finished=True), node_seconds=5400.0)

    listed = admin_api.get("/api/v1/quotas/users/").json()
    assert [a["name"] for a in listed["results"]] == ["alice", "erin", "root"] and listed["count"] == 3
    mine = api.get("/api/v1/usage/").json()
    (alice,) = [a for a in listed["results"] if a["name"] == "alice"]
    assert alice["usage"] == mine["user"]["usage"] and alice["usage"]["node_hours_left"] == 28.5
    in_vision = admin_api.get("/api/v1/quotas/users/", {"team": "vision"}).json()
    assert [a["name"] for a in in_vision["results"]] == ["alice"]
    teams = admin_api.get("/api/v1/quotas/teams/", {"team": "vision"}).json()["results"]
    assert [t["name"] for t in teams] == ["vision"] and teams[0]["usage"] == mine["teams"][0]["usage"]
    refused = admin_api.get("/api/v1/quotas/users/", {"team": "nosuch"})
    assert refused.status_code == 400 and refused.json() == {"team": ["Unknown team nosuch; the teams are vision."]}
    # An empty ?team= (a form's "any") is no team asked, as on the job list: it was "Unknown team ; the teams are vision."
    for url in ("/api/v1/quotas/users/", "/api/v1/quotas/teams/"):
        assert admin_api.get(url, {"team": ""}).json()["count"] == admin_api.get(url).json()["count"]

    denied = api.get("/api/v1/quotas/users/")
    assert denied.status_code == 403
    assert denied.json()["detail"] == (
        "Only admins list every account's quota and usage; your own and your teams': GET /api/v1/usage/ (muster usage)."
    )

    page = session_for(admin_user).get("/quotas/", {"team": "vision"}).content.decode()
    assert 'data-testid="quota-user-alice"' in page and 'data-testid="quota-user-erin"' not in page
    assert 'data-testid="quota-team-vision"' in page and "28.5 node-hours left" in page
    assert session_for(admin_user).get("/quotas/", {"team": "nosuch"}).status_code == 404
