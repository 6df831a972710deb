"""Per-job tokens: what a job's pods present to push NCCL results for that job, and to report its checkpoints, and only its.

A token is `mtt.<job id>.<HMAC-SHA256 of the job id and a random per-job salt, keyed by SECRET_KEY>`.
The database holds only the salt, so:

- the cluster backends call `telemetry_pod_env(job_id)` at every launch and get the same token
  for every pod and every retried or restarted launch (no race between pods of one gang);
- a stolen database cannot forge a token (it lacks SECRET_KEY), and a token cannot be read back
  from it; a new salt would invalidate the old token;
- verification costs one primary-key read and a constant-time comparison.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.crypto import salted_hmac

from telemetry.models import TelemetryCredential

TOKEN_PREFIX = "mtt"
ENV_TOKEN = "MUSTER_TELEMETRY_TOKEN"
ENV_URL = "MUSTER_TELEMETRY_URL"
# The same token reports the job's checkpoints (api/jobs: `POST /api/v1/jobs/{id}/checkpoint/`).
ENV_CHECKPOINT_URL = "MUSTER_CHECKPOINT_URL"
_KEY_SALT = "muster.telemetry.push-token"


class InvalidToken(Exception):
    """Malformed, unknown or forged: the caller is not authenticated (401)."""


@dataclass(frozen=True)
class JobTokenAuth:
    """A verified token: its holder may push telemetry and report checkpoints for `job_id`."""

    job_id: int


def _digest(job_id: int, salt: str) -> str:
    return salted_hmac(_KEY_SALT, f"{job_id}:{salt}", algorithm="sha256").hexdigest()


def _credential(job_id: int) -> TelemetryCredential:
    credential = TelemetryCredential.objects.filter(job_id=job_id).first()
    if credential is not None:
        return credential
    try:
        with transaction.atomic():
            return TelemetryCredential.objects.create(job_id=job_id, salt=secrets.token_hex(16), created_at=timezone.now())
    except IntegrityError:
        # Another launch of the same job created it first: use theirs, so both get one token.
        return TelemetryCredential.objects.get(job_id=job_id)


def telemetry_token_for_job(job_id: int) -> str:
    """The job's push token (created on first use). Same value on every call while its salt stays."""
    credential = _credential(job_id)
    return f"{TOKEN_PREFIX}.{job_id}.{_digest(job_id, credential.salt)}"


def telemetry_pod_env(job_id: int) -> dict[str, str]:
    """Environment for every pod of the job: its token, and where to push and report checkpoints when MUSTER_PUBLIC_URL is set."""
    env = {ENV_TOKEN: telemetry_token_for_job(job_id)}
    if settings.MUSTER_PUBLIC_URL:
        env[ENV_URL] = f"{settings.MUSTER_PUBLIC_URL}/api/v1/jobs/{job_id}/telemetry/"
        env[ENV_CHECKPOINT_URL] = f"{settings.MUSTER_PUBLIC_URL}/api/v1/jobs/{job_id}/checkpoint/"
    return env


def telemetry_token_verify(token: str) -> JobTokenAuth:
    """The job a token was issued for; InvalidToken when it is malformed, unknown or forged."""
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != TOKEN_PREFIX or not (parts[1].isascii() and parts[1].isdigit()) or len(parts[1]) > 18:
        raise InvalidToken("Malformed telemetry token.")
    job_id = int(parts[1])
    salt = TelemetryCredential.objects.filter(job_id=job_id).values_list("salt", flat=True).first()
    if salt is None or not hmac.compare_digest(parts[2].encode(), _digest(job_id, salt).encode()):
        raise InvalidToken("Invalid telemetry token.")
    return JobTokenAuth(job_id)
