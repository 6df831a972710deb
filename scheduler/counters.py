"""What only a cycle knows, kept for /metrics: counters the cycle adds to at its end.

Web, worker and beat are separate processes, so the counts live in `CycleCounter` rows, not in
this process's memory: any web process exports them (`telemetry.exporter`) and they survive
restarts. One UPDATE per cycle adds to every counter (histogram buckets are cumulative: every
bucket >= the cycle's duration gets 1); missing rows are created on first use.
"""

from __future__ import annotations

import logging

from django.db import DatabaseError, transaction
from django.db.models import Case, F, FloatField, Q, Value, When

from jobs.models import CycleCounter

logger = logging.getLogger(__name__)

# Upper bounds (seconds) of the cycle-duration histogram's buckets: a healthy cycle takes well under a
# second; tens of seconds means the queue or the cluster API is in trouble.
CYCLE_SECONDS_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The plain counters the cycle adds to (CycleCounter rows with le = 0).
PLAIN_COUNTERS = (
    "cycles_ran",
    "cycles_skipped",
    "cycles_cluster_unavailable",
    "cycle_seconds_sum",
    "cycle_seconds_count",
    "launches",
    "launch_failures",
    "preemptions",
)
BUCKET_COUNTER = "cycle_seconds_bucket"


class _RowsMissing(Exception):
    """Some counter rows do not exist yet (a new database, or a bucket added since)."""


def _ensure_counter_rows() -> None:
    rows = [CycleCounter(name=n, le=0) for n in PLAIN_COUNTERS] + [CycleCounter(name=BUCKET_COUNTER, le=b) for b in CYCLE_SECONDS_BUCKETS]
    CycleCounter.objects.bulk_create(rows, ignore_conflicts=True)


def _increment(increments: dict[str, float], seconds: float | None) -> tuple[int, int]:
    """One UPDATE adding each increment (and 1 to every duration bucket >= seconds); returns (rows updated, rows expected)."""
    whens = [When(name=name, le=0, then=Value(float(v))) for name, v in increments.items()]
    where = Q(name__in=list(increments), le=0)
    expected = len(increments)
    if seconds is not None:
        whens.append(When(name=BUCKET_COUNTER, le__gte=seconds, then=Value(1.0)))
        where |= Q(name=BUCKET_COUNTER, le__gte=seconds)
        expected += sum(1 for b in CYCLE_SECONDS_BUCKETS if b >= seconds)
    updated = CycleCounter.objects.filter(where).update(value=F("value") + Case(*whens, default=Value(0.0), output_field=FloatField()))
    return updated, expected


def cycle_counters_record(
    *, ran: bool, seconds: float, launched: int = 0, launch_failed: int = 0, preempted: int = 0, cluster_error: bool = False
) -> None:
    """Add one cycle to the persistent counters. Never raises: metrics must not stop scheduling."""
    if not ran:
        increments: dict[str, float] = {"cycles_skipped": 1}
        observed: float | None = None
    else:
        increments = {"cycles_ran": 1, "cycle_seconds_sum": seconds, "cycle_seconds_count": 1}
        if cluster_error:
            increments["cycles_cluster_unavailable"] = 1
        for name, value in (("launches", launched), ("launch_failures", launch_failed), ("preemptions", preempted)):
            if value:
                increments[name] = value
        observed = seconds
    try:
        try:
            # A savepoint, so a partial update (some rows missing) is undone before the rows are made and it is redone.
            with transaction.atomic():
                updated, expected = _increment(increments, observed)
                if updated != expected:
                    raise _RowsMissing
        except _RowsMissing:
            with transaction.atomic():
                _ensure_counter_rows()
                _increment(increments, observed)
    except DatabaseError:
        logger.exception("could not record the cycle's metrics")
