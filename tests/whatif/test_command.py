"""python manage.py muster_replay: a tiny trace in, summary.json and a self-contained report.html out."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from replay.overrides import setting_names
from tests.whatif.traces import BAD_LINE_3, TINY

pytestmark = pytest.mark.django_db


def replay(tmp_path: Path, trace: str, *args: str) -> tuple[str, str]:
    path = tmp_path / "trace.csv"
    path.write_text(trace)
    out, err = io.StringIO(), io.StringIO()
    call_command("muster_replay", "--trace", str(path), "--out", str(tmp_path / "out"), *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_a_tiny_trace_gives_the_summary_and_an_offline_report(tmp_path: Path) -> None:
    stdout, stderr = replay(tmp_path, TINY, "--nodes", "2", "--set", "starvation_seconds=600")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == ["fifo", "easy", "muster"]
    assert all(p["jobs"] == 6 for p in summary["policies"])
    assert summary["settings"]["nodes"] == 2 and summary["settings"]["policy.starvation_seconds"] == 600.0
    assert summary["settings"]["changed"] == "starvation_seconds=600.0"
    assert any("hour" in sentence for sentence in summary["assumptions"])
    page = (tmp_path / "out" / "report.html").read_text()
    assert not re.search(r"<script[^>]+src=", page), "the report must open offline: no external scripts"
    assert "Plotly.newPlot" in page and "Side by side" in page
    # The headline table on stdout, a progress bar with an ETA on stderr.
    assert stdout.splitlines()[0].split() == ["policy", "fifo", "easy", "muster"]
    assert "wait mean, all jobs" in stdout and "report.html" in stdout
    assert "ETA" in stderr and "\r" in stderr and "6 jobs from trace.csv on 2 nodes x 8 GPUs" in stderr


def test_load_sizes_the_cluster(tmp_path: Path) -> None:
    replay(tmp_path, TINY, "--load", "0.5", "--policies", "fifo")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [p["policy"] for p in summary["policies"]] == ["fifo"]
    assert summary["settings"]["offered_load_asked"] == 0.5 and summary["settings"]["nodes"] >= 2


def test_a_bad_row_stops_it_with_the_line_number_and_writes_nothing(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"line 3: num_gpus 'two' is not a number; nothing was run"):
        replay(tmp_path, BAD_LINE_3, "--nodes", "2")
    assert not (tmp_path / "out").exists()


def test_set_is_validated_before_anything_runs(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match=r"--set: Unknown setting 'starvation'\. Valid names: ") as caught:
        replay(tmp_path, TINY, "--nodes", "2", "--set", "starvation=60")
    assert all(name in str(caught.value) for name in setting_names())
    with pytest.raises(CommandError, match="--set: preemption: 'maybe' is not true or false"):
        replay(tmp_path, TINY, "--nodes", "2", "--set", "preemption=maybe")
    assert not (tmp_path / "out").exists()


def test_other_mistakes_are_clear(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="unknown policy sjf; choose from fifo, easy, muster"):
        replay(tmp_path, TINY, "--nodes", "2", "--policies", "fifo,sjf")
    with pytest.raises(CommandError, match="a job on 2 nodes, more than the cluster's 1"):
        replay(tmp_path, TINY, "--nodes", "1")
    with pytest.raises(CommandError, match="no nodes to size the cluster from"):
        replay(tmp_path, TINY)
    with pytest.raises(CommandError, match="no such file"):
        call_command("muster_replay", "--trace", str(tmp_path / "missing.csv"), "--out", str(tmp_path / "out"), "--nodes", "2")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("cap", ["0", "-5"])
def test_a_runtime_cap_of_0_is_refused_not_taken_for_no_cap(tmp_path: Path, cap: str) -> None:
    with pytest.raises(CommandError, match=r"A runtime cap must be above 0 s: 0 would cut every run to nothing\. Give `none` for no cap\."):
        replay(tmp_path, TINY, "--nodes", "2", "--runtime-cap", cap)
    assert not (tmp_path / "out").exists()


def test_runtime_cap_none_is_no_cap(tmp_path: Path) -> None:
    replay(tmp_path, TINY, "--nodes", "2", "--policies", "fifo", "--runtime-cap", "none")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["settings"]["assumption.runtime_cap_seconds"] is None
    assert not any("are cut" in sentence for sentence in summary["assumptions"])
