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
    assert "Since: Not a date and time: write it in ISO 8601, as 2026-11-29T14:00:00Z (UTC)" in html


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


def test_an_admin_is_told_an_unknown_owner_with_the_owners_there_are(admin_user: Any, user: Any, other_user: Any) -> None:
    JobFactory(owner=user)
    JobFactory(owner=other_user)
    response = session_for(admin_user).get("/", {"owner": "nobody"})
    assert response.status_code == 400
    html = response.content.decode()
    assert listed(html) == []
    assert "Owner: Unknown owner nobody; the owners of jobs are alice, bob." in html
    assert "No jobs are listed until the filter is fixed." in html and "No jobs match" not in html
    # A user who has no jobs is no mistake: nothing matches.
    quiet = session_for(admin_user).get("/", {"owner": "root"})
    assert quiet.status_code == 200 and "No jobs match" in quiet.content.decode()
    assert listed(session_for(admin_user).get("/", {"owner": "bob"}).content.decode()) != []


def test_a_researcher_asking_for_anothers_jobs_is_told_they_see_only_their_own(user: Any, other_user: Any) -> None:
    mine = JobFactory(owner=user)
    JobFactory(owner=other_user, name="bobs-secret-run")
    client = session_for(user)
    for asked in ("bob", "nobody"):  # someone's name or no one's: the same words, and no one else's name
        response = client.get("/", {"owner": asked})
        assert response.status_code == 400, asked
        html = response.content.decode()
        assert listed(html) == []
        assert f"Owner: You can list only your own jobs (alice); {asked} is not you." in html
        assert "bobs-secret-run" not in html and ("bob" not in html.replace(asked, "") if asked == "nobody" else True)
    assert listed(client.get("/", {"owner": "alice"}).content.decode()) == [mine.pk]


def test_the_list_says_its_total_and_links_the_first_and_last_pages(user: Any) -> None:
    for _ in range(61):
        JobFactory(owner=user, finished=True)
    client = session_for(user)
    first = client.get("/").content.decode()
    nav = re.search(r'<nav class="pages"[^>]*>(.*?)</nav>', first, re.S)
    assert nav, "the list has no pages"
    assert '<span data-testid="total">61 jobs</span>' in nav.group(1) and "Page 1 of 3" in nav.group(1)
    links = dict((label, href) for href, label in re.findall(r'<a href="\?([^"]*)">([^<]*)</a>', nav.group(1)))
    assert links == {"older →": "page=2", "oldest »": "page=3"}
    middle = re.search(r'<nav class="pages"[^>]*>(.*?)</nav>', client.get("/", {"page": "2"}).content.decode(), re.S)
    assert middle and re.findall(r">([^<]+)</a>", middle.group(1)) == ["← newer", "older →"]
    last = re.search(r'<nav class="pages"[^>]*>(.*?)</nav>', client.get("/", {"page": "3"}).content.decode(), re.S)
    assert last and re.findall(r">([^<]+)</a>", last.group(1)) == ["« newest", "← newer"]
    # One page long, it still says how many.
    assert '<span data-testid="total">61 jobs</span>' in first
    assert '<span data-testid="total">0 jobs</span>' not in client.get("/", {"name": "none"}).content.decode()


def test_a_page_past_the_end_is_a_404_naming_the_last_page(user: Any) -> None:
    for _ in range(30):
        JobFactory(owner=user)
    client = session_for(user)
    for asked in ("99", "0", "x"):
        response = client.get("/", {"page": asked, "state": "PENDING"})
        assert response.status_code == 404, asked
        html = response.content.decode()
        assert listed(html) == [], asked  # not the last page as if it had been asked for
        said = re.search(r'<div class="error-summary" role="alert" data-testid="page-missing">(.*?)</div>', html, re.S)
        assert said and f"There is no page {asked} of this list: it has 2 pages (30 jobs)." in said.group(1)
        assert '<a href="?page=2&amp;state=PENDING">the last page, 2</a>' in said.group(1)
    # The rows it polls for are none either, and stop the poll.
    body = client.get("/", {"page": "99", "parts": "1"}).json()
    assert body["live"] is False and "<tr" not in body["parts"]["job-rows"]
    assert client.get("/", {"page": "2"}).status_code == 200


def test_an_arrays_elements_are_told_apart_and_listed_together(user: Any, api: Any, sim: Any) -> None:
    """Thirty identical "sweep" rows: which point of the sweep failed could not be found without the API."""
    from tests.conftest import job_payload

    made = api.post("/api/v1/jobs/array/", {**job_payload(name="sweep", nodes=1, gpus_per_node=1), "array": "0-2"}, format="json")
    array_id, jobs = made.json()["array_id"], made.json()["jobs"]
    other = JobFactory(owner=user, name="sweep")
    client = session_for(user)
    html = client.get("/").content.decode()
    assert f'title="Element 2 of array {array_id}: list the array\'s elements" data-testid="array-label">{array_id}_2</a>' in html
    only = client.get("/", {"array": array_id}).content.decode()
    assert listed(only) == sorted((j["id"] for j in jobs), reverse=True)
    assert f"The elements of array {array_id}." in only and f'name="array" value="{array_id}"' in only  # kept by the form
    page = client.get(f"/jobs/{jobs[1]['id']}/").content.decode()
    assert f"element 1 of array {array_id} (<code>{array_id}_1</code>)" in page
    assert f'<a href="/?array={array_id}">its elements</a>' in page
    assert "array" not in client.get(f"/jobs/{other.pk}/").content.decode().split('<dl class="facts">', 1)[1].split("</dl>", 1)[0]


def test_a_requeued_jobs_wait_counts_from_its_requeue_and_a_held_one_says_held(user: Any) -> None:
    """A job preempted after 10 minutes of running read "waiting 10 minutes" the moment it was back in the queue."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import JobEvent

    now = timezone.now()
    requeued = JobFactory(owner=user, submitted_at=now - timedelta(minutes=12))
    JobEvent.objects.create(job=requeued, at=now - timedelta(minutes=12), from_state="", to_state="PENDING", reason="Submitted.")
    JobEvent.objects.create(job=requeued, at=now - timedelta(minutes=11), from_state="PENDING", to_state="RUNNING", reason="Started.")
    JobEvent.objects.create(job=requeued, at=now - timedelta(minutes=1), from_state="RUNNING", to_state="PREEMPTED", reason="Preempted.")
    JobEvent.objects.create(job=requeued, at=now - timedelta(minutes=1), from_state="PREEMPTED", to_state="PENDING", reason="Requeued.")
    held = JobFactory(owner=user, submitted_at=now - timedelta(hours=2), hold="owner")
    JobEvent.objects.create(job=held, at=now - timedelta(hours=2), from_state="", to_state="PENDING", reason="Submitted.")
    JobEvent.objects.create(job=held, at=now - timedelta(minutes=30), from_state="PENDING", to_state="PENDING", reason="Held by alice.")
    html = session_for(user).get("/").content.decode()

    def time_cell(job: Any) -> str:
        row = html.split(f'<tr data-job="{job.pk}">', 1)[1].split("</tr>", 1)[0]
        return re.sub(r"<[^>]+>", "", row.split('data-testid="job-time">', 1)[1].split("</td>", 1)[0]).replace("\xa0", " ")

    assert time_cell(requeued) == "waiting 1 minute"
    assert time_cell(held) == "held 30 minutes"


def nothing_listed(html: str) -> str:
    """What an empty list says, as read (tags dropped)."""
    said = re.search(r'<p class="empty" data-testid="nothing-listed">(.*?)</p>', html, re.S)
    assert said, "the empty list says nothing"
    return re.sub(r"<[^>]+>", "", said.group(1)).replace("\u201c", '"').replace("\u201d", '"')


def test_a_filter_that_matched_nothing_is_named_not_no_jobs_yet(user: Any, other_user: Any) -> None:
    """/?held=true with no held job read "No jobs yet. Submit your first job" to someone with jobs; /?array=999
    headed an empty list "The elements of array 999." Each empty list names the filter that matched nothing."""
    JobFactory(owner=user, name="train")
    theirs = JobFactory(owner=other_user, array_id=77, array_index=0)
    client = session_for(user)

    def says(**query: str) -> str:
        response = client.get("/", query)
        assert response.status_code == 200, query
        html = response.content.decode()
        assert listed(html) == [] and "No jobs yet" not in html and "Submit your first job" not in html, query
        return nothing_listed(html)

    assert says(held="true") == "No held jobs. Show all."
    assert says(held="true", state="PENDING") == "No held PENDING jobs. Show all."
    assert says(held="false", state="RUNNING") == "No jobs match: state RUNNING, not held. Show all."
    assert says(state="FAILED") == "No FAILED jobs. Show all states."
    # An array there is not, or another's (which is not said to be there): not "The elements of array 999."
    for array in ("999", str(theirs.array_id)):
        html = client.get("/", {"array": array}).content.decode()
        assert nothing_listed(html) == f"No array {array} (or none that you may see). Show all."
        assert "The elements of array" not in html and 'data-testid="array-note"' not in html
    assert says(name="eval", state="RUNNING", held="true") == 'No jobs match: name containing "eval", state RUNNING, held. Show all.'
    # The form keeps ?held= as it keeps ?array=, so a name typed beside it still lists the held jobs only.
    assert '<input type="hidden" name="held" value="true">' in client.get("/", {"held": "true"}).content.decode()
    # With no filter and no job at all, the first job is what is missing.
    newcomer = session_for(other_user)
    theirs.delete()
    assert nothing_listed(newcomer.get("/").content.decode()).startswith("No jobs yet. Submit your first job")


def test_a_held_job_is_listed_by_held_true_and_an_arrays_elements_are_headed_by_it(user: Any) -> None:
    held = JobFactory(owner=user, hold="owner")
    JobFactory(owner=user)
    element = JobFactory(owner=user, array_id=5, array_index=3)
    client = session_for(user)
    assert listed(client.get("/", {"held": "true"}).content.decode()) == [held.pk]
    html = client.get("/", {"array": "5"}).content.decode()
    assert listed(html) == [element.pk] and "The elements of array 5." in html
