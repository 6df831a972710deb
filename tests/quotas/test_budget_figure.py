"""One budget figure everywhere: what is left this period and how much of it running jobs are committed to.

`quotas.selectors.account_usages` works both numbers out (AccountUsage.budget), `policy.model.BudgetLeft` says them
in words, and the usage page, the quota pages, the API and the scheduler's BUDGET reason all show that one figure.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job
from policy.budget import budget_beside_need, node_hours_said
from policy.model import BudgetLeft
from quotas.models import Quota
from quotas.selectors import account_usages, usage_summary
from tests.conftest import client_for, session_for
from tests.jobs.factories import JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory, UsageChargeFactory


def test_the_words_of_a_budget() -> None:
    assert str(BudgetLeft(left=47.36, committed=44.26)) == "47.4 node-hours left, 44.3 of it committed to running jobs, 3.1 for new jobs"
    # Nothing running: no commitment to mention; everything committed (or more, after a lowered budget): said so.
    assert str(BudgetLeft(left=12.0, committed=0.0)) == "12.0 node-hours left"
    assert str(BudgetLeft(left=12.0, committed=0.04)) == "12.0 node-hours left"
    assert str(BudgetLeft(left=5.0, committed=9.0)) == "5.0 node-hours left, all of it committed to running jobs"
    assert str(BudgetLeft(left=0.0, committed=3.0)) == "0.0 node-hours left"
    # The parts add up as written, whatever the rounding of each.
    assert str(BudgetLeft(left=0.75, committed=0.46)) == "0.75 node-hours left, 0.46 of it committed to running jobs, 0.29 for new jobs"
    # Under one node-hour, to two places (three under a tenth): at one, 0.118 left with 0.075 committed read
    # "0.1 node-hours left, all of it committed to running jobs".
    assert str(BudgetLeft(left=0.118, committed=0.075)) == "0.12 node-hours left, 0.07 of it committed to running jobs, 0.05 for new jobs"
    assert str(BudgetLeft(left=0.0421, committed=0.0)) == "0.042 node-hours left"
    assert BudgetLeft(left=5.0, committed=9.0).uncommitted == 0.0 and BudgetLeft(left=5.0, committed=1.5).uncommitted == 3.5


def test_a_need_beside_a_budget_shows_as_many_decimals_as_tell_whether_it_fits() -> None:
    # At one decimal both read 38.0, and the job waits for no reason a user could see.
    assert budget_beside_need(BudgetLeft(left=40.0, committed=2.02), 38.0) == (
        "40.00 node-hours left, 2.02 of it committed to running jobs, 37.98 for new jobs",
        "38.00",
    )
    assert budget_beside_need(BudgetLeft(left=12.0, committed=0.04), 12.0) == (
        "12.00 node-hours left, 0.04 of it committed to running jobs, 11.96 for new jobs",
        "12.00",
    )
    # Where one decimal tells the truth, it is kept; so it is for a need that fits.
    assert budget_beside_need(BudgetLeft(left=40.0, committed=2.0), 39.0) == (
        "40.0 node-hours left, 2.0 of it committed to running jobs, 38.0 for new jobs",
        "39.0",
    )
    assert budget_beside_need(BudgetLeft(left=38.04, committed=0.0), 38.04)[1] == "38.0"
    assert budget_beside_need(BudgetLeft(left=0.3, committed=0.0), 0.25) == ("0.30 node-hours left", "0.25")


def test_running_jobs_commit_their_share_of_each_node_until_their_wall_time(user: Any) -> None:
    now = timezone.now()
    team = TeamFactory(name="vision")
    Quota.objects.create(user=user, node_hours_per_period=100.0)
    Quota.objects.create(team=team, node_hours_per_period=40.0)
    UsageChargeFactory(user=user, team=team, node_seconds=10 * 3600)  # 10 node-hours charged this period
    placed = now - timedelta(hours=1)
    # Two whole nodes, 1 h into a 4 h wall time: 2 x 3 h committed, to the user and to the team.
    JobFactory(owner=user, team=team, running=True, nodes=2, wall_time_seconds=4 * 3600, scheduled_at=placed, started_at=placed)
    # 2 of a node's 8 GPUs, 30 min into 2.5 h: a quarter node for 2 h, the user's only.
    JobFactory(
        owner=user,
        running=True,
        gpus_per_node=2,
        wall_time_seconds=int(2.5 * 3600),
        scheduled_at=now - timedelta(minutes=30),
        started_at=now - timedelta(minutes=30),
        held=[(NodeFactory(gpus_total=8), 2)],
    )
    # Past its wall time (the cycle stops it next): nothing left to commit. Ended jobs hold nothing.
    JobFactory(owner=user, running=True, wall_time_seconds=600, scheduled_at=placed, started_at=placed)
    JobFactory(owner=user, finished=True)

    mine, vision = account_usages(users=[user], teams=[team], now=now)
    assert mine.budget is not None and vision.budget is not None
    assert mine.budget.left == pytest.approx(90.0) and mine.budget.committed == pytest.approx(6.0 + 0.5)
    assert vision.budget.left == pytest.approx(30.0) and vision.budget.committed == pytest.approx(6.0)
    assert str(mine.budget) == "90.0 node-hours left, 6.5 of it committed to running jobs, 83.5 for new jobs"
    assert mine.node_hours_left == mine.budget.left


def test_an_account_without_a_budget_has_no_budget_figure(user: Any) -> None:
    JobFactory(owner=user, running=True, nodes=2)
    (usage,) = account_usages(users=[user])
    assert usage.budget is None and usage.node_hours_left is None
    assert usage.node_hours_committed > 0  # worked out all the same, but nothing states it without a budget


def test_the_usage_page_the_quota_pages_and_the_api_state_the_same_figure(user: Any, admin_user: Any) -> None:
    Quota.objects.create(user=user, node_hours_per_period=60.0)
    UsageChargeFactory(user=user, node_seconds=12.6 * 3600)
    placed = timezone.now() - timedelta(hours=2)
    JobFactory(owner=user, running=True, nodes=4, wall_time_seconds=8 * 3600, scheduled_at=placed, started_at=placed)
    words = str(usage_summary(user).user_account.budget)
    assert words.startswith("47.4 node-hours left, 24.0 of it committed to running jobs")

    usage_page = session_for(user).get("/usage/").content.decode()
    assert f'<strong data-testid="budget-left">{words}</strong>' in usage_page
    assert 'class="committed"' in usage_page  # the bar shows the committed part beside what was used
    admin = session_for(admin_user)
    assert f'<small data-testid="budget-left">{words}</small>' in admin.get("/quotas/").content.decode()
    assert f'<span data-testid="budget-left">{words}</span>' in admin.get("/quotas/users/alice/").content.decode()

    body = client_for(user).get("/api/v1/usage/").json()["user"]["usage"]
    assert str(BudgetLeft(left=body["node_hours_left"], committed=body["node_hours_committed"])) == words
    assert body["node_hours_committed"] == pytest.approx(24.0, abs=0.01)
    assert client_for(admin_user).get("/api/v1/quotas/users/root/").json()["usage"]["node_hours_committed"] is None


def test_the_queue_says_the_budget_in_the_usage_pages_words(user: Any, sim: Any) -> None:
    """The scheduler works the figure out from its snapshot, the pages from the database: the same numbers, the same
    words, so the BUDGET reason and the usage page can no longer disagree."""
    Quota.objects.create(user=user, node_hours_per_period=20.0)
    api = client_for(user)
    base = {"image": "busybox:1", "command": ["true"], "gpus_per_node": 8, "simulate": {"duration_seconds": 7200}}
    running = api.post("/api/v1/jobs/", {**base, "name": "long", "nodes": 4, "wall_time_seconds": 4 * 3600}, format="json")
    assert running.status_code == 201, running.content
    sim.cycle()
    sim.advance(1.5)
    held = api.post("/api/v1/jobs/", {**base, "name": "more", "nodes": 2, "wall_time_seconds": 3 * 3600}, format="json").json()
    sim.cycle()
    job = Job.objects.get(pk=held["id"])
    assert job.pending_reason_code == "BUDGET"
    (usage,) = account_usages(users=[user], now=sim.clock())
    assert usage.budget is not None
    words = str(usage.budget)
    assert words.startswith("20.0 node-hours left, 16.0 of it committed to running jobs, 4.0 for new jobs")
    assert job.pending_reason.startswith(f"The budget of user alice has {words}; this job may use 6.0 (2 nodes x 3.00 h).")
    # The usage page states the same figures to the places of the account's smallest, the 6 s its job has run (4 nodes x
    # 1.5 s): its use is not 0.0, and used and left add up to the budget as written.
    page = session_for(user).get("/usage/").content.decode()
    # The page reads the clock, not the simulation's: what is committed may be a few seconds less there.
    said = re.search(r'0\.0017</span> used of 20: <strong data-testid="budget-left">19\.9983 node-hours left, (15\.99\d\d) of it', page)
    assert said is not None, page
    cluster = session_for(user).get("/cluster/").content.decode()
    assert f"The budget of user alice has {words}" in cluster and f"The budget of user alice has {words}" in (
        session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    )


# (budget, used, committed) -> (used, left, committed) as the pages and `muster usage` state them.
NODE_HOURS_SAID = [
    ((3.0, 0.011, 0.0), ("0.011", "2.989", "0.000")),  # the team's read "0.0 used of 3" beside the user's "0.011 used"
    ((20.0, 0.0004, 0.0), ("0.00040", "19.99960", "0.00000")),
    ((3.0, 1e-9, 0.0), ("0.000001", "2.999999", "0.000000")),  # a use under the finest place is said as that, not 0.0
    ((10.0, 8.45, 0.0), ("8.4", "1.6", "0.0")),  # two roundings of 8.45 and 1.55 would not add up to 10
    ((0.5, 0.23, 0.0), ("0.23", "0.27", "0.00")),
    ((2.25, 1.0, 0.0), ("1.00", "1.25", "0.00")),  # a budget with places of its own (a grant of 0.25) keeps them
    ((47.4 + 12.6, 12.6, 44.3), ("12.6", "47.4", "44.3")),
    ((40.0, 0.0, 39.96), ("0.000", "40.000", "39.960")),  # 0.04 for new jobs, to two figures, is not rounded away
    ((4.0, 5.0, 0.0), ("5.0", "0.0", "0.0")),  # used beyond a budget lowered under it: said as it is
    ((None, 0.011, None), ("0.011", "-", "-")),
    ((None, 0.0, None), ("0.0", "-", "-")),
]


@pytest.mark.parametrize(("given", "said"), NODE_HOURS_SAID)
def test_node_hours_are_said_to_one_precision_that_adds_up_and_never_reads_a_use_as_nothing(
    given: tuple[float | None, float, float | None], said: tuple[str, str, str]
) -> None:
    """One rule for the pages (policy.budget.node_hours_said) and `muster usage` (its copy in the client)."""
    from muster_client.render import node_hours_columns

    budget, used, committed = given
    server = node_hours_said(used=used, budget=budget, committed=committed or 0.0)
    left = "-" if server.budget is None else server.budget_text.split(" node-hours")[0]
    assert (server.used, left) == said[:2]
    assert node_hours_columns(used, budget, committed) == said
    if budget is not None and used <= budget:
        assert float(said[0]) + float(said[1]) == pytest.approx(budget)


def test_the_usage_pages_and_muster_usage_say_a_small_use_alike_for_the_user_and_the_team(admin_user: Any, user: Any) -> None:
    """The team's figures were rounded so its budget added up ("0.0 used of 3: 3.0 node-hours left") beside the user's
    "0.011 used" for the same job; `muster usage` said 0.01 of both."""
    from muster_client.render import usage_text

    team = TeamFactory(name="vision")
    team.members.add(user)
    Quota.objects.create(team=team, node_hours_per_period=3.0)
    UsageChargeFactory(job__owner=user, user=user, team=team, node_seconds=0.011 * 3600)
    usage = session_for(user).get("/usage/").content.decode()
    user_card = usage[usage.index('data-testid="account-user-alice"') : usage.index('data-testid="account-team-vision"')]
    team_card = usage[usage.index('data-testid="account-team-vision"') :]
    assert '<span data-testid="node-hours-used">0.011</span> used (no budget)' in " ".join(user_card.split())
    said = '<span data-testid="node-hours-used">0.011</span> used of 3: <strong data-testid="budget-left">2.989 node-hours left'
    assert said in team_card
    quotas = session_for(admin_user).get("/quotas/").content.decode()
    row = quotas[quotas.index('data-testid="quota-team-vision"') :]
    assert 'node-hours-used">0.011</span> <small data-testid="budget-left">2.989 node-hours left</small>' in row
    # `muster usage` from the API's answer: the same figures in its columns.
    lines = usage_text(client_for(user).get("/api/v1/usage/").json()).splitlines()
    rows = {line.split()[1]: line.split()[2:6] for line in lines[2:]}
    assert rows == {"alice": ["0/unlimited", "0.011", "unlimited", "-"], "vision": ["0/unlimited", "0.011", "3", "2.989"]}
    assert lines[0].startswith("Budget period ") and " to " in lines[0] and ":00:00" not in lines[0]
