"""The `muster` command without a server: usage errors, a missing token and an unreachable server, each its exit code."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from muster_client import cli, commands, config
from muster_client.client import Client

from tests.client.cli_run import run
from tests.client.fakes import FakeSession, response
from tests.live_server import free_port

SQUEUE_HEADER = ["ID", "NAME", "USER", "STATE", "NODESxGPUS", "POS", "PRIORITY", "TIME", "TIME_LEFT", "START", "NODELIST(REASON)"]


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MUSTER_URL", "MUSTER_TOKEN", "MUSTER_PASSWORD"):
        monkeypatch.delenv(name, raising=False)


def test_every_command_has_help_with_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("login", "submit", "queue", "jobs", "show", "why", "logs", "wait", "cancel", "checkpoint", "usage", "nodes"):
        code, out, _ = run(capsys, name, "--help")
        assert code == 0
        assert f"examples:\n  muster {name}" in out


def test_a_bad_wall_time_is_a_usage_error_naming_the_forms(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "submit", "-t", "4x", "--", "python", "train.py")
    assert code == 2
    assert "'4x' is not a wall time; write it as 4h, 90m" in err


def test_without_a_login_a_command_says_to_log_in(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "queue")
    assert (code, out) == (4, "")
    assert err == "muster: error: no server: run `muster login URL` (or set MUSTER_URL and MUSTER_TOKEN)\n"
    code, _, err = run(capsys, "--url", "http://muster.test:8000", "jobs")
    assert code == 4
    assert err == "muster: error: not logged in to http://muster.test:8000 — run `muster login http://muster.test:8000`\n"


def test_a_server_that_is_not_there_exits_3_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    config.save_token(url, "secret")
    code, out, err = run(capsys, "show", "1")
    assert (code, out) == (3, "")
    assert err == f"muster: error: cannot reach the Muster server at {url} (connection refused)\n"


def test_a_missing_spec_file_is_a_usage_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config.save_token("http://muster.test:8000", "secret")
    code, _, err = run(capsys, "submit", str(tmp_path / "nope.yaml"))
    assert code == 2
    assert err.startswith("muster: error: cannot read ") and "nope.yaml: No such file or directory" in err


def test_only_submit_takes_a_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "queue", "--", "python")
    assert code == 2
    assert "only `muster submit` takes a command after --" in err


def test_a_script_given_as_the_spec_file_says_where_a_command_goes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config.save_token("http://muster.test:8000", "secret")
    script = tmp_path / "train.py"
    script.write_text("import torch\nprint('hi')\n")
    code, _, err = run(capsys, "submit", str(script))
    assert code == 2
    assert err.endswith(
        "must be a mapping of the job's fields (name: ..., image: ..., nodes: ...). (a command goes after --: "
        "muster submit -G 8 -t 1h --image IMAGE -- python train.py)\n"
    )


def test_an_sbatch_script_given_as_the_spec_file_says_directives_are_flags_here(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config.save_token("http://muster.test:8000", "secret")
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -N 2\n#SBATCH --gres=gpu:8\nsrun python train.py\n")
    code, _, err = run(capsys, "submit", str(script))
    assert code == 2
    assert err.endswith(
        "job.sh is a batch script: muster takes no #SBATCH directives. Give them as flags (-N 2 -G 8 -t 4h --image IMAGE "
        "-- COMMAND) or in a YAML file of the job's fields (muster submit --help shows one).\n"
    )


def test_a_submit_without_a_command_says_where_it_goes(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config.save_token("http://muster.test:8000", "secret")
    code, _, err = run(capsys, "submit", "-G", "8", "-t", "1h", "--image", "busybox")
    assert code == 2
    assert err.startswith("muster: error: no command to run: give it after -- (") and "name" not in err
    spec = tmp_path / "job.yaml"
    spec.write_text("image: busybox\nnodes: 1\n")
    code, _, err = run(capsys, "submit", str(spec))
    assert code == 2 and "or as command: in a job.yaml" in err


def test_a_submit_without_gpus_per_node_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """The server's "gpus_per_node: This field is required" named no flag."""
    config.save_token("http://muster.test:8000", "secret")
    code, _, err = run(capsys, "submit", "-t", "1h", "--image", "busybox", "--", "python", "a.py")
    assert code == 2 and err.startswith("muster: error: missing -G/--gpus-per-node N, the GPUs each node gets (gpus_per_node: in")


def test_cancel_cancels_each_job_once_however_often_it_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`muster cancel 10 10` cancelled job 10, then said it had already ended and exited 5. Several jobs go in one
    request, so none is started on the nodes the others free in between."""
    config.save_token("http://muster.test:8000", "secret")
    asked: list[list[int]] = []

    def cancel_many(self: Client, job_ids: list[int], reason: str = "") -> dict[str, Any]:
        asked.append(list(job_ids))
        return {"cancelled": [{"id": i, "name": "train"} for i in job_ids], "ended": [], "not_found": []}

    monkeypatch.setattr(Client, "cancel_many", cancel_many)
    monkeypatch.setattr(Client, "cancel", lambda self, job_id, reason="": asked.append([job_id]) or {"id": job_id, "name": "train"})
    monkeypatch.setattr(Client, "jobs", lambda self, **filters: iter([]))  # neither is an array's id
    code, out, _ = run(capsys, "cancel", "10", "11", "10")
    assert code == 0 and asked == [[10, 11]] and out.splitlines() == ["Cancelled job 10 (train)", "Cancelled job 11 (train)"]
    code, out, _ = run(capsys, "cancel", "12", "12")
    assert code == 0 and asked[-1] == [12] and out.splitlines() == ["Cancelled job 12 (train)"]  # one job: its own cancel


def test_login_without_a_terminal_says_how_a_script_logs_in(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    def no_terminal(prompt: str = "") -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", no_terminal)
    code, _, err = run(capsys, "login", "http://muster.test:8000")
    assert (code, err) == (2, "muster: error: no terminal to ask on: give --username and set MUSTER_PASSWORD\n")


def test_an_elastic_node_range_is_checked_before_anything_is_sent(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "submit", "-N", "8-2", "--", "python", "train.py")
    assert code == 2
    assert "'8-2': an elastic range goes from its fewest nodes to its most (e.g. 2-8)" in err
    code, _, err = run(capsys, "submit", "-N", "0", "--", "python", "train.py")
    assert code == 2 and "'0': a job runs on at least 1 node" in err
    # As in sbatch, a range of one size is that size.
    assert cli._node_count("4-4") == (4, None) and cli._node_count("2-8") == (2, 8)
    code, _, err = run(capsys, "submit", "-N", "two", "--", "python", "train.py")
    assert code == 2 and "write 4, or 2-8 for an elastic job" in err


def test_mail_types_are_sbatchs_words_and_a_webhook_needs_one(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "submit", "--mail-type", "BEGIN,OFTEN", "--", "python", "train.py")
    assert code == 2 and "'OFTEN' is not a mail type: use BEGIN, END, FAIL, REQUEUE, ALL or NONE" in err
    code, _, err = run(capsys, "submit", "--webhook", "https://hooks.example/x", "--", "python", "train.py")
    assert code != 0 and "--webhook needs --mail-type" in err
    # NONE among others became `on: [start]`, NONE dropped unsaid.
    for types, others in (("BEGIN,NONE", "BEGIN"), ("none,begin,END", "BEGIN,END"), ("ALL,NONE", "ALL")):
        code, _, err = run(capsys, "submit", "--mail-type", types, "--", "python", "train.py")
        assert code == 2, types
        assert f"NONE (be told nothing) cannot go with {others}: give NONE alone, or the types without it" in err


def test_a_command_that_cannot_be_split_is_a_usage_error_not_a_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config.save_token("http://muster.test:8000", "secret")
    spec = tmp_path / "job.yaml"
    spec.write_text('image: busybox\ncommand: "sleep \\"1"\n')
    code, out, err = run(capsys, "submit", str(spec), "--dry-run")
    assert (code, out) == (2, "")
    assert err == "muster: error: command: cannot split it as a shell would: No closing quotation.\n"


def test_the_queue_of_one_user_is_cut_to_the_limit_after_it_is_filtered(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The queue API does not filter by owner: bob's job is third in line, behind two of ann's.
    entries = [
        {"id": i, "name": f"job-{i}", "owner": owner, "nodes": 1, "gpus_per_node": 8, "position": i, "priority": None}
        for i, owner in ((1, "ann"), (2, "ann"), (3, "bob"))
    ]
    page = response(200, {"count": 3, "next": None, "summary": {"pending": 3}, "results": entries})
    session = FakeSession(page)
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session))  # type: ignore[arg-type]
    code, out, _ = run(capsys, "queue", "--user", "bob", "--limit", "1")
    assert code == 0
    assert [line.split()[:3] for line in out.splitlines()[1:-1]] == [["3", "job-3", "bob"]]
    assert out.splitlines()[-1] == "1 shown; in the whole queue 3 pending"


def test_jobs_takes_slurms_state_names_as_queue_does(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`muster jobs -s CD,F,CA,TO` (sacct's) was refused though `muster queue -t PD,R,CF` (squeue's) was taken."""
    session = FakeSession(*(response(200, {"count": 0, "next": None, "results": []}) for _ in range(3)))
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session))  # type: ignore[arg-type]
    assert run(capsys, "jobs", "-s", "CD,f,ca", "--state", "TO,pr")[0] == 0
    assert run(capsys, "jobs", "-s", "PD,CF,R,completed,timeout")[0] == 0
    assert run(capsys, "jobs", "-s", "cancelled,DONE")[0] == 0  # a word neither names: the server refuses it, naming the states
    states = [sent["params"]["state"] for sent in session.sent]
    assert states == [
        ["SUCCEEDED", "FAILED", "CANCELLED", "TIMED_OUT", "PREEMPTED"],
        ["PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED", "TIMED_OUT"],
        ["CANCELLED", "DONE"],
    ]


def test_nodes_and_why_say_when_jobs_cannot_start_on_the_cluster(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    config.save_token("http://muster.test:8000", "secret")
    node = {"name": "gpu-a", "rack": "r1", "state": "READY", "gpus_total": 8, "gpus_free": 8, "gpu_model": "H100"}
    held = {**node, "name": "gpu-b", "held": True, "held_reason": "PSU swap, back 14:00"}
    monkeypatch.setattr(Client, "nodes", lambda self: [node, held])
    down = {"usable": False, "problem": "Muster may not create pods in namespace muster-jobs.", "since": "2026-11-28T07:00:00Z"}
    monkeypatch.setattr(Client, "cluster", lambda self: down)
    code, out, err = run(capsys, "nodes")
    # A held node takes no new work: said on its row, and its GPUs are not counted free.
    assert code == 0 and "gpu-b  r1    READY, HELD (PSU swap, back 14:00)" in out  # why, as sinfo -R says a drain's
    assert out.splitlines()[-1] == "2 nodes, 8 of 16 GPUs free (1 node held: no new work)"
    back = datetime.now(UTC) + timedelta(minutes=5)
    settling = {**node, "name": "gpu-c", "settling_until": back.isoformat()}
    monkeypatch.setattr(Client, "nodes", lambda self: [node, {**node, "name": "gpu-b", "held": True}, settling])
    code, out, err = run(capsys, "nodes")
    assert f"gpu-c  r1    READY, SETTLING until {back.astimezone():%H:%M:%S}" in out
    assert out.splitlines()[-1] == "3 nodes, 8 of 24 GPUs free (1 node held, 1 settling after being unready: no new work)"
    # A shared node takes GPU slices only: its free shares are summed apart from the whole GPUs, as the pages sum them.
    shared = {
        **node,
        "name": "gpu-s",
        "gpus_total": 2,
        "gpus_free": 1.75,
        "sharing": "time-slicing",
        "slices_per_gpu": 4,
        "slices_free": 7,
        "slice_gpus": 0.25,
    }
    monkeypatch.setattr(Client, "nodes", lambda self: [node, shared])
    code, out, err = run(capsys, "nodes")
    assert "1.75/2" in out and "time-slicing 7 of 8 slices free, 0.25 GPU each" in out
    assert out.splitlines()[-1] == "2 nodes, 8 of 8 GPUs free for whole-GPU jobs; on 1 shared node (GPU slices only), 1.75 of 2 GPUs free"
    assert err.startswith("muster: jobs cannot start on the cluster now (since ")
    assert err.rstrip().endswith("Muster may not create pods in namespace muster-jobs.")
    waiting = {"id": 7, "name": "train", "state": "PENDING", "state_reason": "",
               "pending_reason": {"code": "NEW", "message": "Waiting for the next scheduling cycle."}}  # fmt: skip
    monkeypatch.setattr(Client, "job", lambda self, job_id: waiting)
    code, out, err = run(capsys, "why", "7")
    assert code == 0 and "jobs cannot start on the cluster now" in err
    monkeypatch.setattr(Client, "cluster", lambda self: {"usable": True, "problem": "", "since": None})
    code, out, err = run(capsys, "nodes")
    assert code == 0 and err == ""


def _queue_session(monkeypatch: pytest.MonkeyPatch, *answers: Any) -> FakeSession:
    session = FakeSession(*answers)
    monkeypatch.setattr(commands, "client_for", lambda args: Client("http://muster.test:8000", "secret", session=session))  # type: ignore[arg-type]
    return session


QUEUE_PAGE = {
    "count": 1,
    "next": None,
    "summary": {"pending": 1, "pending_by_reason": {"NO_ROOM": 1}, "running_within_quota": 4, "running_over_quota": 1},
    "results": [
        {"id": 9, "name": "waits", "owner": "ann", "nodes": 2, "gpus_per_node": 8, "position": 1,
         "priority": {"total": 6050.2}, "pending_reason": {"code": "NO_ROOM", "message": "..."},
         "estimated_start": None, "estimate_kind": ""},
    ],
}  # fmt: skip


def _on_nodes() -> list[dict[str, Any]]:
    placed = datetime.now(UTC) - timedelta(minutes=30)
    base = {"owner": "ann", "nodes": 2, "gpus_per_node": 8, "wall_time_seconds": 7200, "scheduled_at": placed.isoformat()}
    return [
        {**base, "id": 8, "name": "starts", "state": "SCHEDULED", "started_at": None, "assigned_nodes": ["gpu-07", "gpu-09"]},
        {**base, "id": 7, "name": "trains", "state": "RUNNING", "started_at": placed.isoformat(),
         "assigned_nodes": ["gpu-00", "gpu-01", "gpu-02", "gpu-04"], "nodes": 4},
    ]  # fmt: skip


def test_the_queue_lists_pending_jobs_then_the_running_ones_as_squeue_does(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    session = _queue_session(monkeypatch, response(200, QUEUE_PAGE), response(200, {"count": 2, "next": None, "results": _on_nodes()}))
    code, out, _ = run(capsys, "queue")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == SQUEUE_HEADER
    # Pending first, with its place, priority, estimated start and reason; then the jobs on their nodes, oldest first,
    # with the time since placement, what is left of the wall time, and their nodes. The priority to one decimal, as
    # `muster show` and the pages say it (it read 6050 here and 6050.2 there).
    assert lines[1].split() == ["9", "waits", "ann", "PENDING", "2x8", "1", "6050.2", "-", "-", "unknown", "(NO_ROOM)"]
    running = lines[2].split()
    assert running[:7] == ["7", "trains", "ann", "RUNNING", "4x8", "-", "-"]
    # (Placed 30 minutes ago with 2 hours of wall time, give or take the test's own seconds.)
    assert running[7].startswith("30m") and running[8] in ("1h30m", "1h29m") and running[-1] == "gpu-[00-02,04]"
    assert lines[3].split()[:4] == ["8", "starts", "ann", "SCHEDULED"] and lines[3].endswith("gpu-[07,09]")
    # The whole cluster has 5 on their nodes; a researcher sees their own.
    footer = (
        "1 pending (NO_ROOM 1); 1 running, 1 starting (of 5 on the cluster: others' jobs are listed to their owners and admins "
        "only); 1 borrowing beyond quota (preempted first)"
    )
    assert lines[-1] == footer
    assert session.sent[1]["params"] == {"state": ["SCHEDULED", "RUNNING"], "limit": 500}


def test_the_queue_narrows_to_states_as_squeue_t_does(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # --start (and -t PD): the pending jobs only, and nothing else is asked of the server.
    for argv in (["queue", "--start"], ["queue", "-t", "pd"]):
        session = _queue_session(monkeypatch, response(200, QUEUE_PAGE))
        code, out, _ = run(capsys, *argv)
        assert code == 0 and len(session.sent) == 1, argv
        assert [line.split()[3] for line in out.splitlines()[1:-1]] == ["PENDING"]
        assert out.splitlines()[-1] == "1 pending (NO_ROOM 1)"
    # -t R: the running ones only.
    running = [job for job in _on_nodes() if job["state"] == "RUNNING"]
    session = _queue_session(monkeypatch, response(200, QUEUE_PAGE), response(200, {"count": 1, "next": None, "results": running}))
    code, out, _ = run(capsys, "queue", "-t", "R", "--json")
    assert code == 0 and session.sent[1]["params"]["state"] == ["RUNNING"]
    answer = json.loads(out)
    assert answer["results"] == [] and [job["id"] for job in answer["running"]] == [7]
    session = _queue_session(monkeypatch, response(200, QUEUE_PAGE), response(200, {"count": 1, "next": None, "results": running}))
    code, out, _ = run(capsys, "queue", "-t", "RUNNING")
    assert [line.split()[0] for line in out.splitlines()[1:-1]] == ["7"]
    assert out.splitlines()[-1] == "1 running; 1 borrowing beyond quota (preempted first)"
    # An ended state is not in the queue: said, with where to look.
    code, _, err = run(capsys, "queue", "-t", "DONE")
    assert code == 2 and "'DONE' is not a state the queue shows: use PENDING (PD), SCHEDULED (CF) or RUNNING (R)" in err
