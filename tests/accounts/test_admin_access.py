"""Staff status makes a Muster admin in Django admin too: Nodes, Teams, Jobs and API tokens, with no permission to tick.
A staff user who was not a superuser saw the navigation's Admin link, used /quotas/ and cancelled anyone's jobs, but
/admin/ said "You don't have permission to view or edit anything" and a node could not be held."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from jobs.models import Node
from quotas.models import Team
from tests.accounts.factories import UserFactory
from tests.conftest import session_for
from tests.jobs.factories import JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory


@pytest.fixture
def staff(db: None) -> Client:
    """carol: Staff status ticked, Superuser status not (and no model permission, nor group)."""
    return session_for(UserFactory(username="carol", is_staff=True, is_superuser=False))


def test_the_admin_index_offers_a_staff_user_musters_models(staff: Client) -> None:
    index = staff.get("/admin/")
    assert index.status_code == 200
    html = index.content.decode()
    assert "have permission to view or edit anything" not in html
    for changelist in ("/admin/jobs/node/", "/admin/jobs/job/", "/admin/quotas/team/", "/admin/accounts/apitoken/"):
        assert f'href="{changelist}"' in html
        assert staff.get(changelist).status_code == 200
    # Who is an admin is the site owner's to say: users (and Django's own tables) stay the superuser's.
    assert 'href="/admin/auth/user/"' not in html and staff.get("/admin/auth/user/").status_code == 403


def test_a_staff_user_holds_a_node_and_manages_a_team(staff: Client, user: Any) -> None:
    node = NodeFactory(name="gpu-07")
    assert staff.post(f"/admin/jobs/node/{node.pk}/change/", {"held": "on", "held_reason": "GPU 3 replaced"}).status_code == 302
    assert Node.objects.get(pk=node.pk).held
    added = staff.post("/admin/quotas/team/add/", {"name": "vision", "members": [user.pk], **_no_volumes()})
    assert added.status_code == 302, added.content.decode()[:2000]
    assert list(Team.objects.get(name="vision").members.values_list("username", flat=True)) == ["alice"]
    # Cancelling through the job list's action, as the job page already let them.
    job = JobFactory(owner=user, running=True)
    assert staff.post("/admin/jobs/job/", {"action": "cancel_selected", "_selected_action": [job.pk], "index": 0}).status_code == 302
    job.refresh_from_db()
    assert job.state == "CANCELLED"


def test_the_admin_link_is_shown_to_those_who_can_use_it(staff: Client, user: Any) -> None:
    assert 'href="/admin/"' in staff.get("/usage/").content.decode()
    # Everyone else: no link, and Django admin sends them to sign in as someone who may.
    plain = session_for(user)
    assert 'href="/admin/"' not in plain.get("/usage/").content.decode()
    assert plain.get("/admin/").status_code == 302
    assert plain.get("/admin/jobs/node/").status_code == 302


def test_a_staff_user_made_inactive_loses_it(db: None) -> None:
    gone = UserFactory(username="dave", is_staff=True, is_active=False)
    client = Client()
    client.force_login(gone)
    assert client.get("/admin/jobs/node/").status_code == 302


def _no_volumes() -> dict[str, Any]:
    """The team page's empty Volumes inline, as the browser posts it."""
    return {"volumes-TOTAL_FORMS": 0, "volumes-INITIAL_FORMS": 0, "volumes-MIN_NUM_FORMS": 0, "volumes-MAX_NUM_FORMS": 1000}


def test_a_superuser_keeps_everything(admin_user: Any) -> None:
    client = session_for(admin_user)
    assert client.get("/admin/auth/user/").status_code == 200
    assert client.get("/admin/jobs/node/").status_code == 200
    TeamFactory(name="infra")
    assert client.get("/admin/quotas/team/").status_code == 200
