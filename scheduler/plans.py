"""The plan the cycle stores on each waiting job, so that reads (scheduler.queue) never run the policy.

A waiting job's plan is its reason, place in the queue, priority and factors, estimated start and
what it means, and its reservation. The cycle writes only what changed since it was stored, and
cheaply: when the head of a 10,000-job queue starts, every other job moves up one place, which is
10,000 positions to write every few seconds. `bulk_update` builds a `When` per row and field, and
cost ~0.2 ms a row in Python alone (4.5 s for 20,000 positions on SQLite); `_write_by_pk` writes the
same `UPDATE ... SET col = CASE id WHEN ... END` with one expression per column and batch
(benchmarks/bench_reads.py times it).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

from django.db import connection
from django.db.models import Expression, Field
from django.db.models.sql.compiler import SQLCompiler

from jobs.lifecycle import fit_reason
from jobs.models import Job, PlannedQueue
from jobs.states import JobState
from policy.model import Priority, Reservation, Waiting

# What the cycle stores on a waiting job, in this order in a plan row.
PLAN_FIELDS = (
    "pending_reason_code",
    "pending_reason",
    "estimated_start",
    "estimate_kind",
    "queue_position",
    "priority",
    "priority_factors",
    "reserved_nodes",
    "reserved_start",
    "promised_start",
)
_PRIORITY = PLAN_FIELDS.index("priority")
_PROMISED = PLAN_FIELDS.index("promised_start")
_REASON_CODE = PLAN_FIELDS.index("pending_reason_code")
# A priority drifts every cycle (its age grows, decayed usage fades): it is rewritten once the total or a factor's
# weighted part has moved by this much (the pages show one decimal), or with any other change of the job's plan.
PRIORITY_DRIFT = 0.1
# Rows per UPDATE (fewer where the database limits the parameters of a statement).
PLAN_BATCH = 500


def _datetime(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, UTC) if timestamp is not None else None


# Shared by every row without a reservation, never changed: a row costs few objects (at 20,000 rows the garbage
# collector's passes over them cost more than the comparisons).
_NO_NODES: list[str] = []


def plan_row(wait: Waiting, priority: Priority | None, reservation: Reservation | None, promised: datetime | None) -> tuple[Any, ...]:
    """A waiting job's values of PLAN_FIELDS. A first reservation's start becomes the promise it keeps while it waits.

    The factors stay the policy's mapping of (value, weighted) pairs here; they are stored as {name: [value, weighted]}.
    """
    reserved_start = _datetime(reservation.start) if reservation else None
    return (
        wait.reason_code,
        fit_reason(wait.reason),
        _datetime(wait.estimated_start),
        wait.estimate,
        wait.position,
        priority.total if priority else None,
        priority.factors if priority else None,
        list(reservation.node_names) if reservation else _NO_NODES,
        reserved_start,
        promised or reserved_start,
    )


def _priority_moved(old_total: Any, old_factors: Any, new_total: Any, new_factors: Any) -> bool:
    if old_total is None or new_total is None:
        return old_total is not new_total
    if abs(old_total - new_total) >= PRIORITY_DRIFT or len(old_factors or ()) != len(new_factors or ()):
        return True
    for name, (_, weighted) in (new_factors or {}).items():
        was = old_factors.get(name)
        if was is None or abs(was[1] - weighted) >= PRIORITY_DRIFT:
            return True
    return False


_PLAIN = [(i, name) for i, name in enumerate(PLAN_FIELDS) if name not in ("priority", "priority_factors")]


def changed_fields(old: Sequence[Any], new: Sequence[Any]) -> tuple[str, ...]:
    """The plan fields to write: those that differ, with the priority and its factors as one (a total is their sum)."""
    after = _PRIORITY + 2
    if old[:_PRIORITY] == new[:_PRIORITY] and old[after:] == new[after:]:
        changed = []
    else:
        changed = [name for i, name in _PLAIN if old[i] != new[i]]
    if _priority_moved(old[_PRIORITY], old[_PRIORITY + 1], new[_PRIORITY], new[_PRIORITY + 1]):
        changed += ["priority", "priority_factors"]
    return tuple(changed)


def store_plans(waiting: Sequence[Waiting], priorities: Mapping[int, Priority], reservations: Sequence[Reservation]) -> int:
    """Store each waiting job's plan, writing only what changed; returns the rows written.

    Run after the cycle's placements and preemptions, in its transaction: the pending jobs are read
    again here, so only jobs still PENDING are written, and every UPDATE is restricted to PENDING once
    more, so a job cancelled meanwhile keeps what its canceller wrote. Rows are grouped by the fields
    that changed: mostly the position alone, when the head of the queue starts.
    """
    reserved = {r.job_id: r for r in reservations}
    stored = {row[0]: row[1:] for row in Job.objects.filter(state=JobState.PENDING).values_list("id", *PLAN_FIELDS)}
    changes: dict[tuple[str, ...], dict[int, tuple[Any, ...]]] = defaultdict(dict)
    by_reason: Counter[str] = Counter()
    for wait in waiting:
        old = stored.get(wait.job_id)
        if old is None:
            continue  # placed, preempted, cancelled or deleted since the snapshot
        new = plan_row(wait, priorities.get(wait.job_id), reserved.get(wait.job_id), old[_PROMISED])
        by_reason[new[_REASON_CODE]] += 1
        fields = changed_fields(old, new)
        if fields:
            changes[fields][wait.job_id] = new
    store_queue_summary(by_reason)
    return sum(_write_by_pk(fields, rows) for fields, rows in changes.items())


def store_queue_summary(by_reason: Mapping[str, int], now: datetime | None = None) -> None:
    """The planned jobs counted by reason, for the queue's summary (scheduler.queue.queue_counts)."""
    PlannedQueue.objects.update_or_create(
        pk=1, defaults={"pending_by_reason": dict(sorted(by_reason.items())), "planned_at": now or datetime.now(UTC)}
    )


class _ValueByPk(Expression):
    """`CASE <table>.id WHEN <pk> THEN %s ... END` for one column: one expression for a whole batch of rows."""

    def __init__(self, values: Mapping[int, Any], field: Field[Any, Any]) -> None:
        super().__init__(output_field=field)
        self.values = values

    def as_sql(self, compiler: SQLCompiler, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        qn = compiler.quote_name_unless_alias
        column = f"{qn(Job._meta.db_table)}.{qn('id')}"
        # Ids are ints from the database: written inline, the values as parameters (adapted as the field saves them).
        whens = " ".join(f"WHEN {int(pk)} THEN %s" for pk in self.values)
        field = self.output_field
        params = [field.get_db_prep_save(value, connection) for value in self.values.values()]
        sql = f"CASE {column} {whens} END"
        if connection.features.requires_casted_case_in_updates:
            # PostgreSQL types a CASE of parameters by its first branch; say the column's type (as bulk_update does).
            sql = f"CAST({sql} AS {field.cast_db_type(connection)})"  # type: ignore[attr-defined]  # not in the stubs
        return sql, params


def _stored(name: str, value: Any) -> Any:
    if name == "priority_factors" and value is not None:
        return {factor: [v, w] for factor, (v, w) in value.items()}
    return value


def _write_by_pk(fields: Sequence[str], rows: Mapping[int, Sequence[Any]]) -> int:
    """Write `fields` of each row (pk -> a plan row) in batched UPDATEs restricted to pending jobs; returns rows updated."""
    index = [PLAN_FIELDS.index(name) for name in fields]
    model_fields = [cast("Field[Any, Any]", Job._meta.get_field(name)) for name in fields]
    limit = connection.features.max_query_params
    # Each row takes a parameter per field, and one in the IN list.
    size = min(PLAN_BATCH, limit // (len(fields) + 1)) if limit else PLAN_BATCH
    pks = list(rows)
    written = 0
    for start in range(0, len(pks), size):
        batch = pks[start : start + size]
        update = {
            name: _ValueByPk({pk: _stored(name, rows[pk][i]) for pk in batch}, field)
            for name, i, field in zip(fields, index, model_fields, strict=True)
        }
        written += Job.objects.filter(state=JobState.PENDING, pk__in=batch).update(**update)
    return written
