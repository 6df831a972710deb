"""The job list's filters as a researcher uses them: a filter that means nothing is said, never answered with a list."""

from __future__ import annotations

import re
from typing import Any

from tests.conftest import session_for
from tests.jobs.factories import JobFactory
from tests.quotas.factories import TeamFactory

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


def test_the_forms_any_sends_empty_fields_and_every_job_is_listed(user: Any) -> None:
    """The Filter button sends every field, the empty ones too (?name=&state=&team=&submitted_after=): that read
    "State: Unknown state ;" and listed nothing. The API takes an empty state as none asked, too."""
    jobs = {JobFactory(owner=user, running=True).pk, JobFactory(owner=user).pk}
    response = session_for(user).get("/", {"name": "", "state": "", "owner": "", "team": "", "submitted_after": ""})
    assert response.status_code == 200 and set(listed(response.content.decode())) == jobs
    api = session_for(user).get("/api/v1/jobs/", {"state": ""})
    assert api.status_code == 200 and {job["id"] for job in api.json()["results"]} == jobs


def test_the_team_filter_lists_that_teams_jobs_and_offers_the_users_teams(user: Any) -> None:
    ml, vision, left = TeamFactory(name="ml"), TeamFactory(name="vision"), TeamFactory(name="old-team")
    ml.members.add(user)
    vision.members.add(user)
    TeamFactory(name="someone-elses")
    for_ml = JobFactory(owner=user, team=ml)
    JobFactory(owner=user, team=vision)
    JobFactory(owner=user)
    # A job for a team the user has left since: still theirs to find.
    for_left = JobFactory(owner=user, team=left)
    client = session_for(user)
    html = client.get("/", {"team": "ml"}).content.decode()
    assert listed(html) == [for_ml.pk]
    assert listed(client.get("/", {"team": "old-team"}).content.decode()) == [for_left.pk]
    # The form offers their teams, the one asked for selected; never another's team.
    select = re.search(r'<select id="team-filter" name="team"[^>]*>(.*?)</select>', html, re.S)
    assert select, "the job list has no team filter"
    assert re.findall(r'<option value="([^"]*)"', select.group(1)) == ["", "ml", "old-team", "vision"]
    assert '<option value="ml" selected>ml</option>' in select.group(1)


def test_a_team_that_is_not_the_users_is_said_with_their_teams_and_no_jobs(user: Any) -> None:
    ml = TeamFactory(name="ml")
    ml.members.add(user)
    JobFactory(owner=user, team=ml)
    JobFactory(owner=user)
    TeamFactory(name="vision")  # exists, but not theirs: answered as a name they have no team of
    client = session_for(user)
    for asked in ("nope", "vision"):
        response = client.get("/", {"team": asked})
        assert response.status_code == 400, asked
        html = response.content.decode()
        assert listed(html) == []
        errors = re.search(r'<div class="error-summary" role="alert" data-testid="filter-errors">(.*?)</div>', html, re.S)
        assert errors, "the page does not say what is wrong with the team"
        assert f"Team: No team {asked} of yours; your teams are ml." in errors.group(1)
        assert "No jobs are listed until the filter is fixed." in errors.group(1)
        assert f'<option value="{asked}" selected>{asked} (no such team)</option>' in html


def test_an_admin_is_told_an_unknown_team_with_every_team(admin_user: Any) -> None:
    TeamFactory(name="ml")
    TeamFactory(name="vision")
    JobFactory(team=TeamFactory(name="nlp"))
    response = session_for(admin_user).get("/", {"team": "ml-infra"})
    assert response.status_code == 400
    html = response.content.decode()
    assert listed(html) == []
    assert "Team: Unknown team ml-infra; the teams are ml, nlp, vision." in html
    assert listed(session_for(admin_user).get("/", {"team": "nlp"}).content.decode()) != []
