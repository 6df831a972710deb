"""Reading the audit trail: who may see which entries."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import QuerySet

from audit.models import AuditEntry


def audit_entries_visible_to(user: User | AnonymousUser) -> QuerySet[AuditEntry]:
    """Admins see every entry; others the entries about jobs they own (e.g. an admin cancelled one)."""
    entries = AuditEntry.objects.order_by("-at", "-id")
    if not user.is_authenticated:
        return entries.none()
    if getattr(user, "is_staff", False):
        return entries
    return entries.filter(job__owner=user)
