"""The site's finished jobs as a trace: muster_history_export writes what replay.trace.read_trace reads back."""

from __future__ import annotations

import io
from datetime import timedelta
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from jobs.states import JobState
from replay.trace import Assumptions, read_trace
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory
from whatif.history import history_rows

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
