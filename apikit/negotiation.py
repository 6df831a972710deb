"""`?format=`, DRF's own query parameter (URL_FORMAT_OVERRIDE), refused in words when the endpoint has no such format."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import Http404
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request

# DRF's name of the browsable API's HTML is not self-explanatory.
_SAID = {"api": "api (the browsable HTML API)"}


class FormatParameterNegotiation(DefaultContentNegotiation):
    """DRF answers a `?format=` no renderer of the view has with a bare 404 ("Not found."), as if the endpoint did not
    exist: `GET /api/v1/jobs/?format=csv` read as a missing URL. Here it is a 400 naming the parameter and the formats
    the endpoint has (the usage report: json and csv). A format it has is answered whatever the Accept header says."""

    def select_renderer(self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None) -> Any:
        renderers = list(renderers)
        asked = format_suffix or request.query_params.get(str(self.settings.URL_FORMAT_OVERRIDE))
        chosen = [renderer for renderer in renderers if renderer.format == asked] if asked else []
        if chosen:
            # The format named in the URL wins over the Accept header: many clients send `Accept: application/json`
            # on every call, and `?format=csv` then answered 406.
            return chosen[0], chosen[0].media_type
        try:
            return super().select_renderer(request, renderers, format_suffix)
        except Http404 as exc:
            if format_suffix:
                raise  # /api/v1/jobs/1.5/: a path with a suffix no renderer has is no resource, a 404 as any unknown path
            asked = request.query_params.get(str(self.settings.URL_FORMAT_OVERRIDE), "")
            formats = list(dict.fromkeys(_SAID.get(renderer.format, renderer.format) for renderer in renderers))
            named = " or ".join(formats) if len(formats) < 3 else f"{', '.join(formats[:-1])} or {formats[-1]}"
            # Said in JSON, whatever the endpoint's first renderer is: DRF would write this error in it, and the
            # schema's (YAML) answered `format:\n- string: 'Unknown format ...'\n  code: invalid`.
            request.accepted_renderer, request.accepted_media_type = JSONRenderer(), JSONRenderer.media_type
            raise ValidationError({"format": [f"Unknown format {asked!r}: this endpoint answers {named}."]}) from exc
