"""`muster requeue` (scontrol requeue / requeuehold) against the server in this process."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job
from tests.client.cli_run import run_live as run
from tests.conftest import SimHarness

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def test_requeue_stops_a_running_job_and_requeue_hold_keeps_it_from_starting(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    ids = []
    for name in ("a", "b"):
        code, out, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", name, "--", "python", "t.py")
        assert code == 0, err
        ids.append(int(re.search(r"(\d+)", out).group(1)))  # type: ignore[union-attr]
    tx_sim.cycle()
    tx_sim.advance(2)
    code, out, err = run(capsys, "requeue", str(ids[0]), "--reason", "wrong learning rate")
    assert (code, err) == (0, ""), err
    assert out == f"Requeued job {ids[0]} (a): its attempt 1 was stopped; it waits in the queue again\n"
    job = Job.objects.get(pk=ids[0])
    assert (job.state, job.pending_reason) == ("PENDING", "Requeued by dana: wrong learning rate.")
    code, out, _ = run(capsys, "requeue", "--hold", str(ids[1]))
    assert code == 0 and out == f"Requeued job {ids[1]} (b) and held it: it is not started until `muster release {ids[1]}`\n"
    tx_sim.advance(2)
    tx_sim.advance(2)
    assert Job.objects.get(pk=ids[0]).state == "RUNNING" and Job.objects.get(pk=ids[0]).attempt == 2
    assert Job.objects.get(pk=ids[1]).state == "PENDING"  # held
    # A pending job is refused, said on stderr, exit code 5; the others named are still requeued.
    code, out, err = run(capsys, "requeue", str(ids[1]), str(ids[0]))
    assert code == 5
    assert err == f"muster: error: Job {ids[1]} is PENDING: only a placed or running job can be requeued; it is queued already.\n"
    assert out.startswith(f"Requeued job {ids[0]} (a)")


def test_requeue_of_an_arrays_id_requeues_its_running_elements_as_scontrol_does(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", IMAGE, "-J", "arr", "--array", "0-2", "--", "x")
    assert code == 0, err
    array_id = int(re.search(r"Submitted array (\d+)", out).group(1))  # type: ignore[union-attr]
    tx_sim.cycle()
    tx_sim.advance(2)
    code, out, err = run(capsys, "requeue", f"{array_id}_[1-2]")
    assert (code, err) == (0, "")
    assert [line.split(":")[0] for line in out.splitlines()] == [
        f"Requeued job {array_id + 1} (arr, {array_id}_1)",
        f"Requeued job {array_id + 2} (arr, {array_id}_2)",
    ]
    assert Job.objects.get(pk=array_id).attempt == 1 and Job.objects.get(pk=array_id).state == "RUNNING"
    tx_sim.advance(2)
    tx_sim.advance(2)
    code, out, _ = run(capsys, "requeue", str(array_id))
    assert code == 0 and len(out.splitlines()) == 3
