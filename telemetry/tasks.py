"""Celery tasks: thin interfaces over telemetry services."""

from __future__ import annotations

from celery import shared_task

from telemetry.live_use import cluster_gpu_use_refresh
from telemetry.services import STORE_RUN_TASK, telemetry_store_attempt, telemetry_store_due


# Idempotent (a rerun replaces the run's rows in one transaction), so acks_late is safe. A source that
# is away is not retried here: the run stays due and the sweep below enqueues it again, with backoff.
@shared_task(name=STORE_RUN_TASK, acks_late=True, ignore_result=True)
def telemetry_store_run_task(job_id: int, attempt: int) -> int:
    return telemetry_store_attempt(job_id=job_id, attempt=attempt)


# Beat fires it every MUSTER_TELEMETRY_STORE_SWEEP_SECONDS; rows are claimed with SKIP LOCKED, so overlaps are harmless.
@shared_task(name="telemetry.tasks.telemetry_store_due", ignore_result=True)
def telemetry_store_due_task() -> int:
    return len(telemetry_store_due())


# Beat fires it every USE_REFRESH_SECONDS: the dashboard's "GPUs used now" (telemetry/live_use.py), off its request.
@shared_task(name="telemetry.tasks.cluster_gpu_use", ignore_result=True)
def cluster_gpu_use_task() -> int:
    return int(cluster_gpu_use_refresh()["jobs_reporting"])
