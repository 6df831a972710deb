"""What a Slurm user's walk of `muster` found, without a server: what is typed wrong is said before anything is sent
(exit 2), never read as something else (`1_2` as job 12, `--gpus=8` as --gpus-per-node, a second file as the command)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from muster_client import commands, config
from muster_client.client import Client

from tests.client.cli_run import run
from tests.client.fakes import FakeSession, response


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MUSTER_URL", "MUSTER_TOKEN", "MUSTER_PASSWORD", "MUSTER_JOB_ID"):
        monkeypatch.delenv(name, raising=False)


def _session(monkeypatch: pytest.MonkeyPatch, *answers: Any) -> FakeSession:
    session = FakeSession(*answers)
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session))  # type: ignore[arg-type]
    return session


@pytest.mark.parametrize("word", ["1_2x", "+12", " 12", "12 ", "١٢", "1__2", "-3"])
@pytest.mark.parametrize("command", ["show", "why", "logs", "wait"])
def test_a_job_id_that_int_would_read_otherwise_is_refused(
    command: str, word: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _session(monkeypatch)
    code, out, err = run(capsys, command, word)
    assert (code, out, session.sent) == (2, "", [])
    assert f"usage: muster {command}" in err


def test_checkpoint_takes_a_jobs_own_id_only(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`muster checkpoint 1_2 --step 1` reported a checkpoint for job 12."""
    session = _session(monkeypatch)
    code, _, err = run(capsys, "checkpoint", "1_2", "--step", "1")
    assert (code, session.sent) == (2, [])
    assert "'1_2' is not a job id: write its digits only, e.g. 42 (an array's element by its job id: `muster jobs --array 1`" in err
    code, _, err = run(capsys, "jobs", "--array", "1_2")
    assert code == 2 and "argument --array: '1_2' is not a job id" in err
    code, _, err = run(capsys, "checkpoint", "42", "--at", "yesterday")
    assert code == 2 and "'yesterday' is not a time with its zone: write it as 2026-11-26T17:30:00Z" in err
    code, _, err = run(capsys, "checkpoint", "42", "--at", "2026-11-26T17:30:00")
    assert code == 2 and "is not a time with its zone" in err
    assert session.sent == []


def test_show_of_an_arrays_element_shows_that_element(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    elements = [{"id": 20 + i, "array_id": 20, "array_index": i} for i in range(3)]
    session = _session(monkeypatch, response(200, {"count": 3, "next": None, "results": elements}), response(200, {"id": 22}))
    code, out, _ = run(capsys, "show", "20_2", "--json")
    assert code == 0 and json.loads(out)["id"] == 22
    assert session.sent[0]["params"]["array"] == 20 and session.sent[1]["url"].endswith("/api/v1/jobs/22/")
    _session(monkeypatch, response(200, {"count": 3, "next": None, "results": elements}))
    code, _, err = run(capsys, "show", "20_7")
    assert code == 5
    assert err == "muster: error: No job 20_7: array 20 has no element 7 (or none that you may see).\n"


@pytest.mark.parametrize("flag", ["--gpus-per", "--gpus-p", "--pre", "--ti", "--na", "--image-"])
def test_no_flag_is_taken_for_another_it_begins(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "submit", f"{flag}=1", "--", "python", "t.py")
    assert code == 2 and "unrecognized arguments" in err
    code, _, err = run(capsys, "queue", "--lim", "3")
    assert code == 2 and "unrecognized arguments: --lim 3" in err


def test_sbatchs_gpus_for_the_whole_job_is_refused_naming_what_asks_for_them(capsys: pytest.CaptureFixture[str]) -> None:
    """`--gpus=8` was silently taken as --gpus-per-node (an abbreviation): on 2 nodes that is 16 GPUs."""
    code, _, err = run(capsys, "submit", "-N", "2", "--gpus=16", "-t", "1h", "--image", "busybox", "--", "python", "t.py")
    assert code == 2
    assert err == (
        "muster: error: --gpus=16 is sbatch's GPUs for the whole job; Muster asks GPUs per node: -G/--gpus-per-node N with "
        "-N nodes (--gpus=16 on 2 nodes is -N 2 -G 8)\n"
    )
    code, _, err = run(capsys, "submit", "--gpus", "3", "-N", "2", "--", "python", "t.py")
    assert code == 2 and "(--gpus=16 on 2 nodes is -N 2 -G 8)" in err


def test_words_after_the_job_file_are_not_its_command(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`muster submit short.yaml other.yaml` queued the command `other.yaml`."""
    config.save_token("http://muster.test:8000", "secret")
    spec = tmp_path / "short.yaml"
    spec.write_text("image: busybox\ngpus_per_node: 1\ncommand: python a.py\n")
    code, out, err = run(capsys, "submit", str(spec), "other.yaml")
    assert (code, out) == (2, "")
    assert f"error: 'other.yaml' after {spec}: a command goes after -- (muster submit {spec} -- other.yaml)" in err
    code, _, err = run(capsys, "submit", "-G", "1", "python", "train.py")
    assert code == 2
    assert "error: 'python train.py': a command goes after -- (muster submit -G 8 -t 1h --image IMAGE -- python train.py)" in err


def test_an_empty_or_throttled_array_is_refused_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`--array ''` submitted one plain job, exit 0; `--array=0-9%2` was the server's 400, exit 5."""
    session = _session(monkeypatch)
    flags = ["submit", "-G", "1", "-t", "1h", "--image", "busybox"]
    code, _, err = run(capsys, *flags, "--array", "", "--", "python", "t.py")
    assert code == 2 and "an array needs its indices: 0-99, 1,3,5-7 or 0-98:2" in err
    code, _, err = run(capsys, *flags, "--array=0-9%2", "--", "python", "t.py")
    assert code == 2 and "Muster has no %N limit of elements running at once (your quota limits them); write 0-9" in err
    code, _, err = run(capsys, *flags, "-a", "0-3,x", "--", "python", "t.py")
    assert code == 2 and "'0-3,x' is not an array's indices" in err
    spec = tmp_path / "sweep.yaml"
    spec.write_text("array: ''\n")
    code, _, err = run(capsys, "submit", str(spec), *flags[1:], "--", "python", "t.py")
    assert code == 2 and "array: an array needs its indices" in err
    assert session.sent == []


def test_a_spec_on_stdin_is_read_as_sbatch_reads_a_script(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch, response(200, {"valid": True, "count": 1}))
    monkeypatch.setattr("sys.stdin", io.StringIO("image: busybox\ngpus_per_node: 2\ncommand: python train.py\n"))
    code, _, err = run(capsys, "submit", "-", "-t", "1h", "--dry-run")
    assert (code, err) == (0, ""), err
    assert session.sent[0]["json"]["gpus_per_node"] == 2 and session.sent[0]["json"]["name"] == "python"


def test_json_before_the_command_says_where_it_goes(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--json", "jobs")
    assert code == 2
    assert err.splitlines()[-1] == "muster jobs: error: unrecognized arguments: --json (--json goes after the command: muster jobs --json)"


def test_logs_values_are_checked_and_a_follow_is_text(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch)
    code, _, err = run(capsys, "logs", "42", "--tail", "0")
    assert code == 2 and "argument --tail: '0': give at least 1" in err
    code, _, err = run(capsys, "logs", "42", "-f", "--json")
    assert code == 2 and err == (
        "muster: error: -f streams the output as text and takes no --json (without -f, --json prints what was written so far)\n"
    )
    assert session.sent == []


def test_jobs_refuses_a_state_it_does_not_know(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    session = _session(monkeypatch)
    code, _, err = run(capsys, "queue", "--start", "-t", "R")
    assert code == 2 and "--start is -t PENDING (squeue's --start): it cannot go with -t RUNNING" in err
    assert session.sent == []
