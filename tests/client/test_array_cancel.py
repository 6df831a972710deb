"""`muster cancel` of a job array, as scancel reads it (`4`: every element, `4_2`: one, `4_[1-3]`: some), against the
server in this process: one request per array (`POST /api/v1/jobs/cancel-array/`), all or nothing; and a throttled
cancel sent again."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from muster_client import commands, config
from muster_client.client import Client

from jobs.models import Job
from jobs.states import JobState
from tests.client.cli_run import run
from tests.client.fakes import FakeSession, response
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit_array(capsys: pytest.CaptureFixture[str], indices: str = "0-3") -> tuple[int, list[Job]]:
    code, out, err = run(
        capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "-J", "sweep", "--array", indices, "--", "python", "s.py"
    )
    assert code == 0, err
    array_id = int(re.match(r"Submitted array (\d+):", out).group(1))  # type: ignore[union-attr]
    return array_id, list(Job.objects.filter(array_id=array_id).order_by("array_index"))


def said(err: str) -> list[str]:
    """The command's own lines (the server in this process logs its 4xx answers to the same stderr)."""
    return [line for line in err.splitlines() if line.startswith("muster:")]


def states(jobs: list[Job]) -> list[str]:
    return [Job.objects.get(pk=job.pk).state for job in jobs]


def test_an_arrays_id_cancels_every_element_left_and_id_index_one(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    array_id, elements = submit_array(capsys)
    tx_sim.cycle()
    tx_sim.advance(2)
    assert set(states(elements)) == {JobState.RUNNING}
    # One element, by its index: only it.
    code, out, err = run(capsys, "cancel", f"{array_id}_1")
    assert (code, err) == (0, "")
    assert out == f"Cancelled job {elements[1].pk} (sweep): {array_id}_1\n"
    assert states(elements) == [JobState.RUNNING, JobState.CANCELLED, JobState.RUNNING, JobState.RUNNING]
    # Again: it has ended; and an index the array lacks is said, with where its indices are.
    code, _, err = run(capsys, "cancel", f"{array_id}_1", f"{array_id}_9")
    assert code == 5
    assert said(err) == [
        f"muster: error: job {elements[1].pk} ({array_id}_1) has already ended (CANCELLED); there is nothing to cancel.",
        f"muster: error: array {array_id} has no element 9 (its elements and their indices: muster jobs --array {array_id}).",
    ]
    # The array's id: every element not ended, as `scancel 1234` does.
    code, out, err = run(capsys, "cancel", str(array_id))
    assert (code, err) == (0, "")
    assert out == f"Cancelled array {array_id} (sweep): 3 jobs ({array_id}_[0,2-3]); 1 had already ended\n"
    assert set(states(elements)) == {JobState.CANCELLED}
    code, out, err = run(capsys, "cancel", str(array_id))
    assert (code, out) == (5, "")
    assert said(err) == [f"muster: error: array {array_id} has ended: its 4 jobs had already ended; there is nothing to cancel."]


def test_some_elements_by_their_indices_and_a_plain_job_as_before(signed_in: Any, capsys: pytest.CaptureFixture[str]) -> None:
    array_id, elements = submit_array(capsys, "0-5")
    code, out, _ = run(capsys, "cancel", f"{array_id}_[1-2,4]")
    assert code == 0 and out == f"Cancelled 3 jobs of array {array_id} (sweep): {array_id}_[1-2,4]\n"
    assert states(elements) == [
        JobState.PENDING,
        JobState.CANCELLED,
        JobState.CANCELLED,
        JobState.PENDING,
        JobState.CANCELLED,
        JobState.PENDING,
    ]
    # An element by its own job id is that job alone (named as scancel names it too); so is a job of no array.
    code, out, _ = run(capsys, "cancel", str(elements[3].pk))
    assert code == 0 and out == f"Cancelled job {elements[3].pk} (sweep): {array_id}_3\n"
    assert states(elements)[0] == JobState.PENDING
    code, out, err = run(capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "-J", "single", "--json", "--", "python", "a.py")
    assert code == 0, err
    single = Job.objects.get(name="single")
    code, out, _ = run(capsys, "cancel", str(single.pk))
    assert code == 0 and out == f"Cancelled job {single.pk} (single)\n"
    # What is not an array or a job id is a usage error naming the forms.
    code, _, err = run(capsys, "cancel", f"{array_id}_x")
    assert code == 2 and "write 42, 42_7 (element 7 of array 42) or 42_[1-3,8]" in err


def test_another_users_array_is_not_there(signed_in: Any, django_user_model: Any, capsys: pytest.CaptureFixture[str]) -> None:
    array_id, elements = submit_array(capsys, "0-1")
    Job.objects.filter(array_id=array_id).update(owner=django_user_model.objects.create_user(username="erin"))
    code, _, err = run(capsys, "cancel", f"{array_id}_1", str(array_id))
    assert code == 5
    assert said(err) == [
        f"muster: error: No array {array_id} (or none that you may see).",
        f"muster: error: No job {array_id} (or none that you may see).",
    ]
    assert set(states(elements)) == {JobState.PENDING}


def test_an_index_the_array_lacks_cancels_none_of_the_others(signed_in: Any, capsys: pytest.CaptureFixture[str]) -> None:
    array_id, elements = submit_array(capsys, "0-3")
    code, out, err = run(capsys, "cancel", f"{array_id}_[1,9-10]")
    assert (code, out) == (5, "")
    assert said(err) == [
        f"muster: error: array {array_id} has no elements 9-10 (its elements and their indices: muster jobs --array "
        f"{array_id}); nothing was cancelled."
    ]
    assert set(states(elements)) == {JobState.PENDING}
    code, out, err = run(capsys, "cancel", "--json", f"{array_id}_[1-2]")
    assert (code, err) == (0, "")
    assert [job["array_index"] for job in json.loads(out)["cancelled"]] == [1, 2]


def test_an_array_is_one_request_and_a_throttled_one_is_sent_again_after_the_wait_the_server_asks(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server answers 429 with Retry-After (the user's writes spent elsewhere): the cancel is sent again, since a
    second one cancels nothing twice."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    config.save_token("http://muster.test:8000", "secret")
    element = {"name": "sweep", "state": "PENDING"}
    page = {"count": 2, "next": None, "results": [{**element, "id": 4, "array_index": 0}, {**element, "id": 5, "array_index": 1}]}
    done = {**element, "state": "CANCELLED"}
    cancelled = {"array_id": 4, "name": "sweep", "cancelled": [{**done, "id": 4, "array_index": 0}, {**done, "id": 5, "array_index": 1}]}
    session = FakeSession(
        response(200, page),  # is 4 an array?
        response(429, {"detail": "Request was throttled."}, headers={"Retry-After": "7"}),
        response(200, {**cancelled, "ended": []}),
    )
    slept: list[float] = []
    monkeypatch.setattr(
        commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session, sleep=slept.append)
    )  # type: ignore[arg-type]
    code, out, err = run(capsys, "cancel", "4")
    assert (code, err) == (0, "") and out == "Cancelled array 4 (sweep): 2 jobs (4_[0-1])\n"
    assert slept == [7.0]
    sent = [(s["method"], s["url"].rsplit("/api/v1/", 1)[1], s.get("json")) for s in session.sent[1:]]
    assert sent == [("POST", "jobs/cancel-array/", {"array_id": 4})] * 2


def test_several_plain_jobs_are_cancelled_in_one_request_and_the_others_said(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """`muster cancel 28 29 30`: 30 was placed on the nodes cancelling 28 and 29 freed, then cancelled the same second."""
    ids = []
    for name in ("a", "b", "c"):
        code, out, err = run(capsys, "submit", "-N", "8", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", name, "--", "python", "t.py")
        assert code == 0, err
        ids.append(int(re.search(r"\d+", out).group()))  # type: ignore[union-attr]
    tx_sim.cycle()
    assert states([Job(pk=i) for i in ids]) == [JobState.SCHEDULED, JobState.SCHEDULED, JobState.PENDING]
    code, out, err = run(capsys, "cancel", *map(str, ids), "999999", "--reason", "wrong data")
    assert code == 5
    assert out.splitlines() == [f"Cancelled job {ids[0]} (a)", f"Cancelled job {ids[1]} (b)", f"Cancelled job {ids[2]} (c)"]
    assert said(err) == ["muster: error: No job 999999 (or none that you may see)."]
    tx_sim.cycle()
    assert set(states([Job(pk=i) for i in ids])) == {JobState.CANCELLED}
    assert not Job.objects.get(pk=ids[2]).events.filter(to_state=JobState.SCHEDULED).exists()
    assert Job.objects.get(pk=ids[2]).state_reason == "Cancelled by dana: wrong data."
