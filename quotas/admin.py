from django.contrib import admin

from quotas.models import Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = [
        "name", "description", "member_count", "allow_host_network", "allow_run_as_root", "allow_writable_root_filesystem", "created_at",
    ]  # fmt: skip
    list_filter = ["allow_host_network", "allow_run_as_root", "allow_writable_root_filesystem"]
    search_fields = ["name", "description", "members__username"]
    filter_horizontal = ["members"]

    @admin.display(description="members")
    def member_count(self, obj: Team) -> int:
        return obj.members.count()
