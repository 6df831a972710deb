"""Reads of the node-hours admins added to budgets for one period (quotas.BudgetGrant): what each account was given on
top of its quota's budget in a period, summed in one query."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from django.db.models import Q, QuerySet, Sum

from policy.model import team_key, user_key
from quotas.models import BudgetGrant

K = TypeVar("K")


def grants_by_id(period_start: datetime, *, user_ids: Sequence[int] = (), team_ids: Sequence[int] = ()) -> dict[tuple[str, int], float]:
    """Node-hours granted for the period starting `period_start`, keyed ("user", id) / ("team", id); absent: none."""
    if not user_ids and not team_ids:
        return {}
    rows = _summed(period_start, Q(user_id__in=user_ids) | Q(team_id__in=team_ids), "user_id", "team_id")
    return _keyed(rows, lambda user: ("user", user), lambda team: ("team", team))


def grants_by_key(period_start: datetime, *, users: Iterable[str], teams: Iterable[str]) -> dict[str, float]:
    """The same by the policy's account keys (`user:<name>`, `team:<name>`), for the scheduler's snapshot."""
    users, teams = list(users), list(teams)
    if not users and not teams:
        return {}
    rows = _summed(period_start, Q(user__username__in=users) | Q(team__name__in=teams), "user__username", "team__name")
    return _keyed(rows, user_key, team_key)


def _summed(period_start: datetime, accounts: Q, user_field: str, team_field: str) -> list[tuple[Any, Any, float]]:
    """(user, team, node-hours) per account granted in the period: one query, one row per account. A revoked grant adds
    nothing: every budget (the scheduler's, the submit's check, the estimates, the pages, `muster usage`) reads this."""
    rows = (
        BudgetGrant.objects.filter(period_start=period_start, revoked_at__isnull=True)
        .filter(accounts)
        .values_list(user_field, team_field)
        .annotate(total=Sum("node_hours"))
        .order_by()
    )
    return list(rows)


def _keyed(rows: Iterable[tuple[Any, Any, float]], user: Callable[[Any], K], team: Callable[[Any], K]) -> dict[K, float]:
    found: dict[K, float] = defaultdict(float)
    for user_of, team_of, total in rows:
        found[user(user_of) if user_of is not None else team(team_of)] += total
    return dict(found)


def grants_of(*, period_start: datetime, user: object = None, team: object = None) -> QuerySet[BudgetGrant]:
    """One account's grants for a period, oldest first, the revoked too (the quota page and the API list them)."""
    return BudgetGrant.objects.filter(period_start=period_start, **({"user": user} if user is not None else {"team": team}))
