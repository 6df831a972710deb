"""The site's own finished jobs as a replay trace (the Muster history CSV that replay.trace.read_trace reads).

One row per job, not per attempt: a job's attempts ran one after another, and rows of their own would be jobs of their
own, submitted together and run side by side. Its `runtime_seconds` is the work of its attempts, in seconds on all of
its nodes (what the replay runs it for, TraceJob.runtime):

- every attempt that ran counts, from its placement (its GPUs taken, as the wall time and the ledger count) to its end:
  a failed attempt the job was restarted after, one a lost or drained node ended, and the last;
- but an attempt preempted and followed by another that ran counts nothing: the replay preempts by its own policy (and
  so throws that work away, or keeps it up to a checkpoint, itself), and the later attempt redid that work or resumed
  from its checkpoint. A job that resumed is so read short by the work its checkpoint kept;
- a launch that never came up held its GPUs a moment and ran nothing: it counts nothing;
- an elastic job's node-seconds are divided by its max_nodes, the size its row asks for (4 nodes for 70 s, then 8 for
  30 s: 65 s on 8), with its min_nodes beside: the replay scales its work by the nodes it holds;
- a job whose history keeps no events nor allocations: from its placement to its end.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO

from jobs.attempts import LAUNCH_FAILED, PREEMPTED, allocations_never_up, job_attempts
from jobs.models import Job
from jobs.states import JobState
from replay.trace import HISTORY_HEADER

# Ended, and ran: a job cancelled before it started used no GPUs and says nothing about run times.
FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def job_work_seconds(job: Job) -> tuple[datetime | None, float]:
    """The job's first placement and its attempts' work in seconds on all its nodes (the module's rules). Uses the job's
    prefetched events and allocations (with their nodes)."""
    placed = [a for a in job_attempts(job) if a.placed_at is not None]
    if not placed:
        # A job whose history keeps neither events nor allocations (imported, or from before they were kept): its own
        # placement to its end, as the export read every job before.
        start = job.scheduled_at or job.started_at
        if start is None or job.finished_at is None:
            return None, 0.0
        return start, max(0.0, (job.finished_at - start).total_seconds())
    attempts = [a for a in placed if a.outcome != LAUNCH_FAILED]
    never_up = allocations_never_up(job)
    size = job.max_nodes or job.nodes
    work = 0.0
    for i, attempt in enumerate(attempts):
        if attempt.outcome == PREEMPTED and i + 1 < len(attempts):
            continue
        end = attempt.ended_at or job.finished_at
        node_seconds = 0.0
        for allocation in job.allocations.all():
            if allocation.attempt != attempt.number or allocation.pk in never_up:
                continue
            released = allocation.released_at or end
            if released is not None:
                node_seconds += max(0.0, (released - allocation.allocated_at).total_seconds())
        work += node_seconds / size
    return (attempts[0].placed_at if attempts else None), work


def history_rows(start: datetime | None = None, end: datetime | None = None) -> Iterator[list[str]]:
    """One row per finished job that ran, submitted in [start, end), in submit order (HISTORY_HEADER's columns)."""
    jobs = Job.objects.filter(state__in=FINISHED, attempt__gt=0, finished_at__isnull=False)
    if start is not None:
        jobs = jobs.filter(submitted_at__gte=start)
    if end is not None:
        jobs = jobs.filter(submitted_at__lt=end)
    jobs = jobs.select_related("owner", "team").prefetch_related("events", "allocations__node").order_by("submitted_at", "pk")
    for job in jobs.iterator(chunk_size=500):
        placed, work = job_work_seconds(job)
        if placed is None or job.finished_at is None:
            continue  # its launches never came up: it never ran
        size = job.max_nodes or job.nodes
        yield [
            _iso(job.submitted_at),
            _iso(placed),
            _iso(job.finished_at),
            str(size),
            str(job.gpus_per_node),
            str(job.wall_time_seconds),
            job.owner.get_username(),
            job.team.name if job.team else "",
            job.priority_class,
            f"{work:.3f}".rstrip("0").rstrip("."),
            str(job.min_nodes) if job.elastic else "",
            "true" if job.preemptible else "false",
        ]


def history_write(stream: TextIO, start: datetime | None = None, end: datetime | None = None) -> int:
    """Write the history CSV (header first) to `stream`; returns the number of jobs."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(HISTORY_HEADER)
    count = 0
    for row in history_rows(start, end):
        writer.writerow(row)
        count += 1
    return count
