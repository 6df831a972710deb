"""Reads of quotas and usage: limits with current usage, the scheduler's accounts, usage reports.

Every function here runs a fixed number of queries, however many accounts it covers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db.models import FloatField, Q, QuerySet, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from jobs.amounts import gpu_amount, plural
from jobs.models import Allocation
from jobs.selectors import jobs_visible_to
from jobs.states import ACTIVE_STATES
from policy.budget import NodeHoursSaid, node_hours_said
from policy.model import Account, BudgetLeft, team_key, user_key
from quotas.grants import grants_by_id, grants_by_key
from quotas.limits import LIMIT_FIELDS, Limits, effective_limits, limits_of
from quotas.models import Quota, Team, TeamVolume, UsageCharge
from quotas.periods import decayed_seconds, local_today, overlap_seconds, period_bounds

__all__ = [
    "AboveQuota",
    "AccountUsage",
    "BudgetLeft",
    "ReportRow",
    "UsageSummary",
    "account_usages",
    "accounts_above_quota",
    "accounts_snapshot",
    "effective_limits",
    "period_bounds",
    "teams_visible_to",
    "usage_report",
    "usage_summary",
    "users_visible_to",
]

# Allocations released longer ago than this many half-lives weigh under 0.1% and are not read.
DECAY_HORIZON_HALF_LIVES = 10

# The share of its node one allocation holds: GPUs held / GPUs on the node.
NODE_SHARE = Cast("gpus", FloatField()) / Cast("node__gpus_total", FloatField())


@dataclass(frozen=True)
class AccountUsage:
    """One account's limits and what it uses now and in the current budget period."""

    limits: Limits
    gpus_in_use: float  # a GPU slice counts its share
    node_hours_used: float
    gpu_hours_used: float
    period_start: datetime
    period_end: datetime
    # What its running jobs may still use by their wall time (the share of each node they hold x the time left).
    node_hours_committed: float = 0.0
    # Of `gpus_in_use`, what jobs hold within the quota: a preemptible job borrowing beyond it counts against no quota.
    gpus_within_quota: float = 0.0
    # Node-hours admins added to this period's budget only (quotas.BudgetGrant): the next period starts without them.
    node_hours_granted: float = 0.0

    @property
    def budget_this_period(self) -> float | None:
        """The quota's budget plus this period's grants; None without a budget."""
        budget = self.limits.node_hours_per_period
        return None if budget is None else budget + self.node_hours_granted

    @property
    def gpus_borrowed(self) -> float:
        """Of `gpus_in_use`, what preemptible jobs borrow beyond the quota (placed `over_quota`): first to be preempted
        when the quota's own jobs need the GPUs, and counted against no quota."""
        return gpu_amount(max(0.0, self.gpus_in_use - self.gpus_within_quota))

    @property
    def gpus_in_use_text(self) -> str:
        """GPUs held as every page states them, the two parts labelled so they add up to `gpus_in_use`: "32 within quota +
        8 borrowed (preemptible)". A quota page that said "40 in use" of a quota of 40 looked full while the jobs' reasons
        said 32 of 40 were in use; both were right, counting different things."""
        if not self.gpus_borrowed:
            return f"{self.gpus_in_use:g}"
        return f"{self.gpus_within_quota:g} within quota + {self.gpus_borrowed:g} borrowed (preemptible)"

    @property
    def above_quota(self) -> bool:
        """It holds more GPUs within its quota than the quota allows: the quota was lowered under its running jobs
        (they are not stopped; nothing new of it starts until it is under). Borrowing beyond it is not this."""
        return self.limits.max_gpus is not None and self.gpus_within_quota > self.limits.max_gpus

    @property
    def above_quota_text(self) -> str:
        """How far above its quota it is: "team research holds 126 GPUs of its quota of 8"."""
        return above_quota_text(self.limits, self.gpus_within_quota)

    @property
    def budget(self) -> BudgetLeft | None:
        """What is left of the budget this period and how much of it running jobs are committed to; None without one."""
        budget = self.budget_this_period
        if budget is None:
            return None
        return BudgetLeft(left=node_hours_left(budget, self.node_hours_used), committed=self.node_hours_committed)

    @property
    def node_hours_left(self) -> float | None:
        return None if self.budget is None else self.budget.left

    @property
    def node_hours_said(self) -> NodeHoursSaid:
        """Used, left and committed as the pages state them: to the same places, adding up to the budget as written, a
        use that is not nothing never 0.0 (policy.budget.node_hours_said; `muster usage` by the same rule)."""
        return node_hours_said(used=self.node_hours_used, budget=self.budget_this_period, committed=self.node_hours_committed)

    @property
    def node_hours_used_text(self) -> str:
        """Node-hours used this period as the pages state them: "0.011 used of 3: 2.989 node-hours left", where the
        team's read "0.0 used of 3" beside the user's "0.011 used" for the same jobs."""
        return self.node_hours_said.used

    @property
    def budget_text(self) -> str:
        """The budget left (and committed) in the words of BudgetLeft, to the places of `node_hours_used_text`; empty
        without a budget."""
        return self.node_hours_said.budget_text

    @property
    def budget_fraction_used(self) -> float | None:
        """Share of the period's budget used, 0..1 (for bars); None without a budget."""
        budget = self.budget_this_period
        if budget is None:
            return None
        return 1.0 if budget <= 0 else min(1.0, self.node_hours_used / budget)


@dataclass(frozen=True)
class UsageSummary:
    username: str
    period_start: datetime
    period_end: datetime
    # The user first, then each of their teams by name.
    accounts: list[AccountUsage]

    @property
    def period_last_day(self) -> date:
        """The last day of the budget period (the end is exclusive: midnight after it)."""
        return local_today(self.period_end - timedelta(microseconds=1))

    @property
    def user_account(self) -> AccountUsage:
        return self.accounts[0]

    @property
    def team_accounts(self) -> list[AccountUsage]:
        return self.accounts[1:]


@dataclass(frozen=True)
class ReportRow:
    name: str
    jobs: int
    gpu_hours: float
    node_hours: float


def node_hours_left(budget: float, used: float) -> float:
    """What is left of a period's budget after the ledger's charges (never below nothing)."""
    return max(0.0, budget - used)


# --- who may see which accounts ----------------------------------------------------------------


def users_visible_to(viewer: User) -> QuerySet[Any]:
    """Staff see every user's quota; others only their own. One rule for list and detail."""
    users = get_user_model().objects.order_by("username")
    return users if getattr(viewer, "is_staff", False) else users.filter(pk=viewer.pk)


def volumes_of_teams_of(user: User) -> list[tuple[str, str, bool]]:
    """(team, claim, read-only) of every volume given to a team the user is in: what the user's jobs may mount."""
    return list(
        TeamVolume.objects.filter(team__members=user).order_by("team__name", "claim").values_list("team__name", "claim", "read_only")
    )


def teams_visible_to(viewer: User) -> QuerySet[Team]:
    """Staff see every team; others the teams they belong to."""
    teams = Team.objects.order_by("name")
    return teams if getattr(viewer, "is_staff", False) else teams.filter(members=viewer)


def job_filter_teams(viewer: User) -> list[str]:
    """The team names a viewer's job list may be filtered by: the teams visible to them, and the teams their visible
    jobs were for (one they have left since), sorted."""
    of_jobs = jobs_visible_to(viewer).exclude(team=None).values_list("team__name", flat=True).distinct()
    return sorted({*teams_visible_to(viewer).values_list("name", flat=True), *of_jobs})


# --- limits with usage ---------------------------------------------------------------------------


def account_usages(*, users: Sequence[Any] = (), teams: Sequence[Team] = (), now: datetime | None = None) -> list[AccountUsage]:
    """Limits, GPUs in use, this period's ledger totals and the budget left with what running jobs are committed to
    (`AccountUsage.budget`: the one place the pages and the API get that figure) for the given users then teams
    (three queries)."""
    now = now or timezone.now()
    period_start, period_end = period_bounds(now)
    user_ids = [u.pk for u in users]
    team_ids = [t.pk for t in teams]
    if not user_ids and not team_ids:
        return []
    rows = {
        ("user", q["user_id"]) if q["user_id"] else ("team", q["team_id"]): q
        for q in Quota.objects.filter(Q(user_id__in=user_ids) | Q(team_id__in=team_ids)).values("user_id", "team_id", *LIMIT_FIELDS)
    }
    in_use: dict[tuple[str, int], float] = defaultdict(float)
    within: dict[tuple[str, int], float] = defaultdict(float)
    committed: dict[tuple[str, int], float] = defaultdict(float)
    # Grouped by the times of each job: the GPUs it holds, and the node-hours it may still use until its wall time
    # ends (counted from its placement, as the scheduler's snapshot counts it).
    live = (
        Allocation.objects.filter(released_at__isnull=True)
        .filter(Q(job__owner_id__in=user_ids) | Q(job__team_id__in=team_ids))
        .values_list("job__owner_id", "job__team_id", "job__scheduled_at", "job__started_at", "job__wall_time_seconds", "job__over_quota")
        .annotate(gpus_held=Sum("gpus"), node_share=Sum(NODE_SHARE))
        .order_by()
    )
    for owner_id, team_id, scheduled_at, started_at, wall, over_quota, gpus_held, node_share in live:
        placed = scheduled_at or started_at
        left_hours = 0.0 if placed is None else max(0.0, (placed + timedelta(seconds=wall) - now).total_seconds()) / 3600
        for key in (("user", owner_id), ("team", team_id)):
            if key[1] is not None:
                in_use[key] += gpus_held
                if not over_quota:
                    within[key] += gpus_held
                committed[key] += node_share * left_hours
    charged: dict[tuple[str, int], tuple[float, float]] = defaultdict(lambda: (0.0, 0.0))
    charges = (
        UsageCharge.objects.filter(period_start__gte=period_start, period_start__lt=period_end)
        .filter(Q(user_id__in=user_ids) | Q(team_id__in=team_ids))
        .values("user_id", "team_id")
        .annotate(node_seconds=Sum("node_seconds"), gpu_seconds=Sum("gpu_seconds"))
    )
    for row in charges:
        for key in (("user", row["user_id"]), ("team", row["team_id"])):
            if key[1] is not None:
                node, gpu = charged[key]
                charged[key] = (node + row["node_seconds"], gpu + row["gpu_seconds"])
    granted = grants_by_id(period_start, user_ids=user_ids, team_ids=team_ids)

    def usage(kind: str, pk: int, name: str) -> AccountUsage:
        node_seconds, gpu_seconds = charged[kind, pk]
        return AccountUsage(
            limits=limits_of(kind, name, rows.get((kind, pk))),
            gpus_in_use=gpu_amount(in_use[kind, pk]),
            node_hours_used=node_seconds / 3600,
            gpu_hours_used=gpu_seconds / 3600,
            period_start=period_start,
            period_end=period_end,
            node_hours_committed=committed[kind, pk],
            gpus_within_quota=gpu_amount(within[kind, pk]),
            node_hours_granted=granted.get((kind, pk), 0.0),
        )

    return [usage("user", u.pk, u.get_username()) for u in users] + [usage("team", t.pk, t.name) for t in teams]


@dataclass(frozen=True)
class AboveQuota:
    """An account whose jobs hold more GPUs within its quota than the quota allows now: the quota was lowered under its
    running jobs (`AccountUsage.above_quota`, as the Usage page shows it)."""

    limits: Limits
    gpus_within_quota: float

    @property
    def above_quota_text(self) -> str:
        """How far above its quota it is: "team research holds 126 GPUs of its quota of 8"."""
        return above_quota_text(self.limits, self.gpus_within_quota)


def above_quota_text(limits: Limits, gpus_within_quota: float) -> str:
    return f"{limits.kind} {limits.name} holds {plural(gpus_within_quota, 'GPU')} of its quota of {limits.max_gpus}"


def accounts_above_quota() -> list[AboveQuota]:
    """The users and teams whose running jobs hold more GPUs within their quota than it allows now, users first, each by
    name: what an admin who lowered a quota to get GPUs back looks for.

    The queue's summary, the cluster page, the dashboard and /metrics ask on every read: the GPUs are summed per
    account in the database (a row per account holding GPUs, never one per running job; 4,000 running jobs were 4,000
    rows here, read and summed in Python on every read of the queue), and only those accounts' quotas are read.
    """
    within = Allocation.objects.filter(released_at__isnull=True, job__state__in=ACTIVE_STATES, job__over_quota=False).order_by()
    held: dict[tuple[str, int], tuple[str, float]] = {}
    for kind, account, name in (("user", "job__owner_id", "job__owner__username"), ("team", "job__team_id", "job__team__name")):
        for pk, account_name, gpus in within.exclude(**{account: None}).values_list(account, name).annotate(gpus=Sum("gpus")):
            held[kind, pk] = (account_name, gpu_amount(gpus))
    if not held:
        return []
    user_ids = [pk for kind, pk in held if kind == "user"]
    team_ids = [pk for kind, pk in held if kind == "team"]
    quotas = {
        ("user", q["user_id"]) if q["user_id"] else ("team", q["team_id"]): q
        for q in Quota.objects.filter(Q(user_id__in=user_ids) | Q(team_id__in=team_ids)).values("user_id", "team_id", *LIMIT_FIELDS)
    }
    above = []
    for (kind, pk), (name, gpus) in held.items():
        limits = limits_of(kind, name, quotas.get((kind, pk)))
        if limits.max_gpus is not None and gpus > limits.max_gpus:
            above.append(AboveQuota(limits=limits, gpus_within_quota=gpus))
    return sorted(above, key=lambda a: (a.limits.kind != "user", a.limits.name))


def usage_summary(user: User, *, now: datetime | None = None) -> UsageSummary:
    """What the user and each of their teams use now and this period, against their limits."""
    now = now or timezone.now()
    period_start, period_end = period_bounds(now)
    teams = list(Team.objects.filter(members=user).order_by("name"))
    return UsageSummary(
        username=user.get_username(),
        period_start=period_start,
        period_end=period_end,
        accounts=account_usages(users=[user], teams=teams, now=now),
    )


# --- the scheduler's view ----------------------------------------------------------------------


def accounts_snapshot(*, now: datetime, users: Iterable[str], teams: Iterable[str]) -> dict[str, Account]:
    """The policy's `Account` for each username and team name, keyed `user:<name>` / `team:<name>`.

    Limits come from quota rows (or the defaults); `node_hours_left` from this period's
    ledger; decayed usage exactly from allocations, each GPU-second weighted
    2^(-age / half-life). At most three queries, whatever the number of accounts.
    """
    users = sorted(set(users))
    teams = sorted(set(teams))
    limits: dict[str, Limits] = {}
    quota_rows = Quota.objects.filter(Q(user__username__in=users) | Q(team__name__in=teams)).values(
        "user__username", "team__name", *LIMIT_FIELDS
    )
    found = {("user", r["user__username"]) if r["user__username"] else ("team", r["team__name"]): r for r in quota_rows}
    for kind, names in (("user", users), ("team", teams)):
        for name in names:
            account = limits_of(kind, name, found.get((kind, name)))
            limits[account.key] = account

    period_start, period_end = period_bounds(now)
    used_node_seconds = _period_node_seconds(limits.values(), period_start, period_end)
    # This period's budget is the quota's plus what admins added to it (quotas.BudgetGrant); `node_hours_per_period`
    # stays the quota's, the whole budget a renewal brings back.
    granted = grants_by_key(
        period_start,
        users=[a.name for a in limits.values() if a.kind == "user" and a.node_hours_per_period is not None],
        teams=[a.name for a in limits.values() if a.kind == "team" and a.node_hours_per_period is not None],
    )
    usage = _decayed_usage(now=now, users=users, teams=teams)
    accounts: dict[str, Account] = {}
    for key, account in limits.items():
        budget = account.node_hours_per_period
        gpu_seconds, node_seconds = usage.get(key, (0.0, 0.0))
        accounts[key] = Account(
            key=key,
            max_gpus=account.max_gpus,
            node_hours_left=None
            if budget is None
            else node_hours_left(budget + granted.get(key, 0.0), used_node_seconds.get(key, 0.0) / 3600),
            budget_resets_at=period_end.timestamp(),
            node_hours_per_period=budget,
            node_hours_granted=granted.get(key, 0.0),
            max_wall_seconds=account.max_wall_time_seconds,
            max_node_hours_per_job=account.max_node_hours_per_job,
            weight=account.fair_share_weight,
            usage_gpu_seconds=gpu_seconds,
            usage_node_seconds=node_seconds,
        )
    return accounts


def _period_node_seconds(accounts: Iterable[Limits], period_start: datetime, period_end: datetime) -> dict[str, float]:
    """Node-seconds charged this period to the accounts that have a budget (one query; none if no budgets)."""
    budgeted = [a for a in accounts if a.node_hours_per_period is not None]
    users = [a.name for a in budgeted if a.kind == "user"]
    teams = [a.name for a in budgeted if a.kind == "team"]
    if not budgeted:
        return {}
    rows = (
        UsageCharge.objects.filter(period_start__gte=period_start, period_start__lt=period_end)
        .filter(Q(user__username__in=users) | Q(team__name__in=teams))
        .values("user__username", "team__name")
        .annotate(node_seconds=Sum("node_seconds"))
    )
    used: dict[str, float] = defaultdict(float)
    for row in rows:
        used[user_key(row["user__username"])] += row["node_seconds"]
        if row["team__name"] is not None:
            used[team_key(row["team__name"])] += row["node_seconds"]
    return used


def _decayed_usage(*, now: datetime, users: Sequence[str], teams: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Decayed (GPU-seconds, node-seconds) per account key from live and recently released allocations."""
    half_life = settings.MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS
    horizon = now - timedelta(seconds=DECAY_HORIZON_HALF_LIVES * half_life)
    # Ranks of one attempt share their times, so grouping by them sums a gang in the database.
    rows = (
        Allocation.objects.filter(Q(released_at__isnull=True) | Q(released_at__gte=horizon))
        .filter(Q(job__owner__username__in=users) | Q(job__team__name__in=teams))
        .values_list("job__owner__username", "job__team__name", "allocated_at", "released_at")
        .annotate(gpus_held=Sum("gpus"), node_share=Sum(NODE_SHARE))
        .order_by()
    )
    usage: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    team_names = set(teams)
    for owner, team, allocated_at, released_at, gpus_held, node_share in rows:
        weight = decayed_seconds(allocated_at, released_at or now, now=now, half_life=half_life)
        keys = [user_key(owner)] + ([team_key(team)] if team in team_names else [])
        for key in keys:
            usage[key][0] += weight * gpus_held
            usage[key][1] += weight * node_share
    return {key: (gpu, node) for key, (gpu, node) in usage.items()}


# --- reports -------------------------------------------------------------------------------------


# A report by team's row for the jobs submitted for no team (no team's name has parentheses).
NO_TEAM = "(no team)"


def usage_report(
    *, start: datetime, end: datetime, group_by: str, viewer: User | None = None, now: datetime | None = None
) -> list[ReportRow]:
    """Jobs run, GPU-hours and node-hours per user or team in [start, end), sorted by name.

    Each allocation counts only the part of its time inside the range (like Slurm's
    sreport). A viewer who is not staff sees only their own user row, or their teams.
    By team, staff also get the jobs of no team, last, as NO_TEAM: without them the two
    reports' totals differ and the cluster's use does not add up.
    """
    if group_by not in {"user", "team"}:
        raise ValueError(f"group_by must be 'user' or 'team', not {group_by!r}")
    now = now or timezone.now()
    account = "job__owner__username" if group_by == "user" else "job__team__name"
    allocations = Allocation.objects.filter(allocated_at__lt=end).filter(Q(released_at__isnull=True) | Q(released_at__gt=start))
    if viewer is not None and not getattr(viewer, "is_staff", False):
        # The accounts the viewer may see (users_visible_to / teams_visible_to): their own, or their teams.
        allocations = (
            allocations.filter(job__owner__in=users_visible_to(viewer))
            if group_by == "user"
            else allocations.filter(job__team__in=teams_visible_to(viewer))
        )
    rows = (
        allocations.values_list(account, "job_id", "allocated_at", "released_at")
        .annotate(gpus_held=Sum("gpus"), node_share=Sum(NODE_SHARE))
        .order_by()
    )
    jobs: dict[str, set[int]] = defaultdict(set)
    gpu_seconds: dict[str, float] = defaultdict(float)
    node_seconds: dict[str, float] = defaultdict(float)
    for account_name, job_id, allocated_at, released_at, gpus_held, node_share in rows:
        seconds = overlap_seconds(allocated_at, min(released_at or now, now), start, end)
        if seconds <= 0:
            continue
        name = NO_TEAM if account_name is None else account_name
        jobs[name].add(job_id)
        gpu_seconds[name] += seconds * gpus_held
        node_seconds[name] += seconds * node_share
    return [
        ReportRow(name=name, jobs=len(jobs[name]), gpu_hours=gpu_seconds[name] / 3600, node_hours=node_seconds[name] / 3600)
        for name in sorted(jobs, key=lambda name: (name == NO_TEAM, name))
    ]
