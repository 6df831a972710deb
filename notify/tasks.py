"""Celery tasks: thin interfaces over notify services."""

from __future__ import annotations

from celery import shared_task

from notify.services import SEND_TASK, deliveries_send_due


# Beat fires it every minute, and a state change enqueues it after its commit; rows are claimed with SKIP LOCKED.
@shared_task(name=SEND_TASK, ignore_result=True)
def notify_send_due_task() -> int:
    return deliveries_send_due()
