"""What the CLI says of quotas on running jobs, against the server in this process: a job borrowing beyond its quota
(the API's `over_quota`, the first to be preempted) and an account above a quota lowered under its running jobs. The
API said both; `muster queue`, `jobs`, `show` and `usage` printed nothing of them ("64/16" with no words)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_client import cli

from jobs.models import Job
from quotas.models import Quota
from tests.conftest import SimHarness

LEGEND = (
    "+ borrowing: holds GPUs beyond its quota (a preemptible job on idle GPUs), so it is preempted first when the "
    "quota's own jobs need them"
)


def submit(capsys: pytest.CaptureFixture[str], *flags: str) -> int:
    assert cli.main(["submit", "-t", "1h", "--image", "busybox:1.36", "--json", *flags, "--", "python", "x.py"]) == 0
    return int(json.loads(capsys.readouterr().out)["id"])


def test_a_job_borrowing_beyond_its_quota_is_marked_and_explained(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    Quota.objects.create(user=signed_in, max_gpus=8)
    within = submit(capsys, "-N", "1", "-G", "8")
    borrower = submit(capsys, "-N", "2", "-G", "8", "--preemptible")
    tx_sim.cycle()
    tx_sim.advance(2)
    assert Job.objects.get(pk=borrower).over_quota and not Job.objects.get(pk=within).over_quota

    assert cli.main(["queue"]) == 0
    lines = capsys.readouterr().out.splitlines()
    states = {line.split()[0]: line.split()[3] for line in lines[1:3]}
    assert states == {str(within): "RUNNING", str(borrower): "RUNNING+"}
    assert lines[3] == "0 pending; 2 running, 0 starting; 1 borrowing beyond quota (16 GPUs, preempted first)"
    assert lines[4:] == [LEGEND]

    assert cli.main(["jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[3] for line in lines[1:3]] == ["RUNNING+", "RUNNING"]  # newest first
    assert lines[3:] == [LEGEND]

    assert cli.main(["show", str(borrower)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert "borrowing       yes: it holds GPUs beyond its quota, so it is preempted first when the quota's own jobs need them" in shown
    assert cli.main(["show", str(within)]) == 0
    assert not [line for line in capsys.readouterr().out.splitlines() if line.startswith("borrowing")]


def test_an_account_above_a_quota_lowered_under_its_running_jobs_is_said(
    signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]
) -> None:
    quota = Quota.objects.create(user=signed_in, max_gpus=16)
    submit(capsys, "-N", "2", "-G", "8")
    tx_sim.cycle()
    tx_sim.advance(2)
    quota.max_gpus = 8  # lowered under the running job, which is not stopped
    quota.save()

    assert cli.main(["usage"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].split()[:3] == ["user", "dana", "16/8"]
    assert lines[-1] == (
        "user dana is above its GPU quota: it holds 16 GPUs of 8 (the quota was lowered under its running jobs: they are "
        "not stopped, and no new job of it starts until it is under)."
    )

    assert cli.main(["queue"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Above a quota lowered under their running jobs (not stopped; nothing new of theirs starts until under it): user dana "
        "holds 16 GPUs of its quota of 8."
    )


def test_no_jobs_says_0_jobs_not_a_header_alone(signed_in: Any, tx_sim: SimHarness, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["jobs", "-s", "PR"]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["0 jobs"]
