"""The OpenAPI schema tells the truth about errors and strict bodies (a drf-spectacular postprocessing hook).

Every operation documents the errors it can answer with, each with its body: 400 (a field, or the
query, is invalid), 401 (no or bad credentials), 403 (not allowed), 404 (no such object: a page past
the end of a list is an empty page, not a 404), 406 (an Accept header it cannot answer), 413 and 415 (a body too large, or not JSON:
on operations that take one), 429 (throttled) and 503 (the database or the cluster is away), both
with their Retry-After header. Request bodies of strict serializers say
`additionalProperties: false`, as the API refuses unknown fields. A string that is blank or of a format is
`anyOf` the two, not `oneOf` (which "" would match twice).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from rest_framework import serializers

from apikit.serializers import StrictSerializer

DETAIL = "ErrorDetail"
FIELDS = "ValidationErrors"

_COMPONENTS: dict[str, dict[str, Any]] = {
    DETAIL: {
        "type": "object",
        "description": "An error the request cannot be retried as is; `detail` says why in plain words.",
        "properties": {"detail": {"type": "string"}},
        "required": ["detail"],
    },
    FIELDS: {
        "type": "object",
        "description": "What is wrong with the request, by field name (or `non_field_errors`): a list of messages, "
        "or for a nested object, its own fields' messages. Unknown fields are named with 'Unknown field.'",
        "additionalProperties": {},
        "minProperties": 1,
    },
}

_ERRORS: dict[str, tuple[str, str]] = {
    "400": (FIELDS, "The request is invalid; nothing was changed."),
    "401": (DETAIL, "No credentials, or credentials that are wrong, expired or revoked."),
    "403": (DETAIL, "The account may not do this."),
    "404": (DETAIL, "No such object visible to this account."),
    "406": (DETAIL, "The Accept header names no form this operation answers in (it names those it has)."),
    "413": (DETAIL, "The request body is larger than the site allows."),
    "415": (DETAIL, "The body's Content-Type is not one the operation reads (application/json)."),
    "429": (DETAIL, "Too many requests; retry after the number of seconds in the Retry-After header."),
    "503": (DETAIL, "The database or the cluster cannot be reached now; retry after the Retry-After header's seconds."),
}
_OTHER_ERRORS = {
    "409": "The object's current state does not allow this (e.g. cancelling a job that has ended).",
    "415": "The body's content type is not one the operation reads.",
}
_BODY_METHODS = {"post", "put", "patch"}
# Said of a body, so documented only where one is sent; every other error may answer any operation.
_BODY_ERRORS = {"413", "415"}


def _strict_components() -> set[str]:
    names: set[str] = set()
    pending: list[type] = [StrictSerializer]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls is not StrictSerializer:
            base = cls.__name__.removesuffix("Serializer")
            names.update({base, f"{base}Request", f"Patched{base}Request"})
    return names


def _error_response(component: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{component}"}}}}


# The header a 429 and a 503 always carry (the throttles, the login lockout and apikit.errors set it): the schema said
# "retry after the Retry-After header" in words only, so a generated client had no header to read.
_RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "required": True,
        "schema": {"type": "integer", "minimum": 0},
    }
}


# drf-spectacular describes a format-checked string that may be blank (a URLField or EmailField with allow_blank) as
# `oneOf: [{format: uri}, {maxLength: 0}]`. A validator that does not check `format` finds "" matching both branches,
# which `oneOf` forbids, and refuses every answer with an empty webhook; `anyOf` says what is meant.
_BLANK = {"type": "string", "maxLength": 0}


def _blank_or_formatted_as_any_of(node: Any) -> None:
    if isinstance(node, dict):
        branches = node.get("oneOf")
        if isinstance(branches, list) and _BLANK in branches:
            node["anyOf"] = node.pop("oneOf")
        for value in node.values():
            _blank_or_formatted_as_any_of(value)
    elif isinstance(node, list):
        for value in node:
            _blank_or_formatted_as_any_of(value)


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    _blank_or_formatted_as_any_of(schemas)
    schemas.update(_COMPONENTS)
    strict = _strict_components()
    for name, schema in schemas.items():
        if name in strict and schema.get("type") == "object":
            schema["additionalProperties"] = False
    for path_item in result.get("paths", {}).values():
        for method, operation in path_item.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            for code, (_component, description) in _ERRORS.items():
                if code in _BODY_ERRORS and method not in _BODY_METHODS:
                    continue
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                # Errors documented by a view without a body (e.g. `409: None`) still answer with one.
                if code.isdigit() and int(code) >= 400 and "content" not in response:
                    component = FIELDS if code == "400" else DETAIL
                    described = response.get("description", "")
                    if not described or described == "No response body":
                        described = _OTHER_ERRORS.get(code) or _ERRORS.get(code, (DETAIL, "An error."))[1]
                    responses[code] = _error_response(component, described)
            for code in ("429", "503"):
                if code in responses:
                    responses[code].setdefault("headers", {}).update(_RETRY_AFTER)
    return result


class AutoSchema(SpectacularAutoSchema):
    """drf-spectacular's, saying `minItems: 1` of a list that refuses to be empty (`allow_empty=False`): it said so
    only of a `min_length`, so `{"ids": []}` to cancel-many and `"indices": []` to cancel-array were valid by the
    schema and refused by the API ("Give at least one job id.")."""

    def _map_serializer_field(self, field: Any, direction: Any, bypass_extensions: bool = False) -> dict[str, Any]:
        schema: dict[str, Any] = super()._map_serializer_field(field, direction, bypass_extensions)
        if isinstance(field, serializers.ListField) and not field.allow_empty and schema.get("type") == "array":
            schema["minItems"] = max(schema.get("minItems", 0), 1)
        return schema
