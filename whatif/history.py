"""The site's own finished jobs as a replay trace (the Muster history CSV that replay.trace.read_trace reads)."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TextIO

from jobs.models import Job
from jobs.states import JobState
from replay.trace import HISTORY_HEADER

# Ended, and ran: a job cancelled before it started used no GPUs and says nothing about run times.
FINISHED = (JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()


def history_rows(start: datetime | None = None, end: datetime | None = None) -> Iterator[list[str]]:
    """One row per finished job that ran, submitted in [start, end), in submit order (HISTORY_HEADER's columns)."""
    jobs = Job.objects.filter(state__in=FINISHED, started_at__isnull=False, finished_at__isnull=False)
    if start is not None:
        jobs = jobs.filter(submitted_at__gte=start)
    if end is not None:
        jobs = jobs.filter(submitted_at__lt=end)
    columns = ("submitted_at", "started_at", "finished_at", "nodes", "gpus_per_node", "wall_time_seconds")
    rows = jobs.order_by("submitted_at", "pk").values_list(*columns, "owner__username", "team__name", "priority_class")
    for submitted, started, ended, nodes, gpus, wall, owner, team, priority_class in rows.iterator(chunk_size=2000):
        runtime = max(0.0, (ended - started).total_seconds())
        times = [_iso(submitted), _iso(started), _iso(ended)]
        yield [*times, str(nodes), str(gpus), str(wall), owner, team or "", priority_class, f"{runtime:g}"]


def history_write(stream: TextIO, start: datetime | None = None, end: datetime | None = None) -> int:
    """Write the history CSV (header first) to `stream`; returns the number of jobs."""
    writer = csv.writer(stream, lineterminator="\n")
    writer.writerow(HISTORY_HEADER)
    count = 0
    for row in history_rows(start, end):
        writer.writerow(row)
        count += 1
    return count
