"""Request rates: brute force at the login form and the token endpoint (django-axes, by account and by address),
and per-user rates on writes, a submit's dry runs and raw token requests (DRF throttles over Django's cache)."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

from axes.helpers import get_cool_off
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from rest_framework.exceptions import Throttled
from rest_framework.request import Request
from rest_framework.throttling import SimpleRateThrottle

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


def retry_after_seconds(cool_off: timedelta | None) -> int:
    return max(1, int(cool_off.total_seconds())) if cool_off else 3600


def lockout_response(request: HttpRequest, original_response: HttpResponse | None, credentials: dict[str, Any] | None) -> HttpResponse:
    """AXES_LOCKOUT_CALLABLE: 429 with Retry-After; JSON for the API, the login page's lockout template for people."""
    seconds = retry_after_seconds(get_cool_off(request))
    minutes = max(1, round(seconds / 60))
    detail = (
        f"Too many failed sign-ins for this account or from this address: try again in {minutes} minute"
        f"{'s' if minutes != 1 else ''}. Signing in with the right password meanwhile is refused too."
    )
    response: HttpResponse
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": detail}, status=429)
    else:
        response = render(request, "registration/locked_out.html", {"detail": detail, "minutes": minutes}, status=429)
    response["Retry-After"] = str(seconds)
    return response


_PERIODS = {1: "a second", 60: "a minute", 3600: "an hour", 86400: "a day"}


class _RateThrottled(Throttled):
    """A 429 whose detail is all Muster's: given to Throttled(), `wait` would add DRF's "Expected available in 36
    seconds." to it; set after, it is still the Retry-After header."""

    wait: int

    def __init__(self, detail: str, wait: int) -> None:
        super().__init__(detail=detail)
        self.wait = wait


class _SaidThrottle(SimpleRateThrottle):
    """Refuses with a 429 saying which rate was passed and its setting, not DRF's "Request was throttled. Expected
    available in 36 seconds.", which named neither; Retry-After is still the wait."""

    # What is counted, in the 429's words, and the setting that gives the rate.
    counted = "requests"
    setting = ""

    def allow_request(self, request: Request, view: Any) -> bool:
        if super().allow_request(request, view):
            return True
        wait = max(math.ceil(self.wait() or 0), 1)
        # Set by SimpleRateThrottle.__init__ from the rate (its stubs do not declare them).
        most, seconds = int(getattr(self, "num_requests", 0)), int(getattr(self, "duration", 0))
        per = _PERIODS.get(seconds, f"per {seconds} s")
        raise _RateThrottled(f"Too many {self.counted}: at most {most} {per} ({self.setting}); try again in {wait} s.", wait)


class _PerUserThrottle(_SaidThrottle):
    """Counted per signed-in user; a request without one is not counted (its 401 comes from authentication)."""

    def allow_request(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return True
        return super().allow_request(request, view)

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": request.user.pk}


class WriteRateThrottle(_PerUserThrottle):
    """Writes (POST, PUT, PATCH, DELETE) per signed-in user, at MUSTER_THROTTLE_WRITES; reads and dry runs are not counted."""

    scope = "writes"
    counted = "writes from this account (submits, cancels, updates and the other POSTs, PUTs, PATCHes and DELETEs)"
    setting = "MUSTER_THROTTLE_WRITES"

    def get_rate(self) -> str | None:
        return settings.MUSTER_THROTTLE_WRITES or None

    def allow_request(self, request: Request, view: Any) -> bool:
        return request.method in SAFE_METHODS or super().allow_request(request, view)


class DryRunRateThrottle(_PerUserThrottle):
    """A submit's dry runs per signed-in user, at MUSTER_THROTTLE_DRY_RUNS: the throttle of the actions that are POSTs but
    write nothing (`POST /api/v1/jobs/validate/` and `/estimate/`, which name it instead of the write throttle). A client
    that estimates as its user types must not use up the user's submits; an estimate plans the whole queue, so they
    have a rate of their own."""

    scope = "dry-runs"
    counted = "dry runs of a submit (validate, estimate) from this account"
    setting = "MUSTER_THROTTLE_DRY_RUNS"

    def get_rate(self) -> str | None:
        return settings.MUSTER_THROTTLE_DRY_RUNS or None


class TokenRequestRateThrottle(_SaidThrottle):
    """Requests to the password-exchange endpoint per client address, right or wrong (MUSTER_THROTTLE_TOKEN_REQUESTS)."""

    scope = "token-requests"
    counted = "token requests from this address"
    setting = "MUSTER_THROTTLE_TOKEN_REQUESTS"

    def get_rate(self) -> str | None:
        return settings.MUSTER_THROTTLE_TOKEN_REQUESTS or None

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class CheckpointRateThrottle(_SaidThrottle):
    """Checkpoint reports per job, whoever sends them (its pods or its owner), at MUSTER_THROTTLE_CHECKPOINTS."""

    scope = "checkpoints"
    counted = "checkpoint reports for this job"
    setting = "MUSTER_THROTTLE_CHECKPOINTS"

    def get_rate(self) -> str | None:
        return settings.MUSTER_THROTTLE_CHECKPOINTS or None

    def get_cache_key(self, request: Request, view: Any) -> str | None:
        return self.cache_format % {"scope": self.scope, "ident": view.kwargs.get("pk", "")}
