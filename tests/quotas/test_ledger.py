"""The usage ledger, budget periods and the scheduler's decayed usage, on known data with exact numbers."""

from __future__ import annotations

import math
import threading
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection

from jobs.models import Allocation, Job, Node
from jobs.services import job_transition
from jobs.states import JobState
from policy.model import team_key, user_key
from quotas.models import BudgetGrant, Quota, UsageCharge
from quotas.periods import period_bounds
from quotas.selectors import accounts_snapshot
from quotas.services import ledger_charge, ledger_charge_active
from tests.accounts.factories import UserFactory
from tests.jobs.factories import AllocationFactory, JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory

HOUR = 3600.0
T0 = datetime(2026, 11, 10, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _utc_months(settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    settings.MUSTER_BUDGET_PERIOD = "month"


def node(name: str, gpus: int = 8) -> Node:
    return NodeFactory(name=name, gpus_total=gpus)


def running_job(owner: Any, *, held: list[tuple[Node, int]], at: datetime, team: Any = None, attempt: int = 1) -> Job:
    """A RUNNING job whose current attempt holds `held` (node, GPUs) since `at`."""
    gpus = max(g for _, g in held)
    return JobFactory(
        owner=owner, team=team, running=True, attempt=attempt, submitted_at=at, nodes=len(held), gpus_per_node=gpus, held=held
    )


def charges(job: Job) -> dict[datetime, tuple[float, float]]:
    return {c.period_start: (c.node_seconds, c.gpu_seconds) for c in UsageCharge.objects.filter(job=job)}


# --- periods -----------------------------------------------------------------------------------


def test_month_period_is_the_calendar_month() -> None:
    assert period_bounds(datetime(2026, 11, 30, 23, 59, tzinfo=UTC)) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )
    assert period_bounds(datetime(2026, 12, 31, 12, tzinfo=UTC)) == (datetime(2026, 12, 1, tzinfo=UTC), datetime(2027, 1, 1, tzinfo=UTC))


def test_week_period_runs_monday_to_monday(settings: Any) -> None:
    settings.MUSTER_BUDGET_PERIOD = "week"
    # 2026-11-11 is a Wednesday.
    assert period_bounds(datetime(2026, 11, 11, 8, tzinfo=UTC)) == (datetime(2026, 11, 9, tzinfo=UTC), datetime(2026, 11, 16, tzinfo=UTC))


def test_periods_follow_the_site_time_zone(settings: Any) -> None:
    settings.TIME_ZONE = "Europe/Berlin"
    berlin = ZoneInfo("Europe/Berlin")
    # 23:30 UTC on 31 October is already 1 November in Berlin (CET, UTC+1).
    start, end = period_bounds(datetime(2026, 10, 31, 23, 30, tzinfo=UTC))
    assert start == datetime(2026, 11, 1, tzinfo=berlin) == datetime(2026, 10, 31, 23, tzinfo=UTC)
    assert end == datetime(2026, 12, 1, tzinfo=berlin)


# --- charging ----------------------------------------------------------------------------------


def test_a_2_gpu_job_on_an_8_gpu_node_pays_a_quarter_node_hour_per_hour(user: Any) -> None:
    job = running_job(user, held=[(node("n1"), 2)], at=T0)
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (0.25 * HOUR, 2 * HOUR)}
    job.refresh_from_db()
    assert job.charged_until == T0 + timedelta(hours=1)


def test_a_gang_pays_each_node_it_holds(user: Any) -> None:
    job = running_job(user, held=[(node("n1"), 8), (node("n2"), 8), (node("n3", gpus=4), 4)], at=T0)
    ledger_charge(job=job, until=T0 + timedelta(minutes=30))
    ((node_seconds, gpu_seconds),) = charges(job).values()
    assert node_seconds == pytest.approx(3 * 1800)
    assert gpu_seconds == pytest.approx(20 * 1800)


def test_charge_is_split_at_the_month_boundary(user: Any) -> None:
    start = datetime(2026, 10, 31, 22, 0, tzinfo=UTC)
    job = running_job(user, held=[(node("n1"), 8)], at=start)
    ledger_charge(job=job, until=datetime(2026, 11, 1, 3, 0, tzinfo=UTC))
    assert charges(job) == {
        datetime(2026, 10, 1, tzinfo=UTC): (2 * HOUR, 16 * HOUR),
        datetime(2026, 11, 1, tzinfo=UTC): (3 * HOUR, 24 * HOUR),
    }
    charge = UsageCharge.objects.get(job=job, period_start=datetime(2026, 11, 1, tzinfo=UTC))
    assert (charge.user_id, charge.team_id) == (user.pk, None)


def test_charging_is_idempotent_and_incremental(user: Any) -> None:
    job = running_job(user, held=[(node("n1"), 4)], at=T0)
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    ledger_charge(job=Job.objects.get(pk=job.pk), until=T0 + timedelta(hours=1))  # a stale copy changes nothing
    ledger_charge(job=job, until=T0 + timedelta(minutes=10))  # the past is already charged
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (0.5 * HOUR, 4 * HOUR)}
    ledger_charge(job=job, until=T0 + timedelta(hours=3))
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (1.5 * HOUR, 12 * HOUR)}
    assert UsageCharge.objects.count() == 1


def test_leaving_running_charges_up_to_that_instant_and_nothing_after(user: Any) -> None:
    job = running_job(user, held=[(node("n1"), 8)], at=T0)
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    job_transition(job, JobState.SUCCEEDED, reason="done", now=T0 + timedelta(hours=2))
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (2 * HOUR, 16 * HOUR)}
    assert not Allocation.objects.filter(job=job, released_at__isnull=True).exists()
    ledger_charge(job=job, until=T0 + timedelta(hours=5))  # released: nothing more to charge
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (2 * HOUR, 16 * HOUR)}


def test_a_restarted_attempt_is_charged_from_its_own_start(user: Any) -> None:
    n1 = node("n1")
    job = running_job(user, held=[(n1, 8)], at=T0)
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    Allocation.objects.filter(job=job).update(released_at=T0 + timedelta(hours=1))
    # Requeued, waited an hour, then attempt 2 started on a 2-GPU share.
    Job.objects.filter(pk=job.pk).update(attempt=2)
    job.refresh_from_db()
    AllocationFactory(job=job, node=n1, attempt=2, gpus=2, allocated_at=T0 + timedelta(hours=2))
    ledger_charge(job=job, until=T0 + timedelta(hours=3))
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (1.25 * HOUR, 10 * HOUR)}


def test_team_jobs_charge_the_team(user: Any) -> None:
    team = TeamFactory(name="vision")
    job = running_job(user, held=[(node("n1"), 8)], at=T0, team=team)
    ledger_charge(job=job, until=T0 + timedelta(hours=1))
    assert UsageCharge.objects.get(job=job).team == team


def test_charging_every_active_job_at_once_matches_charging_each(user: Any, other_user: Any, django_assert_max_num_queries: Any) -> None:
    team = TeamFactory(name="vision")
    n1, n2, n3 = node("n1"), node("n2"), node("n3", gpus=4)
    start = datetime(2026, 10, 31, 23, 0, tzinfo=UTC)
    a = running_job(user, held=[(n1, 2)], at=start, team=team)
    b = running_job(other_user, held=[(n2, 8), (n3, 4)], at=start + timedelta(minutes=30))
    c = running_job(user, held=[(n1, 6)], at=start)
    ledger_charge(job=c, until=start + timedelta(minutes=90))  # already charged part of the way
    done = running_job(user, held=[(n1, 8)], at=start)
    Job.objects.filter(pk=done.pk).update(state=JobState.SUCCEEDED)  # not active: never charged here

    until = datetime(2026, 11, 1, 2, 0, tzinfo=UTC)
    with django_assert_max_num_queries(8):
        assert ledger_charge_active(until=until) == 3
    assert ledger_charge_active(until=until) == 0  # idempotent
    oct1, nov1 = datetime(2026, 10, 1, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)
    assert charges(a) == {oct1: (0.25 * HOUR, 2 * HOUR), nov1: (0.5 * HOUR, 4 * HOUR)}
    assert charges(b) == {oct1: (2 * 1800, 12 * 1800), nov1: (2 * 2 * HOUR, 12 * 2 * HOUR)}
    assert charges(c) == {oct1: (0.75 * HOUR, 6 * HOUR), nov1: (0.75 * 2 * HOUR, 6 * 2 * HOUR)}
    assert charges(done) == {}
    assert set(Job.objects.filter(pk__in=[a.pk, b.pk, c.pk]).values_list("charged_until", flat=True)) == {until}
    # One job charged further on its own, then all of them again: nothing counted twice.
    ledger_charge(job=Job.objects.get(pk=a.pk), until=until + timedelta(hours=1))
    assert ledger_charge_active(until=until + timedelta(hours=1)) == 2
    assert charges(a)[nov1] == (0.75 * HOUR, 6 * HOUR)
    assert UsageCharge.objects.get(job=b, period_start=nov1).team_id is None
    assert UsageCharge.objects.get(job=a, period_start=nov1).team_id == team.pk


# --- the scheduler's accounts ------------------------------------------------------------------


def closed_form(start: float, end: float, h: float) -> float:
    """∫ 2^(-(now - t)/h) dt for t from `start` to `end` seconds before now."""
    return h / math.log(2) * (2 ** (-end / h) - 2 ** (-start / h))


def test_decayed_usage_matches_the_closed_form(user: Any, other_user: Any, settings: Any) -> None:
    h = 3600.0
    settings.MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS = h
    now = T0
    team = TeamFactory(name="vision")
    n1, n2 = node("n1"), node("n2")
    # alice: 8 GPUs (a whole node) from 2 h ago to 1 h ago, for team vision.
    done = running_job(user, held=[(n1, 8)], at=now - timedelta(hours=2), team=team)
    Allocation.objects.filter(job=done).update(released_at=now - timedelta(hours=1))
    # alice: 2 of n2's 8 GPUs for the last 30 minutes, still running, no team.
    running_job(user, held=[(n2, 2)], at=now - timedelta(minutes=30))
    # bob: a whole node released 11 half-lives ago is past the horizon; a 2-node gang for 10 minutes counts.
    old = running_job(other_user, held=[(n1, 8)], at=now - timedelta(hours=12), team=team)
    Allocation.objects.filter(job=old).update(released_at=now - timedelta(hours=11))
    running_job(other_user, held=[(n1, 8), (n2, 8)], at=now - timedelta(minutes=10), team=team)

    accounts = accounts_snapshot(now=now, users=["alice", "bob"], teams=["vision"])

    alice_done = closed_form(2 * h, 1 * h, h)  # = h/ln2 x (1/2 - 1/4)
    alice_live = closed_form(1800, 0, h)
    bob_gang = closed_form(600, 0, h)
    alice, bob, vision = accounts[user_key("alice")], accounts[user_key("bob")], accounts[team_key("vision")]
    assert alice_done == pytest.approx(h / math.log(2) * 0.25, rel=1e-12)
    assert alice.usage_gpu_seconds == pytest.approx(8 * alice_done + 2 * alice_live, rel=1e-9)
    assert alice.usage_node_seconds == pytest.approx(1 * alice_done + 0.25 * alice_live, rel=1e-9)
    assert bob.usage_gpu_seconds == pytest.approx(16 * bob_gang, rel=1e-9)
    assert bob.usage_node_seconds == pytest.approx(2 * bob_gang, rel=1e-9)
    assert vision.usage_gpu_seconds == pytest.approx(8 * alice_done + 16 * bob_gang, rel=1e-9)
    assert vision.usage_node_seconds == pytest.approx(alice_done + 2 * bob_gang, rel=1e-9)


def test_closed_form_is_the_integral() -> None:
    # A midpoint sum over one hour, 10 half-lives back, agrees with the closed form.
    h, start, end, steps = 600.0, 7200.0, 3600.0, 200_000
    width = (start - end) / steps
    numeric = sum(2 ** (-(end + (i + 0.5) * width) / h) * width for i in range(steps))
    assert closed_form(start, end, h) == pytest.approx(numeric, rel=1e-9)


def test_accounts_carry_limits_budgets_and_defaults(user: Any, settings: Any) -> None:
    settings.MUSTER_DEFAULT_MAX_GPUS = 16
    settings.MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD = 100.0
    settings.MUSTER_DEFAULT_FAIR_SHARE_WEIGHT = 1.5
    team = TeamFactory(name="vision")
    TeamFactory(name="nlp")
    bob = UserFactory(username="bob")
    Quota.objects.create(user=bob, max_gpus=32, node_hours_per_period=10.0, fair_share_weight=3.0)
    Quota.objects.create(team=team, max_gpus=64, node_hours_per_period=50.0, fair_share_weight=2.0)
    job = running_job(bob, held=[(node("n1"), 8)], at=T0 - timedelta(hours=4), team=team)
    ledger_charge(job=job, until=T0)  # 4 node-hours this period

    accounts = accounts_snapshot(now=T0, users=["alice", "bob"], teams=["vision", "nlp"])

    reset = datetime(2026, 12, 1, tzinfo=UTC).timestamp()
    alice = accounts[user_key("alice")]
    assert (alice.max_gpus, alice.node_hours_left, alice.weight, alice.budget_resets_at) == (16, 100.0, 1.5, reset)
    # What is back at the renewal, for the forecast of jobs planned past it.
    assert alice.node_hours_per_period == 100.0
    bob_account = accounts[user_key("bob")]
    assert (bob_account.max_gpus, bob_account.weight) == (32, 3.0)
    assert bob_account.node_hours_left == pytest.approx(6.0)
    vision = accounts[team_key("vision")]
    assert (vision.max_gpus, vision.weight) == (64, 2.0)
    assert vision.node_hours_left == pytest.approx(46.0)
    nlp = accounts[team_key("nlp")]
    assert (nlp.max_gpus, nlp.node_hours_left, nlp.weight, nlp.usage_gpu_seconds) == (None, None, 1.0, 0.0)


def test_an_exhausted_budget_leaves_zero_not_a_negative(user: Any) -> None:
    Quota.objects.create(user=user, node_hours_per_period=1.0)
    job = running_job(user, held=[(node("n1"), 8)], at=T0 - timedelta(hours=3))
    ledger_charge(job=job, until=T0)
    assert accounts_snapshot(now=T0, users=["alice"], teams=[])[user_key("alice")].node_hours_left == 0.0


def test_accounts_snapshot_runs_a_fixed_number_of_queries(db: None, django_assert_max_num_queries: Any, settings: Any) -> None:
    settings.MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD = 100.0
    n1 = node("n1")
    users = [UserFactory(username=f"u{i}") for i in range(30)]
    teams = [TeamFactory(name=f"t{i}") for i in range(10)]
    for i, u in enumerate(users):
        if i % 2:  # odd users have their own quota, even ones the site default
            Quota.objects.create(user=u, max_gpus=i, node_hours_per_period=50.0)
        job = running_job(u, held=[(n1, 1)], at=T0 - timedelta(hours=1), team=teams[i % 10])
        ledger_charge(job=job, until=T0)
    # Node-hours an admin added to this period (one query for every account's, beside the ledger's).
    BudgetGrant.objects.create(user=users[7], period_start=period_bounds(T0)[0], node_hours=5, reason="deadline")
    with django_assert_max_num_queries(4):
        accounts = accounts_snapshot(now=T0, users=[u.username for u in users], teams=[t.name for t in teams])
    assert len(accounts) == 40
    assert accounts[user_key("u7")].max_gpus == 7
    assert accounts[team_key("t3")].node_hours_left is None  # teams without a quota are unlimited
    assert accounts[user_key("u7")].node_hours_left == pytest.approx(50 + 5 - 1 / 8)
    assert accounts[user_key("u7")].node_hours_per_period == 50  # the quota's: what the next period brings back
    assert accounts[user_key("u5")].node_hours_left == pytest.approx(50 - 1 / 8)
    assert (accounts[user_key("u8")].max_gpus, accounts[user_key("u8")].node_hours_left) == (None, pytest.approx(100 - 1 / 8))


@pytest.mark.postgres
def test_concurrent_charges_count_once(transactional_db: None, require_postgres: None) -> None:
    """Two connections charging the same job to the same instant at once: the interval is charged once."""
    owner = UserFactory(username="carol")
    job = running_job(owner, held=[(node("n1"), 8)], at=T0)
    until = T0 + timedelta(hours=1)
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def charge(use_batch: bool) -> None:
        try:
            barrier.wait()
            if use_batch:
                ledger_charge_active(until=until)
            else:
                ledger_charge(job=Job.objects.get(pk=job.pk), until=until)
        except BaseException as exc:  # reported below, in the test's thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=charge, args=(i % 2 == 0,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert charges(job) == {datetime(2026, 11, 1, tzinfo=UTC): (HOUR, 8 * HOUR)}
