"""A job that changes between the cycle's snapshot and its writes is skipped; the rest of the cycle stands."""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from django.db import connections

import scheduler.cycle
from jobs.models import Allocation, Job
from jobs.services import job_cancel
from jobs.states import ACTIVE_STATES, JobState
from scheduler.cycle import run_cycle


def _between_snapshot_and_writes(monkeypatch: pytest.MonkeyPatch, meddle: Any) -> None:
    """Run `meddle` right after the policy decided, before the cycle writes its decisions."""
    real = scheduler.cycle.schedule

    def schedule(snapshot, config):
        decisions = real(snapshot, config)
        meddle(decisions)
        return decisions

    monkeypatch.setattr(scheduler.cycle, "schedule", schedule)


def test_a_job_cancelled_after_the_snapshot_is_skipped_and_the_others_are_placed(submit, sim, user, monkeypatch) -> None:
    first, second, third = (submit(nodes=2)["id"] for _ in range(3))
    _between_snapshot_and_writes(monkeypatch, lambda d: job_cancel(job=Job.objects.get(pk=second), by=user))

    report = sim.cycle()

    assert report.placed == [first, third]
    assert set(report.launched) == {first, third}
    assert Job.objects.get(pk=second).state == JobState.CANCELLED
    assert not Allocation.objects.filter(job_id=second).exists()
    assert {j.state for j in Job.objects.filter(pk__in=[first, third])} == {JobState.SCHEDULED}


def test_a_job_deleted_after_the_snapshot_is_skipped(submit, sim, monkeypatch) -> None:
    first, second = (submit(nodes=1)["id"] for _ in range(2))
    _between_snapshot_and_writes(monkeypatch, lambda d: Job.objects.filter(pk=first).delete())

    report = sim.cycle()

    assert report.placed == [second]
    assert Job.objects.get(pk=second).state == JobState.SCHEDULED


@pytest.mark.usefixtures("classes_open")
def test_a_preemption_victim_cancelled_after_the_snapshot_does_not_undo_the_cycle(submit, sim, user, monkeypatch) -> None:
    victims = [
        submit(nodes=4, priority_class="preemptible", wall_time_seconds=14400, simulate={"duration_seconds": 7200})["id"] for _ in range(4)
    ]
    sim.cycle()
    sim.advance(5)
    sim.advance(700)  # past the preemption minimum run time
    assert {Job.objects.get(pk=v).state for v in victims} == {JobState.RUNNING}
    urgent = submit(nodes=4, priority_class="production")["id"]
    cancelled: list[int] = []

    def cancel_the_victim(decisions) -> None:
        assert decisions.preemptions, "the policy should preempt for the production job"
        victim = decisions.preemptions[0].job_id
        job_cancel(job=Job.objects.get(pk=victim), by=user)
        cancelled.append(victim)

    _between_snapshot_and_writes(monkeypatch, cancel_the_victim)
    report = sim.cycle()

    assert report.placed == [urgent]
    assert cancelled[0] not in report.preempted
    assert Job.objects.get(pk=cancelled[0]).state == JobState.CANCELLED
    assert Job.objects.get(pk=urgent).state == JobState.SCHEDULED


def test_a_waiting_job_cancelled_after_the_snapshot_gets_no_plan(submit, sim, user, monkeypatch) -> None:
    submit(nodes=16)
    sim.cycle()
    kept, cancelled = submit(nodes=16)["id"], submit(nodes=16)["id"]
    _between_snapshot_and_writes(monkeypatch, lambda d: job_cancel(job=Job.objects.get(pk=cancelled), by=user))

    sim.cycle()

    assert Job.objects.get(pk=kept).queue_position == 1
    job = Job.objects.get(pk=cancelled)
    assert job.state == JobState.CANCELLED
    assert (job.queue_position, job.priority, job.pending_reason_code, job.reserved_start) == (None, None, "", None)


@pytest.mark.postgres
def test_cancels_raced_against_cycles_never_abort_a_cycle(require_postgres, tx_submit, tx_sim) -> None:
    """Submit-then-cancel pairs from one connection while another runs cycles back to back on PostgreSQL."""
    pairs = 100
    stop = threading.Event()
    outcomes: Counter[str] = Counter()
    errors: list[BaseException] = []

    def cycles() -> None:
        try:
            while not stop.is_set():
                report = run_cycle(backend=tx_sim.cluster, now=tx_sim.clock())
                outcomes["ran" if report.ran else "skipped"] += 1
        except BaseException as exc:  # surfaced below: a cycle that raised was aborted
            errors.append(exc)
        finally:
            connections.close_all()

    def cancels() -> None:
        try:
            owner = None
            for i in range(pairs):
                job_id = tx_submit(nodes=1 + i % 3, gpus_per_node=8)["id"]
                job = Job.objects.select_related("owner").get(pk=job_id)
                owner = owner or job.owner
                time.sleep(0.001 * (i % 7))  # land the cancel at different points of the cycle
                job_cancel(job=job, by=owner, backend=tx_sim.cluster)
        except BaseException as exc:
            errors.append(exc)
        finally:
            stop.set()
            connections.close_all()

    runner = threading.Thread(target=cycles)
    canceller = threading.Thread(target=cancels)
    runner.start()
    canceller.start()
    canceller.join(120)
    runner.join(60)
    assert not errors, errors
    print(f"\n{pairs} submit-then-cancel pairs raced against {outcomes['ran']} cycles: 0 aborted")
    assert outcomes["ran"] > 10
    assert Job.objects.filter(state=JobState.CANCELLED).count() == pairs
    # A cycle's plan writes are restricted to pending jobs: no cancelled job was given a place in the queue.
    assert not Job.objects.filter(state=JobState.CANCELLED, queue_position__isnull=False).exists()
    # Nothing a cancelled job held is left allocated.
    assert not Allocation.objects.filter(released_at__isnull=True).exclude(job__state__in=ACTIVE_STATES).exists()
