"""The cluster and scheduler dashboard: exact numbers on known data, figures Plotly accepts, empty states."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job, JobEvent, Node
from jobs.states import JobState
from telemetry.dashboard.page import dashboard_context
from telemetry.dashboard.selectors import WINDOWS, first_data, gpus, latency, queue_depth, span_for
from telemetry.models import JobTelemetrySummary
from tests.conftest import session_for
from tests.jobs.factories import AllocationFactory, JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory
from tests.telemetry.helpers import as_plotly_figure

DAY = WINDOWS["24h"]


def event(job: Job, at: datetime, from_state: str, to_state: str) -> None:
    JobEvent.objects.create(job=job, at=at, from_state=from_state, to_state=to_state, reason="test")


def started_job(owner: Any, submitted: datetime, started: datetime) -> Job:
    job = JobFactory(owner=owner, state=JobState.SUCCEEDED, submitted_at=submitted, started_at=started)
    event(job, submitted, "", JobState.PENDING)
    event(job, started, JobState.SCHEDULED, JobState.RUNNING)
    return job


@pytest.fixture
def now() -> datetime:
    # On a bucket boundary, so bucket arithmetic in the assertions is plain.
    return datetime(2026, 3, 2, 12, 0, tzinfo=timezone.get_current_timezone())


@pytest.fixture
def node(db: None) -> Node:
    return NodeFactory(name="gpu-001")


# --- sections on known data ------------------------------------------------------------------------


def test_latency_percentiles_exact(user: Any, now: datetime) -> None:
    for i in range(1, 11):  # latencies 10, 20, ..., 100 s, started over the last hours
        started = now - timedelta(hours=i)
        started_job(user, started - timedelta(seconds=10 * i), started)
    # Started before the window: not counted.
    started_job(user, now - timedelta(days=3), now - timedelta(hours=30))
    lat = latency(DAY, now)
    assert lat["count"] == 10
    assert lat["overall"] == {50: 50.0, 90: 90.0, 99: 100.0}
    assert lat["max"] == 100.0
    # Per hour: the job started i hours ago sits alone in its bucket.
    assert lat["series"][50][24 - 3] == 30.0 and lat["counts"][24 - 3] == 1
    assert lat["series"][50][0] is None


def test_a_restarted_job_waits_from_its_requeue_not_from_its_submit(user: Any, now: datetime) -> None:
    submitted = now - timedelta(hours=5)
    job = started_job(user, submitted, submitted + timedelta(seconds=30))
    # Its first attempt failed after four hours; it was requeued and started again 20 s later.
    failed = submitted + timedelta(hours=4)
    event(job, failed, JobState.RUNNING, JobState.PENDING)
    event(job, failed + timedelta(seconds=20), JobState.SCHEDULED, JobState.RUNNING)
    lat = latency(DAY, now)
    assert lat["count"] == 2 and lat["max"] == 30.0 and lat["overall"][50] == 20.0


def test_queue_depth_replays_the_event_history(user: Any, now: datetime) -> None:
    start = now - timedelta(hours=24)
    waiting = JobFactory(owner=user, submitted_at=now - timedelta(hours=25))
    event(waiting, now - timedelta(hours=25), "", JobState.PENDING)
    ran = JobFactory(owner=user, state=JobState.SUCCEEDED, submitted_at=start + timedelta(minutes=10))
    event(ran, start + timedelta(minutes=10), "", JobState.PENDING)
    event(ran, start + timedelta(minutes=25), JobState.PENDING, JobState.SCHEDULED)
    event(ran, start + timedelta(minutes=26), JobState.SCHEDULED, JobState.RUNNING)
    event(ran, start + timedelta(minutes=60), JobState.RUNNING, JobState.SUCCEEDED)
    depth = queue_depth(DAY, now)
    assert len(depth["pending"]) == 288 and len(depth["x"]) == 288
    assert depth["x"][0] == int(start.timestamp() * 1000)
    assert depth["pending"][:7] == [1, 1, 2, 2, 2, 1, 1]  # the second job waits from 10 to 25 min
    assert depth["active"][:14] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0]  # holds GPUs from 25 to 60 min
    assert depth["pending"][-1] == 1 and depth["pending_now"] == 1 and depth["active_now"] == 0


def test_gpu_hours_per_team_and_allocated_over_time(user: Any, admin_user: Any, node: Node, now: datetime) -> None:
    vision, nlp = TeamFactory(name="vision"), TeamFactory(name="nlp")
    vision.members.add(user)
    rows = [
        (vision, 8, now - timedelta(hours=2), now - timedelta(hours=1)),  # 8 GPU-hours
        (nlp, 4, now - timedelta(hours=30), now - timedelta(hours=23)),  # 1 h inside the window: 4 GPU-hours
        (None, 2, now - timedelta(hours=3), None),  # still held: 6 GPU-hours
        (nlp, 8, now - timedelta(hours=50), now - timedelta(hours=40)),  # before the window
    ]
    for team, held, allocated_at, released_at in rows:
        job = JobFactory(owner=user, state=JobState.SUCCEEDED, team=team, submitted_at=allocated_at, gpus_per_node=held)
        AllocationFactory(job=job, node=node, gpus=held, allocated_at=allocated_at, released_at=released_at)
    staff = gpus(DAY, now, admin_user)
    assert staff["team_hours"] == pytest.approx({"vision": 8.0, "no team": 6.0, "nlp": 4.0})
    assert list(staff["team_hours"]) == ["vision", "no team", "nlp"]  # most first
    assert staff["allocated_now"] == 2 and staff["total"] == 8
    assert staff["allocated"][0] == 4  # nlp's 4 GPUs until 23 h ago
    assert staff["allocated"][12] == 0  # 23 h ago: released
    assert staff["allocated"][264] == 10  # 2 h ago: vision's 8 and the 2 still held
    # Others see their own teams by name and the rest summed.
    member = gpus(DAY, now, user)
    assert member["team_hours"] == pytest.approx({"vision": 8.0, "no team": 6.0, "other teams": 4.0})


def test_used_gpus_come_from_telemetry_summaries(user: Any, admin_user: Any, now: datetime) -> None:
    job = JobFactory(
        owner=user,
        state=JobState.SUCCEEDED,
        submitted_at=now - timedelta(hours=3),
        started_at=now - timedelta(hours=2),
        finished_at=now - timedelta(hours=1),
    )
    JobTelemetrySummary.objects.create(job=job, gpu_seconds=8 * 3600, gpu_util_mean=50.0, computed_at=now)
    used = gpus(DAY, now, admin_user)["used"]
    assert used["jobs"] == 1
    assert used["total_allocated_hours"] == pytest.approx(8.0) and used["total_busy_hours"] == pytest.approx(4.0)
    assert used["utilisation"] == pytest.approx(50.0)
    context = dashboard_context(admin_user, "24h", now=now)
    assert "dashboard-used" in context["figure_ids"]


# --- the page --------------------------------------------------------------------------------------


def figures_in(html: str) -> list[dict[str, Any]]:
    match = re.search(r'<script id="telemetry-figures" type="application/json">(.*?)</script>', html, re.S)
    assert match, "no figures on the page"
    return json.loads(match.group(1))


def test_page_renders_figures_plotly_accepts(user: Any, node: Node) -> None:
    now = timezone.now()
    team = TeamFactory(name="vision")
    team.members.add(user)
    done = JobFactory(
        owner=user,
        state=JobState.SUCCEEDED,
        team=team,
        submitted_at=now - timedelta(hours=2),
        started_at=now - timedelta(hours=2) + timedelta(seconds=30),
    )
    event(done, done.submitted_at, "", JobState.PENDING)
    event(done, done.started_at, JobState.PENDING, JobState.SCHEDULED)
    event(done, done.started_at, JobState.SCHEDULED, JobState.RUNNING)
    AllocationFactory(job=done, node=node, allocated_at=done.started_at, released_at=now - timedelta(hours=1))
    waiting = JobFactory(owner=user, submitted_at=now - timedelta(hours=5), name="big-run", pending_reason_code="NO_ROOM")
    event(waiting, waiting.submitted_at, "", JobState.PENDING)

    page = session_for(user).get("/dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'aria-current="page">Dashboard' in html
    figures = figures_in(html)
    ids = {f["id"] for f in figures}
    assert {"dashboard-queue", "dashboard-latency", "dashboard-starvation", "dashboard-allocation", "dashboard-teams"} <= ids
    for f in figures:
        assert f'id="{f["id"]}"' in html
        as_plotly_figure(f["figure"])  # raises on anything Plotly does not know
    assert "/static/vendor/plotly-" in html and "cdn" not in html.lower()
    assert "p50 30 s" in html  # submit to start of the one job that started
    assert "<code>NO_ROOM</code> 1" in html
    starvation = next(f for f in figures if f["id"] == "dashboard-starvation")["figure"]
    assert starvation["data"][0]["y"] == [f"{waiting.pk} big-run"]
    assert starvation["data"][0]["x"] == [pytest.approx(5.0, abs=0.01)]
    assert "GPUs used: unknown" in html  # no telemetry summary
    assert 'class="node-card' in html

    week = session_for(user).get("/dashboard/?window=7d").content.decode()
    assert "<strong>last 7 days</strong>" in week


def test_gpu_amounts_read_as_counts_not_floats(user: Any, node: Node) -> None:
    JobFactory(owner=user, running=True, held=[(node, node.gpus_total)])
    html = session_for(user).get("/dashboard/").content.decode()
    assert f"<td>GPUs allocated now</td><td>{node.gpus_total} of {node.gpus_total}</td>" in html
    assert f"1 job ({node.gpus_total} GPUs)" in html


def test_a_few_gpu_minutes_used_read_as_minutes_not_zero_of_zero_gpu_hours(user: Any) -> None:
    """A 2-minute run on one GPU at 2.2%: "0.0 of 0.0 GPU-hours used" was said."""
    finished = timezone.now() - timedelta(minutes=5)
    job = JobFactory(owner=user, state=JobState.SUCCEEDED, started_at=finished - timedelta(minutes=2), finished_at=finished)
    JobTelemetrySummary.objects.create(job=job, gpu_seconds=132, gpu_util_mean=2.2, computed_at=finished)
    html = session_for(user).get("/dashboard/").content.decode()
    summary = re.search(r'data-testid="used-summary">(.*?)</p>', html, re.S)
    assert summary and summary.group(1).endswith("(1): 0.048 of 2.2 GPU-minutes used (2.2% mean GPU utilisation).")
    used = next(f["figure"] for f in figures_in(html) if f["id"] == "dashboard-used")
    assert used["layout"]["yaxis"]["title"]["text"] == "GPU-minutes"
    assert [trace["y"] for trace in used["data"]] == [[2.2], [0.0484]]
    as_plotly_figure(used)
    # A GPU-hour or more is said in GPU-hours, as it was.
    JobTelemetrySummary.objects.filter(job=job).update(gpu_seconds=8 * 3600, gpu_util_mean=50.0)
    html = session_for(user).get("/dashboard/").content.decode()
    assert "(1): 4.0 of 8.0 GPU-hours used (50.0% mean GPU utilisation)." in html


def test_empty_dashboard(user: Any) -> None:
    page = session_for(user).get("/dashboard/")
    assert page.status_code == 200
    html = page.content.decode()
    for empty in ("empty-queue", "empty-latency", "empty-starvation", "empty-quota", "empty-used", "empty-teams"):
        assert f'data-testid="{empty}"' in html, empty
    assert "telemetry-figures" not in html  # nothing to draw: no script either
    assert "No nodes known yet" in html


def test_a_window_the_dashboard_does_not_offer_is_said_not_silently_replaced(user: Any) -> None:
    client = session_for(user)
    html = client.get("/dashboard/", {"window": "99y"}).content.decode()
    assert 'data-testid="unknown-window"' in html and "There is no window “99y”: showing last 24 hours." in html
    assert 'data-testid="unknown-window"' not in client.get("/dashboard/", {"window": "24h"}).content.decode()


def test_dashboard_needs_a_login(db: None) -> None:
    page = Client().get("/dashboard/")
    assert page.status_code == 302 and "/accounts/login/" in page["Location"]


def test_dashboard_after_simulated_jobs(submit: Any, sim: Any, admin_user: Any) -> None:
    submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 2})
    submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 600})
    sim.cycle()
    submit(nodes=16, gpus_per_node=8)
    sim.advance(1.5)
    sim.advance(3)
    context = dashboard_context(admin_user, "24h", now=sim.clock() + timedelta(seconds=1))
    assert context["queue"]["pending_now"] == 1 and context["queue"]["active_now"] == 1
    assert context["queue"]["pending"][-1] == 1
    assert context["latency"]["count"] == 2
    assert context["gpus"]["allocated_now"] == 16 and context["gpus"]["total"] == 128
    assert context["standing"]["gpus"] == {"within": 16, "over": 0}
    assert context["standing"]["pending_by_reason"] == {"NO_ROOM": 1}
    for f in context["figures"]:
        as_plotly_figure(f["figure"])


# --- a young site, and updates in place ------------------------------------------------------------


def running_since(owner: Any, node: Node, submitted: datetime) -> Job:
    """A job queued at `submitted`, placed a minute later and running since, holding 8 GPUs of `node`."""
    job = JobFactory(owner=owner, state=JobState.RUNNING, submitted_at=submitted, started_at=submitted + timedelta(seconds=61))
    event(job, submitted, "", JobState.PENDING)
    event(job, submitted + timedelta(seconds=60), JobState.PENDING, JobState.SCHEDULED)
    event(job, submitted + timedelta(seconds=61), JobState.SCHEDULED, JobState.RUNNING)
    AllocationFactory(job=job, node=node, gpus=8, allocated_at=submitted + timedelta(seconds=60), released_at=None)
    return job


def test_a_young_sites_time_series_start_at_its_first_data(user: Any, node: Node, now: datetime) -> None:
    # The site's first job was submitted 30 minutes ago and started a minute later: nothing happened before.
    first = now - timedelta(minutes=30)
    running_since(user, node, first)
    span = span_for(DAY, now, first_data())
    assert span.start == first and span.range_ms == [int(first.timestamp() * 1000), int(now.timestamp() * 1000)]
    # About as many buckets as a whole day would have, not 6 of 288 squeezed into the last pixel.
    assert span.step == 10 and span.latency_step == 120
    depth = queue_depth(DAY, now, span)
    assert depth["x"][0] == int(first.timestamp() * 1000) and len(depth["x"]) == 180
    assert depth["pending"][:8] == [1] * 6 + [0, 0] and depth["active"][6] == 1
    allocated = gpus(DAY, now, user, span)
    assert allocated["x"] == depth["x"] and allocated["allocated"][5] == 0 and allocated["allocated"][6] == 8
    lat = latency(DAY, now, span)
    assert lat["x"][0] == depth["x"][0] and lat["series"][50][0] == 61.0
    context = dashboard_context(user, "24h", now=now)
    for key in ("dashboard-queue", "dashboard-latency", "dashboard-allocation"):
        figure = next(f["figure"] for f in context["figures"] if f["id"] == key)
        # The axis runs from the first data to now, whatever the data's own first and last points.
        assert figure["layout"]["xaxis"]["autorangeoptions"] == {"include": span.range_ms, "clipmin": span.range_ms[0]}, key
        assert "range" not in figure["layout"]["xaxis"]  # a fixed range would undo the reader's zoom at every update


def test_history_older_than_the_window_fills_the_window(user: Any, now: datetime) -> None:
    started_job(user, now - timedelta(days=3), now - timedelta(days=3) + timedelta(minutes=1))
    span = span_for(DAY, now, first_data())
    assert span.start == now - timedelta(hours=24) and (span.step, span.latency_step) == (DAY.step, DAY.latency_step)
    assert span_for(DAY, now, None) == span  # no history at all: the window


def test_the_dashboard_updates_in_place_from_its_own_url(user: Any, node: Node, settings: Any) -> None:
    settings.MUSTER_DASHBOARD_REFRESH_SECONDS = 5
    now = timezone.now()
    running_since(user, node, now - timedelta(hours=2))
    client = session_for(user)
    html = client.get("/dashboard/?window=7d").content.decode()
    # No whole-page refresh (it threw away any zoom): the page's script asks for JSON and redraws in place.
    assert 'http-equiv="refresh"' not in html
    assert json.loads(re.search(r'<script id="dashboard-live" type="application/json">(.*?)</script>', html, re.S).group(1)) == {
        "refresh_ms": 5000
    }
    assert "telemetry/dashboard.js" in html and "frontend/poll.js" in html and 'id="dashboard-body"' in html
    assert 'data-testid="dashboard-updated"' in html and "updates in place every 5 s" in html
    body = client.get("/dashboard/?window=7d&live=1").json()
    assert [f["id"] for f in body["figures"]] == [f["id"] for f in figures_in(html)]
    assert 'data-testid="dashboard-summary"' in body["html"] and "<strong>last 7 days</strong>" in body["html"]
    assert 'id="dashboard-queue"' in body["html"] and "<html" not in body["html"]
    assert datetime.fromisoformat(body["updated"]) >= now
    assert Client().get("/dashboard/?live=1").status_code == 302  # signed out: to the login page, as the page


def test_gpus_held_within_or_beyond_quota_count_a_slice_as_its_share(settings: Any, db: None, api: Any, admin_user: Any) -> None:
    from tests.conftest import job_payload, make_sim

    sim = make_sim(settings, shared="time-slicing:4:1")
    assert api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=1, gpu_fraction=0.25), format="json").status_code == 201
    assert api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=8), format="json").status_code == 201
    sim.cycle()
    context = dashboard_context(admin_user, "24h", now=sim.clock() + timedelta(seconds=1))
    # The same figure as "GPUs allocated now": 8.25, not 9 (the slice read as a whole GPU).
    assert context["gpus"]["allocated_now"] == 8.25
    assert context["standing"]["gpus"] == {"within": 8.25, "over": 0}
