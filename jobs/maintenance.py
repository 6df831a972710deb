"""Planned maintenance of nodes (Slurm's `scontrol create reservation starttime=... duration=... nodes=... flags=maint`).

An admin schedules it ahead; the policy does the rest (policy/maintenance.py): before the start no job whose wall time
would reach it starts on the nodes, from the start to the end nothing new does, and after the end the nodes take work
again with no one acting. Scheduling and cancelling are on the audit trail, one entry per node (`node.maintenance`,
`node.maintenance_cancel`), in the same transaction as the change.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import Prefetch, QuerySet
from django.utils import timezone

from audit.services import audit_record
from jobs.models import Allocation, MaintenanceWindow, Node
from jobs.node_holds import jobs_running_on
from jobs.states import ACTIVE_STATES


class MaintenanceError(ValueError):
    """A window that cannot be scheduled or cancelled, said in words an admin can act on."""


def _said(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def maintenance_text(window: MaintenanceWindow) -> str:
    """'2026-11-28 18:00 UTC to 2026-11-29 02:00 UTC: firmware (window 3)': what the audit trail records of it."""
    return f"{_said(window.starts_at)} to {_said(window.ends_at)}: {window.reason} (window {window.pk})"


def maintenance_not_over(now: datetime | None = None) -> QuerySet[MaintenanceWindow]:
    """The windows not cancelled and not over yet, earliest first, with their nodes' names fetched."""
    now = now or timezone.now()
    return (
        MaintenanceWindow.objects.filter(cancelled_at__isnull=True, ends_at__gt=now)
        .prefetch_related(Prefetch("nodes", queryset=Node.objects.order_by("name").only("id", "name")))
        .select_related("created_by")
        .order_by("starts_at", "id")
    )


def maintenance_create(
    *, nodes: list[Node], starts_at: datetime, ends_at: datetime, reason: str, by: Any, request: Any = None, now: datetime | None = None
) -> MaintenanceWindow:
    """Schedule maintenance of `nodes` from `starts_at` to `ends_at`, each node on the audit trail.

    Refused (MaintenanceError): no node, no reason, a start before the current minute (a start typed as this minute is
    now), an end not after the start, or a node already in a window not over that overlaps this one. Overlaps are
    refused rather than merged: two windows with their own reasons and ends would be merged into one that says neither,
    and cancelling one would then cancel both. The nodes' rows are locked in name order, so two admins scheduling
    overlapping windows at once cannot both succeed.
    """
    now = now or timezone.now()
    reason = reason.strip()
    if not nodes:
        raise MaintenanceError("Name at least one node: nothing was scheduled.")
    if not reason:
        raise MaintenanceError("Say why the nodes go into maintenance: users waiting for them read it.")
    if starts_at < now.replace(second=0, microsecond=0):
        raise MaintenanceError(f"The start, {_said(starts_at)}, is in the past (now: {_said(now)}): maintenance is planned ahead.")
    if ends_at <= starts_at:
        raise MaintenanceError(f"The end, {_said(ends_at)}, is not after the start, {_said(starts_at)}.")
    with transaction.atomic():
        locked = list(Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("name"))
        clashes = (
            maintenance_not_over(now)
            .filter(nodes__in=locked, starts_at__lt=ends_at, ends_at__gt=starts_at)
            .distinct()
            .order_by("starts_at", "id")
        )
        if clash := clashes.first():
            names = sorted({n.name for n in clash.nodes.all()} & {n.name for n in locked})
            raise MaintenanceError(
                f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} in maintenance window {clash.pk} already, "
                f"{_said(clash.starts_at)} to {_said(clash.ends_at)} ({clash.reason}): windows on a node may not "
                f"overlap. Cancel it (muster nodes maint --cancel {clash.pk}) and schedule one window over both, or "
                "pick times that do not overlap."
            )
        window = MaintenanceWindow.objects.create(starts_at=starts_at, ends_at=ends_at, reason=reason, created_by=by)
        window.nodes.set(locked)
        said = maintenance_text(window)
        for node in locked:
            audit_record(actor=by, action="node.maintenance", target=node, changes={"maintenance": [None, said]}, request=request)
    return window


def maintenance_cancel(*, window: MaintenanceWindow, by: Any, request: Any = None, now: datetime | None = None) -> MaintenanceWindow:
    """Cancel a window not over yet (one on now ends at once: its nodes take work again), each node on the audit trail."""
    now = now or timezone.now()
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().get(pk=window.pk)
        if window.cancelled_at is not None:
            raise MaintenanceError(f"Maintenance window {window.pk} was cancelled already, at {_said(window.cancelled_at)}.")
        if window.ends_at <= now:
            raise MaintenanceError(f"Maintenance window {window.pk} is over (it ended at {_said(window.ends_at)}): nothing to cancel.")
        window.cancelled_at, window.cancelled_by = now, by
        window.save(update_fields=["cancelled_at", "cancelled_by"])
        said = maintenance_text(window)
        for node in window.nodes.order_by("name"):
            audit_record(actor=by, action="node.maintenance_cancel", target=node, changes={"maintenance": [said, None]}, request=request)
    return window


def maintenance_in_the_way(window: MaintenanceWindow) -> dict[str, list[int]]:
    """The jobs running now on the window's nodes, by node: those still there at its start run on through it."""
    return jobs_running_on(n.name for n in window.nodes.all())


def maintenance_by_node(now: datetime | None = None) -> dict[str, dict[str, Any]]:
    """Each node's next maintenance window not over (the one on now, else the earliest ahead), by node name, as the
    nodes API, `muster nodes` and the cluster page say it: `id`, `start`, `end`, `reason`, `on`, and `in_the_way`, the
    jobs running there now whose wall time reaches the window's start (they run on into it). Two queries, whatever the
    number of nodes."""
    now = now or timezone.now()
    first: dict[str, MaintenanceWindow] = {}
    for window in maintenance_not_over(now):
        for node in window.nodes.all():
            first.setdefault(node.name, window)
    if not first:
        return {}
    reaching: dict[str, set[int]] = {name: set() for name in first}
    live = Allocation.objects.filter(node__name__in=list(first), released_at__isnull=True, job__state__in=ACTIVE_STATES)
    for name, job_id, scheduled, started, wall in live.values_list(
        "node__name", "job_id", "job__scheduled_at", "job__started_at", "job__wall_time_seconds"
    ):
        placed = scheduled or started  # wall time counts from placement, as the cycle's snapshot counts it
        if placed is None or placed + timedelta(seconds=wall) > first[name].starts_at:
            reaching[name].add(job_id)
    return {
        name: {
            "id": w.pk,
            "start": w.starts_at,
            "end": w.ends_at,
            "reason": w.reason,
            "on": w.starts_at <= now,
            "in_the_way": sorted(reaching[name]),
        }
        for name, w in first.items()
    }
