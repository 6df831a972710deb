"""Who may use Muster's own models in Django admin: its admins, the users with Staff status.

Staff status is what makes a Muster admin everywhere else (every job, the quota pages, the audit trail, what-if), so it
opens Django admin's Nodes, Teams, Jobs and API tokens too, with no model permission to tick or group to join. (Muster
uses neither: a staff user without them was let into /admin/ to read "You don't have permission to view or edit
anything", while /quotas/ let them change every quota.) Each admin's own limits still apply on top (no job holding GPUs
deleted, a node's cluster fields read-only, ...). Users and Django's own tables stay the superuser's: who is an admin is
the site owner's to say.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def is_muster_admin(user: Any) -> bool:
    """A signed-in, active user with Staff status: an admin of Muster (docs/admin.md, "Who is an admin")."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_staff", False))


class MusterAdminAccess:
    """Mixed into a ModelAdmin (or inline) of Muster's, before admin.ModelAdmin: Muster's admins may view, add, change and
    delete its rows, as far as the admin's own `has_*_permission` (which call this through super()) allows."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return is_muster_admin(request.user)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_muster_admin(request.user)

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        # ModelAdmin's takes (request), an inline's (request, obj).
        return is_muster_admin(request.user)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_muster_admin(request.user)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return is_muster_admin(request.user)
