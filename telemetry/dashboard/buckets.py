"""The history charts summed per bucket by the database: a row per chart bucket, never one per event, start or allocation.

The dashboard read every event, start and allocation in its window and replayed them in Python: with 4,000 jobs
started in the last hours, 20,000 rows a view. Each chart's buckets are summed in SQL now, on PostgreSQL and on SQLite
(`make run`'s default) alike, to the same figures the replay gave (tests/telemetry/test_dashboard_history.py):
- a count's highest per bucket (queue depth): its moves merged per instant, their running sum (a window function),
  the highest of that in each bucket;
- a count's time-weighted mean per bucket (GPUs allocated): each move times the time left in its bucket, summed;
- nearest-rank percentiles per bucket (scheduling latency): the waits ranked in each bucket, the ranks asked kept.
Times are whole microseconds since the series' start (`Microseconds`), so a bucket edge is an exact integer on both.
Each query wraps an ORM queryset (the rows and their filters) in what the ORM cannot write: a window function's
results grouped per bucket.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import (
    BigIntegerField,
    Case,
    DateTimeField,
    ExpressionWrapper,
    F,
    FloatField,
    Func,
    IntegerField,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.sql.compiler import SQLCompiler

from jobs.models import Allocation, JobEvent
from jobs.selectors import starts_with_queued_at

US = 1_000_000


class Microseconds(Func):
    """Whole microseconds from the second datetime to the first (`later - earlier`), on PostgreSQL and SQLite.

    Django has no portable way from a datetime difference to a number: PostgreSQL subtracts to an interval, SQLite's
    datetimes are text. Whole microseconds keep the bucket arithmetic in exact integers on both.
    """

    arity = 2
    output_field = BigIntegerField()

    def as_sql(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:  # type: ignore[override]
        # timestamptz - timestamptz is days and time, never months; EXTRACT's epoch of it is exact (numeric) since 14.
        template = "CAST(EXTRACT(EPOCH FROM (%(expressions)s)) * 1000000 AS BIGINT)"
        return super().as_sql(compiler, connection, template=template, arg_joiner=" - ", **extra)

    def as_sqlite(self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any) -> Any:
        # Django's own function for DateTimeField - DateTimeField on SQLite: an integer of microseconds.
        return super().as_sql(compiler, connection, template="django_timestamp_diff(%(expressions)s)", arg_joiner=", ", **extra)


def instant(moment: datetime) -> Value:
    """A datetime as a value of a query (adapted as the database stores datetimes: text on SQLite)."""
    return Value(moment, output_field=DateTimeField())


def _since(field: str, start: datetime) -> Microseconds:
    """Microseconds from `start` to the datetime in `field`."""
    return Microseconds(F(field), instant(start))


def _fetch(sql: str, inner: QuerySet[Any]) -> list[tuple[Any, ...]]:
    """Run `sql` with `{rows}` replaced by the queryset's SQL (and its parameters)."""
    inner_sql, params = inner.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql.replace("{rows}", inner_sql), params)
        return list(cursor.fetchall())


@dataclass(frozen=True)
class Buckets:
    """A time series' buckets: from `start`, `step` seconds each, up to `end` (the last shorter when it does not fit)."""

    start: datetime
    end: datetime
    step: int

    @property
    def count(self) -> int:
        return max(1, math.ceil((self.end - self.start).total_seconds() / self.step))

    @property
    def step_us(self) -> int:
        return self.step * US

    @property
    def total_us(self) -> int:
        span = self.end - self.start
        return max(0, (span.days * 86400 + span.seconds) * US + span.microseconds)

    def bucket_sql(self, us: str) -> str:
        """SQL of the bucket of `us` microseconds since the start (integer division), clamped into the series."""
        last = self.count - 1
        return f"CASE WHEN {us} < 0 THEN 0 WHEN {us} / {self.step_us} > {last} THEN {last} ELSE {us} / {self.step_us} END"


# --- a count's highest per bucket: queue depth -----------------------------------------------------


def state_moves(states: Collection[str]) -> Case:
    """An event's move of the count of jobs in `states`: +1 into them from outside, -1 out of them, else 0."""
    into = Q(to_state__in=states) & ~Q(from_state__in=states)
    out = Q(from_state__in=states) & ~Q(to_state__in=states)
    return Case(When(into, then=Value(1)), When(out, then=Value(-1)), default=Value(0), output_field=IntegerField())


def highest_counts(initial: Sequence[int], moves: Sequence[Case], buckets: Buckets) -> list[list[int]]:
    """Counts at `initial` at the buckets' start, moved by each event's `moves`: each count's highest per bucket.

    The moves at one instant count together, so a job preempted and requeued in one cycle never shows as a momentary
    extra job. A move exactly at a bucket's start belongs to it from its start (a job that ended at 10:00 does not count
    in the 10:00 bucket); moves at or after the end are not drawn. The database hands back a row per bucket with moves.
    """
    names = [f"m{i}" for i in range(len(moves))]
    instants = (
        JobEvent.objects.filter(at__gt=buckets.start, at__lt=buckets.end)
        .values("at")
        .annotate(us=_since("at", buckets.start), **{n: Sum(move) for n, move in zip(names, moves, strict=True)})
        .order_by()
    )
    # Each count after each instant, from the start: its moves' running sum.
    running = ", ".join(f"{n}, SUM({n}) OVER (ORDER BY us) AS {n}_after" for n in names)
    per_bucket = ", ".join(f"MAX({n}_after), SUM({n})" for n in names)
    bucket = f"us / {buckets.step_us}"
    sql = f"SELECT {bucket}, MIN(us), {per_bucket} FROM (SELECT us, {running} FROM ({{rows}}) instants) counts GROUP BY {bucket}"
    # Integers (PostgreSQL's SUM of integers is a numeric).
    by_bucket = {row[0]: [int(v) for v in row[1:]] for row in _fetch(sql, instants)}
    series: list[list[int]] = [[] for _ in moves]
    moved = [0] * len(moves)  # each count's moves before the bucket
    for b in range(buckets.count):
        row = by_bucket.get(b)
        for i, counts in enumerate(series):
            if row is None:
                counts.append(initial[i] + moved[i])
                continue
            first_us, highest_after, bucket_moves = row[0], row[1 + 2 * i], row[2 + 2 * i]
            # The count as the bucket began counts too, unless moves at its very start had already changed it.
            highest = highest_after if first_us == b * buckets.step_us else max(moved[i], highest_after)
            counts.append(initial[i] + highest)
            moved[i] += bucket_moves
    return series


# --- a count's time-weighted mean per bucket: GPUs allocated ---------------------------------------


def mean_gpus_allocated(initial: float, buckets: Buckets) -> list[float]:
    """GPUs allocated, `initial` at the buckets' start: each bucket's time-weighted mean.

    A bucket's GPU-time is what was held at its start for its whole width, and each allocation or release inside it
    for the time left in it: the database sums those per bucket, a row per bucket with any. Releases after the end
    are not moves (still held, as far as the series goes).
    """
    released = ExpressionWrapper(Value(0.0) - F("gpus"), output_field=FloatField())  # a release takes its GPUs away
    starts = (
        Allocation.objects.filter(allocated_at__gt=buckets.start, allocated_at__lt=buckets.end)
        .values(us=_since("allocated_at", buckets.start), gpus_moved=F("gpus"))
        .order_by()
    )
    releases = (
        Allocation.objects.filter(released_at__gt=buckets.start, released_at__lt=buckets.end, allocated_at__lte=buckets.end)
        .values(us=_since("released_at", buckets.start), gpus_moved=released)
        .order_by()
    )
    step = buckets.step_us
    left = f"(us / {step} + 1) * {step} - us"  # microseconds from a move to its bucket's end
    rows = _fetch(
        f"SELECT us / {step}, SUM(gpus_moved), SUM(gpus_moved * ({left})) FROM ({{rows}}) moves GROUP BY us / {step}",
        starts.union(releases, all=True),
    )
    by_bucket = {b: (moved, gpu_us) for b, moved, gpu_us in rows}
    means: list[float] = []
    level = initial
    for b in range(buckets.count):
        width_us = min(step, buckets.total_us - b * step)
        moved, gpu_us = by_bucket.get(b, (0.0, 0.0))
        # A move's time left runs to the bucket's full step; the last bucket may end sooner.
        gpu_us -= moved * (step - width_us)
        area = level * width_us + gpu_us
        means.append(area / width_us if width_us > 0 else level)
        level += moved
    return means


# --- nearest-rank percentiles per bucket: scheduling latency ---------------------------------------


@dataclass(frozen=True)
class Waits:
    """Percentiles (nearest rank) of the waits, overall and per bucket; how many; the longest."""

    count: int
    overall: dict[int, float | None]
    longest: float | None
    series: dict[int, list[float | None]]
    counts: list[int]


def wait_percentiles(percentiles: Sequence[int], *, after: datetime, until: datetime, buckets: Buckets) -> Waits:
    """Queued-to-start waits of the starts in (after, until] (`jobs.selectors.starts_with_queued_at`): their `percentiles`
    overall and per bucket of their start, by nearest rank (the smallest wait with at least p% at or below it, so each
    figure is a wait that happened). The database ranks them; a row per bucket with starts, and one for all."""
    # A start with no entry into the queue before it has no wait (NULL): left out where the waits are ranked, not here
    # or in their CTE, where PostgreSQL would run the subquery finding each start's entry twice (and, costed at twice,
    # compile the query first: 18 ms of JIT at 4,000 starts).
    starts = starts_with_queued_at(after=after, until=until).values(
        us=_since("at", buckets.start), waited=Microseconds(F("at"), F("queued_at"))
    )
    # The rank of percentile p among n: ceil(p * n / 100), in integers (p whole).
    kept = ", ".join(f"MAX(CASE WHEN nth = ({int(p)} * n + 99) / 100 THEN waited END)" for p in percentiles)
    rows = _fetch(
        f"""WITH waits AS (
              SELECT {buckets.bucket_sql("us")} AS bucket, CASE WHEN waited < 0 THEN 0 ELSE waited END AS waited FROM ({{rows}}) starts
            ), ranked AS (
              SELECT bucket, waited, ROW_NUMBER() OVER (PARTITION BY bucket ORDER BY waited) AS nth,
                     COUNT(*) OVER (PARTITION BY bucket) AS n FROM waits WHERE waited IS NOT NULL
              UNION ALL
              SELECT -1, waited, ROW_NUMBER() OVER (ORDER BY waited), COUNT(*) OVER () FROM waits WHERE waited IS NOT NULL
            )
            SELECT bucket, n, MAX(waited), {kept} FROM ranked GROUP BY bucket, n""",
        starts,
    )
    seconds = {bucket: (n, [None if us is None else us / US for us in rest]) for bucket, n, *rest in rows}
    n_all, (longest, *overall) = seconds.get(-1, (0, [None] * (len(percentiles) + 1)))
    series: dict[int, list[float | None]] = {p: [] for p in percentiles}
    counts = []
    for b in range(buckets.count):
        n, (_, *figures) = seconds.get(b, (0, [None] * (len(percentiles) + 1)))
        counts.append(n)
        for p, figure in zip(percentiles, figures, strict=True):
            series[p].append(figure)
    return Waits(n_all, dict(zip(percentiles, overall, strict=True)), longest, series, counts)
