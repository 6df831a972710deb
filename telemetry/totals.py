"""Adding to a running total kept in one database row, for /metrics' counters written with each event
(telemetry/latency.py, telemetry/ended.py)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import F


def add_to_total(model: type[models.Model], key: dict[str, Any], **added: int) -> None:
    """Add to the fields of `model`'s row named by `key` (unique), in one UPDATE of that row: concurrent writers each
    wait for the row's lock and add, so none loses the other's. A row not made yet (the migrations make them; a test
    database flushed, a bound added since) is made at 0, then added to: a writer racing to make the same row inserts
    nothing (the key is unique), and both add to the one row."""
    row = model._default_manager.filter(**key)
    deltas = {field: F(field) + n for field, n in added.items()}
    if not row.update(**deltas):
        model._default_manager.bulk_create([model(**key)], ignore_conflicts=True)
        row.update(**deltas)
