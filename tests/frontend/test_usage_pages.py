"""The browser's usage page (everyone) and quota pages (admins): render, edit, validate, refuse."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from jobs.states import JobState
from quotas.models import Quota, TeamVolume
from tests.conftest import session_for
from tests.frontend.forms import submit_form
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory, UsageChargeFactory


@pytest.fixture
def vision(user: Any) -> Any:
    team = TeamFactory(name="vision")
    team.members.add(user)
    return team


def test_usage_page_shows_limits_usage_and_teams(user: Any, vision: Any) -> None:
    Quota.objects.create(user=user, max_gpus=16, node_hours_per_period=200.0)
    page = session_for(user).get("/usage/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="account-user-alice"' in html and 'data-testid="account-team-vision"' in html
    assert "0 of 16" in html  # GPUs in use of the quota
    assert "200.0 node-hours left" in html
    assert 'role="meter"' in html  # the budget bar
    assert "no quota set" in html  # the team has none
    assert 'href="/usage/"' in html and 'aria-current="page">Usage' in html
    assert 'href="/quotas/"' not in html  # admins only


def test_usage_page_report_and_csv_link(user: Any, settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    start = datetime(2026, 11, 12, 8, tzinfo=UTC)
    JobFactory(
        owner=user,
        state=JobState.SUCCEEDED,
        attempt=1,
        gpus_per_node=4,
        submitted_at=start,
        held=["n1"],
        held__released_at=start + timedelta(hours=2),
    )
    page = session_for(user).get("/usage/", {"start": "2026-11-01", "end": "2026-11-30", "group_by": "user"})
    html = page.content.decode()
    assert 'data-testid="report"' in html
    assert "<td>alice</td><td>1</td><td>8.00</td><td>1.00</td>" in html
    assert "/api/v1/usage/report/?start=2026-11-01&amp;end=2026-11-30&amp;group_by=user&amp;format=csv" in html
    csv = session_for(user).get("/api/v1/usage/report/", {"start": "2026-11-01", "end": "2026-11-30", "format": "csv"})
    assert csv.status_code == 200 and csv.content.decode().splitlines() == ["user,jobs,gpu_hours,node_hours", "alice,1,8.0,1.0"]


def report_refused(response: Any) -> list[str]:
    """A usage page refusing its report: a 400, as the job list answers a filter it cannot read, saying why above the
    form (and beside each field), with no report."""
    assert response.status_code == 400
    html = response.content.decode()
    assert 'data-testid="report"' not in html and 'data-testid="csv-link"' not in html
    said = re.search(r'<div class="error-summary" role="alert" data-testid="report-errors">(.*?)</div>', html, re.S)
    assert said and "No report is shown until the range is fixed." in said.group(1)
    return [re.sub(r"<[^>]+>", "", line) for line in re.findall(r'<p class="error">(.*?)</p>', said.group(1))]


def test_usage_page_report_form_errors(user: Any) -> None:
    page = session_for(user)
    reversed_range = page.get("/usage/", {"start": "2026-11-20", "end": "2026-11-01", "group_by": "user"})
    assert report_refused(reversed_range) == ["To (included): The end date is before the start date."]
    # /usage/?start=bad answered 200 beside a field error; the API's report answers 400.
    assert report_refused(page.get("/usage/", {"start": "bad"})) == ["From: Enter a valid date."]
    assert page.get("/api/v1/usage/report/", {"start": "bad"}).status_code == 400
    assert report_refused(page.get("/usage/", {"group_by": "rack"})) == [
        "Group by: Select a valid choice. rack is not one of the available choices."
    ]
    # The API's range, not a 500 (the day after 9999-12-31 is no date) nor a CSV link the API refuses.
    for start, end in (("2026-11-01", "9999-12-31"), ("1969-12-31", "1970-01-02")):
        said = report_refused(page.get("/usage/", {"start": start, "end": end, "group_by": "user"}))
        assert any("A date between 1970-01-01 and 2999-12-31." in line for line in said)
    said = report_refused(page.get("/usage/", {"start": "2000-01-01", "end": "2026-11-01", "group_by": "user"}))
    assert any("A report covers at most 3660 days." in line for line in said)
    assert page.get("/usage/").status_code == 200 and page.get("/usage/", {"group_by": "team"}).status_code == 200


def test_usage_page_of_another_user_is_a_404_for_others_and_theirs_for_an_admin(user: Any, other_user: Any, admin_user: Any) -> None:
    """?user= as the API's GET /api/v1/usage/?user= takes it: not the viewer's own usage under another's name."""
    Quota.objects.create(user=other_user, max_gpus=3)
    for asked in ("bob", "nobody"):
        response = session_for(user).get("/usage/", {"user": asked})
        html = response.content.decode()
        assert response.status_code == 404
        assert f"No user {asked} (or none that you may see)." in html and "account-user-alice" not in html
    own = session_for(user).get("/usage/", {"user": "alice"})
    assert own.status_code == 200 and 'data-testid="account-user-alice"' in own.content.decode()
    theirs = session_for(admin_user).get("/usage/", {"user": "bob"}).content.decode()
    assert "Usage and limits of user bob" in theirs and 'data-testid="account-user-bob"' in theirs and "0 of 3" in theirs
    assert '<input type="hidden" name="user" value="bob">' in theirs  # the report form keeps it


def test_usage_page_needs_login(db: None) -> None:
    response = Client().get("/usage/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_quotas_page_is_for_admins(user: Any, vision: Any) -> None:
    client = session_for(user)
    assert client.get("/quotas/").status_code == 403
    assert client.get("/quotas/users/alice/").status_code == 403
    assert client.post("/quotas/users/alice/", {"max_gpus": "99", "fair_share_weight": "1"}).status_code == 403
    assert client.post("/quotas/teams/vision/reset/").status_code == 403
    assert not Quota.objects.exists()


def test_quotas_page_lists_users_and_teams(admin_user: Any, user: Any, vision: Any) -> None:
    Quota.objects.create(team=vision, max_gpus=64, node_hours_per_period=1000)
    page = session_for(admin_user).get("/quotas/")
    assert page.status_code == 200
    html = page.content.decode()
    for row in ('data-testid="quota-user-alice"', 'data-testid="quota-user-root"', 'data-testid="quota-team-vision"'):
        assert row in html
    assert 'href="/quotas/users/alice/"' in html and 'href="/quotas/teams/vision/"' in html
    assert "<td>64</td>" in html and "<td>1000</td>" in html
    assert 'aria-current="page">Quotas' in html


def test_admin_edits_a_quota_in_the_browser(admin_user: Any, user: Any) -> None:
    client = session_for(admin_user)
    form = client.get("/quotas/users/alice/")
    assert form.status_code == 200 and "site default applies" in form.content.decode()
    response = client.post(
        "/quotas/users/alice/",
        {
            "max_gpus": "8",
            "max_wall_time_minutes": "120",
            "max_node_hours_per_job": "",
            "node_hours_per_period": "500",
            "fair_share_weight": "2",
        },
        follow=True,
    )
    assert response.redirect_chain == [("/quotas/", 302)]
    assert "Saved the quota of user alice" in response.content.decode()
    quota = Quota.objects.get(user=user)
    assert (
        quota.max_gpus,
        quota.max_wall_time_seconds,
        quota.max_node_hours_per_job,
        quota.node_hours_per_period,
        quota.fair_share_weight,
    ) == (
        8,
        7200,
        None,
        500.0,
        2.0,
    )
    # A wall time of seconds set through the API is shown in whole minutes; saved untouched, it keeps its seconds.
    Quota.objects.filter(user=user).update(max_wall_time_seconds=5430)
    assert 'name="max_wall_time_minutes" value="91"' in client.get("/quotas/users/alice/").content.decode()
    unchanged = {"max_gpus": "64", "max_wall_time_minutes": "91", "node_hours_per_period": "500", "fair_share_weight": "2"}
    assert client.post("/quotas/users/alice/", unchanged).status_code == 302
    assert Quota.objects.get(user=user).max_wall_time_seconds == 5430
    assert client.post("/quotas/users/alice/", {**unchanged, "max_wall_time_minutes": "90"}).status_code == 302
    assert Quota.objects.get(user=user).max_wall_time_seconds == 5400
    # The reset asks first (the site's data-confirm, muster.js); without script the POST acts, as before.
    page = client.get("/quotas/users/alice/").content.decode()
    assert 'data-confirm="Reset the quota of user alice to the site default? Their own limits above are dropped."' in page
    response = client.post("/quotas/users/alice/reset/", follow=True)
    assert "back to the site default" in response.content.decode()
    assert not Quota.objects.exists()


def test_quota_form_shows_errors_beside_fields(admin_user: Any, user: Any) -> None:
    response = session_for(admin_user).post(
        "/quotas/users/alice/", {"max_gpus": "-3", "max_wall_time_minutes": "0", "node_hours_per_period": "lots", "fair_share_weight": "0"}
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "The quota was not saved." in html
    assert html.count('class="field has-error"') == 4
    assert "Give a fair-share weight from 0.001 to 1,000,000." in html
    # What each field needs, in the form's words, not "Ensure this value is greater than or equal to 0."
    assert "Give 0 GPUs or more (at most 10,000,000); leave it empty for no limit." in html
    assert "A wall time limit is at least 1 minute; leave it empty for no limit of its own." in html
    assert "Ensure this value" not in html
    assert not Quota.objects.exists()


def test_quota_form_refuses_a_wall_time_beyond_the_sites_longest(admin_user: Any, user: Any) -> None:
    """153722867280912930 minutes was saved and shown as 106751991167300 d 15 h."""
    fields = {"max_wall_time_minutes": "153722867280912930", "fair_share_weight": "1"}
    html = session_for(admin_user).post("/quotas/users/alice/", fields).content.decode()
    assert "The quota was not saved." in html and "At most the site&#x27;s longest wall time" in html
    # In the field's unit: it read "1209600 s" beside a field that asks for minutes.
    assert "20160 minutes (14 d" in html and "1209600 s" not in html
    assert not Quota.objects.exists()


def test_unknown_account_page_is_404(admin_user: Any) -> None:
    assert session_for(admin_user).get("/quotas/users/nobody/").status_code == 404
    assert session_for(admin_user).get("/quotas/teams/nobody/").status_code == 404


def test_submit_page_names_the_quota_and_accepts_a_preemptible_job(user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8)
    client = session_for(user)
    page = client.post("/jobs/new/", submit_form())
    assert page.status_code == 200
    assert "The job needs 16 GPUs; your quota (user alice) allows at most 8 at once." in page.content.decode()
    assert not Job.objects.exists()
    response = client.post("/jobs/new/", submit_form(priority_class="preemptible"))  # the one preemptible control
    assert response.status_code == 302
    assert Job.objects.get().preemptible is True


def test_the_submit_form_mounts_a_teams_volume_and_names_a_bad_line_or_claim(user: Any, sim: Any) -> None:
    client = session_for(user)
    assert 'name="volumes"' not in client.get("/jobs/new/").content.decode()  # no team volume: no field
    team = TeamFactory(name="vision")
    team.members.add(user)
    TeamVolume.objects.create(team=team, claim="imagenet", read_only=True)
    TeamVolume.objects.create(team=team, claim="scratch", read_only=False)
    page = client.get("/jobs/new/").content.decode()
    assert "imagenet (vision, read-only), scratch (vision)" in page
    bad_line = client.post("/jobs/new/", submit_form(team="vision", volumes="imagenet /data"))
    assert "Line 1: write CLAIM:/mount/path" in bad_line.content.decode() and not Job.objects.exists()
    not_ours = client.post("/jobs/new/", submit_form(team="vision", volumes="imagenet:/data:ro\nweights:/weights"))
    assert "weights" in not_ours.content.decode() and not Job.objects.exists()
    response = client.post("/jobs/new/", submit_form(team="vision", volumes="imagenet:/data:ro\nscratch:/scratch"))
    assert response.status_code == 302, response.content.decode()[:3000]
    assert Job.objects.get().volumes == [
        {"claim": "imagenet", "mount_path": "/data", "read_only": True},
        {"claim": "scratch", "mount_path": "/scratch", "read_only": False},
    ]


def test_usage_page_grouped_by_team_alone_is_this_periods_report_by_team(user: Any, admin_user: Any) -> None:
    """`/usage/?group_by=team` showed no report and the selector back on user."""
    team = TeamFactory(name="vision")
    JobFactory(
        owner=user, team=team, state=JobState.RUNNING, attempt=1, held=["n1"], held__allocated_at=timezone.now() - timedelta(hours=1)
    )
    html = session_for(admin_user).get("/usage/", {"group_by": "team"}).content.decode()
    assert 'data-testid="report"' in html and "<th>Team</th>" in html and "<td>vision</td><td>1</td>" in html
    assert re.search(r'<option value="team" selected', html)


@pytest.mark.parametrize(
    ("budget", "used_hours", "used_text", "left_text"),
    [
        (0.5, 0.23, "0.23", "0.27"),  # it read "0.2 used of 0.5: 0.27 node-hours left"
        (10, 8.45, "8.4", "1.6"),  # two roundings of 8.45 and 1.55 would not add up to 10
        (200, 12.345, "12.3", "187.7"),
        (4, 5.0, "5.0", "0.0"),  # used beyond the budget (lowered under it): said as it is
    ],
)
def test_used_and_left_are_said_to_one_precision_and_add_up(
    admin_user: Any, user: Any, budget: float, used_hours: float, used_text: str, left_text: str
) -> None:
    Quota.objects.create(user=user, node_hours_per_period=budget)
    UsageChargeFactory(job__owner=user, user=user, node_seconds=used_hours * 3600)
    usage = session_for(user).get("/usage/").content.decode()
    said = re.search(r'node-hours-used">([\d.]+)</span> used of ([\d.]+): <strong data-testid="budget-left">([\d.]+) node', usage)
    assert said is not None and (said[1], said[3]) == (used_text, left_text)
    if used_hours <= budget:
        assert float(said[1]) + float(said[3]) == pytest.approx(budget)
    # The quota list and the quota's page say the same figures.
    quotas = session_for(admin_user).get("/quotas/").content.decode()
    row = quotas[quotas.index('data-testid="quota-user-alice"') :]
    assert f'data-testid="node-hours-used">{used_text}</span> <small data-testid="budget-left">{left_text} node-hours left' in row
    edit = session_for(admin_user).get("/quotas/users/alice/").content.decode()
    assert f'data-testid="node-hours-used">{used_text}</span> node-hours used' in edit


def test_the_quota_form_states_the_fair_share_weights_bounds(admin_user: Any, user: Any) -> None:
    """It said "above 0" and answered 1e-300 with Django's "Ensure this value is greater than or equal to 0.001."."""
    client = session_for(admin_user)
    page = client.get("/quotas/users/alice/").content.decode()
    assert "Shares against other accounts (2 weighs twice 1), from 0.001 to 1,000,000." in page
    for weight in ("1e-300", "0", "1000001"):
        html = client.post("/quotas/users/alice/", {"fair_share_weight": weight}).content.decode()
        assert "The quota was not saved." in html and html.count('class="field has-error"') == 1
        assert "Give a fair-share weight from 0.001 to 1,000,000." in html and "Ensure this value" not in html
    assert not Quota.objects.exists()
    assert client.post("/quotas/users/alice/", {"fair_share_weight": "0.001"}).status_code == 302


def test_the_quota_lists_default_badges_do_not_wrap(admin_user: Any, user: Any, vision: Any) -> None:
    """The Teams table's "none set" broke onto two lines at 1440 px."""
    html = session_for(admin_user).get("/quotas/").content.decode()
    assert '<span class="tag nowrap">default</span>' in html and '<span class="tag nowrap">none set</span>' in html


@pytest.mark.parametrize(
    ("period", "zone", "words"),
    [
        ("month", "UTC", "renews each calendar month (from the 1st, 00:00 UTC)"),
        ("week", "Europe/Berlin", "renews each week (from Monday, 00:00 Europe/Berlin)"),
    ],
)
def test_a_teams_quota_page_and_its_django_admin_page_link_each_other_and_say_the_period(
    admin_user: Any, settings: Any, period: str, zone: str, words: str
) -> None:
    """Onboarding a team was two places that did not know of each other (its members in Django admin, its quota on
    /quotas/), and the budget's "resets each period" did not say which period."""
    settings.MUSTER_BUDGET_PERIOD, settings.TIME_ZONE = period, zone
    team = TeamFactory(name="vision")
    client = session_for(admin_user)
    quota_page = client.get("/quotas/teams/vision/").content.decode()
    assert f'<a href="/admin/quotas/team/{team.pk}/change/" data-testid="account-admin">Team vision\'s members' in quota_page
    assert f"Charged as jobs run; {words} (MUSTER_BUDGET_PERIOD, MUSTER_TIME_ZONE: see Settings)." in quota_page
    # Django admin's team page and list: the quota in words, linked to its page.
    admin_page = client.get(f"/admin/quotas/team/{team.pk}/change/").content.decode()
    assert '<a href="/quotas/teams/vision/">none: unlimited</a>' in admin_page
    Quota.objects.create(team=team, max_gpus=32, node_hours_per_period=100.0)
    listed = client.get("/admin/quotas/team/").content.decode()
    assert f'<a href="/quotas/teams/vision/">32 GPUs, 100 node-hours {words.removeprefix("renews ")}</a>' in listed
    # A user's quota page leads to their account there too.
    assert f'href="/admin/auth/user/{admin_user.pk}/change/"' in client.get(f"/quotas/users/{admin_user.username}/").content.decode()
