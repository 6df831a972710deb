"""One scheduling cycle at a time, proven over real PostgreSQL connections."""

from __future__ import annotations

import threading
import time
from collections import Counter

import psycopg2
import pytest
from django.db import connection, connections

from jobs.models import Job, JobEvent
from jobs.states import JobState
from scheduler.cycle import run_cycle
from scheduler.lock import CYCLE_LOCK_KEY

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def raw_connection():
    params = connection.get_connection_params()
    return psycopg2.connect(**{k: v for k, v in params.items() if k in {"dbname", "user", "password", "host", "port"}})


def test_a_cycle_does_nothing_while_another_holds_the_lock(require_postgres, tx_submit, tx_sim) -> None:
    job_id = tx_submit(nodes=1)["id"]
    other = raw_connection()
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [CYCLE_LOCK_KEY])
        report = run_cycle(backend=tx_sim.cluster, now=tx_sim.clock())
        assert not report.ran
        assert Job.objects.get(pk=job_id).state == JobState.PENDING
    finally:
        other.close()  # the lock dies with its connection, as it would with a killed worker
    wait_until_free()
    report = run_cycle(backend=tx_sim.cluster, now=tx_sim.clock())
    assert report.ran and report.placed == [job_id]


def wait_until_free(timeout: float = 10.0) -> None:
    """The server drops a closed connection's locks when its backend process exits, a moment after the close."""
    probe = raw_connection()
    deadline = time.monotonic() + timeout
    try:
        with probe.cursor() as cursor:
            while True:
                cursor.execute("SELECT pg_try_advisory_lock(%s)", [CYCLE_LOCK_KEY])
                if cursor.fetchone()[0]:
                    cursor.execute("SELECT pg_advisory_unlock(%s)", [CYCLE_LOCK_KEY])
                    return
                assert time.monotonic() < deadline, f"the cycle lock was still held {timeout} s after its connection closed"
                time.sleep(0.05)
    finally:
        probe.close()


def test_concurrent_cycles_never_place_a_job_twice(require_postgres, tx_submit, tx_sim) -> None:
    ids = [tx_submit(nodes=n, gpus_per_node=8, simulate={"duration_seconds": 3600})["id"] for n in (1, 2, 1, 4, 1, 3, 2, 1)]
    ids += [tx_submit(nodes=1, gpus_per_node=g)["id"] for g in (1, 2, 3, 4, 5, 6, 7, 8) * 3]
    threads, barrier, ran = 4, threading.Barrier(4), Counter()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(5):
                barrier.wait()
                report = run_cycle(backend=tx_sim.cluster, now=tx_sim.clock())
                ran[report.ran] += 1
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(60)
    assert not errors, errors
    assert ran[True] >= 5  # every round some cycle ran; others found the lock held
    scheduled = Counter(JobEvent.objects.filter(to_state=JobState.SCHEDULED).values_list("job_id", flat=True))
    assert scheduled and max(scheduled.values()) == 1, scheduled
    placed_gpus = sum(Job.objects.get(pk=j).gpus for j in scheduled)
    assert placed_gpus <= 128
