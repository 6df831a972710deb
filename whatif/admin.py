"""What-if runs in Django admin: read-only, but for cancelling and deleting, through the services the pages use
(audited: whatif.cancel, whatif.delete). The trace, summary and charts stay out of the forms: they run to megabytes."""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest

from accounts.admin_access import MusterAdminAccess
from whatif.models import ENDED, WhatIfRun
from whatif.services import RunEnded, RunNotEnded, whatif_cancel, whatif_delete

SHOWN = (
    "status",
    "progress",
    "source",
    "trace_name",
    "trace_jobs",
    "parameters",
    "error",
    "worker",
    "created_by",
    "created_at",
    "started_at",
    "finished_at",
    "cancelled_by",
)


@admin.register(WhatIfRun)
class WhatIfRunAdmin(MusterAdminAccess, admin.ModelAdmin):
    list_display = ["id", "trace_name", "trace_jobs", "status", "created_by", "created_at", "finished_at"]
    list_filter = ["status", "source"]
    search_fields = ["trace_name", "created_by__username"]
    fields = SHOWN
    readonly_fields = SHOWN
    actions = ["cancel_selected", "delete_selected"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[WhatIfRun]:
        return super().get_queryset(request).defer("trace", "summary", "figures").select_related("created_by", "cancelled_by")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a run is started from /whatif/ or muster_replay, which check its trace and cluster

    def has_change_permission(self, request: HttpRequest, obj: WhatIfRun | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: WhatIfRun | None = None) -> bool:
        if obj is not None and not obj.ended:
            return False  # cancel it first
        return super().has_delete_permission(request, obj)

    def delete_model(self, request: HttpRequest, obj: WhatIfRun) -> None:
        try:
            whatif_delete(run_id=obj.pk, actor=request.user, http_request=request)
        except RunNotEnded as exc:
            raise PermissionDenied(str(exc)) from None

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[WhatIfRun]) -> None:
        if queryset.exclude(status__in=ENDED).exists():
            raise PermissionDenied("Some of these runs are queued or running: cancel them first.")
        for pk in queryset.order_by("pk").values_list("pk", flat=True):
            self.delete_model(request, WhatIfRun(pk=pk))

    @admin.action(permissions=["delete"], description="Delete selected what-if runs (ended ones)")
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[WhatIfRun]) -> Any:
        if queryset.exclude(status__in=ENDED).exists():
            self.message_user(request, "Some of the selected runs are queued or running: cancel them first.", messages.ERROR)
            return None
        return django_delete_selected(self, request, queryset)

    @admin.action(description="Cancel selected what-if runs (queued or running)")
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[WhatIfRun]) -> None:
        cancelled, ended = [], []
        for pk in queryset.order_by("pk").values_list("pk", flat=True):
            try:
                whatif_cancel(run_id=pk, actor=request.user, http_request=request)
                cancelled.append(pk)
            except RunEnded:
                ended.append(pk)
        if cancelled:
            self.message_user(request, f"Cancelled run(s) {', '.join(map(str, cancelled))}.", messages.SUCCESS)
        if ended:
            self.message_user(request, f"Run(s) {', '.join(map(str, ended))} had already ended.", messages.WARNING)
