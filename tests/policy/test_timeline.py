"""Node timelines: the profile a reservation lowers in place is the one built from scratch."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.timeline import INF, Hold, Timelines, _sweep, at_count_th_first_start, earliest_common_start, first_starts

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


def intervals_from(cuts: list[int], open_end: bool) -> list[tuple[float, float]]:
    """Disjoint, ordered start intervals from sorted cut points (pairs of them), the last open to INF or not."""
    points = sorted(set(cuts))
    pairs = [(float(points[i]), float(points[i + 1])) for i in range(0, len(points) - 1, 2)]
    if open_end and len(points) % 2:
        pairs.append((float(points[-1]), INF))
    return pairs


@settings(max_examples=500, deadline=None)
@given(
    nodes=st.lists(st.tuples(st.lists(st.integers(0, 12), max_size=6), st.booleans()), min_size=1, max_size=8),
    count=st.integers(1, 5),
)
def test_the_gang_shortcut_gives_what_the_sweep_gives(nodes: list[tuple[list[int], bool]], count: int) -> None:
    # Small integer times, so that many intervals open and close at the same instants (the ties the sweep orders).
    options = {f"n{i}": intervals_from(cuts, open_end) for i, (cuts, open_end) in enumerate(nodes)}
    firsts = first_starts(options)
    shortcut = at_count_th_first_start(options, count, firsts) if len(firsts) >= count else None
    if shortcut is not None:
        assert shortcut == _sweep(options, count)
    assert earliest_common_start(options, count) == _sweep(options, count)


def test_the_gang_shortcut_answers_only_when_the_count_th_first_start_is_the_answer() -> None:
    # Both first open at 0 and 2; at 2, b is open but a has closed (at 1): the shortcut cannot answer, the sweep can.
    options = {"a": [(0.0, 1.0), (3.0, INF)], "b": [(2.0, INF)]}
    assert at_count_th_first_start(options, 2, first_starts(options)) is None
    assert earliest_common_start(options, 2) == (3.0, ["a", "b"])
    # Here it can: c, d and e open at 4, and the two first by name join a, already open.
    options = {"a": [(1.0, INF)], "e": [(4.0, INF)], "d": [(4.0, 9.0)], "c": [(4.0, 4.0)]}
    assert at_count_th_first_start(options, 3, first_starts(options)) == (4.0, ["a", "c", "d"])


@settings(max_examples=300, deadline=None)
@given(
    used=st.lists(st.tuples(st.sampled_from([NOW + 100 * k for k in range(1, 20)]), st.integers(1, 4)), max_size=2),
    holds=st.lists(st.tuples(st.sampled_from([NOW + 100 * k for k in range(-1, 20)]), st.integers(1, 8), st.integers(1, 8)), max_size=4),
    gpus=st.integers(1, 9),
    wall=st.sampled_from([0.0, 100.0, 250.0, 800.0]),
    after=st.sampled_from([NOW, NOW + 300, NOW + 1000]),
)
def test_the_earliest_start_is_the_first_of_the_starts(
    used: list[tuple[float, int]], holds: list[tuple[float, int, int]], gpus: int, wall: float, after: float
) -> None:
    tl = timelines(used, 8 - sum(g for _, g in used))
    for i, (start, length, held) in enumerate(holds):
        tl.hold("a", Hold(start, i, start + 100 * length, held))
    starts = tl.starts("a", gpus, wall, after)
    assert tl.earliest("a", gpus, wall, after) == (starts[0][0] if starts else INF)
