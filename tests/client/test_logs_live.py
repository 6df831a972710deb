"""`muster logs` against the server in this process: an ended attempt's output, then on stderr how it ended, as
Slurm's last line of a job's output says it was cancelled for its time limit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from muster_client import cli

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
