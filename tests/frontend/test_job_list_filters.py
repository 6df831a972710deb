"""The job list's filters as a researcher uses them: a filter that means nothing is said, never answered with a list."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import session_for
from tests.jobs.factories import JobFactory

STATES = "PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT, PREEMPTED"


def listed(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-job="(\d+)"', html)]


def test_an_unknown_state_is_said_with_the_states_there_are_and_no_jobs(user: Any) -> None:
    running = JobFactory(owner=user, running=True)
    JobFactory(owner=user)
    client = session_for(user)
    assert listed(client.get("/", {"state": "RUNNING"}).content.decode()) == [running.pk]

    response = client.get("/", {"state": "RUNING"})
    assert response.status_code == 400
    html = response.content.decode()
    # Not every job as if unfiltered, nor "No RUNING jobs" as if there were such a state with none in it.
    assert listed(html) == []
    assert "No RUNING jobs" not in html
    errors = re.search(r'<div class="error-summary" role="alert" data-testid="filter-errors">(.*?)</div>', html, re.S)
    assert errors, "the page does not say what is wrong with the filter"
    assert f"State: Unknown state RUNING; the states are {STATES}." in errors.group(1)
    assert "No jobs are listed until the filter is fixed." in errors.group(1)
    # The form shows the state asked for, not "any" beside an answer that would be every job.
    assert '<option value="RUNING" selected>RUNING (no such state)</option>' in html


def test_a_since_that_is_not_a_date_is_said_too(user: Any) -> None:
    JobFactory(owner=user)
    response = session_for(user).get("/", {"submitted_after": "yesterday"})
    assert response.status_code == 400
    html = response.content.decode()
    assert listed(html) == []
    assert "Since: Enter a valid date/time." in html


def test_states_in_any_case_still_filter(user: Any) -> None:
    running = JobFactory(owner=user, running=True)
    JobFactory(owner=user)
    response = session_for(user).get("/", {"state": "running"})
    assert response.status_code == 200
    assert listed(response.content.decode()) == [running.pk]
