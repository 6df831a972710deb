"""Maps domain errors and oversized bodies to clear API responses."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import status
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from jobs.cluster import ClusterUnavailable
from jobs.errors import IllegalTransition, JobFinished


class Conflict(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class ClusterUnreachable(APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "cluster_unavailable"


class PayloadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "payload_too_large"


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, JobFinished | IllegalTransition):
        exc = Conflict(str(exc))
    elif isinstance(exc, ClusterUnavailable):
        exc = ClusterUnreachable(f"The cluster cannot be reached: {exc}")
    elif isinstance(exc, RequestDataTooBig):
        # Django refuses the body before any parser sees it (DRF reads `request.body` for JSON).
        exc = PayloadTooLarge(f"The request body is too large; the limit is {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes.")
    elif isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"non_field_errors": exc.messages})
    return drf_exception_handler(exc, context)
