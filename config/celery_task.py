"""The base class of Muster's Celery tasks: publishing never fails the caller's request.

Every task Muster enqueues from a web request or the cycle is a nudge whose work is also
found later without it (beat's next cycle, the telemetry store sweep). So when the broker
is down, a submit or a cancel that has committed must still answer 2xx: the publish is
tried briefly, and a failure is logged, not raised.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from celery import current_app
from celery.contrib.django.task import DjangoTask
from django.db import transaction

logger = logging.getLogger(__name__)

# One quick retry: a request must not hang on a broker that is away (kombu's default waits longer).
PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}


class MusterTask(DjangoTask):
    def publish_quietly(self, *args: Any, **options: Any) -> bool:
        """Enqueue the task now; on a broker error log one line and return False instead of raising."""
        try:
            self.apply_async(args, retry_policy=PUBLISH_RETRY_POLICY, **options)
        except Exception as exc:  # kombu's OperationalError, redis' ConnectionError, a full disk for the spool, ...
            logger.warning("could not enqueue %s%s (the broker may be down; it is picked up later): %s", self.name, args, exc)
            return False
        return True

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """Enqueue after the current transaction commits, without ever failing the committed request."""
        if kwargs:
            raise TypeError("Muster's tasks take ids as positional arguments")
        transaction.on_commit(functools.partial(self.publish_quietly, *args))


def task_named(name: str) -> MusterTask:
    """The registered task `name`, for a service to enqueue a task whose module imports that service.

    Celery's answer to the cycle between task bodies (which call services) and the services that
    enqueue them: they meet by the task's name, not by an import.
    """
    if name not in current_app.tasks:
        # A process that never started a worker (the web, a management command) may not have imported the apps'
        # tasks modules yet: Celery's autodiscovery imports them now.
        current_app.loader.import_default_modules()
    task: MusterTask = current_app.tasks[name]
    return task
