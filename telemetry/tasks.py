"""Celery tasks: thin interfaces over telemetry services."""

from __future__ import annotations

from celery import shared_task

from telemetry.services import telemetry_store_run
from telemetry.sources import TelemetryUnavailable


# Idempotent (a rerun replaces the run's rows in one transaction), so acks_late is safe.
# A source that is down is retried with backoff; the run's series stay readable live meanwhile.
@shared_task(
    name="telemetry.tasks.telemetry_store_run",
    acks_late=True,
    ignore_result=True,
    autoretry_for=(TelemetryUnavailable,),
    retry_backoff=30,
    retry_backoff_max=1800,
    max_retries=8,
)
def telemetry_store_run_task(job_id: int, attempt: int) -> int:
    return telemetry_store_run(job_id=job_id, attempt=attempt)
