"""A query parameter the API does not document is refused, on every endpoint alike.

The job list ignored `?bogus=1` (and `?stat=RUNNING`, a typo that lists every job), while the usage report refused
it. The OpenAPI schema already says which query parameters each operation takes (its filters, pagination and
declared parameters), so the schema is the one list: a parameter it does not name for an operation is a 400 naming
it and what the operation takes, and a parameter the API reads but does not document fails its own tests.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse, JsonResponse

# Every endpoint answers ?format= (apikit.negotiation refuses a format it lacks); the schema names it only where
# there is a choice, so it is taken everywhere but listed only there.
ALWAYS = frozenset({"format"})
# Where config/urls.py mounts the documented API: a page's query (/?state=...) never builds the schema.
API_PREFIX = "/api/v1/"


@dataclass(frozen=True)
class _Operation:
    path: str
    method: str
    params: frozenset[str]


@dataclass(frozen=True)
class _Path:
    template: str
    pattern: re.Pattern[str]
    methods: dict[str, frozenset[str]]


_paths: list[_Path] | None = None
_lock = threading.Lock()


def _build() -> list[_Path]:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    found = []
    for template, operations in schema["paths"].items():
        regex = "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in re.split(r"(\{[^}]+\})", template))
        methods = {
            method.upper(): frozenset(p["name"] for p in operation.get("parameters", []) if p["in"] == "query")
            for method, operation in operations.items()
        }
        found.append(_Path(template, re.compile(regex), methods))
    # A path of fixed words before one with a variable where both match (/jobs/array/ before /jobs/{id}/).
    found.sort(key=lambda path: (path.template.count("{"), path.template))
    return found


def _paths_known() -> list[_Path]:
    global _paths
    if _paths is None:
        with _lock:
            if _paths is None:
                _paths = _build()
    return _paths


def operation_of(path: str, method: str) -> _Operation | None:
    """The documented operation a request is for, or None when the schema has no such path and method (a page,
    the schema itself, a method the endpoint lacks: those answer as they always did)."""
    method = "GET" if method == "HEAD" else method
    for known in _paths_known():
        if known.pattern.fullmatch(path) and method in known.methods:
            return _Operation(known.template, method, known.methods[method])
    return None


def unknown_parameters(request: HttpRequest) -> dict[str, list[str]]:
    """Each query parameter of `request` its operation does not take, with why; empty when all are known."""
    if not request.GET or request.method == "OPTIONS" or not request.path_info.startswith(API_PREFIX):
        return {}
    operation = operation_of(request.path_info, request.method or "GET")
    if operation is None:
        return {}
    unknown = sorted(set(request.GET) - operation.params - ALWAYS)
    if not unknown:
        return {}
    takes = f"takes {', '.join(sorted(operation.params))}" if operation.params else "takes no query parameters"
    why = f"Unknown query parameter; {operation.method} {operation.path} {takes}."
    return {name: [why] for name in unknown}


class UnknownQueryParametersMiddleware:
    """Answers a request to a documented API operation with a 400 when its query has a parameter the operation
    does not document, before anything reads it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        # Made with the WSGI handler, as a gunicorn worker boots: the schema is read now, not by the first API request
        # with a query (it took 1.2 s); a schema that cannot be generated stops the worker here, said at once.
        _paths_known()

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if errors := unknown_parameters(request):
            return JsonResponse(errors, status=400)
        return self.get_response(request)
