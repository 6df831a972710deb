"""Domain errors. The API maps them to status codes in `apikit.errors`."""

from __future__ import annotations


class IllegalTransition(Exception):
    """A state change the state machine does not allow (or the job moved meanwhile)."""

    def __init__(self, job_id: int, from_state: str, to_state: str) -> None:
        super().__init__(f"Job {job_id} cannot go from {from_state} to {to_state}.")
        self.job_id = job_id
        self.from_state = from_state
        self.to_state = to_state


class JobFinished(Exception):
    """The job has already ended; there is nothing left to do to it."""


class JobNotStarted(Exception):
    """The job has not run yet, so what only a run makes (logs) does not exist."""


class JobNotRunning(Exception):
    """What only the running attempt of a job may do (report a checkpoint) came while it is not running, or from
    another attempt."""
