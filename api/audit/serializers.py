"""The audit entry as the API shows it."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from audit.models import AuditEntry


class AuditEntrySerializer(serializers.ModelSerializer):
    actor = serializers.CharField(source="actor_username", help_text="Username of who did it; empty: Muster itself.")
    job = serializers.IntegerField(source="job_id", allow_null=True, help_text="The job the entry is about, if any.")
    changes = serializers.DictField(
        child=serializers.ListField(allow_null=True), help_text="{field: [before, after]} for each field changed."
    )
    remote_addr = serializers.IPAddressField(
        allow_null=True, help_text="The address the change came from. Shown to admins only; null for others."
    )

    class Meta:
        model = AuditEntry
        fields = ["id", "at", "actor", "action", "target_type", "target_id", "target_repr", "changes", "remote_addr", "job"]
        read_only_fields = fields

    def to_representation(self, instance: AuditEntry) -> dict[str, Any]:
        data = super().to_representation(instance)
        request = self.context.get("request")
        # An admin's address is not the business of the user whose job they cancelled.
        if not (request is not None and getattr(request.user, "is_staff", False)):
            data["remote_addr"] = None
        return data
