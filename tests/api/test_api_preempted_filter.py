"""`?state=PREEMPTED`: no job stays PREEMPTED (jobs.lifecycle.job_preempt requeues it at once), so it lists the jobs
waiting again after a preemption, through the API, the Jobs page and `muster jobs --state`; never an empty answer."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode, urlsplit

import pytest
from django.utils import timezone
from muster_client import cli, commands
from muster_client.client import Client

from jobs.lifecycle import job_preempt, job_requeue
from jobs.models import Job
from tests.client.fakes import response
from tests.conftest import client_for, session_for
from tests.jobs.factories import JobFactory

JOBS = "/api/v1/jobs/"


@pytest.fixture
def jobs(user: Any) -> dict[str, Job]:
    """One job of each kind a PREEMPTED filter must tell apart, all the user's, through the real lifecycle."""
    now = timezone.now()
    preempted = job_preempt(JobFactory(owner=user, running=True, history=True), reason="For job 99.", for_job_id=99, now=now)
    # A cycle since then wrote its own reason: it is still a job waiting again after a preemption.
    Job.objects.filter(pk=preempted.pk).update(pending_reason_code="NO_ROOM", pending_reason="No room.")
    requeued = job_requeue(JobFactory(owner=user, running=True, history=True), now=now, why="Its node went away.")
    # Preempted once, placed again since: running, not preempted now.
    again = job_preempt(JobFactory(owner=user, running=True, history=True), reason="For job 98.", for_job_id=98, now=now)
    Job.objects.filter(pk=again.pk).update(state="RUNNING")
    again.events.create(at=now, from_state="PENDING", to_state="SCHEDULED", reason="placed", attempt=2)
    return {
        "preempted": preempted,
        "requeued": requeued,
        "again": again,
        "new": JobFactory(owner=user, queued=True, history=True),
        "done": JobFactory(owner=user, finished=True, history=True),
    }


def ids(response: Any) -> set[int]:
    assert response.status_code == 200, response.content
    return {job["id"] for job in response.json()["results"]}


def test_the_api_lists_the_jobs_waiting_again_after_a_preemption(user: Any, jobs: dict[str, Job]) -> None:
    api = client_for(user)
    assert ids(api.get(JOBS, {"state": "PREEMPTED"})) == {jobs["preempted"].pk}
    assert ids(api.get(JOBS, {"state": "preempted"})) == {jobs["preempted"].pk}
    (found,) = api.get(JOBS, {"state": "PREEMPTED"}).json()["results"]
    assert found["state"] == "PENDING"  # what it is; the filter found it by how it came back to the queue
    # With other states: either.
    assert ids(api.get(f"{JOBS}?state=PREEMPTED&state=SUCCEEDED")) == {jobs["preempted"].pk, jobs["done"].pk}
    assert ids(api.get(f"{JOBS}?state=PREEMPTED&state=PENDING")) == {jobs[k].pk for k in ("preempted", "requeued", "new")}


def test_another_users_preempted_job_is_not_listed(other_user: Any, jobs: dict[str, Job]) -> None:
    assert ids(client_for(other_user).get(JOBS, {"state": "PREEMPTED"})) == set()


def test_the_jobs_page_lists_them_and_says_what_preempted_means(user: Any, jobs: dict[str, Job]) -> None:
    html = session_for(user).get("/", {"state": "PREEMPTED"}).content.decode()
    assert [int(pk) for pk in re.findall(r'<tr data-job="(\d+)"', html)] == [jobs["preempted"].pk]
    assert "PREEMPTED lists the jobs waiting again (PENDING) after a preemption." in html
    assert '<option value="PREEMPTED" selected>' in html


class DjangoSession:
    """requests.Session.request answered in-process by Django's test client, for the `muster` command."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def request(self, method: str, url: str, *, params: Any = None, **_kwargs: Any) -> Any:
        parts = urlsplit(url)
        answer = self.client.generic(method, f"{parts.path}?{parts.query or urlencode(params or {}, doseq=True)}")
        return response(answer.status_code, answer.json())


def muster(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, user: Any, *argv: str) -> tuple[int, str, str]:
    session = DjangoSession(client_for(user))
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://testserver", "token", session=session))  # type: ignore[arg-type]
    code = cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_muster_jobs_lists_them_and_says_what_its_preempted_state_lists(
    user: Any, jobs: dict[str, Job], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, _ = muster(capsys, monkeypatch, user, "jobs", "--state", "preempted")
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:]] == [str(jobs["preempted"].pk)]
    with pytest.raises(SystemExit):
        cli.main(["jobs", "--help"])
    assert "PREEMPTED (PR): the PENDING jobs waiting again after a preemption" in " ".join(capsys.readouterr().out.split())


def test_muster_jobs_with_a_state_there_is_not_says_the_states_there_are(
    user: Any, jobs: dict[str, Job], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    code, out, err = muster(capsys, monkeypatch, user, "jobs", "--state", "RUNING")
    assert code != 0 and out == ""
    states = "PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT, PREEMPTED"
    assert f"state: Unknown state RUNING; the states are {states}." in err
