"""The audit trail in Django admin: read-only, like the trail itself."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from audit.models import AuditEntry


@admin.register(AuditEntry)
class AuditEntryAdmin(admin.ModelAdmin):
    list_display = ["at", "actor_username", "action", "target_type", "target_repr", "remote_addr"]
    list_filter = ["action", "target_type"]
    search_fields = ["actor_username", "target_repr", "target_id"]
    date_hierarchy = "at"
    readonly_fields = [f.name for f in AuditEntry._meta.fields]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: AuditEntry | None = None) -> bool:
        return False
