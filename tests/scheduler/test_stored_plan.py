"""The cycle stores each waiting job's plan (position, priority, estimate, reservation); reads show only that."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import scheduler.cycle
from jobs.models import EstimateKind, Job
from jobs.services import job_cancel
from jobs.states import JobState
from policy.model import Decisions, Priority, Reservation, Snapshot, Waiting
from policy.priority import prioritize
from scheduler.plans import PLAN_FIELDS, changed_fields
from scheduler.snapshot import build_snapshot, held_reservations, policy_config
from tests.jobs.factories import JobFactory

CLEARED = {
    "estimated_start": None,
    "estimate_kind": "",
    "queue_position": None,
    "priority": None,
    "priority_factors": None,
    "reserved_nodes": [],
    "reserved_start": None,
    "promised_start": None,
}


def when(timestamp: float | None) -> datetime | None:
    return datetime.fromtimestamp(timestamp, UTC) if timestamp is not None else None


def plan_of(job_id: int) -> dict[str, Any]:
    job = Job.objects.get(pk=job_id)
    return {name: getattr(job, name) for name in CLEARED}


@pytest.fixture
def decided(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Snapshot, Decisions]]:
    """Every (snapshot, decisions) of the cycles run in the test, as the real policy made them."""
    seen: list[tuple[Snapshot, Decisions]] = []
    real = scheduler.cycle.schedule

    def schedule(snapshot: Snapshot, config: Any) -> Decisions:
        decisions = real(snapshot, config)
        seen.append((snapshot, decisions))
        return decisions

    monkeypatch.setattr(scheduler.cycle, "schedule", schedule)
    return seen


def fake_policy(monkeypatch: pytest.MonkeyPatch, *decisions: Decisions) -> None:
    """The cycle gets these decisions, one per cycle, whatever the snapshot."""
    planned = iter(decisions)
    monkeypatch.setattr(scheduler.cycle, "schedule", lambda snapshot, config: next(planned))


@pytest.fixture
def starving(settings: Any) -> None:
    # Every waiting job is past the starvation threshold at once, so the policy reserves for it.
    settings.MUSTER_STARVATION_SECONDS = 0
    settings.MUSTER_STARVATION_WALL_FACTOR = 0


@pytest.mark.usefixtures("classes_open")
def test_the_cycle_stores_each_waiting_jobs_plan(submit: Any, sim: Any, starving: None, decided: list) -> None:
    blocker = submit(nodes=16, gpus_per_node=8)["id"]
    sim.cycle()
    waiting = [submit(nodes=4)["id"], submit(nodes=1, gpus_per_node=1, priority_class="production")["id"], submit(nodes=16)["id"]]
    assert [plan_of(pk) for pk in waiting] == [CLEARED] * 3  # new: no cycle planned them yet

    sim.advance(1)

    snapshot, decisions = decided[-1]
    assert Job.objects.get(pk=blocker).state == JobState.RUNNING
    assert {w.job_id for w in decisions.waiting} == set(waiting)
    assert decisions.reservations, "a starving job that does not fit gets a reservation"
    reserved = {r.job_id: r for r in decisions.reservations}
    priorities = decisions.priorities or prioritize(snapshot, policy_config())
    for wait in decisions.waiting:
        job = Job.objects.get(pk=wait.job_id)
        assert (job.queue_position, job.pending_reason_code, job.pending_reason) == (wait.position, wait.reason_code, wait.reason)
        assert (job.estimated_start, job.estimate_kind) == (when(wait.estimated_start), wait.estimate)
        priority = priorities[wait.job_id]
        assert job.priority == pytest.approx(priority.total)
        assert job.priority_factors == {name: [pytest.approx(v), pytest.approx(w)] for name, (v, w) in priority.factors.items()}
        reservation = reserved.get(wait.job_id)
        assert job.reserved_nodes == (list(reservation.node_names) if reservation else [])
        assert job.reserved_start == (when(reservation.start) if reservation else None)
        # A first reservation's start is the promise.
        assert job.promised_start == job.reserved_start
    assert sorted(Job.objects.filter(pk__in=waiting).values_list("queue_position", flat=True)) == [1, 2, 3]


def test_a_reservation_lives_in_the_database_and_reaches_the_next_cycle(submit: Any, sim: Any, starving: None, decided: list) -> None:
    submit(nodes=16, gpus_per_node=8)
    sim.cycle()
    big = submit(nodes=16)["id"]
    sim.advance(1)
    (reservation,) = [r for r in decided[-1][1].reservations if r.job_id == big]

    # A restart keeps nothing in memory: the next snapshot reads the promise back from the job's row.
    (held,) = [r for r in build_snapshot(sim.clock()).reservations if r.job_id == big]
    assert (held.job_id, held.node_names) == (reservation.job_id, reservation.node_names)
    assert held.start == pytest.approx(reservation.start, abs=1e-6)

    sim.advance(1)
    snapshot, _ = decided[-1]
    assert big in {r.job_id for r in snapshot.reservations}


def test_the_plan_is_cleared_when_the_job_starts(submit: Any, sim: Any, starving: None) -> None:
    submit(nodes=16, gpus_per_node=8, simulate={"duration_seconds": 5})
    sim.cycle()
    waiting = submit(nodes=16)["id"]
    sim.advance(1)
    stored = Job.objects.get(pk=waiting)
    assert stored.queue_position == 1 and stored.priority is not None and stored.reserved_start is not None

    for _ in range(10):
        sim.advance(1)
        if Job.objects.get(pk=waiting).state != JobState.PENDING:
            break
    assert Job.objects.get(pk=waiting).state in (JobState.SCHEDULED, JobState.RUNNING)
    assert plan_of(waiting) == CLEARED


def test_the_plan_is_cleared_when_the_job_is_cancelled(submit: Any, sim: Any, user: Any, starving: None) -> None:
    submit(nodes=16, gpus_per_node=8)
    sim.cycle()
    waiting = submit(nodes=16)["id"]
    sim.advance(1)
    assert Job.objects.get(pk=waiting).queue_position == 1

    job_cancel(job=Job.objects.get(pk=waiting), by=user)

    assert plan_of(waiting) == CLEARED
    assert not [r for r in build_snapshot(sim.clock()).reservations if r.job_id == waiting]


def test_a_promise_is_kept_while_the_job_waits(sim: Any, user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    job = JobFactory(owner=user, nodes=2)
    other = JobFactory(owner=user)
    t0 = sim.clock().timestamp()
    priority = Priority(total=1234.5, factors={"age": (0.25, 125.0), "class": (0.5, 1109.5)})

    def cycle(reservation_start: float | None, estimate: str, estimated: float | None) -> Decisions:
        reservations = (Reservation(job.pk, ("sim-node-00", "sim-node-01"), reservation_start),) if reservation_start else ()
        return Decisions(
            placements=(),
            waiting=(
                Waiting(job.pk, 1, "NO_ROOM", "Needs 2 whole nodes.", estimated, estimate),
                Waiting(other.pk, 2, "NO_ROOM", "Needs 1 whole node.", None, EstimateKind.NONE),
            ),
            reservations=reservations,
            # The policy reports every pending job's priority; one it leaves out is stored as unknown.
            priorities={job.pk: priority},
        )

    fake_policy(
        monkeypatch,
        cycle(t0 + 600, EstimateKind.RESERVED, t0 + 600),
        cycle(t0 + 900, EstimateKind.RESERVED, t0 + 900),
        cycle(None, EstimateKind.PLANNED, t0 + 1200),
    )

    sim.cycle()
    assert plan_of(job.pk) == {
        "estimated_start": when(t0 + 600),
        "estimate_kind": "reserved",
        "queue_position": 1,
        "priority": 1234.5,
        "priority_factors": {"age": [0.25, 125.0], "class": [0.5, 1109.5]},
        "reserved_nodes": ["sim-node-00", "sim-node-01"],
        "reserved_start": when(t0 + 600),
        "promised_start": when(t0 + 600),
    }
    assert plan_of(other.pk) == {**CLEARED, "queue_position": 2}

    sim.advance(1)  # the reservation moved later: the first promise stays
    assert (plan_of(job.pk)["reserved_start"], plan_of(job.pk)["promised_start"]) == (when(t0 + 900), when(t0 + 600))

    sim.advance(1)  # no reservation any more: the promise is still shown while it waits
    plan = plan_of(job.pk)
    assert (plan["reserved_nodes"], plan["reserved_start"], plan["promised_start"]) == ([], None, when(t0 + 600))
    assert (plan["estimate_kind"], plan["estimated_start"], plan["queue_position"]) == ("planned", when(t0 + 1200), 1)

    job_cancel(job=Job.objects.get(pk=job.pk), by=user)
    assert plan_of(job.pk) == CLEARED


def bulk_plan_writes(ctx: CaptureQueriesContext) -> list[list[str]]:
    """The columns of each of the cycle's plan writes: UPDATEs of jobs setting columns by id (col = CASE id WHEN ...).

    A transition is a plain UPDATE of the job, so it is not counted.
    """
    by_id = re.compile(r'"(\w+)" = (?:CAST\()?CASE "jobs_job"\."id" WHEN')
    sqls = [q["sql"] for q in ctx.captured_queries if q["sql"].startswith('UPDATE "jobs_job"')]
    return [columns for sql in sqls if (columns := by_id.findall(sql))]


@pytest.mark.usefixtures("classes_open")
def test_a_cycle_writes_only_the_plans_that_changed(submit: Any, sim: Any) -> None:
    submit(nodes=16, gpus_per_node=8, simulate={"duration_seconds": 600})
    sim.cycle()
    waiting = [submit(nodes=1, gpus_per_node=1)["id"] for _ in range(4)]
    sim.advance(1)
    with CaptureQueriesContext(connection) as ctx:
        sim.advance(1)  # nothing moved; priorities drifted by less than a tenth
    assert bulk_plan_writes(ctx) == []

    later = submit(nodes=1, gpus_per_node=1, priority_class="production")["id"]
    with CaptureQueriesContext(connection) as ctx:
        sim.advance(1)
    # The new job gets its whole plan; the others only move down one place.
    assert Job.objects.get(pk=later).queue_position == 1
    assert [Job.objects.get(pk=pk).queue_position for pk in waiting] == [2, 3, 4, 5]
    writes = bulk_plan_writes(ctx)
    assert ["queue_position"] in writes and len(writes) == 2
    assert {"pending_reason_code", "queue_position", "priority"} <= set(next(w for w in writes if w != ["queue_position"]))


def test_a_priority_is_rewritten_once_it_drifted() -> None:
    old = ("NO_ROOM", "why", None, "", 1, 100.0, {"age": [0.1, 50.0], "class": [0.5, 50.0]}, [], None, None)
    assert len(old) == len(PLAN_FIELDS)

    def with_priority(total: float, age: float) -> tuple[Any, ...]:
        return (*old[:5], total, {"age": [age / 500, age], "class": [0.5, 50.0]}, *old[7:])

    assert changed_fields(old, with_priority(100.05, 50.05)) == ()
    assert changed_fields(old, with_priority(100.1, 50.1)) == ("priority", "priority_factors")
    assert changed_fields(old, (*old[:4], 2, *old[5:])) == ("queue_position",)
    assert changed_fields(old, (*old[:5], None, None, *old[7:])) == ("priority", "priority_factors")


def test_the_next_snapshot_carries_stored_reservations_in_start_order(db: None) -> None:
    now = datetime(2026, 11, 20, 12, tzinfo=UTC)
    later = JobFactory(reserved_nodes=["b"], reserved_start=now + timedelta(hours=2))
    sooner = JobFactory(reserved_nodes=["a", "c"], reserved_start=now + timedelta(hours=1))
    JobFactory(reserved_nodes=[], reserved_start=None)
    with CaptureQueriesContext(connection) as ctx:
        held = held_reservations()
    assert len(ctx.captured_queries) == 1
    assert held == (
        Reservation(sooner.pk, ("a", "c"), (now + timedelta(hours=1)).timestamp()),
        Reservation(later.pk, ("b",), (now + timedelta(hours=2)).timestamp()),
    )
