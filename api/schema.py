"""How the OpenAPI schema describes authentication (API tokens and jobs' own tokens; imported by ApiConfig.ready) and
the submits' response headers."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension

from api.idempotency import HEADER, REPLAYED_HEADER


class ApiTokenScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A token from /api/v1/tokens/ or /api/v1/auth/token/, sent as 'Authorization: Bearer <token>' "
            "('Token <token>' works too).",
        }


class JobTokenScheme(OpenApiAuthenticationExtension):
    target_class = "api.telemetry.authentication.JobTokenAuthentication"
    match_subclasses = True
    name = "jobToken"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "The job's own token, in its pods' MUSTER_TELEMETRY_TOKEN: it reports for that job only.",
        }


def document_submit_headers(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """The submits' 201 says its headers (a drf-spectacular postprocessing hook): `Location`, and `Idempotent-Replayed`
    on an answer that replays an earlier request with the same `Idempotency-Key`. README documented both; the schema
    did not, so a client generated from it could neither follow the new job nor tell a replay from a new submit."""
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "201" not in operation.get("responses", {}):
                continue
            parameters = operation.get("parameters", [])
            if not any(p.get("in") == "header" and p.get("name") == HEADER for p in parameters):
                continue
            operation["responses"]["201"].setdefault("headers", {}).update(
                {
                    "Location": {
                        "description": "The new job's URL (an array's: the job list of its elements, ?array=).",
                        "required": True,
                        "schema": {"type": "string", "format": "uri"},
                    },
                    REPLAYED_HEADER: {
                        "description": f"'true' when this answers a retry with an earlier request's {HEADER}: the "
                        "jobs are that request's, and nothing new was queued. Absent otherwise.",
                        "schema": {"type": "string", "enum": ["true"]},
                    },
                }
            )
    return result
