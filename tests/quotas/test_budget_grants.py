"""An admin adds node-hours to a budget for the current period only (quotas.BudgetGrant): a team's deadline, or a budget
given back after a failed run, without raising its quota for every period after; on the audit trail as quota.grant."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from audit.models import AuditEntry
from quotas.models import BudgetGrant, Quota
from quotas.selectors import account_usages
from tests.conftest import session_for
from tests.quotas.factories import TeamFactory
from tests.scheduler.test_queue_scenarios import get, post, world  # noqa: F401  (world: the fixture)

GRANT = "/api/v1/quotas/teams/vision/grant/"


def test_a_grant_starts_the_jobs_waiting_for_the_budget_this_period_only(
    world: Any,  # noqa: F811
    user: Any,
    api: APIClient,
    admin_api: APIClient,
) -> None:
    sim = world(16)
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=0.5)
    first = post(api, name="probe", nodes=1, wall_time_seconds=600, simulate={"duration_seconds": 300})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(300)
    assert get(api, first)["state"] == "SUCCEEDED"
    big = post(api, name="finetune", nodes=2, wall_time_seconds=900, simulate={"duration_seconds": 60})["id"]
    sim.cycle()
    assert get(api, big)["pending_reason"]["code"] == "BUDGET"

    response = admin_api.post(GRANT, {"node_hours": 0.25, "reason": "ICLR deadline"}, format="json")
    assert response.status_code == 201, response.content
    quota = response.json()
    assert quota["node_hours_per_period"] == 0.5  # the quota is not changed: next period starts from it
    assert quota["usage"]["node_hours_granted"] == 0.25
    assert quota["usage"]["node_hours_left"] == pytest.approx(0.75 - 301 / 3600)
    assert sim.advance(1).placed == [big]

    (entry,) = AuditEntry.objects.filter(action="quota.grant")
    assert entry.actor_username == "root" and entry.target_repr == "team vision"
    assert entry.changes["budget_this_period"] == [0.5, 0.75] and entry.changes["reason"] == [None, "ICLR deadline"]

    # The next period (April: the harness's clock is in March) has the quota's budget and no grant.
    (april,) = account_usages(teams=[vision], now=datetime(2026, 4, 2, tzinfo=UTC))
    assert (april.budget_this_period, april.node_hours_granted) == (0.5, 0.0)


def test_a_job_beyond_the_quotas_whole_budget_is_taken_once_a_grant_makes_room(user: Any, api: APIClient, admin_api: APIClient) -> None:
    from tests.conftest import job_payload

    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=1.0)
    refused = api.post("/api/v1/jobs/", job_payload(nodes=2, wall_time_seconds=3600), format="json")
    assert refused.status_code == 400 and "could never start" in refused.content.decode()
    assert admin_api.post(GRANT, {"node_hours": 1.5, "reason": "one big run"}, format="json").status_code == 201
    assert api.post("/api/v1/jobs/", job_payload(nodes=2, wall_time_seconds=3600), format="json").status_code == 201


def test_grants_refused(user: Any, admin_user: Any, api: APIClient, admin_api: APIClient) -> None:
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    # Only admins grant.
    assert api.post(GRANT, {"node_hours": 5, "reason": "please"}, format="json").status_code == 403
    # A team without a budget is unlimited: nothing to add to.
    response = admin_api.post(GRANT, {"node_hours": 5, "reason": "deadline"}, format="json")
    assert response.status_code == 400 and "has no node-hour budget" in response.json()["node_hours"][0]
    Quota.objects.create(team=vision, node_hours_per_period=10)
    response = admin_api.post(GRANT, {"node_hours": 0, "reason": "  "}, format="json")
    assert response.status_code == 400 and set(response.json()) == {"node_hours", "reason"}
    # Less than the pages show (0.001): it was taken and listed as "+0.000 node-hours".
    response = admin_api.post(GRANT, {"node_hours": 0.0000001, "reason": "deadline"}, format="json")
    assert response.json() == {"node_hours": ["Add at least 0.001 node-hours, and at most 1,000,000,000."]}
    page = session_for(admin_user).post("/quotas/teams/vision/grant/", {"node_hours": "0.0004", "reason": "deadline"}, follow=True)
    assert "Add at least 0.001 node-hours" in page.content.decode()
    assert not BudgetGrant.objects.exists() and not AuditEntry.objects.filter(action="quota.grant").exists()


def test_the_quota_page_adds_node_hours_and_everyone_reads_them(user: Any, admin_user: Any) -> None:
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=3)
    admin = session_for(admin_user)
    page = admin.get("/quotas/teams/vision/").content.decode()
    assert 'data-testid="budget-grant"' in page and 'data-testid="budget-this-period">3<' in page

    refused = admin.post("/quotas/teams/vision/grant/", {"node_hours": "2", "reason": ""}, follow=True).content.decode()
    assert "Nothing was added: Say why" in refused and not BudgetGrant.objects.exists()
    done = admin.post("/quotas/teams/vision/grant/", {"node_hours": "2", "reason": "CVPR deadline"}, follow=True).content.decode()
    assert "Added 2 node-hours to the budget of team vision for this period: 5.0 node-hours left" in done
    assert "+2 node-hours by root" in done and "CVPR deadline" in done
    assert 'data-testid="budget-this-period">5<' in done
    assert "+2 this period" in admin.get("/quotas/").content.decode()

    usage = session_for(user).get("/usage/").content.decode()
    assert "(a budget of 3 a period, and 2 added for this one)" in usage
    assert "</span> used of 5:" in usage and "5.0 node-hours left" in usage

    # A part of a node-hour reads as typed, 1.5, on every page: it read 1.500 beside the quota's 3 (floatformat's -3).
    admin.post("/quotas/teams/vision/grant/", {"node_hours": "1.5", "reason": "one more run"})
    page = admin.get("/quotas/teams/vision/").content.decode()
    assert 'data-testid="budget-this-period">6.5</span> node-hours: the quota\'s\n    3 and 3.5 added.' in page
    assert "+1.5 node-hours by root" in page
    assert "+3.5 this period" in admin.get("/quotas/").content.decode()
    assert "(a budget of 3 a period, and 3.5 added for this one)" in session_for(user).get("/usage/").content.decode()


def test_a_job_that_fits_only_with_a_grant_says_so_not_that_the_budget_was_lowered(
    world: Any,  # noqa: F811
    user: Any,
    api: APIClient,
    admin_api: APIClient,
) -> None:
    # Taken at submit because node-hours were added to this period, it read "more than its whole budget of 1
    # node-hours a period (lowered since it was submitted): it waits until an admin raises the budget", though it starts
    # once the job running ends.
    sim = world(16)
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=1.0)
    assert admin_api.post(GRANT, {"node_hours": 1.5, "reason": "one big run"}, format="json").status_code == 201
    running = post(api, name="probe", nodes=1, wall_time_seconds=3600, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    big = post(api, name="finetune", nodes=2, wall_time_seconds=3600, simulate={"duration_seconds": 60})["id"]
    sim.cycle()
    reason = get(api, big)["pending_reason"]
    assert reason["code"] == "BUDGET"
    said = "Only the 1.5 node-hours added for this period fit it: it may start as running jobs end, until the renewal ("
    assert said in reason["message"] and len(reason["message"]) < 500 and "…" not in reason["message"]
    assert "lowered since it was submitted" not in reason["message"]
    assert "brings back 1, too few. To be sure it runs, shorten it (muster update" in reason["message"]

    # Lowered under it since: this period's budget, the grant in it, is what it is more than.
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"node_hours_per_period": 0.4}, format="json").status_code == 200
    sim.cycle()
    assert (
        "That is more than its whole budget of 1.9 node-hours this period (0.4 a period, 1.5 added) (lowered since it was submitted)"
    ) in get(api, big)["pending_reason"]["message"]

    # Back as it was: it starts once the job running has ended, as it said.
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"node_hours_per_period": 1.0}, format="json").status_code == 200
    sim.advance(600)
    assert get(api, running)["state"] == "SUCCEEDED"
    sim.advance(1)
    assert get(api, big)["state"] in ("SCHEDULED", "RUNNING")


def test_a_job_the_grant_made_room_for_says_when_too_much_of_this_period_is_used(
    world: Any,  # noqa: F811
    user: Any,
    api: APIClient,
    admin_api: APIClient,
) -> None:
    sim = world(16)
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=1.0)
    assert admin_api.post(GRANT, {"node_hours": 1.5, "reason": "one big run"}, format="json").status_code == 201
    probe = post(api, name="probe", nodes=1, wall_time_seconds=3600, simulate={"duration_seconds": 1800})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(1800)
    assert get(api, probe)["state"] == "SUCCEEDED"
    # 2.5 this period, 0.5 used: a job of 2.0 fits the period's budget (the submit takes it) but not what is left.
    big = post(api, name="finetune", nodes=2, wall_time_seconds=3600)["id"]
    sim.cycle()
    message = get(api, big)["pending_reason"]["message"]
    assert "Only the 1.5 node-hours added for this period fit it, and less is left now; the renewal (" in message
    assert "brings back 1, too few: it waits until an admin adds more or raises the budget" in message
    assert len(message) < 500 and "…" not in message  # whole: a longer one loses its middle
