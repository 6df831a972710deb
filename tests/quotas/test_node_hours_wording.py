"""Node-hours as every message says them: 'node-hour' for exactly 1 ('its whole budget of 1 node-hours a period'), and
a budget written as the quota pages write it (the Usage page read 'used of 6.500' beside the quota page's 6.5)."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from policy.budget import node_hours_words
from quotas.admin import quota_words
from quotas.models import BudgetGrant, Quota
from tests.conftest import session_for
from tests.quotas.factories import TeamFactory
from tests.scheduler.test_queue_scenarios import get, post, world  # noqa: F401  (world: the fixture)


def test_the_unit_is_singular_for_exactly_one() -> None:
    assert [node_hours_words(x) for x in (1, 1.0, 2, 0.5)] == ["1 node-hour", "1 node-hour", "2 node-hours", "0.5 node-hours"]
    # A figure written to places is not exactly one, nor is a figure that only rounds to it at its places.
    assert node_hours_words("1.0") == "1.0 node-hours" and node_hours_words(1.04, ".3g") == "1.04 node-hours"


def test_a_budget_of_one_reads_one_node_hour_in_the_reason_the_estimate_the_pages_and_django_admin(
    world: Any,  # noqa: F811
    user: Any,
    admin_user: Any,
    api: APIClient,
    admin_api: APIClient,
) -> None:
    sim = world(16)
    vision = TeamFactory(name="vision")
    vision.members.add(user)
    quota = Quota.objects.create(team=vision, node_hours_per_period=2)
    job = post(api, name="long", nodes=1, wall_time_seconds=5400, team="vision")["id"]
    quota.node_hours_per_period = 1
    quota.save()
    sim.cycle()
    reason = get(api, job)["pending_reason"]["message"]
    assert "more than its whole budget of 1 node-hour a period (lowered since it was submitted)" in reason

    estimate = api.post("/api/v1/jobs/estimate/", _payload(), format="json")
    assert estimate.status_code == 200, estimate.content
    assert "It gives 1 node-hour a month in all, so the job could never start." in str(estimate.json())

    assert quota_words(quota).startswith("1 node-hour each calendar month")

    admin = session_for(admin_user)
    done = admin.post("/quotas/teams/vision/grant/", {"node_hours": "1", "reason": "one more hour"}, follow=True).content.decode()
    assert "Added 1 node-hour to the budget of team vision" in done and "+1 node-hour by root" in done
    grant = BudgetGrant.objects.get()
    assert str(grant).startswith("1 node-hour for team vision")
    admin.post("/quotas/teams/vision/grant/", {"node_hours": "4.5", "reason": "deadline"})
    usage = session_for(user).get("/usage/").content.decode()
    assert "</span> used of 6.5: <strong" in usage  # it read 6.500
    revoked = admin.post(f"/quotas/teams/vision/grants/{grant.pk}/revoke/", {"reason": "not needed"}, follow=True).content.decode()
    assert "Revoked the 1 node-hour added to the budget of team vision" in revoked


def _payload() -> dict[str, Any]:
    from tests.conftest import job_payload

    return job_payload(nodes=2, wall_time_seconds=3600, team="vision")
