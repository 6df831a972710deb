"""Every transition goes through one function that refuses illegal ones and writes an event."""

from __future__ import annotations

import pytest

from jobs.errors import IllegalTransition
from jobs.models import Job, JobEvent
from jobs.services import job_transition
from jobs.states import ALLOWED_TRANSITIONS, TERMINAL_STATES, JobState, can_transition


def test_terminal_states_are_final() -> None:
    for state in TERMINAL_STATES:
        assert ALLOWED_TRANSITIONS[state] == frozenset()
        assert not any(can_transition(state, other) for other in JobState.values)


@pytest.mark.parametrize(
    ("start", "target"),
    [
        (JobState.PENDING, JobState.RUNNING),
        (JobState.PENDING, JobState.SUCCEEDED),
        (JobState.SUCCEEDED, JobState.PENDING),
        (JobState.CANCELLED, JobState.RUNNING),
        (JobState.SCHEDULED, JobState.SUCCEEDED),
    ],
)
def test_illegal_transitions_are_refused_and_leave_no_trace(submit, start: str, target: str) -> None:
    job = Job.objects.get(pk=submit()["id"])
    Job.objects.filter(pk=job.pk).update(state=start)
    job.refresh_from_db()
    events_before = JobEvent.objects.filter(job=job).count()
    with pytest.raises(IllegalTransition):
        job_transition(job, target, reason="test")
    job.refresh_from_db()
    assert job.state == start
    assert JobEvent.objects.filter(job=job).count() == events_before


def test_a_stale_copy_cannot_move_a_job_twice(submit) -> None:
    first = Job.objects.get(pk=submit()["id"])
    stale = Job.objects.get(pk=first.pk)
    job_transition(first, JobState.CANCELLED, reason="user cancelled")
    with pytest.raises(IllegalTransition):
        job_transition(stale, JobState.SCHEDULED, reason="scheduler saw an old copy")
    assert Job.objects.get(pk=first.pk).state == JobState.CANCELLED
    assert list(JobEvent.objects.filter(job=first).values_list("to_state", flat=True)) == ["PENDING", "CANCELLED"]
