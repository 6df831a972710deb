"""A job's attempts, each with where it ran, when, and how it ended, for the job page's Attempts table.

Nothing new is stored: an attempt is what the job's history (JobEvent, numbered by attempt) and its allocations
already say. It begins when the job is placed (PENDING -> SCHEDULED, a new attempt number) and ends at the first
move out of SCHEDULED/RUNNING in that attempt. How it ended is that move's state; a requeue (back to PENDING) is
told apart by the words jobs.lifecycle and the scheduler's cycle give it (tests/frontend/test_attempts.py drives
each of them, so a change of wording is caught there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import prefetch_related_objects
from django.utils import timezone

from jobs.models import Allocation, Job
from jobs.states import ACTIVE_STATES, JobState

# How an attempt ended (or that it has not), as the table says it.
SUCCEEDED = "succeeded"
FAILED = "failed"
TIMED_OUT = "timed out"
CANCELLED = "cancelled"
PREEMPTED = "preempted"
NODE_LOST = "node lost"
NODE_DRAINED = "node drained"
LAUNCH_FAILED = "launch failed"
REQUEUED = "requeued"
STARTING = "starting"
RUNNING = "running"

ENDED_IN: dict[str, str] = {
    JobState.SUCCEEDED: SUCCEEDED,
    JobState.FAILED: FAILED,
    JobState.TIMED_OUT: TIMED_OUT,
    JobState.CANCELLED: CANCELLED,
    JobState.PREEMPTED: PREEMPTED,
}
# A requeue's reason (scheduler.cycle._follow, jobs.lifecycle) -> what ended the attempt.
REQUEUED_BY = (
    (re.compile(r"left the cluster or stopped being Ready"), NODE_LOST),
    (re.compile(r"was drained"), NODE_DRAINED),
    (re.compile(r"^Attempt \d+ failed:"), FAILED),
    (re.compile(r"Failed launch \d+"), LAUNCH_FAILED),
)
# A job FAILED after MUSTER_LAUNCH_MAX_FAILURES launches that did not come up (jobs.lifecycle.job_launch_failed).
NEVER_UP = re.compile(r"^\d+ launch(es)? in a row did not come up")
# A container's exit as the Kubernetes backend words a failed pod (jobs.cluster.kubernetes).
EXIT_CODE = re.compile(r"exited with code (-?\d+)")
# An elastic job's growth undone because its pods did not come up (scheduler.cycle._shrink_back's reasons: a refusal, a
# launch error, a timeout, nowhere they may be bound). Their ends, which jobs.lifecycle.fit_reason always keeps.
SHRUNK_BACK = re.compile(r"shrunk back from \d+ to \d+ nodes?\.")


@dataclass(frozen=True)
class Attempt:
    number: int
    nodes: list[str]  # by rank; an elastic job's every node it held in this attempt
    placed_at: datetime | None  # its GPUs taken: its wall time counts from here
    running_at: datetime | None  # all its pods running (None: it never got that far)
    ended_at: datetime | None  # None while it holds its GPUs
    outcome: str
    reason: str  # the history's words for its end; empty while it holds its GPUs
    exit_code: int | None

    @property
    def run_seconds(self) -> float | None:
        """How long it held its GPUs (so far, while it holds them)."""
        if self.placed_at is None:
            return None
        return max(0.0, ((self.ended_at or timezone.now()) - self.placed_at).total_seconds())

    @property
    def never_started(self) -> bool:
        """A launch that did not come up: it held its GPUs a moment (or up to the launch timeout), but its code never
        ran, so the table says so rather than a run time of "0 s"."""
        return self.outcome == LAUNCH_FAILED

    @property
    def ran(self) -> bool:
        """Whether its pods ever ran: only then has it telemetry."""
        return self.running_at is not None

    @property
    def end_line(self) -> str:
        """How it ended, in one line, as Slurm ends a job's output ("CANCELLED AT ... DUE TO TIME LIMIT"); empty while it
        holds its GPUs."""
        if self.ended_at is None:
            return ""
        at = self.ended_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"{self.outcome} at {at}" + (f": {self.reason}" if self.reason else "")

    @property
    def tone(self) -> str:
        """For the page's colours: ok, bad, live or plain."""
        if self.outcome == SUCCEEDED:
            return "ok"
        if self.outcome in (FAILED, TIMED_OUT, LAUNCH_FAILED):
            return "bad"
        return "live" if self.outcome in (STARTING, RUNNING) else "plain"


def job_attempts(job: Job) -> list[Attempt]:
    """Every attempt of the job, the first first, from its events and allocations (prefetch them: no query then)."""
    if not job.attempt:
        return []
    placed: dict[int, datetime] = {}
    running: dict[int, datetime] = {}
    ends: dict[int, tuple[datetime, str, str]] = {}
    for event in job.events.all():
        n = event.attempt
        if event.to_state == JobState.SCHEDULED and event.from_state == JobState.PENDING:
            placed.setdefault(n, event.at)
        elif event.to_state == JobState.RUNNING:
            running.setdefault(n, event.at)
        elif event.from_state in ACTIVE_STATES and event.to_state not in ACTIVE_STATES and n not in ends:
            ends[n] = (event.at, _outcome(event.to_state, event.reason), event.reason)
    nodes: dict[int, list[str]] = {}
    never_up = allocations_never_up(job)
    for allocation in sorted(job.allocations.all(), key=lambda a: (a.attempt, a.rank, a.allocated_at)):
        if allocation.pk in never_up:  # a growth the cluster refused or never ran: the attempt did not run there
            continue
        held = nodes.setdefault(allocation.attempt, [])
        if allocation.node.name not in held:
            held.append(allocation.node.name)
        placed.setdefault(allocation.attempt, allocation.allocated_at)
    attempts = []
    for n in range(1, job.attempt + 1):
        ended = ends.get(n)
        if ended is not None:
            ended_at, outcome, reason = ended
        else:
            # Without an end in its history: the attempt the job is in now (or, in an old history, one that ended unrecorded).
            ended_at, reason = None, ""
            outcome = (RUNNING if n in running else STARTING) if n == job.attempt and job.state in ACTIVE_STATES else REQUEUED
        attempts.append(
            Attempt(
                number=n,
                nodes=nodes.get(n, []),
                placed_at=placed.get(n),
                running_at=running.get(n),
                ended_at=ended_at,
                outcome=outcome,
                reason=reason,
                exit_code=_exit_code(job, n, outcome, reason),
            )
        )
    return attempts


def allocations_never_up(job: Job) -> set[int]:
    """The allocations (ids) of ranks an elastic job grew by that never ran: the cycle shrank it back because their pods
    did not come up, and kept no output of them (a later rank that did come up goes with the one that did not, its
    output kept first). They held their node a moment, or up to the launch timeout, but the job never ran there: its
    attempts and its telemetry leave them out. Uses prefetched allocations; prefetches the job's resizes and logs only
    when a grown rank was let go before its attempt ended."""
    by_attempt: dict[int, list[Allocation]] = {}
    for a in job.allocations.all():
        by_attempt.setdefault(a.attempt, []).append(a)
    candidates = []
    for allocations in by_attempt.values():
        first = min(a.allocated_at for a in allocations)
        last = None if any(a.released_at is None for a in allocations) else max(a.released_at for a in allocations if a.released_at)
        candidates += [a for a in allocations if a.allocated_at > first and a.released_at is not None and a.released_at != last]
    if not candidates:
        return set()
    prefetch_related_objects([job], "resizes", "logs")  # once per job in hand: each telemetry read asks again
    backs = {(r.attempt, r.at) for r in job.resizes.all() if SHRUNK_BACK.search(r.reason)}
    if not backs:
        return set()
    kept = {(log.attempt, log.rank) for log in job.logs.all()}
    never = set()
    for a in candidates:
        if (a.attempt, a.released_at) not in backs:
            continue
        # A log row is one per rank number: it is this allocation's only when no later one of the attempt had the number
        # (a growth after the hold, whose own end keeps its output). Then it was kept as the rank went: it ran.
        later = any(b.rank == a.rank and b.allocated_at > a.allocated_at for b in by_attempt[a.attempt])
        if (a.attempt, a.rank) in kept and not later:
            continue
        never.add(a.pk)
    return never


def _outcome(to_state: str, reason: str) -> str:
    if to_state == JobState.FAILED and NEVER_UP.search(reason):
        return LAUNCH_FAILED  # the job failed, but this attempt was one more launch that did not come up: it never ran
    if to_state in ENDED_IN:
        return ENDED_IN[to_state]
    return next((outcome for pattern, outcome in REQUEUED_BY if pattern.search(reason)), REQUEUED)


def _exit_code(job: Job, n: int, outcome: str, reason: str) -> int | None:
    """The attempt's exit code where it is known: the job's own for its last attempt, else the one its reason quotes."""
    if outcome == SUCCEEDED:
        return 0
    if n == job.attempt and job.is_finished and job.exit_code is not None:
        return job.exit_code
    found = EXIT_CODE.search(reason) if outcome == FAILED else None
    return int(found.group(1)) if found else None
