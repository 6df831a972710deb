"""Planned maintenance windows over plain data: backfill before the start, closed from start to end, back at the end,
and the plan forward (estimates, promises) aware of all of it from the moment the window is scheduled."""

from __future__ import annotations

from dataclasses import replace

from policy.maintenance import close_for_maintenance, hostlist
from policy.model import ESTIMATE_PLANNED, ESTIMATE_RESERVED, RESERVATION, MaintenanceWindow, NodeView, Snapshot, when
from policy.schedule import schedule
from tests.policy.test_fair_share_policy import HOUR, NOW, config, pend, placed, running, snap, waiting


def _with(snapshot: Snapshot, *windows: MaintenanceWindow) -> Snapshot:
    return replace(snapshot, maintenance=windows)


def _window(names: tuple[str, ...], start: float, end: float, reason: str = "firmware", wid: int = 1) -> MaintenanceWindow:
    return MaintenanceWindow(id=wid, node_names=names, start=start, end=end, reason=reason)


def test_before_the_start_a_job_that_ends_in_time_backfills_the_nodes_and_one_that_would_reach_the_window_waits() -> None:
    window = _window(("n00", "n01"), NOW + 2 * HOUR, NOW + 10 * HOUR)
    short, long = pend(1, wall=HOUR, age=200), pend(2, wall=3 * HOUR, age=100)
    decisions = schedule(_with(snap([short, long], nodes=2), window))
    assert list(placed(decisions)) == [1]
    wait = waiting(decisions)[2]
    assert wait.reason_code == RESERVATION
    assert wait.reason.startswith(
        f"Nodes n[00-01] go into maintenance at {when(NOW + 2 * HOUR)} (firmware), until {when(NOW + 10 * HOUR)}: "
        "this job's wall time would reach it."
    )
    # Its estimate is after the window, not in it: the plan knows the nodes are gone from the start to the end.
    assert wait.estimated_start == NOW + 10 * HOUR


def test_a_job_that_fits_elsewhere_is_placed_away_from_the_nodes_going_into_maintenance() -> None:
    window = _window(("n00",), NOW + HOUR, NOW + 5 * HOUR)
    decisions = schedule(_with(snap([pend(1, wall=3 * HOUR)], nodes=2), window))
    assert placed(decisions)[1].node_names == ("n01",)


def test_during_the_window_the_nodes_take_no_new_work_and_running_jobs_run_on() -> None:
    window = _window(("n00",), NOW - HOUR, NOW + 2 * HOUR)
    there = running(10, {"n00": 4}, left=5 * HOUR)
    decisions = schedule(_with(snap([pend(1, gpus=4, wall=HOUR / 2)], [there], nodes=1), window))
    assert decisions.placements == ()
    assert decisions.preemptions == ()
    wait = waiting(decisions)[1]
    assert wait.reason.startswith(f"Node n00 is in maintenance (firmware) until {when(NOW + 2 * HOUR)}: nothing new starts there before.")
    # The 4 GPUs the running job leaves free come back at the window's end.
    assert (wait.estimate, wait.estimated_start) == (ESTIMATE_PLANNED, NOW + 2 * HOUR)


def test_after_the_end_the_nodes_come_back_on_their_own() -> None:
    window = _window(("n00",), NOW - 3 * HOUR, NOW)
    decisions = schedule(_with(snap([pend(1)], nodes=1), window))
    assert placed(decisions)[1].node_names == ("n00",)


def test_a_promise_made_with_a_window_ahead_is_kept_when_the_window_comes() -> None:
    """Issue 13: a planned window is capacity known in advance, so the reservation is right from the start, not moved
    later when the window closes the nodes."""
    window = _window(("n00", "n01"), NOW + HOUR, NOW + 3 * HOUR)
    blocker = running(10, {"n00": 8}, left=HOUR / 2)
    gang = pend(1, nodes=2, wall=2 * HOUR, age=10 * HOUR)
    first = schedule(_with(snap([gang], [blocker], nodes=2), window), config(starvation_seconds=HOUR))
    (promise,) = first.reservations
    # Not at +30 min, when the running job ends: the gang's two hours would reach the window.
    assert promise.start == NOW + 3 * HOUR
    assert waiting(first)[1].estimate == ESTIMATE_RESERVED
    # Two hours on, the window is on and the promise stands as made.
    later = replace(_with(snap([gang], nodes=2), window), now=NOW + 2 * HOUR, reservations=first.reservations)
    second = schedule(later, config(starvation_seconds=HOUR))
    assert second.reservations == first.reservations
    assert "Moved" not in waiting(second)[1].reason


def test_a_snapshot_without_windows_decides_as_before() -> None:
    jobs = [running(10, {"n00": 8}, left=HOUR)]
    base = snap([pend(1, age=300), pend(2, age=200)], jobs, nodes=2)
    assert schedule(base) == schedule(_with(base))


def test_hostlist_writes_node_names_as_squeue_does() -> None:
    assert hostlist(("gpu-07", "gpu-08", "gpu-12")) == "gpu-[07-08,12]"
    assert hostlist(("gpu-07",)) == "gpu-07"


def test_a_node_that_shares_its_gpus_is_closed_while_its_window_is_on_and_counted_back_from_the_end() -> None:
    """GPU slices are not planned on timelines: the node itself is closed, as one settling after NotReady."""
    shared = NodeView("s00", 8, 8, sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25)
    base = Snapshot((shared, NodeView("n00", 8, 8)), (), now=NOW)
    on = close_for_maintenance(_with(base, _window(("s00", "n00"), NOW - HOUR, NOW + HOUR)))
    closed, whole = on.nodes
    assert (closed.schedulable, closed.opens_at) == (False, NOW + HOUR)
    assert closed.closed_why == f"in maintenance until {when(NOW + HOUR)}: firmware"
    assert whole.schedulable  # a whole-GPU node is held on the timelines instead (the tests above)
    # Over: dropped, and the node as it was.
    over = close_for_maintenance(replace(_with(base, _window(("s00",), NOW - 2 * HOUR, NOW)), now=NOW))
    assert over.maintenance == () and over.nodes == base.nodes
