"""Slurm's spellings a Slurm user types: sbatch's --job-name and --gres=gpu:N, squeue's -j; and a bad flag said with
the command's own usage."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from muster_client import commands
from muster_client.client import Client

from tests.client.cli_run import run
from tests.client.fakes import FakeSession, response
from tests.client.test_cli_offline import QUEUE_PAGE, _on_nodes


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MUSTER_URL", "MUSTER_TOKEN", "MUSTER_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def _session(monkeypatch: pytest.MonkeyPatch, *answers: Any) -> FakeSession:
    session = FakeSession(*answers)
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session))  # type: ignore[arg-type]
    return session


SUBMIT = ["submit", "-t", "1h", "--image", "busybox:1.36", "--dry-run"]


def test_submit_takes_sbatchs_job_name_and_gres_gpu(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch, response(200, {"valid": True, "count": 1}))
    code, out, err = run(capsys, *SUBMIT, "--job-name", "foo", "--gres=gpu:4", "--", "python", "train.py")
    assert (code, err) == (0, "")
    assert session.sent[0]["json"]["name"] == "foo" and session.sent[0]["json"]["gpus_per_node"] == 4
    assert "It fits the cluster and your limits" in out
    # `--gres=gpu` alone is one GPU, as in sbatch; the same count as -G is no conflict.
    session = _session(monkeypatch, response(200, {"valid": True, "count": 1}), response(200, {"valid": True, "count": 1}))
    assert run(capsys, *SUBMIT, "--gres", "gpu", "--", "python", "x.py")[0] == 0
    assert run(capsys, *SUBMIT, "-G", "8", "--gres=gpu:8", "--", "python", "x.py")[0] == 0
    assert [sent["json"]["gpus_per_node"] for sent in session.sent] == [1, 8]


def test_a_gpu_model_in_gres_is_refused_naming_what_to_write(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *SUBMIT, "--gres=gpu:h100:8", "--", "python", "train.py")
    assert (code, out) == (2, "")
    assert err.startswith("usage: muster submit")
    assert "'gpu:h100:8' names a GPU model (h100), and Muster cannot be asked for one" in err
    assert "Ask for the count only: --gres=gpu:8 (or -G 8)" in err
    code, _, err = run(capsys, *SUBMIT, "--gres=nic:1", "--", "python", "train.py")
    assert code == 2 and "Muster's --gres takes GPUs only, gpu:N (N GPUs on each node, as -G N)" in err
    code, _, err = run(capsys, *SUBMIT, "-G", "4", "--gres=gpu:8", "--", "python", "train.py")
    assert code == 2 and "-G 4 and --gres=gpu:8 ask for different GPUs per node: give one of them" in err


def test_an_unknown_flag_is_said_with_the_commands_usage(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "submit", "--partition", "gpu", "--", "python", "train.py")
    assert (code, out) == (2, "")
    assert err.startswith("usage: muster submit [-h]")
    assert "muster submit: error: unrecognized arguments: --partition" in err
    code, _, err = run(capsys, "queue", "--bogus")
    assert code == 2 and err.startswith("usage: muster queue [-h]") and "muster queue: error: unrecognized arguments: --bogus" in err
    code, _, err = run(capsys, "queue", "--", "python")
    assert code == 2 and err.startswith("usage: muster queue") and "only `muster submit` takes a command after --" in err


def test_queue_j_shows_only_the_jobs_named_as_squeue_j(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    pending = {**QUEUE_PAGE, "results": [*QUEUE_PAGE["results"], {**QUEUE_PAGE["results"][0], "id": 10, "name": "other", "position": 2}]}
    _session(monkeypatch, response(200, pending), response(200, {"count": 2, "next": None, "results": _on_nodes()}))
    code, out, _ = run(capsys, "queue", "-j", "9,7")
    assert code == 0
    assert [line.split()[:4] for line in out.splitlines()[1:-1]] == [["9", "waits", "ann", "PENDING"], ["7", "trains", "ann", "RUNNING"]]
    assert out.splitlines()[-1] == (
        "2 shown; in the whole queue 1 pending (NO_ROOM 1), 5 running or starting "
        "(others' jobs on their nodes are listed to their owners and admins only), 1 borrowing beyond quota (preempted first)"
    )
    _session(monkeypatch, response(200, pending), response(200, {"count": 2, "next": None, "results": _on_nodes()}))
    code, out, _ = run(capsys, "queue", "-j", "10", "-j", "8", "--json")
    answer = json.loads(out)
    assert [e["id"] for e in answer["results"]] == [10] and [j["id"] for j in answer["running"]] == [8]
    code, _, err = run(capsys, "queue", "-j", "9,x")
    assert code == 2 and "'9,x' is not a job or a comma-separated list of them (-j 42, -j 42,43, or -j 42_7: element 7 of array 42)" in err
