"""A JSON parser that refuses oversized bodies before reading them."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.parsers import JSONParser

from jobs.api.errors import PayloadTooLarge


class BoundedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict[str, Any] | None = None) -> Any:
        request = (parser_context or {}).get("request")
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        length = int(request.META.get("CONTENT_LENGTH") or 0) if request is not None else 0
        if length > limit:
            raise PayloadTooLarge(f"The request body is {length} bytes; the limit is {limit}.")
        return super().parse(stream, media_type, parser_context)
