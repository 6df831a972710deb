"""The site's finished jobs as a trace: muster_history_export writes what replay.trace.read_trace reads back."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from jobs.models import Allocation, Job, JobEvent, Node
from jobs.states import JobState
from replay.trace import HISTORY_HEADER, Assumptions, TraceError, read_trace
from tests.jobs.factories import JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory
from whatif.history import history_rows, history_write

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(user, other_user) -> dict[str, object]:
    now = timezone.now().replace(microsecond=0)
    team = TeamFactory(name="vision")
    ran = JobFactory(owner=user, team=team, finished=True, nodes=2, gpus_per_node=8, wall_time_seconds=7200, priority_class="production")
    JobFactory.create(  # failed after 30 minutes
        owner=other_user,
        finished=True,
        state=JobState.FAILED,
        gpus_per_node=2,
        submitted_at=now - timedelta(hours=5),
        scheduled_at=now - timedelta(hours=4),
        started_at=now - timedelta(hours=4),
        finished_at=now - timedelta(hours=3, minutes=30),
    )
    JobFactory(owner=user, state=JobState.CANCELLED, submitted_at=now - timedelta(hours=1))  # never ran: left out
    JobFactory(owner=user, running=True)  # not finished: left out
    JobFactory(owner=user, queued=True)
    return {"ran": ran, "now": now}


def test_finished_jobs_that_ran_round_trip_through_read_trace(history, tmp_path: Path) -> None:
    out = tmp_path / "history.csv"
    stderr = io.StringIO()
    call_command("muster_history_export", "--out", str(out), stderr=stderr)
    assert "2 jobs written" in stderr.getvalue()
    jobs = read_trace(out.read_text().splitlines(), assumptions=Assumptions())
    assert len(jobs) == 2
    failed, ran = jobs  # submit order: the failed job was submitted 5 h ago, the other 2 h ago
    assert (failed.nodes, failed.gpus, failed.runtime, failed.tenant, failed.user) == (1, 2, 1800.0, "bob", "bob")
    assert (ran.nodes, ran.gpus, ran.runtime, ran.wall_seconds, ran.tenant, ran.user) == (2, 16, 3600.0, 7200.0, "vision", "alice")
    assert ran.class_rank == 0
    assert ran.submit == pytest.approx(history["ran"].submitted_at.timestamp())


def test_the_range_picks_jobs_by_submit_time(history) -> None:
    now = history["now"]
    rows = list(history_rows(now - timedelta(hours=3), None))
    assert [r[6] for r in rows] == ["alice"]
    assert [r[6] for r in history_rows(None, now - timedelta(hours=3))] == ["bob"]


def test_bad_dates_are_refused(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="--start: 'yesterday' is not a date"):
        call_command("muster_history_export", "--out", str(tmp_path / "x.csv"), "--start", "yesterday")
    with pytest.raises(CommandError, match="--end must be after --start"):
        call_command("muster_history_export", "--out", str(tmp_path / "x.csv"), "--start", "2024-02-01", "--end", "2024-01-01")


def _attempt(job: Job, n: int, nodes: list[Node], placed: datetime, ended: datetime, to_state: str, reason: str) -> None:
    """Attempt n of `job` as the cycle writes it: placed on `nodes` (one rank each), running a second later, ended."""
    JobEvent.objects.create(job=job, at=placed, from_state=JobState.PENDING, to_state=JobState.SCHEDULED, reason="Placed.", attempt=n)
    JobEvent.objects.create(
        job=job, at=placed + timedelta(seconds=1), from_state=JobState.SCHEDULED, to_state=JobState.RUNNING, reason="Running.", attempt=n
    )
    JobEvent.objects.create(job=job, at=ended, from_state=JobState.RUNNING, to_state=to_state, reason=reason, attempt=n)
    if to_state == JobState.PREEMPTED:
        JobEvent.objects.create(job=job, at=ended, from_state=to_state, to_state=JobState.PENDING, reason=reason, attempt=n)
    for rank, node in enumerate(nodes):
        Allocation.objects.create(job=job, node=node, attempt=n, rank=rank, gpus=8, allocated_at=placed, released_at=ended)


def test_an_elastic_job_is_exported_elastic_with_the_work_of_the_nodes_it_held(user) -> None:
    """4 nodes for 70 s, then 8 for 30 s: 520 node-seconds, 65 s on its 8 nodes, and its min_nodes kept. It was exported
    as a rigid gang of 8 for the whole 100 s."""
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    nodes = [NodeFactory() for _ in range(8)]
    job = JobFactory(
        owner=user, state=JobState.SUCCEEDED, exit_code=0, attempt=1, nodes=8, min_nodes=4, max_nodes=8, preemptible=True,
        submitted_at=t0, scheduled_at=t0, started_at=t0, finished_at=t0 + timedelta(seconds=100), held=[],
    )  # fmt: skip
    _attempt(job, 1, nodes[:4], t0, t0 + timedelta(seconds=100), JobState.SUCCEEDED, "All pods exited with code 0.")
    for rank, node in enumerate(nodes[4:], start=4):
        Allocation.objects.create(
            job=job,
            node=node,
            attempt=1,
            rank=rank,
            gpus=8,
            allocated_at=t0 + timedelta(seconds=70),
            released_at=t0 + timedelta(seconds=100),
        )
    out = io.StringIO()
    history_write(out)
    (trace_job,) = read_trace(out.getvalue().splitlines(), assumptions=Assumptions())
    assert (trace_job.nodes, trace_job.min_nodes, trace_job.runtime, trace_job.preemptible) == (8, 4, 65.0, True)
    assert out.getvalue().splitlines()[1].endswith(",65,4,true")


def test_a_job_s_attempts_are_one_row_with_the_work_of_each_but_a_preempted_one(user) -> None:
    """Failed after 600 s (restarted), preempted after 300 s, succeeded after 900 s: 1,500 s of work, the replay preempting
    by its own policy. It was exported with the last attempt's 900 s only."""
    t0 = timezone.now().replace(microsecond=0) - timedelta(hours=3)
    node = NodeFactory()
    job = JobFactory(
        owner=user, state=JobState.SUCCEEDED, exit_code=0, attempt=3, max_restarts=1, restarts=1, submitted_at=t0, held=[],
        scheduled_at=t0 + timedelta(seconds=1000), started_at=t0 + timedelta(seconds=1001), finished_at=t0 + timedelta(seconds=1900),
    )  # fmt: skip
    _attempt(job, 1, [node], t0, t0 + timedelta(seconds=600), JobState.PENDING, "Attempt 1 failed: rank 0 exited with code 1.")
    _attempt(job, 2, [node], t0 + timedelta(seconds=650), t0 + timedelta(seconds=950), JobState.PREEMPTED, "Preempted for job 9.")
    _attempt(job, 3, [node], t0 + timedelta(seconds=1000), t0 + timedelta(seconds=1900), JobState.SUCCEEDED, "All pods exited.")
    (row,) = history_rows()
    assert row[1] == t0.astimezone(UTC).isoformat()  # its first placement
    assert (row[9], row[10], row[11]) == ("1500", "", "false")
    (trace_job,) = read_trace([",".join(HISTORY_HEADER), ",".join(row)], assumptions=Assumptions())
    assert (trace_job.runtime, trace_job.min_nodes, trace_job.preemptible) == (1500.0, 0, False)


def test_a_history_file_without_min_nodes_and_preemptible_is_still_read() -> None:
    old = ["submitted_at,started_at,ended_at,nodes,gpus_per_node,wall_time_seconds,owner,team,priority_class,runtime_seconds"]
    old.append("2024-01-01T00:00:00+00:00,2024-01-01T00:10:00+00:00,2024-01-01T01:10:00+00:00,2,8,7200,alice,vision,normal,3600")
    (job,) = read_trace(old, assumptions=Assumptions())
    assert (job.nodes, job.runtime, job.min_nodes, job.preemptible) == (2, 3600.0, 0, False)


@pytest.mark.parametrize(
    ("min_nodes", "preemptible", "says"),
    [
        ("8", "true", "min_nodes 8 is not below nodes 8"),
        ("0", "true", "min_nodes '0' is not a whole number"),
        ("", "maybe", "preemptible 'maybe'"),
    ],
)
def test_bad_min_nodes_or_preemptible_name_the_line(min_nodes: str, preemptible: str, says: str) -> None:
    row = f"2024-01-01T00:00:00+00:00,,,8,8,7200,alice,,normal,3600,{min_nodes},{preemptible}"
    with pytest.raises(TraceError, match=f"line 2: {says}"):
        read_trace([",".join(HISTORY_HEADER), row], assumptions=Assumptions())
