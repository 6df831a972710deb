"""Reads of API tokens."""

from __future__ import annotations

from django.contrib.auth.models import User
from django.db.models import QuerySet

from accounts.models import ApiToken


def tokens_visible_to(user: User) -> QuerySet[ApiToken]:
    """A user's own tokens, newest first: nobody, admins included, lists another person's."""
    return ApiToken.objects.filter(user=user)
