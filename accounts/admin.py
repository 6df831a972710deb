from django.contrib import admin

from accounts.admin_access import MusterAdminAccess
from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(MusterAdminAccess, admin.ModelAdmin):
    """Read-only: people make their own tokens (the secret is shown to them once); an admin may only revoke by deleting."""

    list_display = ["name", "user", "hint", "created_at", "expires_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "user__username", "hint"]
    readonly_fields = ["user", "name", "digest", "hint", "created_at", "expires_at", "last_used_at", "revoked_at"]

    def has_add_permission(self, request: object) -> bool:
        return False
