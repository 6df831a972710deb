"""Job states and the transitions between them.

Every change of state goes through `jobs.services.job_transition`, which refuses
anything not listed here.
"""

from __future__ import annotations

from django.db import models


class JobState(models.TextChoices):
    PENDING = "PENDING"
    SCHEDULED = "SCHEDULED"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMED_OUT = "TIMED_OUT"
    PREEMPTED = "PREEMPTED"


# States in which a job holds GPUs on the cluster.
ACTIVE_STATES = frozenset({JobState.SCHEDULED, JobState.RUNNING})
TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT})

# SCHEDULED/RUNNING -> PENDING is a requeue: a failed attempt within the restart
# limit, or a launch the cluster refused. PREEMPTED -> PENDING keeps the job's age.
ALLOWED_TRANSITIONS: dict[str, frozenset[str]] = {
    JobState.PENDING: frozenset({JobState.SCHEDULED, JobState.CANCELLED}),
    JobState.SCHEDULED: frozenset(
        {JobState.RUNNING, JobState.PENDING, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.PREEMPTED}
    ),
    JobState.RUNNING: frozenset(
        {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT, JobState.PENDING, JobState.PREEMPTED}
    ),
    JobState.PREEMPTED: frozenset({JobState.PENDING, JobState.CANCELLED}),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.TIMED_OUT: frozenset(),
}


def can_transition(from_state: str, to_state: str) -> bool:
    return to_state in ALLOWED_TRANSITIONS.get(from_state, frozenset())
