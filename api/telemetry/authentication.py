"""The push endpoint's authentication: a job's telemetry token, and nothing else (no user sessions or API tokens)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AnonymousUser
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from accounts.authentication import KEYWORDS
from accounts.services import PREFIX as USER_TOKEN_PREFIX
from telemetry.tokens import ENV_TOKEN, TOKEN_PREFIX, InvalidToken, JobTokenAuth, telemetry_token_verify


class JobTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <MUSTER_TELEMETRY_TOKEN>`. A wrong token is 401, never a silent anonymous request."""

    def authenticate(self, request: Request) -> tuple[AnonymousUser, JobTokenAuth] | None:
        header = get_authorization_header(request).split()
        if len(header) == 2 and header[0].lower() in KEYWORDS and header[1].startswith(USER_TOKEN_PREFIX.encode()):
            # A user's API token (well formed, or it would not start so): not "malformed", just not what this takes.
            raise AuthenticationFailed(
                f"A user's API token is not accepted here: push with the job's own token, {ENV_TOKEN} in every pod's "
                f"environment ('Authorization: Bearer ${ENV_TOKEN}')."
            )
        return self.job_token(header)

    def job_token(self, header: list[bytes]) -> tuple[AnonymousUser, JobTokenAuth] | None:
        """The job's token in a split Authorization header; None when the header is not a bearer one."""
        if not header or header[0].lower() != b"bearer":
            return None
        if len(header) != 2:
            raise AuthenticationFailed(f"Send 'Authorization: Bearer <token>' with the job's {ENV_TOKEN}.")
        try:
            auth = telemetry_token_verify(header[1].decode("ascii"))
        except (InvalidToken, UnicodeDecodeError) as exc:
            raise AuthenticationFailed(str(exc) if isinstance(exc, InvalidToken) else "Malformed telemetry token.") from exc
        return AnonymousUser(), auth

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (with this challenge) rather than 403 when no token is sent.
        return 'Bearer realm="muster-telemetry"'


class HasJobToken(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, JobTokenAuth)


class JobTokenIfPresented(JobTokenAuthentication):
    """A job's token where a user's login is also accepted: a bearer token of another kind is left to the next class."""

    def authenticate(self, request: Request) -> tuple[AnonymousUser, JobTokenAuth] | None:
        header = get_authorization_header(request).split()
        if len(header) == 2 and header[0].lower() == b"bearer" and not header[1].startswith(f"{TOKEN_PREFIX}.".encode()):
            return None
        return self.job_token(header)


class IsAuthenticatedOrJobToken(BasePermission):
    """A signed-in user (the view then checks the job is theirs) or a job's token (the view checks which job)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, JobTokenAuth) or bool(request.user and request.user.is_authenticated)
