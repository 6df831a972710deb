"""Request bodies: JSON whose top level is an object, the one shape every Muster body has."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

OBJECT_EXPECTED = (
    'The body must be a JSON object ({{"field": value, ...}}), not {kind}; an action that takes nothing takes no body, or {{}}.'
)


def _kind(data: Any) -> str:
    if data is None:
        return "null"
    if isinstance(data, bool):
        return "true" if data else "false"
    if isinstance(data, list):
        return "a list"
    if isinstance(data, str):
        return "a string"
    return "a number"


def _not_json(exc: ParseError) -> str:
    """DRF said "JSON parse error - Expecting value: line 1 column 9 (char 8)", and of bytes that are not UTF-8
    "JSON parse error - 'utf-8' codec can't decode byte 0xff in position 9: invalid start byte"."""
    cause = exc.__context__
    if isinstance(cause, UnicodeDecodeError):
        return f"The body is not UTF-8 text (byte {cause.object[cause.start]:#04x} at offset {cause.start}): send JSON in UTF-8."
    if isinstance(cause, json.JSONDecodeError):
        return f"The body is not valid JSON: {cause.msg} at line {cause.lineno}, column {cause.colno}."
    return str(exc.detail).replace("JSON parse error - ", "The body is not valid JSON: ", 1)


class JSONObjectParser(JSONParser):
    """DRF's JSON parser, refusing a body that is JSON but not an object (`null`, a list, a string, a number).

    `null` read as no body at all: `POST /jobs/{id}/release/` with `null` released the job while cancel refused `[1]`
    and a submit said "No data provided", naming neither a field nor the shape. Every body is refused alike now, before
    any view reads it, with a 400 saying what it must be (an empty body is still none: DRF never parses it).
    """

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except ParseError as exc:
            raise ParseError(_not_json(exc)) from exc
        if not isinstance(data, dict):
            raise ParseError(OBJECT_EXPECTED.format(kind=_kind(data)))
        return data
