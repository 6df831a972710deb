from django.contrib import admin

from quotas.models import Team


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "member_count", "created_at"]
    search_fields = ["name", "description", "members__username"]
    filter_horizontal = ["members"]

    @admin.display(description="members")
    def member_count(self, obj: Team) -> int:
        return obj.members.count()
