"""`python -m replay.bench --set KNOB=VALUE`: a what-if on one of the policy's knobs, or a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policy.model import PolicyConfig
from replay.bench import CYCLE_MAX_JOBS, main, policy_config


def test_each_knob_is_read_as_its_fields_type_over_the_cycles_config() -> None:
    config = policy_config(["weight_short=0", "max_reservations=8", "preemption=false", "starvation_wall_factor=0.5"])
    assert (config.weight_short, config.max_reservations, config.preemption, config.starvation_wall_factor) == (0.0, 8, False, 0.5)
    assert config.max_jobs == CYCLE_MAX_JOBS
    assert policy_config([]) == PolicyConfig(max_jobs=CYCLE_MAX_JOBS)
    assert policy_config(["max_jobs=none"]).max_jobs is None  # as the what-if page reads it


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("bogus=1", "--set: Unknown setting 'bogus'. Valid names: "),
        ("weight_short", "--set: Not NAME=VALUE: 'weight_short'. Valid names: "),
        ("weight_short=lots", "--set: weight_short: 'lots' is not a number"),
        ("max_reservations=2.5", "--set: max_reservations: '2.5' is not a whole number"),
        ("preemption=maybe", "--set: preemption: 'maybe' is not true or false"),
        ("weight_age=-1", "--set: weight_age: must be at least 0, not -1"),
    ],
)
def test_anything_else_is_refused_before_the_trace_is_read(item: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["/nonexistent/trace.csv.gz", "--set", item])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "says"), [("--production-share=1.5", "production_share is a share of the jobs, from 0 to 1")])
def test_an_assumption_out_of_range_is_refused_before_the_trace_is_read(flag: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["/nonexistent/trace.csv.gz", flag])
    assert exited.value.code == 2
    assert says in capsys.readouterr().err


def test_a_replay_with_two_classes_prints_each_ones_waits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-01 00:00:00,36000,8,0,vc1\n2017-10-01 00:20:00,3600,8,0,vc2\n")
    main([str(trace), "--policies", "muster", "--loads", "1.0", "--load-from", "", "--production-share", "0.5"])
    line = json.loads(capsys.readouterr().out.splitlines()[0])
    # Sized for load 1.0 the cluster has room for both, so nobody waits or is stopped; each class is said apart.
    assert (line["production_share"], line["preemptions"]) == (0.5, 0)
    assert line["by_priority_class"] == {
        "normal": {"jobs": 1, "mean_wait_s": 0.0, "p99_wait_s": 0.0, "preemptions": 0},
        "production": {"jobs": 1, "mean_wait_s": 0.0, "p99_wait_s": 0.0, "preemptions": 0},
    }
