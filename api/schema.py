"""How the OpenAPI schema describes authentication: API tokens and jobs' own tokens (imported by ApiConfig.ready)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension


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
