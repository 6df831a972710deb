"""What a user asked to be told about their jobs, and the messages owed (an outbox the sender works through)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from jobs.models import Job


class Asks(models.Model):
    """When to tell, and how: by e-mail (to the user's address) and/or a webhook (a JSON POST)."""

    on_start = models.BooleanField(default=False)
    on_end = models.BooleanField(default=False)
    on_fail = models.BooleanField(default=False)
    on_requeue = models.BooleanField(default=False)
    email = models.BooleanField(default=True)
    webhook_url = models.URLField(max_length=500, blank=True)

    class Meta:
        abstract = True

    @property
    def events(self) -> list[str]:
        asked = (("start", self.on_start), ("end", self.on_end), ("fail", self.on_fail), ("requeue", self.on_requeue))
        return [name for name, on in asked if on]


class NotifyPreference(Asks):
    """A user's default for their jobs (a job may say otherwise: JobNotify)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notify_preference")

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.events) or 'nothing'}"


class JobNotify(Asks):
    """What the job's submit asked, instead of its owner's default."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="notify")

    def __str__(self) -> str:
        return f"job {self.job_id}: {', '.join(self.events) or 'nothing'}"


class Delivery(models.Model):
    """One message owed: written in the transaction of the job's state change, sent after it (with retries)."""

    EMAIL = "email"
    WEBHOOK = "webhook"

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=8)
    channel = models.CharField(max_length=8, choices=[(EMAIL, "e-mail"), (WEBHOOK, "webhook")])
    target = models.CharField(max_length=500)
    subject = models.CharField(max_length=300)
    body = models.TextField()
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField()
    due_at = models.DateTimeField()
    tries = models.PositiveIntegerField(default=0)
    sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["due_at"], condition=models.Q(sent_at__isnull=True), name="delivery_owed")]

    def __str__(self) -> str:
        return f"job {self.job_id} {self.event} by {self.channel} to {self.target}"
