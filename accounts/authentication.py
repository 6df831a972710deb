"""DRF authentication by API token, sent as `Authorization: Token <secret>` or `Authorization: Bearer <secret>`."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.request import Request

from accounts.services import TokenRefused, token_authenticate

KEYWORDS = (b"token", b"bearer")


class ApiTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[Any, Any] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() not in KEYWORDS:
            return None
        if len(parts) != 2:
            raise AuthenticationFailed("Send the token as 'Authorization: Bearer <token>' (or 'Token <token>'), with no spaces in it.")
        try:
            secret = parts[1].decode("ascii")
        except UnicodeDecodeError as exc:
            raise AuthenticationFailed("Invalid token.") from exc
        try:
            token = token_authenticate(secret)
        except TokenRefused as exc:
            raise AuthenticationFailed(str(exc)) from exc
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        # Makes DRF answer 401 (not 403) to a request without credentials.
        return 'Bearer realm="api"'
