"""The API tokens page: make a token (its secret shown once), see when each was last used, revoke one."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from accounts.requests import AuthenticatedHttpRequest
from accounts.selectors import tokens_visible_to
from accounts.services import token_create, token_revoke
from api.accounts.serializers import MAX_EXPIRY_DAYS, TokenCreateSerializer

EXPIRY_CHOICES = [(30, "30 days"), (90, "90 days"), (MAX_EXPIRY_DAYS, "a year"), (0, "never")]


@login_required
def tokens_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    new_secret, values = "", {"name": "", "expires_in_days": 90}
    errors: dict[str, Any] = {}
    if request.method == "POST":
        days = request.POST.get("expires_in_days", "")
        values = {"name": request.POST.get("name", ""), "expires_in_days": int(days) if days.isdigit() else days}
        # The API's serializer, so the page and the API accept exactly the same tokens.
        serializer = TokenCreateSerializer(
            data={"name": values["name"], "expires_in_days": values["expires_in_days"] or None}, context={"user": request.user}
        )
        if serializer.is_valid():
            new = token_create(user=request.user, name=serializer.validated_data["name"], expires_at=serializer.validated_expiry())
            new_secret, values = new.secret, {"name": "", "expires_in_days": 90}
        else:
            errors = serializer.errors
    tokens = tokens_visible_to(request.user)
    return render(
        request,
        "frontend/tokens.html",
        {"tokens": tokens, "new_secret": new_secret, "errors": errors, "values": values, "expiry_choices": EXPIRY_CHOICES},
        status=400 if errors else 200,
    )


@login_required
@require_POST
def token_revoke_view(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    token = token_revoke(token=get_object_or_404(tokens_visible_to(request.user), pk=pk))
    messages.success(request, f"Token {token.name!r} is revoked: it no longer works.")
    return redirect("frontend:tokens")
