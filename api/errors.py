"""The API's answer to each domain error of the apps below it (the kit maps them: apikit.errors)."""

from __future__ import annotations

from rest_framework.exceptions import NotFound, PermissionDenied

from apikit.errors import ClusterUnreachable, Conflict, domain_error_register
from jobs.cluster import ClusterUnavailable
from jobs.errors import (
    ArrayNotFound,
    HoldNotYours,
    IllegalTransition,
    JobFinished,
    JobNotHoldable,
    JobNotRequeueable,
    JobNotRunning,
    JobNotStarted,
    JobNotUpdatable,
)


def register() -> None:
    domain_error_register(ArrayNotFound, lambda exc: NotFound(str(exc)))
    domain_error_register(JobFinished, lambda exc: Conflict(str(exc)))
    domain_error_register(IllegalTransition, lambda exc: Conflict(str(exc)))
    domain_error_register(JobNotStarted, lambda exc: Conflict(str(exc)))
    domain_error_register(JobNotRunning, lambda exc: Conflict(str(exc)))
    domain_error_register(JobNotHoldable, lambda exc: Conflict(str(exc)))
    domain_error_register(JobNotRequeueable, lambda exc: Conflict(str(exc)))
    domain_error_register(JobNotUpdatable, lambda exc: Conflict(str(exc)))
    domain_error_register(HoldNotYours, lambda exc: PermissionDenied(str(exc)))
    domain_error_register(ClusterUnavailable, lambda exc: ClusterUnreachable(f"The cluster cannot be reached: {exc}"))
