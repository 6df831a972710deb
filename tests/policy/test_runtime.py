"""A running job's expected end (policy/runtime.py) and the expected start it gives a reserved job."""

from __future__ import annotations

from dataclasses import replace

from policy.model import ESTIMATE_RESERVED
from policy.runtime import expected_runtime
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, running, snap, waiting


def test_the_prediction_is_the_mean_of_the_owners_last_two_run_times_never_above_the_wall_time() -> None:
    assert expected_runtime([], 4 * HOUR) is None
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


def test_a_job_that_ran_past_its_prediction_is_expected_at_its_wall_time() -> None:
    assert reserved_case(expected_end=NOW - 60) == (NOW + 3 * HOUR, NOW + 3 * HOUR)
