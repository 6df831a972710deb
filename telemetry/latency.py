"""/metrics' scheduling latency histogram, kept as running totals written with each start.

A scrape read every start ever recorded to bucket its wait (the database summed them in one row, but still found each
start's queue entry: ~12 ms at 4,000 starts, ~1.5 s at 300,000, every 15-30 s per Prometheus replica). Now each start
adds its wait to one `SchedulingLatencyTotal` row in the transaction that records it (the `event_recorded` hook,
registered by `telemetry.apps`), and a scrape reads those ~17 rows whatever the history's length.

Why the histogram never goes down (Prometheus reads its buckets, count and sum as counters):

- A total is only ever added to (`F()` in one UPDATE of one row; concurrent starts each wait for the row's lock and add
  to what the other committed, so no start is lost), in the start's own transaction: a start rolled back adds nothing,
  a committed one is counted once.
- Nothing deletes them. Muster has no retention of jobs or events; an admin deleting an ended job in Django admin took
  its starts out of the histogram when it was summed from the events (a counter reset to Prometheus), and no longer
  does: the totals keep every start ever recorded.
- Migration telemetry 0004 counted every start recorded before it with the rule /metrics summed (frozen in the
  migration), so the first scrape after it reads what the last one before it read, plus any start since. Starts the
  previous version records after the migration (its worker still running during a rolling upgrade) are counted by
  neither: upgrade with the worker stopped (migrations run as the web starts: the migrate init container of
  platform/kubernetes/muster.yaml, docker-compose's web command), or they are missing from the totals, which
  Prometheus reads as one reset.
- A note on a running job (from and to RUNNING: within its quota now) counted as a start until the totals; it no
  longer does, and the migration's count kept those before it (what /metrics read then), so nothing went down: the
  totals are above a count of the events today (`wait_histogram`) by the notes written before the migration.
- Buckets are read cumulatively (each bound's count sums the rows at or below it), so a bound added to
  `LATENCY_SECONDS_BUCKETS` reads at least its lower neighbour and a removed one folds into the next: no bucket reads
  fewer than the one below it. A new bound counts only the starts after it from then on, below the truth.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import connection, transaction
from django.db.models import F

from jobs.models import JobEvent
from jobs.selectors import starts_with_queued_at
from jobs.states import JobState
from telemetry.dashboard.buckets import US, Microseconds
from telemetry.models import SchedulingLatencyTotal
from telemetry.totals import add_to_total

if TYPE_CHECKING:
    from collections.abc import Sequence

# Submit-to-start latency buckets: seconds for an idle cluster up to a week for a starved gang.
LATENCY_SECONDS_BUCKETS: tuple[float, ...] = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    1800.0,
    3600.0,
    7200.0,
    21600.0,
    43200.0,
    86400.0,
    259200.0,
    604800.0,
)
# The bounds in whole microseconds, as waits are: 5.0 holds a wait of 5 s, not one of 5.000001 s.
BOUNDS_US: tuple[int, ...] = tuple(round(bound * US) for bound in LATENCY_SECONDS_BUCKETS)
_MICROSECOND = timedelta(microseconds=1)


def bucket_of(waited_us: int) -> int:
    """The `le_us` of the one row a wait adds to: the lowest bound at or above it, or +Inf's."""
    return next((bound for bound in BOUNDS_US if waited_us <= bound), SchedulingLatencyTotal.LE_INF)


def latency_event_recorded(*, event: JobEvent) -> None:
    """The `event_recorded` hook: a start (an event into RUNNING) adds its wait to the totals, in the transaction that
    records it.

    The wait is `jobs.selectors.starts_with_queued_at`'s: from the job's last entry into the queue before the start
    (by id: submit, requeue, release), in whole microseconds. A start with no entry before it has no wait and counts
    nowhere; one stamped before its entry (a skewed clock) waited 0 in the sum and counts in the lowest bucket.
    """
    if event.to_state != JobState.RUNNING or event.from_state == JobState.RUNNING:  # a note on a running job: no start
        return
    queued_at = (
        JobEvent.objects.filter(job_id=event.job_id, to_state=JobState.PENDING, id__lt=event.pk)
        .order_by("-id")
        .values_list("at", flat=True)
        .first()
    )
    if queued_at is None:
        return
    waited = (event.at - queued_at) // _MICROSECOND
    add_to_total(SchedulingLatencyTotal, {"le_us": bucket_of(waited)}, starts=1, waited_us=max(0, waited))


def latency_histogram() -> tuple[list[int], int, float]:
    """/metrics' histogram from the totals (one query of a row per bucket): how many starts waited at or below each of
    `LATENCY_SECONDS_BUCKETS` (Prometheus' cumulative buckets), how many there were, and their waits' sum in seconds."""
    rows = list(SchedulingLatencyTotal.objects.values_list("le_us", "starts", "waited_us"))
    counts = [sum(starts for le_us, starts, _ in rows if le_us <= bound) for bound in BOUNDS_US]
    return counts, sum(starts for _, starts, _ in rows), sum(waited for _, _, waited in rows) / US


def wait_histogram(bounds: Sequence[float]) -> tuple[list[int], int, int]:
    """Every recorded start's wait counted from the events (what /metrics summed before the totals): how many were at or
    below each of `bounds` (seconds, cumulative), how many there were, and their sum in whole microseconds. Reads every
    start: for `latency_recount` and for checking the totals, never a scrape.
    """
    starts = starts_with_queued_at().values(waited=Microseconds(F("at"), F("queued_at"))).order_by()
    inner, params = starts.query.sql_with_params()
    at_or_below = ", ".join(f"COUNT(CASE WHEN waited <= {round(bound * US)} THEN 1 END)" for bound in bounds)
    # Merged into the outer query, the subquery finding each start's queue entry would run once for each of the places
    # it names `waited`. A subquery with an OFFSET (PostgreSQL) or a LIMIT (SQLite) is never merged.
    fence = "OFFSET 0" if connection.vendor == "postgresql" else "LIMIT -1"
    sql = (
        f"SELECT {at_or_below}, COUNT(waited), SUM(CASE WHEN waited < 0 THEN 0 ELSE waited END)"
        f" FROM (SELECT waited FROM ({inner}) starts {fence}) waits"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        *counts, n, total_us = cursor.fetchone()
    # PostgreSQL sums integers to a numeric (a Decimal here); an exact integer either way.
    return [int(c) for c in counts], int(n), int(total_us or 0)


@transaction.atomic
def latency_recount() -> None:
    """The totals counted again from every start recorded, replacing them: for histories written in bulk (the
    benchmarks' fills), which `JobEvent.save` and so the hook never see. Starts recorded meanwhile may be lost: not for
    a live site, whose totals only the hook and the migration write."""
    cumulative, n, total_us = wait_histogram(LATENCY_SECONDS_BUCKETS)
    alone = [c - below for c, below in zip(cumulative, [0, *cumulative], strict=False)]
    rows = [SchedulingLatencyTotal(le_us=bound, starts=c) for bound, c in zip(BOUNDS_US, alone, strict=True)]
    # The sum is only ever read whole: it rides on the +Inf row.
    rows.append(SchedulingLatencyTotal(le_us=SchedulingLatencyTotal.LE_INF, starts=n - cumulative[-1], waited_us=total_us))
    SchedulingLatencyTotal.objects.all().delete()
    SchedulingLatencyTotal.objects.bulk_create(rows)
