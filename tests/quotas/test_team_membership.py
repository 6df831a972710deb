"""Leaving a team: the jobs its former member queued for it are cancelled, saying why, and the admin is told which.

A job is charged to its team; submit takes only a team its owner is in. Without this a removed member's queued jobs
stayed queued under the team, and were charged to it when they started (quotas.membership).
"""

from __future__ import annotations

from html import unescape
from typing import Any

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.utils import timezone

from audit.models import AuditEntry
from jobs.models import Job
from quotas.models import Team, UsageCharge
from tests.audit.test_audit import team_form
from tests.conftest import client_for, session_for
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory


def state(job: Job) -> str:
    job.refresh_from_db()
    return job.state


@pytest.fixture
def vision(user: Any, other_user: Any) -> Any:
    team = TeamFactory(name="vision")
    team.members.add(user, other_user)
    return team


def test_removing_a_member_in_django_admin_cancels_their_queued_jobs_for_the_team_and_says_so(
    admin_user: Any, user: Any, other_user: Any, vision: Any
) -> None:
    nlp = TeamFactory(name="nlp")
    nlp.members.add(user)
    queued = [JobFactory(owner=user, team=vision) for _ in range(2)]
    running = JobFactory(owner=user, team=vision, running=True)
    for_nlp = JobFactory(owner=user, team=nlp)
    of_no_team = JobFactory(owner=user)
    bobs = JobFactory(owner=other_user, team=vision)

    admin = session_for(admin_user)
    response = admin.post(f"/admin/quotas/team/{vision.pk}/change/", team_form(vision, members=[other_user.pk]), follow=True)
    assert response.status_code == 200
    assert list(vision.members.values_list("username", flat=True)) == ["bob"]

    # The jobs queued for the team it left are cancelled; the others (its other team's, no team's, bob's) wait on.
    assert [state(job) for job in queued] == ["CANCELLED", "CANCELLED"]
    assert [state(job) for job in (for_nlp, of_no_team, bobs)] == ["PENDING"] * 3
    # A running job runs to its end, charged to the team as it was placed.
    assert state(running) == "RUNNING"

    # The admin is told which, on the page the save leads to.
    first, second = (job.pk for job in queued)
    said = [str(m) for m in get_messages(response.wsgi_request)]
    cancelled = f"Cancelled 2 queued jobs of alice for team vision ({first}, {second}): a job is charged to a team its owner is in."
    assert f"{cancelled} Each one's reason says why, for its owner to submit it again." in said
    assert f"1 job of alice for team vision still runs ({running.pk}), charged to the team until it ends; cancel it to stop that." in said

    # Its owner reads why, and that an admin did it (on the audit trail, which the owner sees for their jobs).
    job = client_for(user).get(f"/api/v1/jobs/{first}/").json()
    assert job["state"] == "CANCELLED"
    assert job["state_reason"] == (
        "Cancelled while queued: alice is no longer in team vision, which it was submitted for (removed by root). "
        "A job is charged to a team its owner is in: submit it again to run it."
    )
    entry = AuditEntry.objects.get(action="job.cancel", job_id=first)
    assert (entry.actor_username, entry.changes) == ("root", {"state": ["PENDING", "CANCELLED"], "reason": ["", job["state_reason"]]})


def test_the_members_field_warns_before_a_member_is_removed(admin_user: Any, vision: Any) -> None:
    page = session_for(admin_user).get(f"/admin/quotas/team/{vision.pk}/change/").content.decode()
    assert "Removing a member cancels their jobs queued for this team" in page


def test_saving_a_team_without_removing_anyone_cancels_nothing(admin_user: Any, user: Any, vision: Any) -> None:
    queued = JobFactory(owner=user, team=vision)
    response = session_for(admin_user).post(f"/admin/quotas/team/{vision.pk}/change/", team_form(vision, description="CV"), follow=True)
    assert response.status_code == 200
    assert state(queued) == "PENDING"
    assert not [m for m in get_messages(response.wsgi_request) if "Cancelled" in str(m)]


@pytest.mark.parametrize(
    "leave",
    [
        lambda team, user: team.members.remove(user),
        lambda team, user: user.teams.remove(team),
        lambda team, user: team.members.set([]),
        lambda team, user: team.members.clear(),
        lambda team, user: user.teams.clear(),
    ],
    ids=["team.members.remove", "user.teams.remove", "team.members.set", "team.members.clear", "user.teams.clear"],
)
def test_leaving_a_team_any_other_way_cancels_the_queued_jobs_too(user: Any, leave: Any) -> None:
    team = TeamFactory(name="vision")
    team.members.add(user)
    queued = JobFactory(owner=user, team=team)
    leave(team, user)
    queued.refresh_from_db()
    assert queued.state == "CANCELLED"
    assert queued.state_reason == (
        "Cancelled while queued: alice is no longer in team vision, which it was submitted for. "
        "A job is charged to a team its owner is in: submit it again to run it."
    )


RETIRE = (
    "Nothing was deleted. To retire a team instead, remove its members (Members, on the team's page: their jobs queued "
    "for it are cancelled, their running ones run to their end), so that no one can submit for it, and set its GPU "
    "quota to 0 (Quotas). The team stays, with its jobs' history and what they were charged."
)


def test_a_team_with_jobs_queued_for_it_cannot_be_deleted(admin_user: Any, user: Any, vision: Any) -> None:
    queued = JobFactory(owner=user, team=vision)
    admin: Client = session_for(admin_user)
    page = admin.post(f"/admin/quotas/team/{vision.pk}/delete/", {"post": "yes"})
    assert page.status_code == 200  # the confirmation page again, saying why, not the redirect of a deletion
    html = page.content.decode()
    assert "Team vision cannot be deleted: 1 job refers to it (1 queued or running, 0 ended)." in html
    assert 'name="post"' not in html  # nothing to confirm
    assert state(queued) == "PENDING"
    assert vision.members.count() == 2


def test_deleting_a_team_a_running_job_names_says_why_not_and_what_to_do_instead(admin_user: Any, user: Any, vision: Any) -> None:
    """Django said "your account doesn't have permission to delete the following types of objects: job" (a running job
    may not be deleted): as if a permission were missing, when a team with jobs can never be deleted."""
    running = JobFactory(owner=user, team=vision, running=True)
    for _ in range(2):
        JobFactory(owner=user, team=vision, finished=True)
    admin: Client = session_for(admin_user)
    url = f"/admin/quotas/team/{vision.pk}/delete/"
    for page in (admin.get(url), admin.post(url, {"post": "yes"})):
        assert page.status_code == 200
        html = unescape(page.content.decode())
        assert "permission" not in html and "protected related objects" not in html
        assert "Team vision cannot be deleted: 3 jobs refer to it (1 queued or running, 2 ended)." in html
        assert RETIRE in html and "Cannot delete team" in html
    assert state(running) == "RUNNING" and Job.objects.filter(team=vision).count() == 3

    # The list's "Delete selected teams" says the same of each team it cannot delete, and deletes none.
    empty = TeamFactory(name="empty")
    chosen = {"action": "delete_selected", "_selected_action": [vision.pk, empty.pk]}
    for data in (chosen, {**chosen, "post": "yes"}):
        html = unescape(admin.post("/admin/quotas/team/", data).content.decode())
        assert "Team vision cannot be deleted: 3 jobs refer to it (1 queued or running, 2 ended)." in html
        assert "Team empty" not in html and RETIRE in html and "permission" not in html
    assert set(Team.objects.values_list("name", flat=True)) >= {"vision", "empty"}

    # Its ended jobs deleted, the ledger still names it (it keeps what they were charged).
    old = TeamFactory(name="old")
    UsageCharge.objects.create(job=None, job_number=812, user=user, team=old, period_start=timezone.now(), node_seconds=3600)
    html = unescape(admin.get(f"/admin/quotas/team/{old.pk}/delete/").content.decode())
    assert "Team old cannot be deleted: the ledger keeps 1 charge to it." in html and RETIRE in html

    # A team no job names is deleted as before.
    assert admin.post(f"/admin/quotas/team/{empty.pk}/delete/", {"post": "yes"}).status_code == 302
    assert not Team.objects.filter(name="empty").exists()
