"""`muster cancel` by filter, as scancel -n / -u / -t: the jobs not ended that match, in one request; by default only
your own; the name matched whole; with ids, only among those."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from muster_client import config

from accounts.services import token_create
from jobs.models import Job
from jobs.states import JobState
from tests.client.cli_run import run, run_live
from tests.conftest import SimHarness, client_for, job_payload

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(capsys: pytest.CaptureFixture[str], name: str, *more: str) -> int:
    code, out, err = run_live(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", name, *more, "--", "python", "t.py")
    assert code == 0, err
    return int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]


def state(job_id: int) -> str:
    return Job.objects.get(pk=job_id).state


def test_cancel_by_name_and_state_takes_only_your_matching_jobs(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    # The first two run; those submitted after the cycle stay pending (no cycle runs again here).
    running = submit(capsys, "sweep")
    other_running = submit(capsys, "train")
    tx_sim.cycle()
    tx_sim.advance(2)
    pending = submit(capsys, "sweep")
    longer_name = submit(capsys, "sweep-big")
    # Someone else's job of the same name, pending: never touched by dana's filter.
    erin = django_user_model.objects.create_user(username="erin", password="x")
    response = client_for(erin).post("/api/v1/jobs/", job_payload(name="sweep"), format="json")
    assert response.status_code == 201, response.content
    erins = response.json()["id"]
    assert state(running) == JobState.RUNNING and state(pending) == JobState.PENDING

    code, out, err = run_live(capsys, "cancel", "-n", "sweep", "-t", "PD")
    assert (code, err) == (0, "")
    assert out == f"Cancelled job {pending} (sweep)\n"
    assert [state(j) for j in (running, other_running, pending, longer_name, erins)] == [
        JobState.RUNNING,
        JobState.RUNNING,
        JobState.CANCELLED,
        JobState.PENDING,
        JobState.PENDING,
    ]
    # Nothing left to match: said, and nothing cancelled; a script is not failed for it, as scancel.
    code, out, err = run_live(capsys, "cancel", "-n", "sweep", "-t", "PENDING", "--json")
    assert code == 0
    assert json.loads(out)["cancelled"] == []
    assert err == "muster: no pending job of yours named sweep; nothing was cancelled.\n"
    # With ids, only among them.
    code, out, err = run_live(capsys, "cancel", "-t", "R", str(other_running), str(longer_name))
    assert (code, out) == (0, f"Cancelled job {other_running} (train)\n")
    assert err == f"muster: job {longer_name} (sweep-big) was not cancelled: pending, not running (-t).\n"
    assert state(longer_name) == JobState.PENDING and state(running) == JobState.RUNNING
    # Every one of your jobs left, running or not.
    code, out, _ = run_live(capsys, "cancel", "-u", "dana")
    assert code == 0
    assert out.splitlines() == [f"Cancelled job {running} (sweep)", f"Cancelled job {longer_name} (sweep-big)"]
    assert state(erins) == JobState.PENDING
    # Someone else's jobs are not yours to cancel, said as a cancel (the job list's words were "You can list only...").
    code, _, err = run_live(capsys, "cancel", "-u", "erin")
    assert code == 5
    assert err == "muster: error: you may cancel only your own jobs (you are dana), not erin's: only an admin may; nothing was cancelled.\n"
    assert state(erins) == JobState.PENDING


def test_an_admins_cancel_by_filter_says_whose_jobs_it_looked_at(
    signed_in: Any, tx_sim: SimHarness, django_user_model: Any, live_server: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each message of an admin's `muster cancel -n/-u/-t` in words: whose jobs, in which states, named what."""
    danas = [submit(capsys, "sweep"), submit(capsys, "sweep")]
    admin = django_user_model.objects.create_user(username="root", password="x", is_staff=True)
    config.save_token(live_server.url, token_create(user=admin, name="cli").secret)

    # Without -u, the admin's own jobs only: none, and it says whose do match.
    code, out, err = run_live(capsys, "cancel", "-n", "sweep")
    assert (code, out) == (0, "")
    assert err == (
        "muster: no pending, starting or running job of yours named sweep; nothing was cancelled (2 jobs of dana match, "
        "but without -u only your own are cancelled: -u dana for dana's).\n"
    )
    code, out, err = run_live(capsys, "cancel", "-u", "root")
    assert (code, out, err) == (0, "", "muster: no pending, starting or running job of yours; nothing was cancelled.\n")
    code, out, err = run_live(capsys, "cancel", "-u", "dana", "-t", "R")
    assert (code, out, err) == (0, "", "muster: no running job of dana's; nothing was cancelled.\n")
    code, _, err = run_live(capsys, "cancel", "-u", "nosuch")
    assert code == 5
    assert err == "muster: error: Unknown owner nosuch; the owners of jobs are dana; nothing was cancelled.\n"
    code, out, err = run_live(capsys, "cancel", "-u", "dana", "-n", "sweep")
    assert (code, err) == (0, "")
    assert out.splitlines() == [f"Cancelled job {job_id} (sweep)" for job_id in danas]
    assert [state(job_id) for job_id in danas] == [JobState.CANCELLED] * 2


def test_an_arrays_elements_cancelled_by_filter_are_named_as_scancel_names_them(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run_live(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", "sweep", "--array", "0-1", "--", "x")
    assert code == 0, err
    array_id = int(re.search(r"Submitted array (\d+)", out).group(1))  # type: ignore[union-attr]
    code, out, _ = run_live(capsys, "cancel", "-n", "sweep")
    assert code == 0
    assert out.splitlines() == [f"Cancelled job {array_id} (sweep): {array_id}_0", f"Cancelled job {array_id + 1} (sweep): {array_id}_1"]


def test_cancel_without_ids_or_a_filter_is_refused(signed_in: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_live(capsys, "cancel")
    assert code != 0
    assert "name the jobs to cancel (IDs), or filter them: --name, --user, --state" in err
    # An empty name names no job: refused as muster queue -n "" is, not a search for it.
    code, out, err = run(capsys, "cancel", "-n", " ")
    assert code == 2 and out == "" and "' ' names no job: -n NAME, a job's whole name" in err


def test_more_matches_than_one_request_takes_are_cancelled_in_several(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`muster cancel -n bulk` of 1,020 jobs cancelled none: the server takes 1,000 ids a request (here 2)."""
    from muster_client import commands

    monkeypatch.setattr(commands, "CANCEL_MANY", 2)
    code, out, err = run_live(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", "bulk", "--array", "0-4", "--", "x")
    assert code == 0, err
    code, out, err = run_live(capsys, "cancel", "-n", "bulk")
    assert (code, err) == (0, "")
    assert len(out.splitlines()) == 5
    assert set(Job.objects.filter(name="bulk").values_list("state", flat=True)) == {JobState.CANCELLED}


def test_a_cancel_by_name_of_jobs_named_by_id_says_which_were_left_out_and_why(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    """`scancel -n arr2 14_9` cancels 14_9 only if it is named arr2. `muster cancel -n arr2 14_9` of an element named
    arr said "no ... job of yours named arr2 among jobs 14_[9]", and with another id that matched, nothing of it."""
    code, out, err = run_live(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", "arr", "--array", "0-2", "--", "x")
    assert code == 0, err
    array_id = int(re.search(r"Submitted array (\d+)", out).group(1))  # type: ignore[union-attr]
    arr2 = submit(capsys, "arr2")

    code, out, err = run_live(capsys, "cancel", "-n", "arr2", f"{array_id}_1", str(arr2))
    assert (code, out) == (0, f"Cancelled job {arr2} (arr2)\n")
    assert err == f"muster: job {array_id + 1} ({array_id}_1) was not cancelled: named arr, not arr2 (-n).\n"
    assert state(array_id + 1) == JobState.PENDING and state(arr2) == JobState.CANCELLED

    # The whole array named: its elements left out for one reason are said on one line, as scancel names them (and
    # each once, though 1 is named twice).
    code, out, err = run_live(capsys, "cancel", "-n", "arr2", str(array_id), f"{array_id}_1", str(arr2))
    assert (code, out) == (0, "")
    assert err == (
        f"muster: jobs {array_id}_[0-2] were not cancelled: named arr, not arr2 (-n).\n"
        f"muster: job {arr2} (arr2) was not cancelled: ended already (CANCELLED).\n"
        "muster: nothing was cancelled.\n"
    )
    code, out, err = run_live(capsys, "cancel", "-t", "R", f"{array_id}_[0,2]")
    assert (code, out) == (0, "")
    assert err == f"muster: jobs {array_id}_[0,2] were not cancelled: pending, not running (-t).\nmuster: nothing was cancelled.\n"
    # An id that names no job is refused, as without a filter.
    code, out, err = run_live(capsys, "cancel", "-n", "arr", f"{array_id}_9")
    assert (code, out) == (5, "")
    assert err.startswith(f"muster: error: No job {array_id}_9: array {array_id} has no element 9")
    assert [state(array_id + i) for i in range(3)] == [JobState.PENDING] * 3
