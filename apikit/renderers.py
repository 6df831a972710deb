"""Answers that are not JSON (a report's CSV, a log's text), with errors still in JSON."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

# The formats every client reads an error in: the JSON ones (`api` is the browsable API's HTML around JSON).
_ERROR_FORMATS = frozenset({"json", "api"})


class PlainTextRenderer(BaseRenderer):
    """A string as text (a log's output for `Accept: text/plain`, what curl and a terminal want)."""

    media_type = "text/plain"
    format = "text"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None) -> bytes:
        return str(data).encode(self.charset)


class JsonErrorsMixin:
    """An error is JSON, whichever format was asked for: a CSV or text client still gets `{"field": [...]}`, which a
    renderer of rows or text could not draw."""

    def finalize_response(self, request: Request, response: Any, *args: Any, **kwargs: Any) -> Any:
        if response.status_code >= 400 and getattr(getattr(request, "accepted_renderer", None), "format", "json") not in _ERROR_FORMATS:
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)  # type: ignore[misc]
