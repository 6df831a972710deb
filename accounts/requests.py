"""The types of requests that only signed-in users reach. Nothing here checks anything at run time.

Pages under `login_required` (and the admin) never see AnonymousUser, nor do API views under
IsAuthenticated (the default permission) or a permission that requires it: their user is a User.
"""

from __future__ import annotations

from typing import cast

from django.contrib.auth.models import User
from django.http import HttpRequest
from rest_framework.request import Request


class AuthenticatedHttpRequest(HttpRequest):
    """A page's request behind `login_required` or the admin's login."""

    user: User


def api_user(request: Request) -> User:
    """The user of an API request that an authenticated-only permission let through."""
    return cast(User, request.user)
