"""Reading the audit trail: who may see which entries."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from audit.models import ACTIONS, TARGET_TYPES, AuditEntry


def audit_entries_visible_to(user: User | AnonymousUser) -> QuerySet[AuditEntry]:
    """Admins see every entry; others the entries about jobs they own (e.g. an admin cancelled one)."""
    entries = AuditEntry.objects.order_by("-at", "-id")
    if not user.is_authenticated:
        return entries.none()
    if getattr(user, "is_staff", False):
        return entries
    return entries.filter(job__owner=user)


def audit_actions_for(user: User | AnonymousUser) -> tuple[str, ...]:
    """The actions of the entries `audit_entries_visible_to(user)` shows (the audit page's Action choices): any for
    admins; for others those about jobs, as audit_target_types_for."""
    if getattr(user, "is_staff", False):
        return ACTIONS
    return tuple(action for action in ACTIONS if action.startswith("job.")) if user.is_authenticated else ()


def audit_target_types_for(user: User | AnonymousUser) -> tuple[str, ...]:
    """What the entries `audit_entries_visible_to(user)` shows can be about (the audit page's About choices): any kind for
    admins; for others only jobs, as the entries they see are about their own jobs (user, team or node never match)."""
    if getattr(user, "is_staff", False):
        return TARGET_TYPES
    return ("job",) if user.is_authenticated else ()
