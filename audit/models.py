"""The audit trail: who changed what, when and from where. Append-only.

A low layer: other apps import `audit.services`; this app imports none of them (the job
link below is by name, so a user can be shown the entries about their own jobs).
"""

from __future__ import annotations

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone

# What an entry can be about: its target's model name. `audit_record` refuses any other, so this one list is what the
# filters (API and page) offer and the docs name; a new kind of target joins it here.
TARGET_TYPES = ("user", "team", "job", "node", "whatifrun")
# Every action an entry can record, each `<target type>.<verb>` (docs/admin.md's table says who records it): the one
# list the filters offer, so a misspelt ?action= is refused rather than answered with no entries.
ACTIONS = (
    "job.cancel",
    "job.hold",
    "job.release",
    "job.requeue",
    "job.update",
    "job.admin_edit",
    "job.admin_delete",
    "node.hold",
    "node.release",
    "node.update",
    "node.maintenance",
    "node.maintenance_cancel",
    "quota.update",
    "quota.reset",
    "quota.grant",
    "quota.revoke",
    "team.create",
    "team.update",
    "team.delete",
    "team.members",
    "user.create",
    "user.update",
    "user.delete",
    "whatif.run",
    "whatif.cancel",
    "whatif.delete",
)


class AuditEntry(models.Model):
    at = models.DateTimeField(default=timezone.now)
    # The user is kept by name too: the entry must still say who after the account is deleted.
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    actor_username = models.CharField(max_length=150, blank=True, help_text="Empty: done by Muster itself.")
    action = models.CharField(max_length=40, help_text="What was done, e.g. quota.update, team.members, job.cancel.")
    target_type = models.CharField(max_length=40, help_text="What it is about: " + ", ".join(TARGET_TYPES) + ".")
    target_id = models.CharField(max_length=64)
    target_repr = models.CharField(max_length=200, help_text="The target as it was named then.")
    changes = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder, help_text="{field: [before, after]}")
    remote_addr = models.GenericIPAddressField(null=True, blank=True)
    # Entries about a job; its owner sees them. Null for other targets, and once the job is deleted.
    job = models.ForeignKey("jobs.Job", on_delete=models.SET_NULL, null=True, blank=True, related_name="audit_entries")

    class Meta:
        ordering = ["-at", "-id"]
        verbose_name_plural = "audit entries"
        indexes = [
            models.Index(fields=["at"]),
            models.Index(fields=["action", "at"]),
            models.Index(fields=["job", "at"]),
        ]

    def __str__(self) -> str:
        who = self.actor_username or "Muster"
        return f"{self.at:%Y-%m-%d %H:%M:%S} {who}: {self.action} {self.target_type} {self.target_repr}"
