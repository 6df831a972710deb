"""An admin takes back node-hours added to this period by mistake (500 for 50): the grant stays listed, revoked, and
every budget stops counting it at once; on the audit trail as quota.revoke."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rest_framework.test import APIClient

from audit.models import AuditEntry
from quotas.models import BudgetGrant, Quota
from tests.conftest import job_payload, session_for
from tests.quotas.factories import TeamFactory
from tests.scheduler.test_queue_scenarios import get, post, world  # noqa: F401  (world: the fixture)

QUOTA = "/api/v1/quotas/teams/vision/"


def revoke_url(grant_id: int, account: str = "teams/vision") -> str:
    return f"/api/v1/quotas/{account}/grants/{grant_id}/revoke/"


def test_a_mistaken_grant_is_revoked_and_the_submit_check_and_the_api_count_it_at_once(
    user: Any, other_user: Any, api: APIClient, admin_api: APIClient
) -> None:
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=1.0)
    assert admin_api.post(f"{QUOTA}grant/", {"node_hours": 500, "reason": "one big run"}, format="json").status_code == 201
    big = job_payload(nodes=2, wall_time_seconds=3600, team="vision")
    assert api.post("/api/v1/jobs/", big, format="json").status_code == 201
    (grant,) = admin_api.get(f"{QUOTA}grants/").json()
    assert (grant["node_hours"], grant["granted_by"], grant["reason"], grant["revoked"]) == (500, "root", "one big run", False)

    # Only admins revoke; a reason is required; a grant of another account is not found.
    assert api.post(revoke_url(grant["id"]), {"reason": "mine"}, format="json").status_code == 403
    response = admin_api.post(revoke_url(grant["id"]), {"reason": " "}, format="json")
    assert response.status_code == 400 and "Say why it is revoked" in response.json()["reason"][0]
    assert admin_api.post(revoke_url(grant["id"], f"users/{other_user.username}"), {"reason": "x"}, format="json").status_code == 404

    response = admin_api.post(revoke_url(grant["id"]), {"reason": "typed 500 for 50"}, format="json")
    assert response.status_code == 200, response.content
    quota = response.json()
    assert quota["usage"]["node_hours_granted"] == 0 and quota["usage"]["node_hours_left"] == 1.0
    assert quota["warnings"] == []
    # The same job is now more than the whole budget: refused at submit, as before the grant.
    refused = api.post("/api/v1/jobs/", big, format="json")
    assert refused.status_code == 400 and "could never start" in refused.content.decode()

    (listed,) = api.get(f"{QUOTA}grants/").json()  # a member reads the quota, and so its grants
    assert listed["revoked"] and listed["revoked_by"] == "root" and listed["revoke_reason"] == "typed 500 for 50"
    (entry,) = AuditEntry.objects.filter(action="quota.revoke")
    assert entry.actor_username == "root" and entry.target_repr == "team vision"
    assert entry.changes["budget_this_period"] == [501.0, 1.0] and entry.changes["reason"] == [None, "typed 500 for 50"]
    assert entry.changes["grant"][0].startswith("+500 node-hours by root at ") and entry.changes["grant"][1] == "revoked"

    again = admin_api.post(revoke_url(grant["id"]), {"reason": "twice"}, format="json")
    assert again.status_code == 400 and again.json()["grant"][0].startswith("It was revoked already, by root at ")
    assert AuditEntry.objects.filter(action="quota.revoke").count() == 1


def test_a_grant_of_an_ended_period_is_not_revoked(user: Any, admin_api: APIClient) -> None:
    vision = TeamFactory(name="vision")
    Quota.objects.create(team=vision, node_hours_per_period=1.0)
    old = BudgetGrant.objects.create(team=vision, period_start=datetime(2020, 1, 1, tzinfo=UTC), node_hours=5, reason="long ago")
    response = admin_api.post(revoke_url(old.pk), {"reason": "tidy"}, format="json")
    assert response.status_code == 400
    assert response.json()["grant"][0].startswith("It added to the period from 2020-01-01, which has ended")
    assert BudgetGrant.objects.get(pk=old.pk).revoked_at is None


def test_running_jobs_run_on_after_a_revoke_and_new_ones_wait_for_the_budget(
    world: Any,  # noqa: F811
    user: Any,
    api: APIClient,
    admin_api: APIClient,
) -> None:
    sim = world(16)
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    Quota.objects.create(team=vision, node_hours_per_period=0.5)
    assert admin_api.post(f"{QUOTA}grant/", {"node_hours": 1.5, "reason": "deadline"}, format="json").status_code == 201
    running = post(api, name="finetune", nodes=2, wall_time_seconds=1800, team="vision", simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    assert get(api, running)["state"] == "RUNNING"

    (grant,) = admin_api.get(f"{QUOTA}grants/").json()
    response = admin_api.post(revoke_url(grant["id"]), {"reason": "granted to the wrong team"}, format="json")
    assert response.status_code == 200, response.content
    (warning,) = response.json()["warnings"]
    assert warning.startswith("Team vision has ") and "its running jobs may use more by their wall times, and are not stopped" in warning
    assert "so its budget of 0.5 node-hours may be overspent by up to" in warning

    probe = post(api, name="probe", nodes=1, wall_time_seconds=600, team="vision", simulate={"duration_seconds": 60})["id"]
    sim.advance(1)
    assert get(api, running)["state"] == "RUNNING"
    assert get(api, probe)["pending_reason"]["code"] == "BUDGET"


def test_the_quota_page_lists_and_revokes_grants_and_django_admin_only_shows_them(user: Any, admin_user: Any) -> None:
    vision = TeamFactory(name="vision")
    Quota.objects.create(team=vision, node_hours_per_period=3)
    admin = session_for(admin_user)
    admin.post("/quotas/teams/vision/grant/", {"node_hours": "500", "reason": "CVPR deadline"})
    grant = BudgetGrant.objects.get()
    page = admin.get("/quotas/teams/vision/").content.decode()
    assert f'data-testid="grant-revoke-{grant.pk}"' in page and 'data-testid="budget-this-period">503<' in page

    refused = admin.post(f"/quotas/teams/vision/grants/{grant.pk}/revoke/", {"reason": ""}, follow=True).content.decode()
    assert "Nothing was revoked: Say why it is revoked" in refused
    done = admin.post(f"/quotas/teams/vision/grants/{grant.pk}/revoke/", {"reason": "meant 50"}, follow=True).content.decode()
    assert "Revoked the 500 node-hours added to the budget of team vision for this period: 3.0 node-hours left." in done
    assert 'data-testid="grant-revoked">revoked</span> by root' in done and "meant 50" in done
    assert f'data-testid="grant-revoke-{grant.pk}"' not in done and 'data-testid="budget-this-period">3<' in done
    assert "+500 this period" not in admin.get("/quotas/").content.decode()

    # Django admin lists them, and changes none: a change goes through the quota page, on the audit trail.
    listed = admin.get("/admin/quotas/budgetgrant/")
    assert listed.status_code == 200 and "CVPR deadline" in listed.content.decode()
    assert "/admin/quotas/budgetgrant/add/" not in listed.content.decode()
    assert admin.get("/admin/quotas/budgetgrant/add/").status_code == 403
    assert admin.post(f"/admin/quotas/budgetgrant/{grant.pk}/delete/", {"post": "yes"}).status_code == 403
    assert BudgetGrant.objects.filter(pk=grant.pk).exists()
