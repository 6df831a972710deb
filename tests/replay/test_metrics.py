"""Metrics on a tiny schedule worked out by hand (the EASY schedule of tests.replay.test_baselines.TRACE)."""

from __future__ import annotations

import json

import pytest

from policy.model import PolicyConfig
from replay.metrics import idle_while_waiting, percentile, summarize, wall_bucket, water_fill
from replay.simulator import ClusterSpec, JobRecord, simulate
from replay.trace import Assumptions, TraceJob
from tests.replay.test_baselines import TRACE, job


def summary() -> dict[str, object]:
    result = simulate(TRACE, cluster=ClusterSpec(nodes=2), policy="easy", config=PolicyConfig(), assumptions=Assumptions())
    return summarize(result, config=PolicyConfig())


def test_jct_wait_utilisation_by_hand() -> None:
    s = summary()
    json.dumps(s)  # JSON-able
    # Starts 0, 100, 2, 150; ends 100, 150, 42, 650; submits 0, 1, 2, 3.
    jct, wait = s["jct"], s["wait"]
    assert isinstance(jct, dict) and isinstance(wait, dict)
    assert jct["mean"] == pytest.approx((100 + 149 + 40 + 647) / 4)
    assert jct["median"] == pytest.approx((100 + 149) / 2)
    assert wait["mean"] == pytest.approx((0 + 99 + 0 + 147) / 4)
    assert wait["median"] == pytest.approx(99 / 2)
    assert wait["p99"] == pytest.approx(99 + (147 - 99) * 0.97)
    assert jct["split"]["gang"]["mean"] == 149
    assert jct["split"]["whole_node"]["mean"] == 100
    assert jct["split"]["sub_node"]["mean"] == pytest.approx((40 + 647) / 2)
    assert s["makespan_seconds"] == 650
    assert s["gpu_seconds_held"] == 100 * 8 + 50 * 16 + 40 * 4 + 500 * 4
    assert s["utilisation"] == pytest.approx((100 * 8 + 50 * 16 + 40 * 4 + 500 * 4) / (650 * 16))
    # Waiting: the gang from 1 to 100, the second 4-GPU job from 3 to 150. Free meanwhile: 8 GPUs on 1-2,
    # 4 on 2-42, 8 on 42-100, none on 100-150.
    assert s["idle_while_waiting"] == pytest.approx((8 * 1 + 4 * 40 + 8 * 58) / (650 * 16))
    assert s["load"] == pytest.approx(3760 / (3 * 16))
    assert s["bounded_slowdown_mean"] == pytest.approx((1 + 149 / 50 + 1 + 647 / 500) / 4)
    assert s["preemptions"] == 0 and s["gpu_hours_lost"] == 0
    assert s["reservation_slips"] == {"count": 0, "mean_seconds": 0.0, "max_seconds": 0.0}
    assert set(s) >= {"policy", "jobs", "nodes", "gpus", "eta", "decision_cpu", "sim_cpu_seconds", "fair_share"}


def test_a_preempted_job_waits_again_until_its_next_run() -> None:
    # 8 GPUs. Job 1 (4 GPUs) runs 0-10, is preempted, runs again 30-50; job 2 (8 GPUs) waits 0-10 and runs 10-30.
    one = JobRecord(job=TraceJob(1, 0.0, 30.0, 4, 1, 4, 3600.0, "a"), attempts=[(0.0, 10.0, 4), (30.0, 50.0, 4)])
    two = JobRecord(job=TraceJob(2, 0.0, 20.0, 8, 1, 8, 3600.0, "b"), attempts=[(10.0, 30.0, 8)])
    # Free while someone waits: 4 GPUs on 0-10 (job 2 waits), none on 10-30 (job 1 waits, all held), none after.
    assert idle_while_waiting([one, two], 8) == 4 * 10
    # Alone, job 1 leaves all 8 free while it waits between its runs.
    assert idle_while_waiting([one], 8) == 8 * 20


def test_fair_share_single_tenant_by_hand() -> None:
    fair = summary()["fair_share"]
    assert isinstance(fair, dict)
    # One tenant: its fair share is its whole demand (below the capacity 650 s x 16 GPUs).
    demand = 100 * 8 + 149 * 16 + 40 * 4 + 647 * 4
    assert fair["min_ratio"] == pytest.approx(3760 / demand)
    assert fair["min_tenant"] == "a"
    assert "water-filling" in fair["definition"]


def test_water_fill() -> None:
    assert water_fill({"a": 10.0, "b": 50.0, "c": 100.0}, 90.0) == {"a": 10.0, "b": 40.0, "c": 40.0}
    assert water_fill({"a": 10.0, "b": 50.0}, 100.0) == {"a": 10.0, "b": 50.0}
    assert water_fill({"a": 100.0, "b": 100.0}, 90.0, {"a": 2.0, "b": 1.0}) == {"a": 60.0, "b": 30.0}


def test_percentile() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0], 99) == 3.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5


def test_waited_by_class_adds_up_to_the_mean_wait() -> None:
    s = summary()
    by_class = s["waited_by_class"]
    assert isinstance(by_class, dict)
    # Every job asks a wall time of an hour or less; the gang waited 99 s, the second 4-GPU job 147 s.
    assert by_class == {
        "whole_node": {"<=1h": {"jobs": 1, "waited_hours": 0.0, "of_mean_hours": 0.0}},
        "gang": {"<=1h": {"jobs": 1, "waited_hours": pytest.approx(99 / 3600), "of_mean_hours": pytest.approx(99 / 3600 / 4)}},
        "sub_node": {"<=1h": {"jobs": 2, "waited_hours": pytest.approx(147 / 3600), "of_mean_hours": pytest.approx(147 / 3600 / 4)}},
    }
    parts = sum(cell["of_mean_hours"] for buckets in by_class.values() for cell in buckets.values())
    assert parts * 3600 == pytest.approx(s["wait"]["mean"])  # type: ignore[index]


def test_wall_buckets_are_upper_bounds() -> None:
    assert [wall_bucket(h * 3600) for h in (0.5, 1, 1.01, 4, 24, 24.5, 168)] == ["<=1h", "<=1h", "<=4h", "<=4h", "<=1d", ">1d", ">1d"]


def test_one_gpu_jobs_are_told_apart_from_other_jobs_of_part_of_a_node() -> None:
    trace = [job(1, 0.0, 7200.0, 1), job(2, 0.0, 7200.0, 7), job(3, 10.0, 100.0, 1)]  # job 3 waits for a GPU of the one node
    result = simulate(trace, cluster=ClusterSpec(nodes=1), policy="easy", config=PolicyConfig(), assumptions=Assumptions())
    by_class = summarize(result, config=PolicyConfig())["waited_by_class"]
    assert by_class["sub_node"] == {"<=4h": {"jobs": 1, "waited_hours": 0.0, "of_mean_hours": 0.0}}
    assert by_class["one_gpu"]["<=1h"]["jobs"] == 1
    assert by_class["one_gpu"]["<=1h"]["waited_hours"] == pytest.approx((7200 - 10) / 3600)
    assert by_class["one_gpu"]["<=4h"] == {"jobs": 1, "waited_hours": 0.0, "of_mean_hours": 0.0}
