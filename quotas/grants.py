"""Reads of the node-hours admins added to budgets for one period (quotas.BudgetGrant): what each account was given on
top of its quota's budget in a period, summed in one query."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db.models import Q, QuerySet, Sum

from policy.model import team_key, user_key
from quotas.models import BudgetGrant


def grants_by_id(period_start: datetime, *, user_ids: Sequence[int] = (), team_ids: Sequence[int] = ()) -> dict[tuple[str, int], float]:
    """Node-hours granted for the period starting `period_start`, keyed ("user", id) / ("team", id); absent: none."""
    if not user_ids and not team_ids:
        return {}
    rows = (
        BudgetGrant.objects.filter(period_start=period_start)
        .filter(Q(user_id__in=user_ids) | Q(team_id__in=team_ids))
        .values("user_id", "team_id")
        .annotate(total=Sum("node_hours"))
        .order_by()
    )
    found: dict[tuple[str, int], float] = defaultdict(float)
    for row in rows:
        key = ("user", row["user_id"]) if row["user_id"] is not None else ("team", row["team_id"])
        found[key] += row["total"]
    return dict(found)


def grants_by_key(period_start: datetime, *, users: Iterable[str], teams: Iterable[str]) -> dict[str, float]:
    """The same by the policy's account keys (`user:<name>`, `team:<name>`), for the scheduler's snapshot."""
    users, teams = list(users), list(teams)
    if not users and not teams:
        return {}
    rows = (
        BudgetGrant.objects.filter(period_start=period_start)
        .filter(Q(user__username__in=users) | Q(team__name__in=teams))
        .values("user__username", "team__name")
        .annotate(total=Sum("node_hours"))
        .order_by()
    )
    found: dict[str, float] = defaultdict(float)
    for row in rows:
        key = user_key(row["user__username"]) if row["user__username"] is not None else team_key(row["team__name"])
        found[key] += row["total"]
    return dict(found)


def grants_of(*, period_start: datetime, user: object = None, team: object = None) -> QuerySet[BudgetGrant]:
    """One account's grants for a period, oldest first (the quota page lists them)."""
    return BudgetGrant.objects.filter(period_start=period_start, **({"user": user} if user is not None else {"team": team}))
