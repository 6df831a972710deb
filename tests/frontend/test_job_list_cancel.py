"""The job list's "Cancel selected" (`scancel 12 13 17` in the browser): one POST, each job checked and cancelled as
its page's Cancel does it, back to the list as it was with what was cancelled and what was not."""

from __future__ import annotations

import re
from typing import Any

from django.test import Client

from audit.models import AuditEntry
from jobs.models import Job
from jobs.states import JobState
from tests.conftest import session_for
from tests.jobs.factories import JobFactory

CANCEL = "/jobs/cancel/"


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def shown_messages(html: str) -> list[str]:
    return re.findall(r'<p class="message [a-z]+" role="status">(.*?)</p>', html, re.S)


def test_the_list_has_a_box_per_job_not_ended_and_one_for_the_page(user: Any) -> None:
    waiting, running, done = JobFactory(owner=user), JobFactory(owner=user, running=True), JobFactory(owner=user, finished=True)
    html = session_for(user).get("/", {"state": ""}).content.decode()
    boxes = re.findall(r'<input type="checkbox" name="job" value="(\d+)" form="bulk-cancel"', html)
    assert sorted(map(int, boxes)) == sorted([waiting.pk, running.pk])
    assert str(done.pk) not in boxes
    assert 'aria-label="Select all on this page"' in html
    form = re.search(r'<form method="post" action="/jobs/cancel/" id="bulk-cancel"[^>]*>(.*?)</form>', html, re.S)
    assert form and "csrfmiddlewaretoken" in form.group(1)
    # It comes back to the list as it was asked for.
    assert '<input type="hidden" name="next" value="state=">' in form.group(1)
    # A list of ended jobs only offers nothing to cancel.
    ended = session_for(user).get("/", {"state": "SUCCEEDED"}).content.decode()
    assert 'id="bulk-cancel"' not in ended and 'name="job"' not in ended


def test_cancelling_selected_jobs_says_how_many_and_returns_to_the_filtered_list(user: Any) -> None:
    jobs = [JobFactory(owner=user, name=f"sweep-{i}") for i in range(3)]
    running = JobFactory(owner=user, running=True, name="sweep-run")
    kept = JobFactory(owner=user, name="sweep-kept")
    page = session_for(user)
    asked = [*jobs, running]
    response = page.post(CANCEL, {"job": [j.pk for j in asked], "next": "name=sweep&sort=name", "confirmed": "1"})
    assert response.status_code == 302 and response["Location"] == "/?name=sweep&sort=name"
    assert all(state(j) == JobState.CANCELLED for j in asked) and state(kept) == JobState.PENDING
    said = shown_messages(page.get(response["Location"]).content.decode())
    assert said == [f"Cancelled 4 jobs: {jobs[0].pk}-{running.pk}."]
    # Each as its page's Cancel leaves it: its own reason, and no audit entry for the owner's own jobs.
    assert Job.objects.get(pk=running.pk).state_reason == "Cancelled by alice."
    assert not AuditEntry.objects.exists()


def test_ended_jobs_are_said_and_the_rest_cancelled(user: Any) -> None:
    waiting = JobFactory(owner=user)
    done = JobFactory(owner=user, finished=True)
    page = session_for(user)
    response = page.post(CANCEL, {"job": [waiting.pk, done.pk], "confirmed": "1"}, follow=True)
    assert shown_messages(response.content.decode()) == [
        f"Cancelled 1 job: {waiting.pk}.",
        f"Not cancelled, 1 job had already ended: {done.pk} (SUCCEEDED).",
    ]
    assert state(waiting) == JobState.CANCELLED and state(done) == JobState.SUCCEEDED


def test_a_researcher_cannot_cancel_someone_elses_jobs_this_way_and_learns_nothing_of_them(user: Any, other_user: Any) -> None:
    theirs = JobFactory(owner=other_user, running=True)
    mine = JobFactory(owner=user)
    missing = theirs.pk + 1000
    page = session_for(user)
    response = page.post(CANCEL, {"job": [theirs.pk, mine.pk, missing], "confirmed": "1"}, follow=True)
    said = shown_messages(response.content.decode())
    # Someone else's job reads exactly as one that does not exist, as GET /jobs/<id>/ and its cancel answer 404.
    assert said == [f"Cancelled 1 job: {mine.pk}.", f"Not cancelled, no such job (or none that you may see): {theirs.pk}, {missing}."]
    assert state(theirs) == JobState.RUNNING and state(mine) == JobState.CANCELLED
    assert page.post(f"/jobs/{theirs.pk}/cancel/").status_code == 404
    # Not even a box of it on the list.
    assert f'value="{theirs.pk}"' not in page.get("/").content.decode()


def test_an_admin_cancels_anyones_and_each_is_audited_as_a_single_cancel(admin_user: Any, user: Any, other_user: Any) -> None:
    alices, bobs = JobFactory(owner=user), JobFactory(owner=other_user, running=True)
    own = JobFactory(owner=admin_user)
    page = session_for(admin_user)
    html = page.get("/").content.decode()
    assert all(f'name="job" value="{j.pk}"' in html for j in (alices, bobs, own))
    response = page.post(CANCEL, {"job": [alices.pk, bobs.pk, own.pk], "confirmed": "1"}, REMOTE_ADDR="10.0.0.9", follow=True)
    assert shown_messages(response.content.decode()) == [f"Cancelled 3 jobs: {alices.pk}-{own.pk}."]
    entries = AuditEntry.objects.filter(action="job.cancel").order_by("job_id")
    assert [(e.job_id, e.actor_username, e.changes, e.remote_addr) for e in entries] == [
        (alices.pk, "root", {"state": ["PENDING", "CANCELLED"], "reason": ["", "Cancelled by root."]}, "10.0.0.9"),
        (bobs.pk, "root", {"state": ["RUNNING", "CANCELLED"], "reason": ["", "Cancelled by root."]}, "10.0.0.9"),
    ]  # the admin's own job is no admin action, as on its page
    assert Job.objects.get(pk=bobs.pk).state_reason == "Cancelled by root."


def test_all_on_this_page_works_without_script(user: Any) -> None:
    on_page = [JobFactory(owner=user) for _ in range(3)]
    elsewhere = JobFactory(owner=user)
    page = session_for(user)
    # The header's box posts `all`; the rows' hidden `on_page` say which jobs the page listed.
    response = page.post(CANCEL, {"all": "1", "on_page": [j.pk for j in on_page], "confirmed": "1"})
    assert response.status_code == 302
    assert [state(j) for j in on_page] == [JobState.CANCELLED] * 3 and state(elsewhere) == JobState.PENDING
    # Without `all`, the page's list alone cancels nothing.
    page.post(CANCEL, {"on_page": [elsewhere.pk], "confirmed": "1"})
    assert state(elsewhere) == JobState.PENDING


def test_without_script_the_cancel_asks_first_on_a_page_naming_the_jobs(user: Any) -> None:
    jobs = [JobFactory(owner=user, name=f"sweep-{i}") for i in range(2)]
    done = JobFactory(owner=user, finished=True)
    page = session_for(user)
    asked = page.post(CANCEL, {"job": [j.pk for j in jobs] + [done.pk], "next": "state=PENDING"})
    assert asked.status_code == 200
    html = asked.content.decode()
    assert "<h1>Cancel 2 jobs?</h1>" in html and f"Not cancelled, 1 job had already ended: {done.pk} (SUCCEEDED)." in html
    assert sorted(map(int, re.findall(r'<tr data-job="(\d+)"', html))) == [j.pk for j in jobs]
    assert '<a href="/?state=PENDING">Back to the list</a>' in html
    assert all(state(j) == JobState.PENDING for j in jobs)  # nothing yet
    form = re.search(r'<form method="post" action="/jobs/cancel/"[^>]*>(.*?)</form>', html, re.S)
    assert form and '<input type="hidden" name="confirmed" value="1">' in form.group(1)
    fields = dict(re.findall(r'<input type="hidden" name="(next|confirmed)" value="([^"]*)">', form.group(1)))
    ids = re.findall(r'<input type="hidden" name="job" value="(\d+)">', form.group(1))
    response = page.post(CANCEL, {**fields, "job": ids})
    assert response["Location"] == "/?state=PENDING"
    assert all(state(j) == JobState.CANCELLED for j in jobs)


def test_nothing_selected_or_nothing_left_is_said(user: Any) -> None:
    done = JobFactory(owner=user, finished=True)
    page = session_for(user)
    none = page.post(CANCEL, {"next": "name=x", "confirmed": "1"})
    assert none["Location"] == "/?name=x"
    assert shown_messages(page.get(none["Location"]).content.decode()) == [
        "No jobs were selected: tick the box of each job to cancel, or the box above them for the whole page."
    ]
    # Only an ended job (a stale page): no question, just why not.
    stale = page.post(CANCEL, {"job": [done.pk, "12x"]}, follow=True)
    assert shown_messages(stale.content.decode()) == [
        f"Not cancelled, 1 job had already ended: {done.pk} (SUCCEEDED).",
        "Not cancelled, not a job id: 12x.",
    ]


def test_the_cancel_is_a_csrf_protected_post_only_and_stays_on_the_list(user: Any) -> None:
    job = JobFactory(owner=user)
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(user)
    assert strict.post(CANCEL, {"job": [job.pk], "confirmed": "1"}).status_code == 403
    assert session_for(user).get(CANCEL, {"job": [job.pk]}).status_code == 405
    assert state(job) == JobState.PENDING
    assert Client().post(CANCEL, {"job": [job.pk], "confirmed": "1"}).status_code == 302  # to the sign-in page
    assert state(job) == JobState.PENDING
    # `next` is only ever read as the list's query string: never another site.
    away = session_for(user).post(CANCEL, {"job": [job.pk], "confirmed": "1", "next": "https://evil.example/"})
    assert away["Location"].startswith("/?")


def test_the_page_comes_back_to_its_last_page_when_the_cancel_emptied_it(user: Any) -> None:
    jobs = [JobFactory(owner=user) for _ in range(27)]  # two pages of 25
    page = session_for(user)
    last_page = sorted(jobs, key=lambda j: j.submitted_at)[:2]  # the oldest two, on page 2
    response = page.post(CANCEL, {"job": [j.pk for j in last_page], "next": "state=PENDING&page=2", "confirmed": "1"})
    assert response["Location"] == "/?state=PENDING&page=1"


def test_an_arrays_elements_are_named_as_the_list_names_them(user: Any, api: Any, sim: Any) -> None:
    """The message "Cancelled 2 jobs: 20-21." named raw ids where the list reads 19_7 and 19_14: which points went?"""
    from jobs.arrays import index_ranges
    from tests.conftest import job_payload

    made = api.post("/api/v1/jobs/array/", {**job_payload(name="sweep", nodes=1, gpus_per_node=1), "array": "0-2,7,14"}, format="json")
    array_id, elements = made.json()["array_id"], {job["array_index"]: job["id"] for job in made.json()["jobs"]}
    plain = JobFactory(owner=user, name="plain")
    page = session_for(user)
    response = page.post(CANCEL, {"job": [elements[7], elements[14], plain.pk], "next": "", "confirmed": "1"})
    said = shown_messages(page.get(response["Location"]).content.decode())
    assert said == [f"Cancelled 3 jobs: {plain.pk}, {array_id}_[7,14] (jobs {index_ranges([elements[7], elements[14]])})."]
    # One element alone, and one already ended, are named alike.
    response = page.post(CANCEL, {"job": [elements[0], elements[7]], "next": "", "confirmed": "1"})
    said = shown_messages(page.get(response["Location"]).content.decode())
    assert said == [
        f"Cancelled 1 job: {array_id}_0 (job {elements[0]}).",
        f"Not cancelled, 1 job had already ended: {array_id}_7 (job {elements[7]}, CANCELLED).",
    ]
