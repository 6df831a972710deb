"""The server side of pages that keep up in place (frontend/static/frontend/live_parts.js and job_live.js).

A page names the parts of itself that change (elements with an id, each drawn by its own template, which the
page includes too); its poller asks the page's own URL with `?parts=1` added, so the filters, sort and page
in its query string hold, and swaps each part's new HTML in by id. No reload: the reader's scroll, focus
and zoom stay.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.http import HttpRequest, JsonResponse, QueryDict
from django.template.loader import render_to_string
from django.utils import dateformat, timezone

# The query parameter of a poll. Links drawn in a poll's answer leave it out (page_query).
LIVE_PARAM = "parts"


def is_live_poll(request: HttpRequest) -> bool:
    return request.GET.get(LIVE_PARAM) == "1"


def page_query(request: HttpRequest) -> QueryDict:
    """The page's own query string (a mutable copy), without the poll's parameter: what its links build on."""
    query = request.GET.copy()
    query.pop(LIVE_PARAM, None)
    return query


def updated_at() -> str:
    """When the parts were drawn, as the page's "last updated" note shows it (local time)."""
    return dateformat.format(timezone.localtime(), "H:i:s")


def render_parts(request: HttpRequest, parts: Mapping[str, str], context: Mapping[str, Any]) -> dict[str, str]:
    """Each part's HTML by element id, from its template."""
    return {element: render_to_string(template, dict(context), request=request) for element, template in parts.items()}


def live_parts_response(request: HttpRequest, parts: Mapping[str, str], context: Mapping[str, Any], *, live: bool) -> JsonResponse:
    """A poll's answer: the parts, when they were drawn, and whether anything on the page can still change (`live`:
    false stops the poller)."""
    return JsonResponse({"parts": render_parts(request, parts, context), "live": live, "updated": updated_at()})
