from django.contrib import admin

from jobs.models import Allocation, Job, JobEvent, Node


class JobEventInline(admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "from_state", "to_state", "reason", "attempt"]


class AllocationInline(admin.TabularInline):
    model = Allocation
    extra = 0
    can_delete = False
    readonly_fields = ["node", "attempt", "rank", "gpus", "allocated_at", "released_at"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "owner", "team", "state", "nodes", "gpus_per_node", "priority_class", "submitted_at"]
    list_filter = ["state", "priority_class", "team"]
    search_fields = ["name", "owner__username", "image"]
    # State changes go through services (cancel in the UI/API), never through a raw edit here.
    readonly_fields = [
        "state", "state_reason", "pending_reason_code", "pending_reason", "attempt", "restarts", "exit_code",
        "submitted_at", "scheduled_at", "started_at", "finished_at",
    ]  # fmt: skip
    inlines = [AllocationInline, JobEventInline]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "gpus_total", "rack", "gpu_model", "state", "updated_at"]
    list_filter = ["state", "rack"]
    search_fields = ["name"]
