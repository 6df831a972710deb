"""Celery tasks: thin interfaces over the cycle."""

from __future__ import annotations

from celery import shared_task

from scheduler.cycle import run_cycle


# Idempotent (the cycle re-reads the world and takes a lock), so acks_late is safe.
@shared_task(name="jobs.tasks.scheduling_cycle", acks_late=True, ignore_result=True)
def scheduling_cycle() -> dict[str, object]:
    report = run_cycle()
    return {"ran": report.ran, "placed": report.placed, "ended": report.ended}


def cycle_soon() -> None:
    """Run a scheduling cycle soon after the current transaction commits."""
    scheduling_cycle.delay_on_commit()
