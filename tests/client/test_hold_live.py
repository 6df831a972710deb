"""`muster hold` / `muster release` against the server in this process, as a user types them."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job
from jobs.services import job_hold
from jobs.states import JobState
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(capsys: pytest.CaptureFixture[str], *extra: str) -> str:
    code, out, err = run(capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "-J", "tune", *extra, "--", "python", "t.py")
    assert code == 0, err
    return re.search(r"(\d+)", out).group(1)  # type: ignore[union-attr]


def test_hold_then_release_from_the_cli(signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]) -> None:
    job_id = submit(capsys)
    code, out, err = run(capsys, "hold", job_id)
    assert code == 0, err
    assert out.strip() == f"Held job {job_id} (tune): it is not started until `muster release {job_id}`"
    assert tx_sim.cycle().placed == []
    code, out, _ = run(capsys, "queue")
    assert re.search(rf"^\s*{job_id}\b.*\bHELD\b", out, re.M), out
    code, out, _ = run(capsys, "why", job_id)
    assert "Held by its owner (dana) at " in out and f"`muster release {job_id}` lets it start. [HELD]" in out
    code, out, err = run(capsys, "release", job_id)
    assert code == 0, err
    assert out.strip() == f"Released job {job_id} (tune): it may start from the next scheduling cycle"
    assert tx_sim.cycle().placed == [int(job_id)]
    code, _, err = run(capsys, "hold", job_id)
    assert code == 5 and err.strip() == (
        f"muster: error: Job {job_id} is SCHEDULED: only a pending job can be held (it has been placed; cancel it to stop it)."
    )


def test_an_admins_hold_is_refused_to_its_owner(
    signed_in: Any, tx_sim: SimHarness, admin_user: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    job_id = submit(capsys)
    job_hold(job=Job.objects.get(pk=job_id), by=admin_user)
    code, _, err = run(capsys, "release", job_id)
    assert code == 4  # refused to you (403), as any command's
    assert err.strip() == f"muster: error: not allowed: Job {job_id} is held by an admin (root); only an admin can release it."
    assert Job.objects.get(pk=job_id).hold == "admin"


def test_an_array_is_held_and_released_element_by_element(signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "submit", "-G", "1", "-t", "1h", "--image", IMAGE, "--array", "0-2", "--", "python", "s.py")
    assert code == 0, err
    array_id = int(re.match(r"Submitted array (\d+):", out).group(1))  # type: ignore[union-attr]
    code, out, err = run(capsys, "hold", str(array_id))
    assert code == 0, err
    assert len(out.strip().splitlines()) == 3
    assert set(Job.objects.filter(array_id=array_id).values_list("hold", flat=True)) == {"user"}
    code, out, err = run(capsys, "release", f"{array_id}_1")
    assert code == 0, err
    tx_sim.cycle()
    started = Job.objects.filter(array_id=array_id).exclude(state=JobState.PENDING)
    assert [job.array_index for job in started] == [1]


def test_holding_a_job_an_admin_holds_says_so_and_holds_nothing(
    signed_in: Any, tx_sim: SimHarness, admin_user: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """It said "Held job 13 ...", exit 0; then `muster release 13` said only an admin can release it."""
    job_id = submit(capsys)
    job_hold(job=Job.objects.get(pk=job_id), by=admin_user)
    code, out, err = run(capsys, "hold", job_id)
    assert (code, out) == (5, "")
    assert err == f"muster: error: Job {job_id} is already held by an admin (root); only an admin can release it.\n"
    assert Job.objects.get(pk=job_id).hold == "admin"
