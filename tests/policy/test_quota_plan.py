"""An account's GPU quota over time for the forecast: the first instant a job fits in it for its whole run."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.quota_plan import QuotaPlan


def test_a_job_starts_when_enough_of_what_holds_the_quota_has_ended() -> None:
    plan = QuotaPlan(limit=16, in_use=16, ends=[(100.0, 8), (200.0, 8)])
    assert plan.earliest(8, 0.0, 50.0) == 100.0
    assert plan.earliest(16, 0.0, 50.0) == 200.0
    assert plan.earliest(17, 0.0, 50.0) is None


def test_a_planned_job_uses_the_quota_from_its_start_to_its_end() -> None:
    plan = QuotaPlan(limit=8, in_use=0, ends=[])
    plan.hold(8, 100.0, 200.0)
    # Free now, but not for a whole hour: the window must end by the planned start.
    assert plan.earliest(8, 0.0, 100.0) == 0.0
    assert plan.earliest(8, 0.0, 101.0) == 200.0
    assert plan.earliest(8, 150.0, 10.0) == 200.0


def test_held_beyond_every_end_is_never() -> None:
    plan = QuotaPlan(limit=8, in_use=8, ends=[])
    assert plan.earliest(1, 0.0, 10.0) is None


def _in_use(plan: QuotaPlan, at: float) -> float:
    return plan.in_use + sum(change for instant, change in plan.changes if instant <= at)


@settings(max_examples=300)
@given(
    st.integers(0, 4),
    st.lists(st.tuples(st.integers(1, 30), st.integers(1, 2)), max_size=3),
    st.lists(st.tuples(st.integers(0, 30), st.integers(1, 20), st.integers(1, 4)), max_size=5),
    st.integers(1, 8),
    st.integers(0, 40),
    st.integers(1, 30),
)
def test_the_first_start_found_is_the_first_that_fits_throughout(
    held_on: int, ends: list[tuple[int, int]], holds: list[tuple[int, int, int]], needs: int, after: int, seconds: int
) -> None:
    # Against the definition, instant by instant: every start from `after` on whose window stays within the limit.
    # What holds the quota now: jobs that end, and `held_on` GPUs of some that end after all that is known.
    plan = QuotaPlan(limit=8, in_use=held_on + sum(gpus for _, gpus in ends), ends=ends)
    for start, length, gpus in holds:
        plan.hold(gpus, start, start + length)
    instants = sorted({after} | {at for at, _ in plan.changes if at > after})

    def fits(start: float) -> bool:
        points = [start] + [at for at, _ in plan.changes if start < at < start + seconds]
        return all(_in_use(plan, p) + needs <= 8 for p in points)

    expected = next((t for t in instants if fits(t)), None)
    assert plan.earliest(needs, after, seconds) == expected
