"""The cluster-wide scheduling lock: one cycle at a time across all workers.

On PostgreSQL a session-level advisory lock, taken without waiting: a cycle
that finds it held does nothing (another cycle is doing the work). It dies with
its connection, so a killed worker never leaves it held. Elsewhere (the SQLite
laptop default, one machine) an exclusive lock on a file beside the database.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

# Any 64-bit constant unique to Muster's scheduler ("MUSTER" in ASCII).
CYCLE_LOCK_KEY = 0x4D5553544552


@contextmanager
def cycle_lock() -> Iterator[bool]:
    """Yield True when this process holds the scheduling lock, False when another does."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_try_advisory_lock(%s)", [CYCLE_LOCK_KEY])
            acquired = bool(cursor.fetchone()[0])
        try:
            yield acquired
        finally:
            if acquired:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [CYCLE_LOCK_KEY])
        return
    path = settings.DATA_DIR / "scheduler.lock"
    with open(path, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
