"""`Idempotency-Key` on submits: a retried request gets the jobs of its first attempt, never a second copy."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

from api.models import IdempotentSubmit
from apikit.errors import Conflict
from jobs.models import Job

HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
KEY_MAX_LENGTH = 255

IDEMPOTENCY_PARAMETER = OpenApiParameter(
    HEADER,
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Any unique string per intended submit (a UUID): a retry with the same key and body gets the same job(s) "
    "instead of new ones, for MUSTER_IDEMPOTENCY_KEY_SECONDS (a day by default); the same key with another body is a 409.",
)


@dataclass(frozen=True)
class Submitted:
    job_ids: list[int]
    replayed: bool
    # The rows this request created, in hand (empty for a replay, which reads them back by id).
    created: list[Job] = field(default_factory=list)


def _fingerprint(request: Request) -> str:
    body = json.dumps(request.data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(f"{request.path}\n{body}".encode()).hexdigest()


def idempotency_key(request: Request) -> str | None:
    """The request's `Idempotency-Key`, if it sent one; a malformed one is the submit's 400 (a dry run checks it too)."""
    key = request.headers.get(HEADER)
    if key is None:
        return None
    if not key or len(key) > KEY_MAX_LENGTH or not key.isprintable():
        raise ValidationError({HEADER: [f"An {HEADER} is 1-{KEY_MAX_LENGTH} printable characters (a UUID is a good choice)."]})
    return key


def _replay(previous: IdempotentSubmit, fingerprint: str) -> Submitted:
    if previous.fingerprint != fingerprint:
        raise Conflict(
            f"This {HEADER} was used for a different request {timezone.localtime(previous.created_at):%Y-%m-%d %H:%M:%S %Z}; "
            "send a new key for a new submit."
        )
    return Submitted(job_ids=list(previous.job_ids), replayed=True)


def submit_once(request: Request, user: User, create: Callable[[], Sequence[Job]]) -> Submitted:
    """Run `create` unless this user already sent this `Idempotency-Key`; then answer with what it created.

    The key is written in `create`'s transaction: two concurrent requests with one key race on its unique
    constraint, the loser's jobs roll back with it, and it answers with the winner's. The same key with
    another body is a 409.
    """
    key = idempotency_key(request)
    if key is None:
        jobs = list(create())
        return Submitted(job_ids=[job.pk for job in jobs], replayed=False, created=jobs)
    fingerprint = _fingerprint(request)
    now = timezone.now()
    live_after = now - timedelta(seconds=settings.MUSTER_IDEMPOTENCY_KEY_SECONDS)
    try:
        with transaction.atomic():
            # Expired keys of this user go, so the table holds a day of submits, not all of them.
            IdempotentSubmit.objects.filter(user=user, created_at__lt=live_after).delete()
            previous = IdempotentSubmit.objects.filter(user=user, key=key).first()
            if previous is not None:
                return _replay(previous, fingerprint)
            jobs = list(create())
            job_ids = [job.pk for job in jobs]
            IdempotentSubmit.objects.create(user=user, key=key, fingerprint=fingerprint, job_ids=job_ids, created_at=now)
            return Submitted(job_ids=job_ids, replayed=False, created=jobs)
    except IntegrityError:
        previous = IdempotentSubmit.objects.filter(user=user, key=key).first()
        if previous is None:
            raise
        return _replay(previous, fingerprint)
