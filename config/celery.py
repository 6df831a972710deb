"""The Celery app. Workers and beat load it with `celery -A config ...`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("muster", task_cls="config.celery_task:MusterTask")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _schedule_cycles(sender: Celery, **_: object) -> None:
    from django.conf import settings

    interval = settings.MUSTER_CYCLE_INTERVAL_SECONDS
    # expires: a tick nobody picked up in time is dropped, the next one does the work.
    sender.add_periodic_task(interval, sender.signature("jobs.tasks.scheduling_cycle", expires=max(interval, 1.0)), name="scheduling cycle")
    # Runs whose telemetry store task was lost (a broker outage, a killed worker) are found and stored again.
    sweep = settings.MUSTER_TELEMETRY_STORE_SWEEP_SECONDS
    sender.add_periodic_task(sweep, sender.signature("telemetry.tasks.telemetry_store_due", expires=sweep), name="telemetry store sweep")
    # The dashboard's "GPUs used now", measured from the running jobs' live telemetry off the page's request.
    from telemetry.live_use import USE_REFRESH_SECONDS

    sender.add_periodic_task(
        USE_REFRESH_SECONDS,
        sender.signature("telemetry.tasks.cluster_gpu_use", expires=USE_REFRESH_SECONDS),
        name="cluster GPU use",
    )
    # Messages owed whose send task was lost, or that wait for a retry (notify.services).
    notify = settings.MUSTER_NOTIFY_SWEEP_SECONDS
    sender.add_periodic_task(notify, sender.signature("notify.tasks.send_due", expires=notify), name="notifications sweep")
