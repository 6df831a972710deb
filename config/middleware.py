"""Project-wide request handling: a database that is away answers 503 with a retry hint, a JSON body nested
too deep is a 400 before anything parses it (never a 500), and a URL missing its slash is redirected keeping
its method."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.middleware.common import CommonMiddleware
from django.template.response import SimpleTemplateResponse
from django.utils.http import escape_leading_slashes

from apikit.errors import RETRY_AFTER_SECONDS, DatabaseUnavailable, database_is_away
from apikit.json_limits import json_depth_error


class DatabaseUnavailableMiddleware:
    """Turns a lost database connection anywhere (pages, admin, session or auth middleware) into a 503.

    DRF views map it themselves (apikit/errors.py); this catches what happens outside them.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            return self.get_response(request)
        except Exception as exc:
            if not database_is_away(exc):
                raise
            return self._unavailable(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return self._unavailable(request) if database_is_away(exception) else None

    def _unavailable(self, request: HttpRequest) -> HttpResponse:
        detail = str(DatabaseUnavailable.default_detail)
        response: HttpResponse
        if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
            response = JsonResponse({"detail": detail}, status=503)
        else:
            response = SimpleTemplateResponse("503.html", {"detail": detail}, status=503)
            response.render()
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


class MalformedInputMiddleware:
    """Refuses, with a 400 before any view: JSON bodies nested deeper than any Muster body (apikit/json_limits.py),
    and NUL characters in the query string (PostgreSQL cannot store or compare them, so a lookup would fail)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.META.get("QUERY_STRING", "") or any("\x00" in v for vs in request.GET.lists() for v in vs[1]):
            return JsonResponse({"detail": "The query string contains a NUL character."}, status=400)
        if request.method in {"POST", "PUT", "PATCH"} and "json" in cast(str, request.content_type):  # set on every WSGI/ASGI request
            try:
                body = request.body
            except RequestDataTooBig:
                body = b""  # the view answers that one (413), with the limit
            error = json_depth_error(body)
            if error:
                return JsonResponse({"detail": error}, status=400)
        return self.get_response(request)


class PermanentRedirectKeepingMethod(HttpResponsePermanentRedirect):
    status_code = 308


class SlashRedirectMiddleware(CommonMiddleware):
    """Django's CommonMiddleware, whose APPEND_SLASH redirect keeps the method and body (308, not 301).

    HTTP clients follow a 301 as a GET: `requests.post(".../api/v1/jobs", json=job)` got the job list with a 200 and
    queued nothing. A 308 is followed as the same POST. Django's own refuses to redirect a POST in DEBUG, for the
    same reason; with 308 there is nothing to refuse."""

    response_redirect_class = PermanentRedirectKeepingMethod

    def get_full_path_with_slash(self, request: HttpRequest) -> str:
        return escape_leading_slashes(request.get_full_path(force_append_slash=True))
