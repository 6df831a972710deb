"""Which pending jobs are past their starvation threshold, as /metrics and the dashboard count them."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from jobs.models import Job
from jobs.states import JobState
from scheduler.queue import is_starving, starving_count
from tests.jobs.factories import JobFactory

HOUR = 3600


def test_a_single_node_jobs_threshold_grows_with_its_wall_time_and_a_gangs_does_not(db: None, settings: Any) -> None:
    settings.MUSTER_STARVATION_SECONDS = HOUR
    settings.MUSTER_STARVATION_WALL_FACTOR = 0.5
    now = timezone.now()
    waited = now - timedelta(hours=3)
    short = JobFactory(nodes=1, wall_time_seconds=2 * HOUR, submitted_at=waited)  # threshold 1 h: starving
    long = JobFactory(nodes=1, wall_time_seconds=10 * HOUR, submitted_at=waited)  # threshold 5 h: not yet
    gang = JobFactory(nodes=4, wall_time_seconds=10 * HOUR, submitted_at=waited)  # a gang: 1 h, starving
    JobFactory(nodes=1, wall_time_seconds=HOUR, submitted_at=now - timedelta(minutes=30))  # too new
    JobFactory(nodes=1, wall_time_seconds=HOUR, submitted_at=waited, running=True)  # not pending
    pending = Job.objects.filter(state=JobState.PENDING)
    assert [is_starving(job, now) for job in (short, long, gang)] == [True, False, True]
    assert starving_count(pending, now) == 2
    assert starving_count(pending, now + timedelta(hours=2)) == 4  # the long one at 5 h, the new one past 1 h
    settings.MUSTER_STARVATION_WALL_FACTOR = 0
    assert starving_count(pending, now) == 3
