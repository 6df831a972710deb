"""API tokens a person manages: named, optionally expiring, revocable, and stored only as a hash."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """One API token of a user. The secret is shown once when made; only its SHA-256 is kept.

    A token is looked up by that digest: a secret of 256 random bits needs no slow hash, and a
    copy of the database alone cannot be used to call the API.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True)
    # The secret's first characters, so a person can tell their tokens apart (and find a leaked one).
    hint = models.CharField(max_length=16)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["user", "revoked_at"], name="api_token_user_active")]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…) of {self.user}"

    @property
    def state(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"
