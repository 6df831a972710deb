"""Node timelines: the profile a reservation lowers in place is the one built from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.timeline import INF, Hold, Timelines, earliest_common_start

NOW = 1000.0


def flat(times: list[float], frees: list[int]) -> list[tuple[float, int]]:
    """The step function without breakpoints that change nothing."""
    out: list[tuple[float, int]] = []
    for t, f in zip(times, frees, strict=True):
        if not out or out[-1][1] != f:
            out.append((t, f))
    return out


def timelines(releases: list[tuple[float, int]], free: int) -> Timelines:
    return Timelines({"a": 8}, lambda _: free, lambda _: releases, NOW)


@settings(max_examples=200, deadline=None)
@given(
    used=st.lists(st.tuples(st.floats(NOW, NOW + 5000), st.integers(1, 4)), max_size=2),
    holds=st.lists(st.tuples(st.floats(NOW - 100, NOW + 5000), st.floats(1, 3000), st.integers(1, 2)), max_size=4),
)
def test_a_hold_lowers_the_built_profile_as_a_rebuild_would(used: list[tuple[float, int]], holds: list[tuple[float, float, int]]) -> None:
    free = 8 - sum(g for _, g in used)
    incremental = timelines(used, free)
    incremental.profile("a")
    for i, (start, length, gpus) in enumerate(holds):
        incremental.hold("a", Hold(start, i, start + length, gpus))
    rebuilt = timelines(used, free)
    rebuilt.holds = {"a": sorted(Hold(s, i, s + n, g) for i, (s, n, g) in enumerate(holds))} if holds else {}
    assert flat(*incremental.profile("a")) == flat(*rebuilt.profile("a"))


def test_starts_avoid_every_window_that_would_overlap_a_shortfall() -> None:
    # 8 GPUs: a job holds 8 until +100; a reservation holds all 8 from +500 to +800.
    tl = timelines([(NOW + 100, 8)], 0)
    tl.hold("a", Hold(NOW + 500, 1, NOW + 800, 8))
    assert tl.starts("a", 8, 300, NOW) == [(NOW + 100, NOW + 200), (NOW + 800, INF)]
    assert tl.earliest("a", 8, 401, NOW) == NOW + 800
    assert tl.fits("a", 4, NOW + 100, NOW + 500) and not tl.fits("a", 4, NOW + 100, NOW + 501)
    # Its own hold does not count against the reserved job.
    assert tl.fits("a", 8, NOW + 500, NOW + 800, ignore=1)


def test_a_gang_starts_when_enough_nodes_are_free_together() -> None:
    options = {"a": [(0.0, 10.0), (50.0, INF)], "b": [(20.0, INF)], "c": [(5.0, 30.0)]}
    assert earliest_common_start(options, 2) == (5.0, ["a", "c"])
    # a closes at 10 and reopens at 50, when c has closed at 30: never three at once.
    assert earliest_common_start(options, 3) is None
