"""The dashboard's history charts on a known day and week: every figure pinned.

A day and more of a small cluster's life: a job waiting since before the window, one running since before it, one
preempted and requeued in the same instant and once more after a pause, starts and ends on bucket edges and inside
buckets, a GPU slice, a start exactly at `now`, an event stamped after `now` (a skewed clock), runs with telemetry
summaries and one ended before the window. The figures were taken from the dashboard as it read every event, start and
allocation in the window and replayed them in Python, so that summing each chart's buckets in the database changes none
of them, on PostgreSQL or on SQLite (`make run`'s default).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job, JobEvent, Node
from jobs.states import JobState
from quotas.models import Team
from telemetry.dashboard.page import dashboard_context
from telemetry.dashboard.selectors import WINDOWS, first_data, gpus, latency, queue_depth, span_for
from telemetry.models import JobTelemetrySummary
from tests.jobs.factories import AllocationFactory, JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory

P, S, R = JobState.PENDING, JobState.SCHEDULED, JobState.RUNNING
# On a bucket boundary of either window; the day's window starts at T.
NOW = datetime(2026, 3, 2, 12, 0, tzinfo=timezone.get_current_timezone())
T = NOW - timedelta(hours=24)


def at(base: datetime, **delta: float) -> datetime:
    return base + timedelta(**delta)


def job(owner: Any, state: str, team: Team | None, events: Sequence[tuple[datetime, str, str]], **fields: Any) -> Job:
    made = JobFactory(owner=owner, state=state, team=team, submitted_at=events[0][0], **fields)
    for moment, from_state, to_state in events:
        JobEvent.objects.create(job=made, at=moment, from_state=from_state, to_state=to_state, reason="test")
    return made


def held(made: Job, node: Node, gpus: float, since: datetime, until: datetime | None, attempt: int = 1) -> None:
    AllocationFactory(job=made, node=node, gpus=gpus, attempt=attempt, allocated_at=since, released_at=until)


def summary(made: Job, gpu_seconds: float, util: float) -> None:
    JobTelemetrySummary.objects.create(job=made, gpu_seconds=gpu_seconds, gpu_util_mean=util, computed_at=NOW)


@pytest.fixture
def history(user: Any) -> None:
    vision, nlp = TeamFactory(name="vision"), TeamFactory(name="nlp")
    vision.members.add(user)
    a, b = NodeFactory(name="gpu-001"), NodeFactory(name="gpu-002")

    # Queued before the window, placed 7 minutes into it, started 12.345678 s later (inside a bucket); ended at T+3h.
    old = job(user, JobState.SUCCEEDED, vision, [
        (at(T, hours=-1), "", P), (at(T, minutes=7), P, S), (at(T, minutes=7, seconds=12.345678), S, R),
        (at(T, hours=3), R, JobState.SUCCEEDED),
    ], finished_at=at(T, hours=3))  # fmt: skip
    held(old, a, 8, at(T, minutes=7), at(T, hours=3))
    summary(old, 8 * (3 * 3600 - 7 * 60), 40.0)

    # Running since before the window (queued 5 h 7 min before it); released on a bucket edge.
    spanning = job(user, JobState.SUCCEEDED, nlp, [
        (at(T, hours=-5, minutes=-7), "", P), (at(T, hours=-4, minutes=-59), P, S), (at(T, hours=-4, minutes=-58), S, R),
        (at(T, hours=2), R, JobState.SUCCEEDED),
    ], finished_at=at(T, hours=2))  # fmt: skip
    held(spanning, b, 4, at(T, hours=-4, minutes=-59), at(T, hours=2))

    # Queued on a bucket edge, preempted and requeued in one instant, placed again; preempted once more and requeued
    # two minutes later; placed a third time, running now.
    preempted = job(user, R, nlp, [
        (at(T, hours=10), "", P), (at(T, hours=10, minutes=2, seconds=30), P, S), (at(T, hours=10, minutes=3), S, R),
        (at(T, hours=11, minutes=1), R, JobState.PREEMPTED), (at(T, hours=11, minutes=1), JobState.PREEMPTED, P),
        (at(T, hours=11, minutes=4), P, S), (at(T, hours=11, minutes=4, seconds=20), S, R),
        (at(T, hours=13, seconds=45), R, JobState.PREEMPTED), (at(T, hours=13, minutes=2, seconds=45), JobState.PREEMPTED, P),
        (at(T, hours=13, minutes=10), P, S), (at(T, hours=13, minutes=10, seconds=1), S, R),
    ], attempt=3)  # fmt: skip
    held(preempted, a, 2, at(T, hours=10, minutes=2, seconds=30), at(T, hours=11, minutes=1))
    held(preempted, a, 2, at(T, hours=11, minutes=4), at(T, hours=13, seconds=45), attempt=2)
    held(preempted, b, 2, at(T, hours=13, minutes=10), None, attempt=3)

    # Five starts in one hour, waits of 10 to 50 s.
    for k in range(1, 6):
        queued = at(T, hours=15, minutes=7 * k)
        short = job(user, JobState.SUCCEEDED, nlp if k % 2 else vision, [
            (queued, "", P), (at(queued, seconds=10 * k), P, S), (at(queued, seconds=10 * k), S, R),
            (at(queued, minutes=30), R, JobState.SUCCEEDED),
        ], finished_at=at(queued, minutes=30))  # fmt: skip
        held(short, b, 1, at(queued, seconds=10 * k), at(queued, minutes=30))
        summary(short, 1800 - 10 * k, 25.0 * k)

    # A GPU slice of no team, queued and placed off the seconds, released half an hour ago.
    sliced = job(user, JobState.SUCCEEDED, None, [
        (at(NOW, hours=-2, seconds=1.5), "", P), (at(NOW, hours=-2, seconds=2.25), P, S),
        (at(NOW, hours=-2, seconds=3.125), S, R), (at(NOW, minutes=-30), R, JobState.SUCCEEDED),
    ], finished_at=at(NOW, minutes=-30), gpus_per_node=1)  # fmt: skip
    held(sliced, a, 0.5, at(NOW, hours=-2, seconds=2.25), at(NOW, minutes=-30))
    summary(sliced, 0.5 * 5398, 62.5)

    # Cancelled after four hours of waiting in the instant another was queued (still pending): never 2 at once from
    # them; and one queued at the window's very start.
    swap = at(NOW, minutes=-19, seconds=-30)
    job(user, JobState.CANCELLED, vision, [(at(T, hours=20), "", P), (swap, P, JobState.CANCELLED)])
    job(user, P, vision, [(swap, "", P)])
    edge = job(user, R, vision, [(T, "", P), (at(NOW, minutes=-1), P, S), (NOW, S, R)])
    held(edge, b, 1, at(NOW, minutes=-1), None)
    # Stamped three seconds after `now` by a skewed clock: pending now, but not yet on any chart.
    job(user, P, None, [(at(NOW, seconds=3), "", P)])

    # Ran two days before the window (the site's first data, 13 minutes off the week's buckets): in the week's view only.
    gone = job(user, JobState.SUCCEEDED, nlp, [
        (at(T, hours=-48, minutes=-13), "", P), (at(T, hours=-47), P, S), (at(T, hours=-47), S, R),
        (at(T, hours=-46), R, JobState.SUCCEEDED),
    ], finished_at=at(T, hours=-46))  # fmt: skip
    held(gone, a, 1, at(T, hours=-47), at(T, hours=-46))
    summary(gone, 3600, 90.0)


def runs(series: Sequence[Any]) -> list[tuple[Any, int]]:
    """A series as (value, how many times in a row): 288 buckets read as a handful of runs."""
    out: list[tuple[Any, int]] = []
    for value in series:
        if out and out[-1][0] == value:
            out[-1] = (value, out[-1][1] + 1)
        else:
            out.append((value, 1))
    return out


def rounded(value: Any) -> Any:
    """Floats to 9 decimals, however deep: a sum's last bits depend on the order the rows came in, today as before."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(rounded(v) for v in value)
    return value


def figures(viewer: Any, window_key: str) -> dict[str, Any]:
    """Every figure of the history charts, and of the GPU charts beside them, as the viewer's dashboard gets them."""
    window = WINDOWS[window_key]
    span = span_for(window, NOW, first_data())
    depth = queue_depth(window, NOW, span)
    lat = latency(window, NOW, span)
    g = gpus(window, NOW, viewer, span)
    return rounded(
        {
            "span": (span.start.isoformat(), span.step, span.latency_step, span.range_ms),
            "queue": {
                # The first bucket, how many, the last's start: the series and their x.
                "x": (depth["x"][0], len(depth["x"]), depth["x"][-1]),
                "range": depth["range"],
                "pending": runs(depth["pending"]),
                "active": runs(depth["active"]),
                "now": (depth["pending_now"], depth["active_now"]),
                "changes": depth["changes"],
            },
            "latency": {
                "count": lat["count"],
                "overall": lat["overall"],
                "max": lat["max"],
                "x": (lat["x"][0], len(lat["x"]), lat["x"][-1]),
                "range": lat["range"],
                # The buckets with starts (the others are None and 0).
                "series": {p: {i: v for i, v in enumerate(s) if v is not None} for p, s in lat["series"].items()},
                "counts": {i: n for i, n in enumerate(lat["counts"]) if n},
            },
            "gpus": {
                "total": g["total"],
                "now": g["allocated_now"],
                "x": (g["x"][0], len(g["x"]), g["x"][-1]),
                "range": g["range"],
                "allocated": runs(g["allocated"]),
                "team_hours": list(g["team_hours"].items()),
                "used": g["used"],
            },
        }
    )


# Today's figures (taken before the charts were summed in the database), for a staff viewer.
DAY = {
    "span": ("2026-03-01T12:00:00+00:00", 300, 3600, [1772366400000, 1772452800000]),
    "queue": {
        "x": (1772366400000, 288, 1772452500000),
        "range": [1772366400000, 1772452800000],
        "pending": [
            (2, 2),
            (1, 118),
            (2, 1),
            (1, 11),
            (2, 1),
            (1, 23),
            (2, 2),
            (1, 23),
            (2, 2),
            (1, 1),
            (2, 2),
            (1, 1),
            (2, 1),
            (1, 52),
            (2, 24),
            (3, 1),
            (2, 23),
        ],
        "active": [
            (1, 1),
            (2, 23),
            (1, 12),
            (0, 84),
            (1, 37),
            (0, 1),
            (1, 23),
            (2, 1),
            (3, 2),
            (4, 1),
            (5, 2),
            (6, 1),
            (5, 1),
            (4, 2),
            (3, 1),
            (2, 1),
            (1, 71),
            (2, 18),
            (1, 5),
            (2, 1),
        ],
        "now": (2, 2),
        "changes": 45,
    },
    "latency": {
        "count": 11,
        "overall": {50: 50.0, 90: 4032.345678, 99: 86400.0},
        "max": 86400.0,
        "x": (1772366400000, 24, 1772449200000),
        "range": [1772366400000, 1772452800000],
        "series": {
            50: {0: 4032.345678, 10: 180.0, 11: 200.0, 13: 436.0, 15: 30.0, 22: 1.625, 23: 86400.0},
            90: {0: 4032.345678, 10: 180.0, 11: 200.0, 13: 436.0, 15: 50.0, 22: 1.625, 23: 86400.0},
            99: {0: 4032.345678, 10: 180.0, 11: 200.0, 13: 436.0, 15: 50.0, 22: 1.625, 23: 86400.0},
        },
        "counts": {0: 1, 10: 1, 11: 1, 13: 1, 15: 5, 22: 1, 23: 1},
    },
    "gpus": {
        "total": 16,
        "now": 3.0,
        "x": (1772366400000, 288, 1772452500000),
        "range": [1772366400000, 1772452800000],
        "allocated": [
            (4.0, 1),
            (8.8, 1),
            (12.0, 22),
            (8.0, 12),
            (0.0, 84),
            (1.0, 1),
            (2.0, 11),
            (0.8, 1),
            (2.0, 23),
            (0.3, 1),
            (0.0, 1),
            (2.0, 23),
            (2.57, 1),
            (3.13, 1),
            (4.0, 1),
            (4.7, 1),
            (5.27, 1),
            (6.0, 1),
            (6.23, 1),
            (5.8, 1),
            (5.0, 1),
            (4.2, 1),
            (3.6, 1),
            (3.0, 1),
            (2.0, 71),
            (2.5, 18),
            (2.0, 5),
            (2.2, 1),
        ],
        "team_hours": [("nlp", 36.983333333), ("vision", 24.066666667), ("no team", 0.7496875)],
        "used": {
            "jobs": 7,
            "teams": ["vision", "nlp", "no team"],
            "allocated_hours": [24.05, 1.475, 0.749722222],
            "busy_hours": [9.962777778, 1.100694444, 0.468576389],
            "total_allocated_hours": 26.274722222,
            "total_busy_hours": 11.532048611,
            "utilisation": 43.890277939,
        },
    },
}

WEEK = {
    "span": ("2026-02-27T11:47:00+00:00", 900, 10800, [1772192820000, 1772452800000]),
    "queue": {
        "x": (1772192820000, 289, 1772452020000),
        "range": [1772192820000, 1772452800000],
        "pending": [
            (1, 5),
            (0, 167),
            (1, 1),
            (0, 15),
            (1, 4),
            (2, 2),
            (1, 38),
            (2, 2),
            (1, 2),
            (2, 2),
            (1, 7),
            (2, 1),
            (1, 7),
            (2, 3),
            (1, 16),
            (2, 8),
            (3, 1),
            (2, 8),
        ],
        "active": [
            (0, 4),
            (1, 5),
            (0, 163),
            (1, 21),
            (2, 8),
            (1, 4),
            (0, 28),
            (1, 20),
            (3, 1),
            (5, 1),
            (6, 1),
            (4, 1),
            (2, 1),
            (1, 22),
            (2, 7),
            (1, 1),
            (2, 1),
        ],
        "now": (2, 2),
        "changes": 53,
    },
    "latency": {
        "count": 13,
        "overall": {50: 180.0, 90: 4380.0, 99: 86400.0},
        "max": 86400.0,
        "x": (1772192820000, 25, 1772452020000),
        "range": [1772192820000, 1772452800000],
        "series": {
            50: {0: 4380.0, 14: 540.0, 16: 4032.345678, 19: 180.0, 20: 436.0, 21: 30.0, 23: 1.625, 24: 86400.0},
            90: {0: 4380.0, 14: 540.0, 16: 4032.345678, 19: 200.0, 20: 436.0, 21: 50.0, 23: 1.625, 24: 86400.0},
            99: {0: 4380.0, 14: 540.0, 16: 4032.345678, 19: 200.0, 20: 436.0, 21: 50.0, 23: 1.625, 24: 86400.0},
        },
        "counts": {0: 1, 14: 1, 16: 1, 19: 2, 20: 1, 21: 5, 23: 1, 24: 1},
    },
    "gpus": {
        "total": 16,
        "now": 3.0,
        "x": (1772192820000, 289, 1772452020000),
        "range": [1772192820000, 1772452800000],
        "allocated": [
            (0.0, 4),
            (0.13, 1),
            (1.0, 3),
            (0.87, 1),
            (0.0, 163),
            (0.27, 1),
            (4.0, 20),
            (9.33, 1),
            (12.0, 6),
            (11.47, 1),
            (8.0, 3),
            (6.93, 1),
            (0.0, 28),
            (1.93, 1),
            (2.0, 2),
            (1.87, 1),
            (1.73, 1),
            (2.0, 6),
            (1.83, 1),
            (0.93, 1),
            (2.0, 7),
            (2.83, 1),
            (4.92, 1),
            (5.88, 1),
            (4.0, 1),
            (2.2, 1),
            (2.0, 22),
            (2.07, 1),
            (2.5, 5),
            (2.43, 1),
            (2.0, 1),
            (2.08, 1),
        ],
        "team_hours": [("nlp", 57.916666667), ("vision", 24.066666667), ("no team", 0.7496875)],
        "used": {
            "jobs": 8,
            "teams": ["vision", "nlp", "no team"],
            "allocated_hours": [24.05, 2.475, 0.749722222],
            "busy_hours": [9.962777778, 2.000694444, 0.468576389],
            "total_allocated_hours": 27.274722222,
            "total_busy_hours": 12.432048611,
            "utilisation": 45.580844086,
        },
    },
}

# A member of vision sees nlp as other teams; the time series are the same.
MEMBER_DAY = {
    "team_hours": [("other teams", 36.983333333), ("vision", 24.066666667), ("no team", 0.7496875)],
    "used": {
        "jobs": 7,
        "teams": ["vision", "other teams", "no team"],
        "allocated_hours": [24.05, 1.475, 0.749722222],
        "busy_hours": [9.962777778, 1.100694444, 0.468576389],
        "total_allocated_hours": 26.274722222,
        "total_busy_hours": 11.532048611,
        "utilisation": 43.890277939,
    },
}

MEMBER_WEEK = {
    "team_hours": [("other teams", 57.916666667), ("vision", 24.066666667), ("no team", 0.7496875)],
    "used": {
        "jobs": 8,
        "teams": ["vision", "other teams", "no team"],
        "allocated_hours": [24.05, 2.475, 0.749722222],
        "busy_hours": [9.962777778, 2.000694444, 0.468576389],
        "total_allocated_hours": 27.274722222,
        "total_busy_hours": 12.432048611,
        "utilisation": 45.580844086,
    },
}


@pytest.mark.parametrize(("window_key", "expected"), [("24h", DAY), ("7d", WEEK)])
def test_every_history_figure_is_as_it_was(history: None, admin_user: Any, window_key: str, expected: dict[str, Any]) -> None:
    assert figures(admin_user, window_key) == expected


@pytest.mark.parametrize(("window_key", "expected"), [("24h", MEMBER_DAY), ("7d", MEMBER_WEEK)])
def test_a_member_sees_the_teams_not_theirs_summed(history: None, user: Any, window_key: str, expected: dict[str, Any]) -> None:
    shown = figures(user, window_key)["gpus"]
    assert {"team_hours": shown["team_hours"], "used": shown["used"]} == expected


def test_the_page_draws_them(history: None, admin_user: Any) -> None:
    context = dashboard_context(admin_user, "24h", now=NOW)
    drawn = {f["id"]: f["figure"] for f in context["figures"]}
    # Plain numbers (PostgreSQL sums integers to numerics, which a page's JSON would write as strings).
    json.loads(json.dumps(context["figures"]))
    assert {"dashboard-queue", "dashboard-latency", "dashboard-allocation", "dashboard-teams", "dashboard-used"} <= set(drawn)
    assert runs(drawn["dashboard-queue"]["data"][0]["y"]) == DAY["queue"]["pending"]
    assert runs(drawn["dashboard-allocation"]["data"][0]["y"]) == DAY["gpus"]["allocated"]
    assert drawn["dashboard-teams"]["data"][0]["y"] == [36.98, 24.07, 0.75]
    assert [trace["y"] for trace in drawn["dashboard-used"]["data"]] == [[24.05, 1.48, 0.75], [9.96, 1.1, 0.469]]
