"""Writes for quotas and the usage ledger, and the submit-time quota check."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models import F, Max
from django.utils import timezone

from audit.services import audit_changes, audit_record
from jobs.amounts import duration, plural
from jobs.models import Allocation, Job, Node, NodeState
from jobs.states import ACTIVE_STATES, JobState
from policy.budget import node_hours_said, node_hours_text, node_hours_words
from quotas.grants import grants_by_id
from quotas.limits import LIMIT_FIELDS, Limits, default_values, effective_limits, limits_of
from quotas.models import BudgetGrant, Quota, Team, UsageCharge
from quotas.periods import period_bounds, period_segments
from quotas.selectors import AccountUsage, account_usages


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return f"{hours:g} h" if hours >= 1 else f"{seconds / 60:g} min"


def _whose(limits: Limits) -> str:
    return f"your quota (user {limits.name})" if limits.kind == "user" else f"the quota of your team {limits.name}"


def held_gpus(nodes: int, gpus_per_node: int) -> int:
    """What the job will hold: a multi-node job takes whole nodes, at least the smallest ones it fits on (as the policy counts)."""
    if nodes == 1:
        return gpus_per_node
    sizes = Node.objects.exclude(state=NodeState.GONE).filter(gpus_total__gte=gpus_per_node).values_list("gpus_total", flat=True)
    return nodes * min(sizes, default=gpus_per_node)


def team_volumes_check(*, team: Team | None, volumes: Sequence[Mapping[str, object]] = (), **_spec: object) -> None:
    """A job mounts only volumes its team was given (quotas.TeamVolume), by claim name; raises ValidationError."""
    if not volumes:
        return
    if team is None:
        raise ValidationError({"volumes": ["A job mounts its team's volumes: give it a team (`team`) that has them."]})
    given = set(team.volumes.values_list("claim", flat=True))
    unknown = sorted({str(v.get("claim")) for v in volumes} - given)
    if unknown:
        offered = ", ".join(sorted(given)) or "none"
        raise ValidationError({"volumes": [f"Team {team.name} has no volume {', '.join(map(repr, unknown))} (it has: {offered})."]})


def quota_check_job(
    *,
    owner: User,
    team: Team | None,
    nodes: int,
    gpus_per_node: int,
    wall_time_seconds: int,
    preemptible: bool = False,
    gpu_fraction: float | None = None,
    **_spec: object,
) -> None:
    """Reject a job that its owner's or team's limits could never let run, naming each limit.

    Raises ValidationError({field: [messages]}). Limits that can pass later (GPUs in
    use, node-hours left this period) are not checked here: such jobs wait, unless the job needs more than a whole
    period's budget, which no period gives. A preemptible job may exceed `max_gpus` by borrowing idle GPUs.
    """
    errors: dict[str, list[str]] = {}
    gpus = held_gpus(nodes, gpus_per_node)
    node_hours = nodes * wall_time_seconds / 3600
    least = least_node_hours(nodes, gpus_per_node, wall_time_seconds, gpu_fraction)
    accounts = [effective_limits(user=owner)] + ([effective_limits(team=team)] if team is not None else [])
    # This period's budget counts what admins added to it (BudgetGrant): a job that fits it may start this period.
    granted = grants_by_id(period_bounds(timezone.now())[0], user_ids=[owner.pk], team_ids=[team.pk] if team is not None else [])
    # The field to change: a one-node job's GPUs (or its slice); a gang holds its nodes whole, so only fewer nodes help.
    gpus_field = "nodes" if nodes > 1 else "gpu_fraction" if gpu_fraction is not None else "gpus_per_node"
    for limits in accounts:
        whose = _whose(limits)
        if not preemptible and limits.max_gpus is not None and gpus > limits.max_gpus:
            held = "" if gpus == nodes * gpus_per_node else f" (a job of several nodes holds them whole: {nodes} x {gpus // nodes})"
            errors.setdefault(gpus_field, []).append(
                f"The job needs {plural(gpus, 'GPU')}{held}; {whose} allows at most {limits.max_gpus} at once. "
                "A preemptible job may borrow idle GPUs beyond it."
            )
        if limits.max_wall_time_seconds is not None and wall_time_seconds > limits.max_wall_time_seconds:
            errors.setdefault("wall_time_seconds", []).append(
                f"The wall time is {wall_time_seconds} s ({_hours(wall_time_seconds)}); {whose} allows at most "
                f"{limits.max_wall_time_seconds} s ({_hours(limits.max_wall_time_seconds)}) per job."
            )
        if limits.max_node_hours_per_job is not None and node_hours > limits.max_node_hours_per_job:
            errors.setdefault("nodes", []).append(
                f"The job may hold {nodes} whole node{'s' if nodes != 1 else ''} for {_hours(wall_time_seconds)}: "
                f"{node_hours_words(node_hours, '.3g')}; {whose} allows at most "
                f"{node_hours_words(limits.max_node_hours_per_job, '.3g')} per job "
                "(counted by whole nodes, whatever share of a node the job takes)."
            )
        budget = limits.node_hours_per_period
        if budget is not None:
            budget += granted.get((limits.kind, owner.pk if limits.kind == "user" else team.pk if team is not None else 0), 0.0)
        if budget is not None and least > budget:
            # Else it was accepted and waited for good: "[waits] ... It renews 2026-12-01", and then it did not fit either.
            errors.setdefault("wall_time_seconds", []).append(
                f"The job would use at least {node_hours_words(least, '.3g')} of its budget; "
                f"{whose} gives {node_hours_words(budget, '.3g')} "
                f"a {settings.MUSTER_BUDGET_PERIOD} in all, so it could never start. Submit it shorter or on fewer nodes, "
                "or ask an admin to raise the budget."
            )
    if errors:
        raise ValidationError(errors)


def _jobs_listed(pks: Sequence[int]) -> str:
    """'job 5', 'jobs 5, 6, 9' (the first ten, then 'and more'): a bare '(5)' read as a count, not a job."""
    return f"job{'' if len(pks) == 1 else 's'} " + ", ".join(str(pk) for pk in pks[:10]) + (" and more" if len(pks) > 10 else "")


def _stuck_warning(pks: Sequence[int], whose: str, need: str, why: str, limit: str) -> str:
    """A lowered limit's warning of the queued jobs it leaves with no way to start until it is raised."""
    one = len(pks) == 1
    listed = _jobs_listed(pks)
    return (
        f"{len(pks)} queued job{'' if one else 's'} of {whose} need{'s' if one else ''} {need} ({listed}): "
        f"{why}{'it waits' if one else 'they wait'} until {limit} is raised, or until cancelled."
    )


def least_node_hours(nodes: int, gpus_per_node: int, wall_time_seconds: int, gpu_fraction: float | None) -> float:
    """The least the job can charge a budget, as the ledger charges (the share of each node it holds): a gang whole
    nodes; a single-node job its GPUs (or its slice of one) over the largest node's, since which node it gets is
    not known yet."""
    hours = wall_time_seconds / 3600
    if nodes > 1:
        return nodes * hours
    largest = Node.objects.exclude(state=NodeState.GONE).aggregate(most=Max("gpus_total"))["most"] or gpus_per_node
    gpus = gpu_fraction if gpu_fraction is not None else gpus_per_node
    return min(1.0, gpus / max(largest, 1)) * hours


def ledger_charge(*, job: Job, until: datetime) -> None:
    """Charge what the job held since it was last charged, up to `until`, to the ledger.

    Covers max(job.charged_until, start of its live allocations) .. until, split at
    budget-period boundaries: node-seconds = seconds x Σ(GPUs held / GPUs on the node),
    GPU-seconds = seconds x Σ GPUs held, over the live allocations of the current
    attempt. Idempotent: charging twice up to the same instant adds nothing. The job's
    row is locked while it is charged, so concurrent callers never charge the same
    interval twice.
    """
    with transaction.atomic():
        locked = Job.objects.select_for_update().filter(pk=job.pk).values_list("attempt", "charged_until").first()
        if locked is None:
            return
        attempt, charged_until = locked
        live = list(
            Allocation.objects.filter(job_id=job.pk, attempt=attempt, released_at__isnull=True).values_list(
                "gpus", "node__gpus_total", "allocated_at"
            )
        )
        pieces = _pieces(live, charged_until, until)
        if not pieces:
            return
        Job.objects.filter(pk=job.pk).update(charged_until=until)
        for period_start, (node_seconds, gpu_seconds) in pieces.items():
            _charge_add(job, period_start, node_seconds=node_seconds, gpu_seconds=gpu_seconds)
    job.charged_until = until


def _pieces(
    live: list[tuple[float, int, datetime]], charged_until: datetime | None, until: datetime
) -> dict[datetime, tuple[float, float]]:
    """(node-seconds, GPU-seconds) per period start for allocations (GPUs, node GPUs, allocated_at) not yet charged."""
    if not live:
        return {}
    earliest = min(allocated_at for _, _, allocated_at in live)
    start = earliest if charged_until is None else max(charged_until, earliest)
    gpus = sum(g for g, _, _ in live)
    node_share = sum(g / total for g, total, _ in live)
    return {period_start: (seconds * node_share, seconds * gpus) for period_start, seconds in period_segments(start, until)}


def ledger_charge_active(*, until: datetime) -> int:
    """`ledger_charge` for every SCHEDULED/RUNNING job at once, in a fixed number of queries; returns jobs charged.

    For the cycle: the active jobs' rows locked in id order, one read of their live
    allocations, one update of `charged_until` and one upsert of the ledger rows,
    however many jobs run. Same arithmetic and idempotence as `ledger_charge`, and
    safe beside it (both charge under the job's row lock).
    """
    with transaction.atomic():
        jobs = {
            pk: (owner_id, team_id, charged_until)
            for pk, owner_id, team_id, charged_until in Job.objects.select_for_update()
            .filter(state__in=ACTIVE_STATES)
            .order_by("pk")
            .values_list("pk", "owner_id", "team_id", "charged_until")
        }
        held: dict[int, list[tuple[float, int, datetime]]] = defaultdict(list)
        live = Allocation.objects.filter(job_id__in=list(jobs), released_at__isnull=True, attempt=F("job__attempt")).values_list(
            "job_id", "gpus", "node__gpus_total", "allocated_at"
        )
        for job_id, gpus, total, allocated_at in live:
            held[job_id].append((gpus, total, allocated_at))
        totals: dict[tuple[int, datetime], list[float]] = {}
        for job_id, allocations in held.items():
            for period_start, (node_seconds, gpu_seconds) in _pieces(allocations, jobs[job_id][2], until).items():
                totals[job_id, period_start] = [node_seconds, gpu_seconds]
        charged = sorted({job_id for job_id, _ in totals})
        if not charged:
            return 0
        Job.objects.filter(pk__in=charged).update(charged_until=until)
        existing = UsageCharge.objects.filter(job_id__in=charged, period_start__in={p for _, p in totals}).values_list(
            "job_id", "period_start", "node_seconds", "gpu_seconds"
        )
        for job_id, period_start, node_seconds, gpu_seconds in existing:
            if (job_id, period_start) in totals:
                totals[job_id, period_start][0] += node_seconds
                totals[job_id, period_start][1] += gpu_seconds
        UsageCharge.objects.bulk_create(
            [
                UsageCharge(
                    job_id=job_id,
                    job_number=job_id,
                    user_id=jobs[job_id][0],
                    team_id=jobs[job_id][1],
                    period_start=period_start,
                    node_seconds=node_seconds,
                    gpu_seconds=gpu_seconds,
                )
                for (job_id, period_start), (node_seconds, gpu_seconds) in sorted(totals.items())
            ],
            update_conflicts=True,
            unique_fields=["job", "period_start"],
            update_fields=["node_seconds", "gpu_seconds", "updated_at"],
            batch_size=1000,
        )
    return len(charged)


def _charge_add(job: Job, period_start: datetime, *, node_seconds: float, gpu_seconds: float) -> None:
    increments = {"node_seconds": F("node_seconds") + node_seconds, "gpu_seconds": F("gpu_seconds") + gpu_seconds}
    if UsageCharge.objects.filter(job_id=job.pk, period_start=period_start).update(**increments):
        return
    try:
        with transaction.atomic():
            UsageCharge.objects.create(
                job_id=job.pk,
                job_number=job.pk,
                user_id=job.owner_id,
                team_id=job.team_id,
                period_start=period_start,
                node_seconds=node_seconds,
                gpu_seconds=gpu_seconds,
            )
    except IntegrityError:
        # Created by someone else between our update and insert: add to theirs.
        UsageCharge.objects.filter(job_id=job.pk, period_start=period_start).update(**increments)


@dataclass(frozen=True)
class QuotaChange:
    """What saving or resetting a quota did: the limits now, each changed field, and what the change means now."""

    limits: Limits
    changes: dict[str, list[Any]]
    # Limits set below what the account holds or has used: what happens to its running and new jobs.
    warnings: list[str] = field(default_factory=list)


def quota_save(
    *,
    user: User | None = None,
    team: Team | None = None,
    values: Mapping[str, Any],
    actor: User | None = None,
    request: Any = None,
) -> QuotaChange:
    """Set some or all limits of one account. Limits not given keep their current (or default) value.

    Recorded on the audit trail as `quota.update` by `actor` (from `request`'s address),
    with each changed limit before and after; nothing is recorded when nothing changed. No values at all (an empty
    PATCH) change nothing: an account on the site default keeps it, rather than getting a copy of today's default.
    """
    if (user is None) == (team is None):
        raise TypeError("quota_save takes exactly one of user= or team=")
    unknown = set(values) - set(LIMIT_FIELDS)
    if unknown:
        raise ValueError(f"unknown quota fields: {', '.join(sorted(unknown))}")
    kind, account = ("user", user) if user is not None else ("team", team)
    assert account is not None
    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(**{kind: account}).first()
        before = limits_of(kind, _name(kind, account), quota)
        if not values:
            return QuotaChange(limits=before, changes={})
        if quota is None:
            quota = Quota(**{kind: account}, **default_values(kind))
        for name, value in values.items():
            setattr(quota, name, value)
        quota.full_clean(exclude=["user", "team"])
        quota.save()
        after = limits_of(kind, before.name, quota)
        changes = _limit_changes(before, after)
        if changes:
            audit_record(actor=actor, action="quota.update", target=account, changes=changes, request=request, target_repr=after.whose)
        return QuotaChange(limits=after, changes=changes, warnings=quota_warnings(account=account, before=before, after=after))


def quota_reset(*, user: User | None = None, team: Team | None = None, actor: User | None = None, request: Any = None) -> QuotaChange:
    """Drop an account's own quota: a user falls back to the site default, a team to unlimited.

    Recorded as `quota.reset` (each limit that changes, before and after) when there was one to drop.
    """
    if (user is None) == (team is None):
        raise TypeError("quota_reset takes exactly one of user= or team=")
    kind, account = ("user", user) if user is not None else ("team", team)
    assert account is not None
    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(**{kind: account}).first()
        before = limits_of(kind, _name(kind, account), quota)
        after = limits_of(kind, before.name, None)
        if quota is None:
            return QuotaChange(limits=after, changes={})
        quota.delete()
        changes = _limit_changes(before, after)
        audit_record(actor=actor, action="quota.reset", target=account, changes=changes, request=request, target_repr=after.whose)
        return QuotaChange(limits=after, changes=changes, warnings=quota_warnings(account=account, before=before, after=after))


# The most one grant adds, as a budget's own bound (quotas' API and page): beyond it a number is a typo, not node-hours.
MAX_GRANT_NODE_HOURS = 1e9
# The least: the pages show node-hours to 0.001 at most, so a grant of 0.0000001 was listed as "+0.000 node-hours"
# (and muster usage's budget read 5+1e-07): an addition no one could read.
MIN_GRANT_NODE_HOURS = 0.001
GRANT_AMOUNT_REFUSED = f"Add at least {MIN_GRANT_NODE_HOURS:g} node-hours, and at most {MAX_GRANT_NODE_HOURS:,.0f}."
GRANT_REASON_MISSING = "Say why (up to 200 characters): it is on the audit trail beside the node-hours."


def budget_grant(
    *,
    user: User | None = None,
    team: Team | None = None,
    node_hours: float,
    reason: str,
    actor: User | None = None,
    request: Any = None,
    now: datetime | None = None,
) -> BudgetGrant:
    """Add node-hours to one account's budget for the current budget period only; the next starts from the quota's.

    Refused (ValidationError by field) for an account with no budget (unlimited: nothing to add to), an amount not above
    MIN_GRANT_NODE_HOURS or past MAX_GRANT_NODE_HOURS, and an empty reason (its users read the budget grow: the trail says why). Recorded
    as `quota.grant` with this period's budget before and after, the amount and the reason. Jobs waiting with BUDGET
    may start from the next cycle.
    """
    if (user is None) == (team is None):
        raise TypeError("budget_grant takes exactly one of user= or team=")
    kind, account = ("user", user) if user is not None else ("team", team)
    assert account is not None
    errors: dict[str, list[str]] = {}
    teams = [team] if team is not None else []
    if not MIN_GRANT_NODE_HOURS <= node_hours <= MAX_GRANT_NODE_HOURS:
        errors["node_hours"] = [GRANT_AMOUNT_REFUSED]
    reason = reason.strip()
    if not reason:
        errors["reason"] = [GRANT_REASON_MISSING]
    elif len(reason) > 200:
        errors["reason"] = [f"At most 200 characters ({len(reason)} given)."]
    now = now or timezone.now()
    with transaction.atomic():
        # Under the quota row's lock, as a save: a grant and a budget change at once both read the budget they change.
        Quota.objects.select_for_update().filter(**{kind: account}).first()
        usage = account_usages(users=[user], now=now)[0] if user is not None else account_usages(teams=teams, now=now)[0]
        before = usage.budget_this_period
        if before is None:
            errors.setdefault("node_hours", []).append(
                f"{usage.limits.whose.capitalize()} has no node-hour budget (it is unlimited): set one on its quota first."
            )
        if errors:
            raise ValidationError(errors)
        assert before is not None
        grant = BudgetGrant.objects.create(
            **{kind: account},
            period_start=usage.period_start,
            node_hours=node_hours,
            reason=reason,
            granted_by=actor,
            granted_by_username=actor.get_username() if actor is not None else "",
        )
        changes = {
            "budget_this_period": [before, before + node_hours],
            "node_hours_granted": [usage.node_hours_granted, usage.node_hours_granted + node_hours],
            "period_start": [None, usage.period_start.isoformat()],
            "reason": [None, reason],
        }
        audit_record(actor=actor, action="quota.grant", target=account, changes=changes, request=request, target_repr=usage.limits.whose)
    return grant


GRANT_REVOKE_REASON_MISSING = "Say why it is revoked (up to 200 characters): it is on the audit trail beside the node-hours."


@dataclass(frozen=True)
class GrantRevoked:
    """What revoking a grant did: the grant (now revoked), and what the smaller budget means for the account's jobs."""

    grant: BudgetGrant
    # The budget now below what the account used, or what its running jobs may still use: what happens to its jobs.
    warnings: list[str] = field(default_factory=list)


def budget_grant_revoke(
    *, grant: BudgetGrant, reason: str, actor: User | None = None, request: Any = None, now: datetime | None = None
) -> GrantRevoked:
    """Take back node-hours added to this period's budget by mistake (500 for 50): the grant stays, marked revoked (who,
    when, why), and adds nothing to any budget from now on. The whole budget never goes below the quota's own, so
    never below nothing.

    Refused (ValidationError by field) for a grant of an earlier period (its node-hours were that period's, and
    what they let run is charged), one revoked already, and an empty reason. Recorded as `quota.revoke` with this
    period's budget before and after, the node-hours taken back, when and by whom they were added, and the reason.
    As a lowered budget does, it stops nothing that runs (running jobs are charged as they run); new jobs start only
    in what is left (BUDGET), from the next cycle. The warnings say so when what was used, or may still be by the
    running jobs' wall times, is over the smaller budget.
    """
    errors: dict[str, list[str]] = {}
    reason = reason.strip()
    if not reason:
        errors["reason"] = [GRANT_REVOKE_REASON_MISSING]
    elif len(reason) > 200:
        errors["reason"] = [f"At most 200 characters ({len(reason)} given)."]
    now = now or timezone.now()
    kind = "user" if grant.user_id is not None else "team"
    account: Any = grant.user if kind == "user" else grant.team
    with transaction.atomic():
        # The quota row's lock first, as a grant and a save take it: each reads the budget it changes.
        Quota.objects.select_for_update().filter(**{kind: account}).first()
        locked = BudgetGrant.objects.select_for_update().get(pk=grant.pk)
        period_start = period_bounds(now)[0]
        if locked.revoked_at is not None:
            by = locked.revoked_by_username or "Muster"
            when = timezone.localtime(locked.revoked_at).strftime("%Y-%m-%d %H:%M %Z")
            errors.setdefault("grant", []).append(f"It was revoked already, by {by} at {when}: nothing was changed.")
        elif locked.period_start != period_start:
            errors.setdefault("grant", []).append(
                f"It added to the period from {timezone.localtime(locked.period_start):%Y-%m-%d}, which has ended: only a "
                "grant of the current period can be revoked (what it let run then is charged to that period)."
            )
        if errors:
            raise ValidationError(errors)
        usage = account_usages(**{f"{kind}s": [account]}, now=now)[0]
        before = usage.budget_this_period
        locked.revoked_at = now
        locked.revoked_by = actor
        locked.revoked_by_username = actor.get_username() if actor is not None else ""
        locked.revoke_reason = reason
        locked.save(update_fields=["revoked_at", "revoked_by", "revoked_by_username", "revoke_reason"])
        after = None if before is None else max(before - locked.node_hours, usage.limits.node_hours_per_period or 0.0)
        granted_after = max(0.0, usage.node_hours_granted - locked.node_hours)
        changes = {
            "budget_this_period": [before, after],
            "node_hours_granted": [usage.node_hours_granted, granted_after],
            # The grant as the quota page lists it, then that it is revoked.
            "grant": [_grant_said(locked), "revoked"],
            "period_start": [None, usage.period_start.isoformat()],
            "reason": [None, reason],
        }
        audit_record(actor=actor, action="quota.revoke", target=account, changes=changes, request=request, target_repr=usage.limits.whose)
    return GrantRevoked(grant=locked, warnings=_revoke_warnings(usage, after) if after is not None else [])


def _grant_said(grant: BudgetGrant) -> str:
    """'+500 node-hours by root at 2026-11-03 10:12 UTC: CVPR deadline' (the audit trail's record of a grant revoked)."""
    when = timezone.localtime(grant.granted_at).strftime("%Y-%m-%d %H:%M %Z")
    return f"+{node_hours_words(grant.node_hours)} by {grant.granted_by_username or 'Muster'} at {when}: {grant.reason}"


def _revoke_warnings(usage: AccountUsage, budget: float) -> list[str]:
    """What a budget made smaller by a revoked grant means for the account's jobs, in the words of a lowered budget's
    warnings (quota_warnings): nothing that runs is stopped; new jobs wait."""
    whose = usage.limits.whose
    renews = timezone.localtime(usage.period_end).strftime("%Y-%m-%d %H:%M %Z")
    said = node_hours_said(used=usage.node_hours_used, budget=budget, committed=usage.node_hours_committed)
    budget_text = node_hours_words(budget)
    if usage.node_hours_used > budget:
        used = node_hours_words(node_hours_said(used=usage.node_hours_used, budget=None).used)
        return [
            f"{whose.capitalize()} has used {used} this period, above its budget of {budget_text} now: running jobs are not "
            f"stopped and are charged as they run; new jobs of {whose} wait until the period renews ({renews}) or node-hours are added."
        ]
    if said.budget is not None and usage.node_hours_committed > said.budget.left:
        over = usage.node_hours_used + usage.node_hours_committed - budget
        return [
            f"{whose.capitalize()} has {said.budget_text}: its running jobs may use more by their wall times, and are not "
            f"stopped, so its budget of {budget_text} may be overspent by up to {node_hours_text(over)}; new jobs of {whose} "
            f"wait until the period renews ({renews}) or node-hours are added."
        ]
    return []


def _name(kind: str, account: Any) -> str:
    name: str = account.get_username() if kind == "user" else account.name
    return name


def _limit_changes(before: Limits, after: Limits) -> dict[str, list[Any]]:
    """The limits that changed, and for a user whether they left or went back to the site default (`is_default`): a
    user given their own quota equal to today's default changes no limit, yet no longer follows the default. A team
    without a quota is unlimited, which its limits already say: `is_default: True -> False` beside `max_gpus: None -> 8`
    told its reader nothing, so a team's is not recorded."""
    if before.kind != "user":
        return audit_changes(before.values(), after.values())
    return audit_changes({**before.values(), "is_default": before.is_default}, {**after.values(), "is_default": after.is_default})


def quota_warnings(*, account: Any, before: Limits, after: Limits, now: datetime | None = None) -> list[str]:
    """What a lowered GPU quota or budget means for an account that already holds or used more.

    The truth of the policy (policy/schedule.py): a lower limit stops nothing that
    runs. A running job keeps its GPUs until it ends; it is preempted for being over quota
    only if it was placed as a borrower (a preemptible job beyond the quota then), as
    before. New jobs wait (QUOTA_GPUS) until what the account holds within its quota
    leaves room for them under the limit; preemptible jobs may still borrow idle GPUs.
    Below the budget already used, new jobs wait (BUDGET) until the period renews.
    """
    warnings: list[str] = []
    whose = after.whose
    usage = account_usages(**{f"{after.kind}s": [account]}, now=now)[0]
    limit = after.max_gpus
    if limit is not None and limit != before.max_gpus and usage.gpus_in_use > limit:
        borrowed = usage.gpus_borrowed
        lent = f" ({borrowed} of them borrowed by preemptible jobs, which stay first in line to be preempted)" if borrowed else ""
        warnings.append(
            f"{whose} holds {plural(usage.gpus_in_use, 'GPU')} now, above the new limit of {limit}{lent}: running jobs are not stopped; "
            f"new jobs of {whose} wait until the GPUs it holds within its quota leave room for them under {limit} "
            "(preemptible jobs may still borrow idle GPUs)."
        )
    owned_jobs = {"owner": account} if after.kind == "user" else {"team": account}
    queued = Job.objects.filter(state=JobState.PENDING, **owned_jobs).order_by("pk")
    if limit is not None and limit != before.max_gpus:
        too_big = [
            pk
            for pk, nodes, gpus_per_node in queued.filter(preemptible=False).values_list("pk", "nodes", "gpus_per_node")
            # GPUs asked for: a lower bound of what a gang holds (whole nodes), so every job listed really waits.
            if nodes * gpus_per_node > limit
        ]
        if too_big:
            own = "its" if len(too_big) == 1 else "their"
            warnings.append(_stuck_warning(too_big, whose, f"more than {plural(limit, 'GPU')} on {own} own", "", "the limit"))
    budget = after.node_hours_per_period
    if budget is not None and budget != before.node_hours_per_period:
        beyond = [
            job.pk
            for job in queued.only("pk", "nodes", "min_nodes", "gpus_per_node", "wall_time_seconds", "gpu_fraction")
            if least_node_hours(job.min_nodes or job.nodes, job.gpus_per_node, job.wall_time_seconds, job.gpu_fraction) > budget
        ]
        if beyond:
            room = f"no renewal gives {'it' if len(beyond) == 1 else 'them'} room; "
            warnings.append(_stuck_warning(beyond, whose, f"more than the whole budget of {node_hours_words(budget)}", room, "the budget"))
    if budget is not None and budget != before.node_hours_per_period and usage.node_hours_used > budget:
        renews = timezone.localtime(usage.period_end).strftime("%Y-%m-%d %H:%M %Z")
        warnings.append(
            f"{whose} has used {node_hours_words(node_hours_text(usage.node_hours_used))} this period, above the new budget of {budget:g}: "
            "running jobs are not stopped and are charged as they run; "
            f"new jobs of {whose} wait until the period renews ({renews}) or the budget is raised."
        )
    elif budget is not None and budget != before.node_hours_per_period and usage.node_hours_used + usage.node_hours_committed > budget:
        over = usage.node_hours_used + usage.node_hours_committed - budget
        warnings.append(
            f"{whose} has used {node_hours_words(node_hours_text(usage.node_hours_used))} this period and its running jobs may use "
            f"{node_hours_text(usage.node_hours_committed)} more by their wall times: running jobs are not stopped, so the new "
            f"budget of {budget:g} may be overspent by up to {node_hours_text(over)}; new jobs of {whose} wait until the period "
            "renews or it is raised."
        )
    warnings += _queued_beyond(account, before, after)
    # Each a sentence: "User researcher holds …", not "user researcher holds …".
    return [w[:1].upper() + w[1:] for w in warnings]


def _queued_beyond(account: Any, before: Limits, after: Limits) -> list[str]:
    """Queued jobs a lowered per-job limit would have refused at submit: accepted under the old one, they wait until it
    is raised (the scheduler's JOB_LIMIT), as Slurm holds jobs past a lowered MaxWall."""
    owned_jobs = {"owner": account} if after.kind == "user" else {"team": account}
    wall, hours = after.max_wall_time_seconds, after.max_node_hours_per_job
    wall_lowered = wall is not None and wall != before.max_wall_time_seconds
    hours_lowered = hours is not None and hours != before.max_node_hours_per_job
    if not (wall_lowered or hours_lowered):
        return []
    over_wall: list[int] = []
    over_hours: list[int] = []
    queued = Job.objects.filter(state=JobState.PENDING, **owned_jobs).order_by("pk")
    for pk, least, nodes, seconds in queued.values_list("pk", "min_nodes", "nodes", "wall_time_seconds"):
        if wall_lowered and wall is not None and seconds > wall:
            over_wall.append(pk)
        # An elastic job starts on its least: that is what submit checked against the limit.
        if hours_lowered and hours is not None and (least or nodes) * seconds / 3600 > hours:
            over_hours.append(pk)
    warnings = []
    # The wall time as the quota list and the usage page show it ("1 h"), not in the API's seconds beside a form in minutes.
    for what, limit, found in (("wall time", duration(wall), over_wall), ("node-hours per job", f"{hours:g}" if hours else "", over_hours)):
        if found:
            one = len(found) == 1
            listed = _jobs_listed(found)
            warnings.append(
                f"{len(found)} queued job{'' if one else 's'} of {after.whose} ask{'s' if one else ''} more than the new {what} "
                f"limit of {limit} ({listed}): accepted under the old limit, {'it waits' if one else 'they wait'} until the "
                f"limit is raised again; {'its' if one else 'their'} owners are told so on {'its' if one else 'their'} page."
            )
    return warnings
