"""What the API itself must remember: the submits it answered under an `Idempotency-Key`."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class IdempotentSubmit(models.Model):
    """A submit answered under a client's `Idempotency-Key`: the same key and body get the same jobs again.

    Kept for `MUSTER_IDEMPOTENCY_KEY_SECONDS`; written in the transaction that creates the jobs, so a key
    never names jobs that were not created.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # sha256 of the request's path and canonical JSON body: the same key with another body is a client's bug (409).
    fingerprint = models.CharField(max_length=64)
    job_ids = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotent_submit_user_key")]
        indexes = [models.Index(fields=["user", "created_at"])]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
