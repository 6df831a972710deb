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


class ArrayNotFound(Exception):
    """No job array of that id, or none the asker may see (the two read alike, as for a single job)."""

    def __init__(self, array_id: int) -> None:
        super().__init__(f"No array {array_id} (or none that you may see).")
        self.array_id = array_id


class ArrayIndicesMissing(Exception):
    """Indices asked for that the array does not have; nothing was done to it."""

    def __init__(self, array_id: int, missing: list[int]) -> None:
        which = f"element {missing[0]}" if len(missing) == 1 else f"elements {', '.join(map(str, missing))}"
        super().__init__(f"Array {array_id} has no {which}.")
        self.array_id = array_id
        self.missing = missing


class ArrayEnded(JobFinished):
    """Every element of an array asked for has ended: there is nothing left to cancel. `ended`: those elements."""

    def __init__(self, message: str, *, array_id: int, name: str, ended: list[object]) -> None:
        super().__init__(message)
        self.array_id = array_id
        self.name = name
        self.ended = ended


class JobNotRequeueable(Exception):
    """A requeue of a job that is not placed or running: a pending job is queued already, an ended one is resubmitted."""


class JobNotHoldable(Exception):
    """A hold or release of a job it does not apply to: only a PENDING job is held, only a held one released."""


class HoldNotYours(Exception):
    """A release of a hold the asker may not lift: an admin's hold on a job, released by its owner."""


class JobNotUpdatable(Exception):
    """An update (`scontrol update`) of a job that is not PENDING: a placed or running job's asks are not changed."""
