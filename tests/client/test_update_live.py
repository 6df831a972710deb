"""`muster update` (scontrol update) against the server in this process: a pending job's wall time, name, class,
restarts and preemptibility, an array's pending elements in one request, and refusals said in words."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User

from jobs.models import Job
from quotas.models import Quota
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submitted(capsys: pytest.CaptureFixture[str], *flags: str) -> int:
    code, out, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, *flags, "--", "python", "t.py")
    assert code == 0, err
    return int(re.search(r"(\d+)", out).group(1))  # type: ignore[union-attr]


def test_update_changes_a_pending_job_and_refuses_what_the_owners_limits_do_not_allow(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    Quota.objects.create(user=User.objects.get(username="dana"), max_wall_time_seconds=4 * 3600)
    job_id = submitted(capsys, "-J", "train")
    code, out, err = run(capsys, "update", str(job_id), "--time", "2:00:00", "-J", "train-v2", "--preemptible")
    assert (code, err) == (0, ""), err
    assert out == f"Updated job {job_id} (train-v2): name train-v2, wall time 2h, preemptible; the next scheduling cycle plans it so\n"
    job = Job.objects.get(pk=job_id)
    assert (job.wall_time_seconds, job.name, job.preemptible) == (7200, "train-v2", True)
    assert job.events.last().reason == "Updated by dana: name 'train' -> 'train-v2', wall time 1 h -> 2 h, preemptible False -> True."  # type: ignore[union-attr]
    # Beyond the owner's most, and a class kept for admins: both said at once, exit code 5, nothing changed.
    code, out, err = run(capsys, "update", str(job_id), "-t", "5h", "--priority-class", "production")
    assert code == 5 and out == ""
    assert "allows at most 14400 s" in err and "The production class is kept for admins" in err
    assert Job.objects.get(pk=job_id).wall_time_seconds == 7200
    code, _, err = run(capsys, "update", str(job_id))
    assert code != 0 and "nothing to update: give --time" in err
    # Once it runs, it is refused: its wall time is not changed here.
    tx_sim.cycle()
    tx_sim.advance(2)
    code, out, err = run(capsys, "update", str(job_id), "--no-preemptible")
    assert code == 5
    assert err.startswith(f"muster: error: Job {job_id} is RUNNING: only a pending job can be updated")


def test_update_of_an_arrays_id_changes_every_pending_element_and_an_index_one(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    array_id = submitted(capsys, "-J", "sweep", "--array", "0-2")
    code, out, err = run(capsys, "update", str(array_id), "-t", "30m")
    assert (code, err) == (0, ""), err
    lines = out.splitlines()
    assert len(lines) == 3 and lines[0].startswith(f"Updated job {array_id} (sweep, {array_id}_0): wall time 30m")
    assert set(Job.objects.filter(array_id=array_id).values_list("wall_time_seconds", flat=True)) == {1800}
    code, out, err = run(capsys, "update", f"{array_id}_2", "--max-restarts", "3")
    assert (code, err) == (0, ""), err
    assert dict(Job.objects.filter(array_id=array_id).values_list("array_index", "max_restarts")) == {0: 0, 1: 0, 2: 3}
    code, out, err = run(capsys, "update", f"{array_id}_7", "-J", "x")
    assert code == 5 and f"Array {array_id} has no element 7; nothing was updated" in err


def test_update_d_replaces_what_a_job_waits_for_and_an_empty_one_clears_it(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    prep = submitted(capsys, "-J", "prep")
    array_id = submitted(capsys, "-J", "sweep", "--array", "0-2")
    job_id = submitted(capsys, "-J", "train")
    code, out, err = run(capsys, "update", str(job_id), "-d", f"afterok:{prep}:{array_id}_1")
    assert (code, err) == (0, ""), err
    assert out == (
        f"Updated job {job_id} (train): dependencies afterok:{prep} (PENDING), afterok:{array_id}_1 (PENDING); "
        "the next scheduling cycle plans it so\n"
    )
    assert Job.objects.get(pk=job_id).dependencies.count() == 2
    # A job waiting for it may not be made one it waits for: said in the server's words, nothing changed.
    code, out, err = run(capsys, "update", str(prep), "-d", f"afterany:{job_id}")
    assert code == 5 and out == ""
    assert f"Job {prep} would wait for itself: it would wait for job {job_id}, which waits for job {prep}" in err
    code, out, err = run(capsys, "update", str(job_id), "-d", "")
    assert (code, err) == (0, ""), err
    assert out == f"Updated job {job_id} (train): dependencies none; the next scheduling cycle plans it so\n"
    assert not Job.objects.get(pk=job_id).dependencies.exists()
    # An element's refusal names the element as it was named, not the array's id (it read "job 4: ..." for 4_2).
    assert run(capsys, "update", f"{array_id}_1", "-d", f"afterok:{array_id}_2")[0] == 0
    second = Job.objects.get(array_id=array_id, array_index=2).pk
    code, out, err = run(capsys, "update", f"{array_id}_2", "-d", f"afterok:{array_id}_1")
    assert code == 5 and out == ""
    assert err.startswith(f"muster: error: {array_id}_2: dependencies: Job {second} would wait for itself: it would wait for job")
