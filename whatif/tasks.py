"""The what-if task: a thin interface over whatif.services.whatif_execute."""

from __future__ import annotations

from celery import shared_task

from whatif.services import whatif_execute

# A replay of a long trace runs for minutes to hours: its own time limit, well above the site's 300 s for tasks.
WHATIF_TIME_LIMIT_SECONDS = 6 * 3600


# On its own queue (settings.CELERY_TASK_ROUTES), consumed by its own worker: a long replay never holds up the
# scheduling cycle. Not acks_late: with Redis, a task unacknowledged past the visibility timeout (1 h) is delivered again, and a
# second copy of a long replay would only repeat the work (whatif_execute starts a queued run only, so it returns).
@shared_task(
    name="whatif.tasks.whatif_run",
    ignore_result=True,
    time_limit=WHATIF_TIME_LIMIT_SECONDS + 60,
    soft_time_limit=WHATIF_TIME_LIMIT_SECONDS,
)
def whatif_run(run_id: int) -> None:
    whatif_execute(run_id)
