"""Effective limits of one account: its quota row, the site default (users), or unlimited (teams)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User

from policy.model import team_key, user_key
from quotas.models import Quota, Team

LIMIT_FIELDS = ("max_gpus", "max_wall_time_seconds", "max_node_hours_per_job", "node_hours_per_period", "fair_share_weight")


@dataclass(frozen=True)
class Limits:
    """What one user or team may use. None means unlimited."""

    kind: str  # "user" or "team"
    name: str
    max_gpus: int | None = None
    max_wall_time_seconds: int | None = None
    max_node_hours_per_job: float | None = None
    node_hours_per_period: float | None = None
    fair_share_weight: float = 1.0
    # True when no quota row exists: the site default (users) or unlimited (teams).
    is_default: bool = True

    @property
    def key(self) -> str:
        """The policy's account key: `user:<name>` or `team:<name>`."""
        return user_key(self.name) if self.kind == "user" else team_key(self.name)

    @property
    def whose(self) -> str:
        """'user alice' / 'team vision', for messages."""
        return f"{self.kind} {self.name}"

    def values(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in LIMIT_FIELDS}


def site_default_values() -> dict[str, Any]:
    """The quota of a user with no row of their own (settings MUSTER_DEFAULT_*)."""
    return {
        "max_gpus": settings.MUSTER_DEFAULT_MAX_GPUS,
        "max_wall_time_seconds": settings.MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS,
        "max_node_hours_per_job": settings.MUSTER_DEFAULT_MAX_NODE_HOURS_PER_JOB,
        "node_hours_per_period": settings.MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD,
        "fair_share_weight": settings.MUSTER_DEFAULT_FAIR_SHARE_WEIGHT,
    }


def default_values(kind: str) -> dict[str, Any]:
    """What an account without a quota row gets: the site default for users, unlimited for teams."""
    if kind == "user":
        return site_default_values()
    return {name: None for name in LIMIT_FIELDS} | {"fair_share_weight": 1.0}


def limits_of(kind: str, name: str, row: Quota | dict[str, Any] | None) -> Limits:
    """Limits from a quota row (a model or a `.values()` dict), or the default when there is none."""
    if row is None:
        return Limits(kind=kind, name=name, is_default=True, **default_values(kind))
    get = row.get if isinstance(row, dict) else lambda field: getattr(row, field)
    values: dict[str, Any] = {field: get(field) for field in LIMIT_FIELDS}
    return Limits(kind=kind, name=name, is_default=False, **values)


def effective_limits(*, user: User | None = None, team: Team | None = None) -> Limits:
    """The limits of exactly one account: a user (their row or the site default) or a team (its row or unlimited)."""
    if (user is None) == (team is None):
        raise TypeError("effective_limits takes exactly one of user= or team=")
    if user is not None:
        return limits_of("user", user.get_username(), Quota.objects.filter(user=user).first())
    assert team is not None
    return limits_of("team", team.name, Quota.objects.filter(team=team).first())
