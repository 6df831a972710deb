"""The what-if task: a thin interface over whatif.services.whatif_execute; and what its worker does when it stops."""

from __future__ import annotations

import atexit
from typing import Any

from celery import Task, shared_task
from celery.signals import worker_ready

from whatif.services import whatif_execute, whatif_worker_stopped

# A replay of a long trace runs for minutes to hours: its own time limit, well above the site's 300 s for tasks.
WHATIF_TIME_LIMIT_SECONDS = 6 * 3600


# On its own queue (settings.CELERY_TASK_ROUTES), consumed by its own worker: a long replay never holds up the
# scheduling cycle. Not acks_late: with Redis, a task unacknowledged past the visibility timeout (1 h) is delivered again, and a
# second copy of a long replay would only repeat the work (whatif_execute starts a queued run only, so it returns).
@shared_task(
    bind=True,
    name="whatif.tasks.whatif_run",
    ignore_result=True,
    time_limit=WHATIF_TIME_LIMIT_SECONDS + 60,
    soft_time_limit=WHATIF_TIME_LIMIT_SECONDS,
)
def whatif_run(self: Task, run_id: int) -> None:
    whatif_execute(run_id, worker=self.request.hostname or "")


# A cold shutdown (SIGQUIT: make run's Ctrl-C sends it to the what-if worker) kills the replay's pool process without
# a word to the run, and a worker killed outright (SIGKILL, a lost container) does not even shut down. Its runs still
# "running" are marked stopped as it starts, and as its main process exits: at exit, because Celery's cold shutdown
# sends no worker_shutdown signal (only a warm one does), and by then its pool processes are gone. Every worker does
# this; one that never replayed finds no run of its name. (Pool processes leave by os._exit: no atexit of theirs.)
@worker_ready.connect
def _runs_left_by_this_worker(sender: Any = None, **_: Any) -> None:
    worker = getattr(sender, "hostname", "") or ""
    whatif_worker_stopped(worker=worker)
    atexit.register(whatif_worker_stopped, worker=worker)
