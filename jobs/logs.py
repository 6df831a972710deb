"""Job output that outlives the pods: each rank's log kept per attempt before its gang is torn down, and read back.

Every teardown goes through `gang_teardown`: capture first (the last `MUSTER_LOG_CAPTURE_BYTES` of each
rank's output, into the `joblogs` storage), then delete the pods. A capture that fails leaves the gang
standing for the next cycle's reconciliation, which calls `gang_teardown` again; after
`MUSTER_LOG_CAPTURE_TRIES` failed tries the gang goes without it, so a teardown is never held for good.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.db import IntegrityError, transaction
from django.utils import timezone

from jobs.cluster import ClusterBackend, get_backend
from jobs.errors import JobNotStarted
from jobs.models import Job, JobLog
from jobs.states import ACTIVE_STATES, TERMINAL_STATES

logger = logging.getLogger(__name__)

GONE_NOTE = "The pod was gone before its output could be kept."


def log_storage_name(job_id: int, attempt: int, rank: int) -> str:
    return f"job-logs/{job_id}/{attempt}/{rank}.log"


def _settled(row: JobLog) -> bool:
    return row.captured_at is not None or row.tries >= settings.MUSTER_LOG_CAPTURE_TRIES


def gang_logs_capture(backend: ClusterBackend, job_id: int, attempt: int, ranks: Iterable[int], *, now: datetime | None = None) -> bool:
    """Keep each rank's output of one attempt; True once every rank is kept or given up on (the gang may go)."""
    if not Job.objects.filter(pk=job_id).exists():
        return True  # an unknown job's pods: nothing to keep them for
    now = now or timezone.now()
    rows = {row.rank: row for row in JobLog.objects.filter(job_id=job_id, attempt=attempt)}
    settled = True
    for rank in ranks:
        row = rows.get(rank) or JobLog(job_id=job_id, attempt=attempt, rank=rank)
        if _settled(row):
            continue
        try:
            captured = backend.read_log_tail(job_id, attempt, rank, settings.MUSTER_LOG_CAPTURE_BYTES)
        except Exception as exc:  # a capture must never take the cycle down: any failure is a try
            row.tries += 1
            row.error = str(exc)[:500]
            logger.warning("keeping the output of job %s attempt %s rank %s failed (try %s): %s", job_id, attempt, rank, row.tries, exc)
            _save(row)
            settled = settled and _settled(row)
            continue
        if captured is None:
            row.error = GONE_NOTE
        else:
            name = log_storage_name(job_id, attempt, rank)
            storage = storages["joblogs"]
            storage.delete(name)
            row.name = storage.save(name, ContentFile(captured.data))
            row.size = len(captured.data)
            row.truncated = captured.truncated
            row.error = ""
        row.captured_at = now
        _save(row)
    return settled


def _save(row: JobLog) -> None:
    try:
        with transaction.atomic():
            row.save()
    except IntegrityError:
        # A cancel in the web process and a cycle captured the same rank at once: the first row stands.
        logger.info("job %s attempt %s rank %s was kept by another process", row.job_id, row.attempt, row.rank)


def gang_teardown(backend: ClusterBackend, job_id: int, attempt: int, ranks: Iterable[int], *, grace_seconds: int | None = None) -> bool:
    """Keep the gang's output, then delete its pods; False (pods left for reconciliation) while a capture can still be retried."""
    if not gang_logs_capture(backend, job_id, attempt, ranks):
        return False
    backend.teardown_gang(job_id, attempt, grace_seconds=grace_seconds)
    return True


@dataclass(frozen=True)
class LogText:
    text: str
    attempt: int
    # "live" (read from the cluster now), "stored" (kept when the attempt ended) or "none" (nothing to read).
    source: str
    truncated: bool = False
    note: str = ""


# How much of the end of a follow's text is kept to find where it stopped in the rank's kept output.
FOLLOW_OVERLAP_CHARS = 4096


def _attempt_is_live(job: Job, attempt: int) -> bool:
    return attempt == job.attempt and job.state in ACTIVE_STATES


def _rank_is_live(job: Job, attempt: int, rank: int) -> bool:
    # A live elastic job's ranks are 0 to nodes - 1: one a shrink took away was kept then, and is read from there.
    return _attempt_is_live(job, attempt) and rank < job.nodes


def _tail(text: str, tail: int | None) -> str:
    if not tail:
        return text
    lines = text.splitlines(keepends=True)
    return "".join(lines[-tail:])


def _kept(job: Job, attempt: int, rank: int, tail: int | None) -> LogText | None:
    """What was kept of an ended attempt's rank; None if its capture has not been tried yet."""
    row = JobLog.objects.filter(job=job, attempt=attempt, rank=rank).first()
    if row is not None and row.name:
        with storages["joblogs"].open(row.name, "rb") as stored:
            text = stored.read().decode("utf-8", errors="replace")
        return LogText(_tail(text, tail), attempt, "stored", row.truncated)
    if row is not None and row.captured_at is not None:
        return LogText("", attempt, "none", note=row.error)
    return None


def _unsent(kept: str, sent_tail: str) -> str:
    """What `kept` has after the text a follow last sent (its end, `sent_tail`); nothing if they cannot be aligned."""
    if not sent_tail:
        return kept
    at = kept.rfind(sent_tail)
    return kept[at + len(sent_tail) :] if at >= 0 else ""


def never_started(job: Job) -> str:
    """Why a job that never ran has no logs: it "has not started yet" only while it may still start."""
    if job.state in TERMINAL_STATES:
        return f"Job {job.pk} never started ({job.state.lower().replace('_', ' ')} before it ran): it has no logs."
    return f"Job {job.pk} has not started yet: it has no logs."


def job_logs(job: Job, *, rank: int, tail: int | None, attempt: int | None = None, backend: ClusterBackend | None = None) -> LogText:
    """One rank's output of one attempt (the latest by default): live while it runs, as kept once it ended.

    Raises `JobNotStarted` before the first attempt and `ClusterUnavailable` when a live read finds the cluster away.
    """
    if job.attempt == 0:
        raise JobNotStarted(never_started(job))
    attempt = attempt or job.attempt
    if not _rank_is_live(job, attempt, rank) and (kept := _kept(job, attempt, rank, tail)) is not None:
        return kept
    # Live, or ended with its pods still waiting for the capture: the cluster has it.
    text = (backend or get_backend()).read_logs(job.pk, attempt, rank, tail)
    return LogText(text, attempt, "live" if text else "none")


# Set in a web server's worker told to stop (config/gunicorn_ready.py, `worker_int`): each follow ends at its next look
# at the attempt, as at MUSTER_LOG_FOLLOW_SECONDS (`muster logs -f` asks again). A `muster logs -f` left open held its
# worker's thread, so make run's Ctrl-C waited 20 s on the web server and killed it ("the web server (gunicorn) did not
# stop within 20 s; killing it").
FOLLOWS_END = threading.Event()


def job_logs_follow(
    job: Job, *, rank: int, tail: int | None, attempt: int | None = None, backend: ClusterBackend | None = None
) -> Iterator[str]:
    """The output as it is written, while the attempt runs (for at most `MUSTER_LOG_FOLLOW_SECONDS`); an ended attempt's, once."""
    attempt = attempt or job.attempt
    if not _rank_is_live(job, attempt, rank):
        yield job_logs(job, rank=rank, tail=tail, attempt=attempt, backend=backend).text
        return
    deadline = time.monotonic() + settings.MUSTER_LOG_FOLLOW_SECONDS
    sent_tail = ""

    def still_live() -> bool:
        if FOLLOWS_END.is_set():
            return False
        now = Job.objects.filter(pk=job.pk).values("attempt", "state", "nodes").first()
        return now is not None and now["attempt"] == attempt and now["state"] in ACTIVE_STATES and rank < now["nodes"]

    for chunk in (backend or get_backend()).follow_logs(job.pk, attempt, rank, tail, still_live=still_live):
        yield chunk
        sent_tail = (sent_tail + chunk)[-FOLLOW_OVERLAP_CHARS:]
        if time.monotonic() > deadline or FOLLOWS_END.is_set():
            return
    # The pods can go between two reads of the stream, with the last lines (how it ended) unsent; the
    # teardown kept them first, so they are sent from what was kept.
    kept = _kept(job, attempt, rank, tail=None)
    if kept is not None and kept.text:
        rest = _unsent(kept.text, sent_tail)
        if rest:
            yield rest


@dataclass(frozen=True)
class AttemptRanks:
    attempt: int
    # Every rank the attempt had: the live ones, and those an elastic shrink (or the attempt's end) took away.
    had: list[int]
    # Those whose output can be read: live, kept, or still in its pods waiting for the capture.
    readable: list[int]


def job_attempt_ranks(job: Job) -> dict[int, AttemptRanks]:
    """Each attempt's ranks, by attempt number: what it had and what of it can be read (one query).

    The live attempt's ranks are 0 to `job.nodes - 1` (an elastic job shrinks from its last ranks and grows after
    them); every rank an attempt lost (a shrink, its end) has a `JobLog` row from its capture, whether kept or not.
    """
    if not job.attempt:  # never placed: no pod has written anything (and a submit's answer asks no query)
        return {}
    had: dict[int, set[int]] = {}
    readable: dict[int, set[int]] = {}
    rows = JobLog.objects.filter(job=job).values_list("attempt", "rank", "name", "captured_at", "tries")
    for attempt, rank, name, captured_at, tries in rows:
        had.setdefault(attempt, set()).add(rank)
        settled = captured_at is not None or tries >= settings.MUSTER_LOG_CAPTURE_TRIES
        if name or not settled:  # kept, or its pods still stand until the capture is tried again
            readable.setdefault(attempt, set()).add(rank)
    latest = job.attempt
    if _attempt_is_live(job, latest) or latest not in had:
        # Live, or ended with its pods not yet captured (a cancel's teardown follows its commit): the cluster has them.
        live = set(range(job.nodes))
        had.setdefault(latest, set()).update(live)
        readable.setdefault(latest, set()).update(live)
    return {attempt: AttemptRanks(attempt, sorted(ranks), sorted(readable.get(attempt, ()))) for attempt, ranks in sorted(had.items())}


def ranks_text(ranks: list[int]) -> str:
    """`0 to 7`, or `0, 1 and 4` when they are not a run."""
    if len(ranks) > 1 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]} to {ranks[-1]}"
    return ", ".join(map(str, ranks[:-1])) + (" and " if len(ranks) > 1 else "") + str(ranks[-1]) if ranks else "none"


def job_log_attempts(job: Job) -> list[dict[str, object]]:
    """The attempts whose output can be read, each with its ranks: kept ones, and the live one."""
    return [{"attempt": ranks.attempt, "ranks": ranks.readable} for ranks in job_attempt_ranks(job).values() if ranks.readable]
