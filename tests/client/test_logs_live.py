"""`muster logs` against the server in this process: an ended attempt's output, then on stderr how it ended, as
Slurm's last line of a job's output says it was cancelled for its time limit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from muster_client import cli, commands

from jobs.cluster.simulated import SimulatedCluster
from tests.conftest import SimHarness


def test_logs_of_a_timed_out_job_end_with_why_on_stderr(
    signed_in: Any, tx_sim: SimHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {"name": "slow", "image": "busybox:1.36", "command": ["python", "x.py"], "nodes": 1, "gpus_per_node": 1,
             "wall_time_seconds": 60, "simulate": {"duration_seconds": 600}}
        )
    )  # fmt: skip
    assert cli.main(["submit", str(spec), "--json"]) == 0
    job_id = json.loads(capsys.readouterr().out)["id"]
    tx_sim.cycle()
    tx_sim.advance(2)
    assert cli.main(["logs", str(job_id)]) == 0
    running = capsys.readouterr()
    assert running.out and "ended" not in running.err and "timed out" not in running.err
    tx_sim.advance(70)
    tx_sim.cycle()
    assert cli.main(["logs", str(job_id)]) == 0
    ended = capsys.readouterr()
    assert "timed out" not in ended.out  # the output is the job's own
    assert f"muster: job {job_id} attempt 1 timed out at " in ended.err
    assert ended.err.rstrip().endswith("UTC: Stopped: wall time of 1 min reached.")
    assert cli.main(["logs", "-f", str(job_id)]) == 0
    assert "UTC: Stopped: wall time of 1 min reached." in capsys.readouterr().err


def test_following_from_the_last_lines_through_dropped_connections_says_each_line_once(
    signed_in: Any, tx_sim: SimHarness, tmp_path: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`muster logs -f --tail 2` while the server drops the follow after every chunk (MUSTER_LOG_FOLLOW_SECONDS=0, as a
    restart or its time limit does) and lines are written between reconnects: it reconnected from the last N lines it
    had yielded, and skipped as many characters, losing the lines written meanwhile and cutting others."""
    settings.MUSTER_LOG_FOLLOW_SECONDS = 0
    # The server's cluster reads the test's clock, so the test says when a line is written (one every 10 s of it).
    made = SimulatedCluster.from_settings
    monkeypatch.setattr(SimulatedCluster, "from_settings", classmethod(lambda cls: dataclasses.replace(made(), clock=tx_sim.clock)))
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {"name": "train", "image": "busybox:1.36", "command": ["python", "train.py"], "nodes": 1, "gpus_per_node": 1,
             "wall_time_seconds": 3600, "simulate": {"duration_seconds": 200}}
        )
    )  # fmt: skip
    assert cli.main(["submit", str(spec), "--json"]) == 0
    client = commands.client_for(argparse.Namespace())
    job_id = client.jobs(limit=1).__next__()["id"]
    tx_sim.cycle()
    tx_sim.advance(35)  # started, three steps written
    chunks: list[str] = []
    follow = threading.Thread(target=lambda: chunks.extend(client.follow_logs(job_id, tail=2)))
    follow.start()
    deadline = time.monotonic() + 30
    while not chunks and time.monotonic() < deadline:
        time.sleep(0.05)
    # Lines written while the follow connects again and again.
    for _ in range(8):
        tx_sim.clock.advance(10)
        time.sleep(0.3)
    tx_sim.advance(200)  # it ends
    follow.join(timeout=60)
    assert not follow.is_alive()

    whole = client.logs(job_id, tail=1000)["logs"].splitlines(keepends=True)
    followed = "".join(chunks).splitlines(keepends=True)
    first = whole.index(followed[0])
    assert followed == whole[first:]  # every line from where it began to the end, each once and whole
    assert len(followed) > 10 and followed[-1] == whole[-1]


def test_following_a_job_goes_on_to_its_next_attempt_when_it_is_requeued_until_the_job_ends(
    signed_in: Any, tx_sim: SimHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`muster logs -f` of a training job that is requeued (preempted, its node lost, `muster requeue`): it stopped when
    its first attempt ended, with the job going on unseen. It follows the job, each attempt in turn, saying on stderr
    how one ended and that the next is followed; -A follows that one attempt only."""
    made = SimulatedCluster.from_settings
    monkeypatch.setattr(SimulatedCluster, "from_settings", classmethod(lambda cls: dataclasses.replace(made(), clock=tx_sim.clock)))
    spec = tmp_path / "job.json"
    spec.write_text(
        json.dumps(
            {"name": "train", "image": "busybox:1.36", "command": ["python", "train.py"], "nodes": 1, "gpus_per_node": 1,
             "wall_time_seconds": 3600, "simulate": {"duration_seconds": 30}}
        )
    )  # fmt: skip
    assert cli.main(["submit", str(spec), "--json"]) == 0
    job_id = json.loads(capsys.readouterr().out)["id"]
    tx_sim.cycle()
    tx_sim.advance(2)
    codes: list[int] = []
    follow = threading.Thread(target=lambda: codes.append(cli.main(["logs", "-f", "--poll", "0.1", str(job_id)])))
    follow.start()
    out, err = "", ""

    def until(seen: Callable[[], bool]) -> None:
        nonlocal out, err
        deadline = time.monotonic() + 30
        while True:
            more = capsys.readouterr()
            out, err = out + more.out, err + more.err
            if seen() or time.monotonic() > deadline:
                return
            time.sleep(0.1)

    # Following attempt 1 (whose output may come only as its stream ends: a follow that began after the requeue reads
    # the ended attempt once, and goes on the same).
    time.sleep(0.5)
    commands.client_for(argparse.Namespace()).requeue(job_id, "a new learning rate")
    until(lambda: "waiting for attempt 2" in err)
    tx_sim.advance(2)  # placed again
    tx_sim.advance(2)  # running
    tx_sim.advance(40)  # and done
    follow.join(timeout=60)
    assert not follow.is_alive() and codes == [0]
    until(lambda: True)
    assert f"job {job_id} attempt 1 rank 0" in out and f"job {job_id} attempt 2 rank 0" in out
    said = err.splitlines()
    assert said[0].startswith(f"muster: job {job_id} attempt 1 requeued at ") and said[0].endswith("a new learning rate.")
    assert said[1:3] == [
        f"muster: job {job_id} was requeued: waiting for attempt 2 to start (Ctrl-C stops waiting)",
        f"muster: following job {job_id} attempt 2",
    ]
    assert said[3].startswith(f"muster: job {job_id} attempt 2 succeeded at ") and len(said) == 4

    assert cli.main(["logs", "-f", "-A", "1", str(job_id)]) == 0
    one = capsys.readouterr()
    assert "attempt 1 rank 0" in one.out and "attempt 2" not in one.out + one.err
    assert one.err.startswith(f"muster: job {job_id} attempt 1 requeued at ")
