"""GPUs held within a quota and borrowed beyond it, apart, wherever an account's use is shown: the quota pages, the usage
page and the API say what the jobs' reasons say ("8 of 8 GPUs of the quota ... are in use"), and the borrowed rest beside.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from quotas.models import Quota
from tests.conftest import session_for
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory


@pytest.fixture
def research(user: Any) -> Any:
    """Team research, quota 8 GPUs, holding 8 within it (n1) and 8 more a preemptible job borrows (n2)."""
    team = TeamFactory(name="research")
    team.members.add(user)
    Quota.objects.create(team=team, max_gpus=8)
    JobFactory(owner=user, team=team, running=True, held=["n1"])
    borrower = JobFactory(owner=user, team=team, running=True, held=["n2"])
    Job.objects.filter(pk=borrower.pk).update(over_quota=True, preemptible=True)
    return team


def test_the_api_gives_gpus_within_quota_and_borrowed_beside_the_total(admin_api: Any, research: Any) -> None:
    usage = admin_api.get("/api/v1/quotas/teams/research/").json()["usage"]
    assert (usage["gpus_in_use"], usage["gpus_within_quota"], usage["gpus_borrowed"]) == (16, 8, 8)
    # The user's usage summary too: the same account, the same figures.
    (team,) = admin_api.get("/api/v1/usage/", {"user": "alice"}).json()["teams"]
    assert (team["usage"]["gpus_within_quota"], team["usage"]["gpus_borrowed"]) == (8, 8)


def test_an_account_that_borrows_nothing_says_zero_borrowed(admin_api: Any, user: Any) -> None:
    JobFactory(owner=user, running=True, held=["n1"])
    usage = admin_api.get("/api/v1/quotas/users/alice/").json()["usage"]
    assert (usage["gpus_in_use"], usage["gpus_within_quota"], usage["gpus_borrowed"]) == (8, 8, 0)


def test_the_quota_list_says_within_quota_and_borrowed_apart(admin_user: Any, research: Any) -> None:
    html = session_for(admin_user).get("/quotas/").content.decode()
    # It read "16" in use beside a quota of 8, as if the team were far above it, while its jobs' reasons said 8 of 8.
    assert '<td data-testid="gpus-in-use">8 within quota + 8 borrowed (preemptible)</td>' in html
    edit = session_for(admin_user).get("/quotas/teams/research/").content.decode()
    assert '<span data-testid="gpus-in-use">8 within quota + 8 borrowed (preemptible)</span>' in edit


def test_the_usage_page_counts_the_quota_as_the_reasons_do(user: Any, research: Any) -> None:
    html = session_for(user).get("/usage/").content.decode()
    section = html[html.index('data-testid="account-team-research"') :]
    assert "8 of 8 within quota + 8 borrowed (preemptible)" in section
    assert 'data-testid="above-quota"' not in section  # borrowing is not being above the quota
