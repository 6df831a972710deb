"""Maps domain errors and oversized bodies to clear API responses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import status
from rest_framework.exceptions import APIException, MethodNotAllowed, NotAcceptable, UnsupportedMediaType, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class ClusterUnreachable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "cluster_unavailable"


class DatabaseUnavailable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "database_unavailable"
    default_detail = "The database cannot be reached right now; nothing was changed. Try again shortly."


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


# Domain errors of the apps below the API, each with the API error it answers as. The kit sits below
# those apps and cannot name their errors; the API layer registers them (`api.apps.ApiConfig.ready`).
_DOMAIN_ERRORS: dict[type[Exception], Callable[[Exception], APIException]] = {}


def domain_error_register(error: type[Exception], answer: Callable[[Exception], APIException]) -> None:
    """Answer `error` (and its subclasses) raised in any view with the API error `answer` makes of it."""
    _DOMAIN_ERRORS[error] = answer


def _domain_answer(exc: Exception) -> APIException | None:
    for error, answer in _DOMAIN_ERRORS.items():
        if isinstance(exc, error):
            return answer(exc)
    return None


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if (answer := _domain_answer(exc)) is not None:
        exc = answer
    elif isinstance(exc, RequestDataTooBig):
        # Django refuses the body before any parser sees it (DRF reads `request.body` for JSON).
        exc = PayloadTooLarge(f"The request body is too large; the limit is {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    elif isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    elif isinstance(exc, DatabaseError) and database_is_away(exc):
        exc = DatabaseUnavailable()
    elif isinstance(exc, UnsupportedMediaType) and str(exc.detail).startswith("Unsupported media type"):
        exc = _unsupported_media_type(context)  # DRF's own words; a view's own 415 (telemetry's) says more already
    elif isinstance(exc, NotAcceptable) and str(exc.detail) == NotAcceptable.default_detail:
        exc = _not_acceptable(context)
    elif isinstance(exc, MethodNotAllowed) and str(exc.detail).startswith("Method "):
        exc = _method_not_allowed(context) or exc
    response = drf_exception_handler(exc, context)
    if response is not None and response.status_code == status.HTTP_503_SERVICE_UNAVAILABLE:
        response.headers.setdefault("Retry-After", str(RETRY_AFTER_SECONDS))
    return response


def _either(media_types: list[str]) -> str:
    named = list(dict.fromkeys(media_types))
    return " or ".join(named) if len(named) < 3 else f"{', '.join(named[:-1])} or {named[-1]}"


def _unsupported_media_type(context: dict[str, Any]) -> UnsupportedMediaType:
    # DRF said `Unsupported media type "" in request.`: neither what was wrong (a missing Content-Type, curl's -d
    # sending a form) nor what to send instead.
    request = context.get("request")
    parsers = getattr(request, "parsers", None) or []
    sent = getattr(request, "content_type", "") or ""
    reads = _either([parser.media_type for parser in parsers]) or "no body"
    said = f"Content-Type {sent.split(';')[0].strip()!r}" if sent else "no Content-Type"
    return UnsupportedMediaType(sent, detail=f"The body must be sent as {reads}; this request had {said}.")


def _not_acceptable(context: dict[str, Any]) -> NotAcceptable:
    # DRF said "Could not satisfy the request Accept header.", naming neither the header's value nor what would do.
    view, request = context.get("view"), context.get("request")
    renderers = view.get_renderers() if view is not None and hasattr(view, "get_renderers") else []
    asked = request.headers.get("Accept", "") if request is not None else ""
    answers = _either([renderer.media_type for renderer in renderers]) or "application/json"
    return NotAcceptable(f"This endpoint answers {answers}; the Accept header asked for {asked!r}.")


def _method_not_allowed(context: dict[str, Any]) -> MethodNotAllowed | None:
    # DRF said 'Method "PUT" not allowed.', and only the Allow header named what is: `PUT /api/v1/jobs/{id}/` read as
    # no update at all, where PATCH is one.
    view, request = context.get("view"), context.get("request")
    if view is None or request is None:
        return None
    taken = [method for method in getattr(view, "allowed_methods", []) if method not in ("HEAD", "OPTIONS")]
    if not taken:
        return None
    return MethodNotAllowed(request.method, detail=f"{request.method} is not taken here; {request.path} takes {_either(taken)}.")


# What a client is told to wait before retrying when the database or the cluster is away.
RETRY_AFTER_SECONDS = 30


def database_is_away(exc: BaseException) -> bool:
    """A lost or refused connection (OperationalError, InterfaceError), not a bad query or a broken constraint."""
    return isinstance(exc, OperationalError | InterfaceError)


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler404: JSON under /api/ (a path that matches no route, e.g. /api/v1/jobs/x.y/), Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Not found."}, status=404)
    return defaults.page_not_found(request, exception or Http404())


def json_server_error(request: HttpRequest) -> HttpResponse:
    """handler500: JSON under /api/, Django's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": "Server error: the request failed; it has been logged."}, status=500)
    return defaults.server_error(request)  # templates/500.html
