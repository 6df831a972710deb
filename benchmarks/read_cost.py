"""What a request costs the database: the queries it makes and the rows it fetches (benchmarks and tests alike).

Query counts alone miss a read that fetches every running job in one query and sorts or counts them in Python:
that is one query at any length. The rows each query hands back are counted too, at the cursor, so a read that
grows with the queue shows it whatever its number of queries. Timings flake; these do not.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.db import connection


@dataclass
class ReadCost:
    queries: int = 0
    rows: int = 0
    # Each query's SQL and the rows it fetched, in order: what a failing test prints.
    per_query: list[list[Any]] = field(default_factory=list)

    def describe(self) -> str:
        return "\n".join(f"{rows:>7} rows  {sql[:300]}" for sql, rows in self.per_query)


class _CountingCursor:
    """The database driver's cursor, counting the rows fetched from it into the query it ran."""

    def __init__(self, cursor: Any, counted: list[Any], cost: ReadCost) -> None:
        self._cursor, self._counted, self._cost = cursor, counted, cost

    def _add(self, n: int) -> None:
        self._counted[1] += n
        self._cost.rows += n

    def fetchone(self) -> Any:
        row = self._cursor.fetchone()
        self._add(row is not None)
        return row

    def fetchmany(self, size: int | None = None) -> Any:
        rows = self._cursor.fetchmany(size) if size is not None else self._cursor.fetchmany()
        self._add(len(rows))
        return rows

    def fetchall(self) -> Any:
        rows = self._cursor.fetchall()
        self._add(len(rows))
        return rows

    def __iter__(self) -> Iterator[Any]:
        for row in self._cursor:
            self._add(1)
            yield row

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


@contextmanager
def read_cost() -> Iterator[ReadCost]:
    """Count the queries made on the default connection inside the block, and the rows fetched by each."""
    cost = ReadCost()

    def counting(execute: Any, sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
        counted: list[Any] = [sql, 0]
        cost.queries += 1
        cost.per_query.append(counted)
        wrapper = context["cursor"]
        raw = wrapper.cursor
        # Django makes a cursor per query; a cursor that runs a second one counts into the latest.
        wrapper.cursor = _CountingCursor(raw._cursor if isinstance(raw, _CountingCursor) else raw, counted, cost)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(counting):
        yield cost
