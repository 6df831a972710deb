"""A running job's expected end (policy/runtime.py) and the expected start it gives a reserved job."""

from __future__ import annotations

from dataclasses import replace

from policy.model import ESTIMATE_RESERVED
from policy.runtime import expected_runtime
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, running, snap, waiting


def test_the_prediction_is_the_mean_of_the_owners_last_two_run_times_never_above_the_wall_time() -> None:
    assert expected_runtime([], 4 * HOUR) is None
    # One run says too little (a smoke test of seconds): the job is expected to run its wall time.
    assert expected_runtime([5.0], 4 * HOUR) is None
    assert expected_runtime([600.0, 1800.0, 99 * HOUR], 4 * HOUR) == 1200.0  # older ones do not count
    assert expected_runtime([5 * HOUR, 7 * HOUR], 4 * HOUR) == 4 * HOUR


def reserved_case(expected_end: float | None) -> tuple[float, float | None]:
    """Job 1 (a starving 2-node gang) is reserved behind job 10 on n00 (wall end +3 h) and job 11 on n01 (+1 h)."""
    jobs = [
        replace(running(10, {"n00": 8}, left=3 * HOUR), expected_end=expected_end),
        running(11, {"n01": 8}, left=HOUR),
    ]
    decisions = schedule(snap([pend(1, nodes=2, age=2 * HOUR)], jobs), config(starvation_seconds=HOUR))
    (reservation,) = decisions.reservations
    wait = waiting(decisions)[1]
    assert wait.estimate == ESTIMATE_RESERVED
    return reservation.start, wait.estimated_start


def test_a_reserved_job_is_expected_when_the_work_on_its_nodes_is_expected_to_end_but_promised_by_wall_times() -> None:
    assert reserved_case(expected_end=None) == (NOW + 3 * HOUR, NOW + 3 * HOUR)
    # Job 10's owner's jobs run about 90 minutes: the promise stays at +3 h, the expected start is the later node's end.
    assert reserved_case(expected_end=NOW + 1.5 * HOUR) == (NOW + 3 * HOUR, NOW + 1.5 * HOUR)
    # Expected to end before n01 frees: n01's wall end is the expected start.
    assert reserved_case(expected_end=NOW + 0.5 * HOUR) == (NOW + 3 * HOUR, NOW + HOUR)


def test_a_job_that_ran_past_its_prediction_is_expected_half_way_to_its_wall_time() -> None:
    # Job 10 was expected an hour ago and has 3 h left by its wall time: it is expected in 1.5 h, the promise stays.
    assert reserved_case(expected_end=NOW - HOUR) == (NOW + 3 * HOUR, NOW + 1.5 * HOUR)
    # Past its wall time (not yet stopped): nothing is left to halve.
    past_wall = replace(running(10, {"n00": 8}, left=-60.0), expected_end=NOW - HOUR)
    assert past_wall.likely_end(NOW) == NOW - 60


def test_a_reservation_behind_another_is_expected_when_that_one_is_expected_to_be_done() -> None:
    # n00 and n01 run until +1 h. Job 1 (2 nodes, 3 h wall, its owner's jobs run 30 min) is reserved first at +1 h;
    # job 2 (2 nodes) is reserved after it, at +4 h by wall times, and is expected at +1.5 h.
    jobs = [running(10, {"n00": 8}, left=HOUR), running(11, {"n01": 8}, left=HOUR)]
    pending = [
        replace(pend(1, nodes=2, age=3 * HOUR, wall=3 * HOUR), expected_seconds=0.5 * HOUR),
        pend(2, nodes=2, age=2 * HOUR, wall=HOUR),
    ]
    decisions = schedule(snap(pending, jobs), config(starvation_seconds=HOUR, weight_short=0.0))
    assert {r.job_id: r.start for r in decisions.reservations} == {1: NOW + HOUR, 2: NOW + 4 * HOUR}
    assert waiting(decisions)[2].estimated_start == NOW + 1.5 * HOUR


def test_a_job_started_in_this_cycle_is_expected_to_end_by_its_prediction() -> None:
    # n00 is free and takes job 5 now (2 h wall, expected 20 min); job 1 (2 nodes) waits for n00 and n01 (+1 h).
    jobs = [running(11, {"n01": 8}, left=HOUR)]
    pending = [
        replace(pend(5, age=4 * HOUR, wall=2 * HOUR, rank=0), expected_seconds=1200.0),
        pend(1, nodes=2, age=2 * HOUR, wall=HOUR),
    ]
    decisions = schedule(snap(pending, jobs), config(starvation_seconds=HOUR))
    assert [p.job_id for p in decisions.placements] == [5]
    assert {r.job_id: r.start for r in decisions.reservations} == {1: NOW + 2 * HOUR}
    assert waiting(decisions)[1].estimated_start == NOW + HOUR
