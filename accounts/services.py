"""Writes of API tokens: make one (the secret is returned once), check one on each request, revoke one."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken

# Every secret starts so, which secret scanners can be taught to spot in a leaked file or log.
PREFIX = "mst_"
# A request updates last_used_at at most this often, so using a token is not a write per request.
LAST_USED_RESOLUTION = timedelta(minutes=1)


class TokenRefused(Exception):
    """The presented token is unknown, revoked or expired; the message says which, for a 401."""


@dataclass(frozen=True)
class NewToken:
    token: ApiToken
    secret: str


def token_digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_create(*, user: User, name: str, expires_at: datetime | None = None, now: datetime | None = None) -> NewToken:
    """Make a token for `user`. The returned secret is never stored and cannot be shown again."""
    secret = PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(
        user=user,
        name=name,
        digest=token_digest(secret),
        hint=secret[: len(PREFIX) + 6],
        created_at=now or timezone.now(),
        expires_at=expires_at,
    )
    return NewToken(token=token, secret=secret)


def token_revoke(*, token: ApiToken, now: datetime | None = None) -> ApiToken:
    """Revoke a token; revoking a revoked one keeps its first revocation time."""
    with transaction.atomic():
        token = ApiToken.objects.select_for_update().get(pk=token.pk)
        if token.revoked_at is None:
            token.revoked_at = now or timezone.now()
            token.save(update_fields=["revoked_at"])
    return token


def token_authenticate(secret: str, *, now: datetime | None = None) -> ApiToken:
    """The active token with this secret, its last use noted; TokenRefused (saying why) otherwise."""
    now = now or timezone.now()
    token = ApiToken.objects.select_related("user").filter(digest=token_digest(secret)).first()
    if token is None:
        raise TokenRefused("Invalid token.")
    if token.revoked_at is not None:
        raise TokenRefused(f"This token ({token.name!r}) was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC.")
    if token.expires_at is not None and token.expires_at <= now:
        raise TokenRefused(f"This token ({token.name!r}) expired on {token.expires_at:%Y-%m-%d %H:%M} UTC.")
    if not token.user.is_active:
        raise TokenRefused("This token's account is disabled.")
    if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
