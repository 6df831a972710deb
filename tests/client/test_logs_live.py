"""`muster logs` against the server in this process: an ended attempt's output, then on stderr how it ended, as
Slurm's last line of a job's output says it was cancelled for its time limit."""

from __future__ import annotations

import argparse
import dataclasses
import json
import threading
import time
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
