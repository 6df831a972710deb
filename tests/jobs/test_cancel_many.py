"""job_cancel_many: several jobs cancelled in one transaction, each by job_cancel's rule (the job list's Cancel selected)."""

from __future__ import annotations

from typing import Any

import pytest

from jobs.hooks import job_hooks
from jobs.models import Job
from jobs.services import job_cancel_many
from jobs.states import JobState
from tests.jobs.factories import JobFactory


def test_the_visible_jobs_not_ended_are_cancelled_and_the_queue_told_once(
    user: Any, other_user: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    told: list[int] = []
    monkeypatch.setattr(job_hooks, "queue_changed", [lambda: told.append(1)])
    waiting, running, done = JobFactory(owner=user), JobFactory(owner=user, running=True), JobFactory(owner=user, finished=True)
    theirs = JobFactory(owner=other_user)
    result = job_cancel_many(job_ids=[running.pk, waiting.pk, done.pk, theirs.pk, 999_999], by=user)
    assert [job.pk for job in result.cancelled] == sorted([waiting.pk, running.pk])  # locked and cancelled in id order
    assert [job.pk for job in result.ended] == [done.pk]
    assert result.not_found == [theirs.pk, 999_999]  # someone else's reads as no job at all
    assert told == [1]
    assert {job.pk: job.state for job in Job.objects.all()} == {
        waiting.pk: JobState.CANCELLED,
        running.pk: JobState.CANCELLED,
        done.pk: JobState.SUCCEEDED,
        theirs.pk: JobState.PENDING,
    }


def test_nothing_to_cancel_tells_the_queue_nothing(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    told: list[int] = []
    monkeypatch.setattr(job_hooks, "queue_changed", [lambda: told.append(1)])
    done = JobFactory(owner=user, finished=True)
    result = job_cancel_many(job_ids=[done.pk], by=user)
    assert (result.cancelled, [job.pk for job in result.ended], result.not_found, told) == ([], [done.pk], [], [])
