"""Planned maintenance on the simulated cluster, end to end: an admin schedules it over the API a few hours ahead;
short jobs still backfill the nodes before it, a long job waits with a reason naming the window and an estimate at its
end, nothing starts during it, and after it the nodes take work again with no one acting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.test import Client
from rest_framework.test import APIClient

from jobs.models import Job
from jobs.states import JobState
from tests.conftest import SimHarness, job_payload
from tests.scheduler.test_queue_scenarios import START, get, parse, post, world  # noqa: F401  (world: a fixture)

MAINT = "/api/v1/nodes/maintenance/"
HOUR = 3600


def test_a_window_ahead_lets_short_jobs_backfill_keeps_long_ones_off_and_gives_the_nodes_back_at_its_end(
    world: Callable[..., SimHarness],  # noqa: F811
    api: APIClient,
    admin_api: APIClient,
) -> None:
    sim = world(2, racks=1)
    start, end = START + timedelta(hours=2), START + timedelta(hours=10)
    made = admin_api.post(
        MAINT,
        {"nodes": ["sim-node-000", "sim-node-001"], "start": start.isoformat(), "duration_seconds": 8 * HOUR, "reason": "firmware"},
        format="json",
    )
    assert made.status_code == 201, made.content
    window = made.json()
    assert window["nodelist"] == "sim-node-[000-001]" and window["on"] is False

    # With the cluster idle, it is only the window that keeps a 3-hour gang off.
    long = post(api, name="long", nodes=2, wall_time_seconds=3 * HOUR, simulate={"duration_seconds": 2 * HOUR})
    sim.cycle()
    waiting = get(api, long["id"])
    assert waiting["state"] == "PENDING"
    assert waiting["pending_reason"]["message"].startswith(
        "Nodes sim-node-[000-001] go into maintenance at 2026-03-11 11:00 UTC (firmware), until 2026-03-11 19:00 UTC: "
        "this job's wall time would reach it."
    )
    # A one-hour job ends before the window: it backfills the idle nodes (that is the point of planning ahead).
    short = post(api, name="short", nodes=1, wall_time_seconds=HOUR, simulate={"duration_seconds": 1800})
    sim.cycle()
    assert get(api, short["id"])["state"] in ("SCHEDULED", "RUNNING")
    waiting = get(api, long["id"])
    # The plan knows the nodes are gone from 11:00 to 19:00: the long job is expected at 19:00, not in the window.
    assert parse(waiting["estimated_start"]) == end
    # So does `muster submit --test-only` (estimate/) for another such gang: after the window, not at 09:00 on idle nodes.
    estimated = api.post("/api/v1/jobs/estimate/", job_payload(nodes=2, wall_time_seconds=3 * HOUR), format="json")
    assert estimated.status_code == 200, estimated.content
    assert estimated.json()["start"]["kind"] != "now" and parse(estimated.json()["start"]["at"]) >= end

    # In the window: the short job is long done, and a new one-hour job does not start either.
    sim.advance(2 * HOUR + 60)
    assert Job.objects.get(pk=short["id"]).state == JobState.SUCCEEDED
    during = post(api, name="during", nodes=1, wall_time_seconds=HOUR, simulate={"duration_seconds": 60})
    sim.cycle()
    job = get(api, during["id"])
    assert job["state"] == "PENDING"
    assert job["pending_reason"]["message"].startswith(
        "Nodes sim-node-[000-001] are in maintenance (firmware) until 2026-03-11 19:00 UTC: nothing new starts there before."
    )
    listed = admin_api.get(MAINT).json()
    assert [(w["id"], w["on"]) for w in listed] == [(window["id"], True)]

    # At its end the nodes come back by themselves: the long job starts, with no admin acting.
    sim.clock.now = end
    sim.cycle()
    assert get(api, long["id"])["state"] in ("SCHEDULED", "RUNNING")
    assert admin_api.get(MAINT).json() == []


def test_refusals_say_what_is_wrong_and_schedule_nothing(
    world: Callable[..., SimHarness],  # noqa: F811
    api: APIClient,
    admin_api: APIClient,
) -> None:
    world(2, racks=1)
    base: dict[str, Any] = {"nodes": ["sim-node-000"], "start": START.isoformat(), "duration_seconds": HOUR, "reason": "PSU"}

    def refused(client: APIClient, status: int = 400, **changes: Any) -> str:
        response = client.post(
            MAINT,
            {**{k: v for k, v in base.items() if k not in changes}, **{k: v for k, v in changes.items() if v is not None}},
            format="json",
        )
        assert response.status_code == status, response.content
        return str(response.json())

    assert "Only admins" in refused(api, 403)
    assert "in the past" in refused(admin_api, start=(START - timedelta(minutes=5)).isoformat())
    assert "is not after the start" in refused(admin_api, duration_seconds=None, end=START.isoformat())
    assert "No node gpu-99 in the cluster" in refused(admin_api, nodes=["sim-node-000", "gpu-99"])
    assert "Name at least one node" in refused(admin_api, nodes=[])
    assert "Say why" in refused(admin_api, reason="")
    assert "at most 31 days" in refused(admin_api, duration_seconds=32 * 24 * HOUR)
    assert "after the year 9999" in refused(admin_api, start="9999-12-31T23:00:00Z")
    # Now (this minute) is fine; a second window overlapping it on the same node is refused, naming the first.
    first = admin_api.post(MAINT, base, format="json")
    assert first.status_code == 201, first.content
    message = refused(admin_api, nodes=["sim-node-001", "sim-node-000"], start=(START + timedelta(minutes=30)).isoformat())
    assert f"sim-node-000 is in maintenance window {first.json()['id']} already" in message
    # Back to back is not an overlap.
    after = admin_api.post(MAINT, {**base, "start": (START + timedelta(hours=1)).isoformat()}, format="json")
    assert after.status_code == 201, after.content
    # Cancelling: admins only, audited per node, and then the window is gone from the list.
    assert admin_api.post(f"{MAINT}{after.json()['id']}/cancel/").status_code == 200
    assert [w["id"] for w in admin_api.get(MAINT).json()] == [first.json()["id"]]
    again = admin_api.post(f"{MAINT}{after.json()['id']}/cancel/")
    assert again.status_code == 400 and "cancelled already" in str(again.json())
    audit = admin_api.get("/api/v1/audit/", {"action": "node.maintenance_cancel"}).json()["results"]
    assert [e["target_repr"] for e in audit] == ["sim-node-000"]


def test_the_node_list_and_the_cluster_page_say_the_window_and_the_jobs_in_its_way(
    world: Callable[..., SimHarness],  # noqa: F811
    api: APIClient,
    admin_api: APIClient,
    user: Any,
) -> None:
    """A 3-hour job started before the window was planned runs on into it: the admin sees it named on the node, and
    while the window is on the node takes no new work, as every count says."""
    sim = world(2, racks=1)
    long = post(api, name="long", nodes=1, wall_time_seconds=3 * HOUR, simulate={"duration_seconds": 3 * HOUR})
    sim.cycle()
    busy = Job.objects.get(pk=long["id"]).allocations.get().node.name
    start = START + timedelta(hours=1)
    made = admin_api.post(
        MAINT,
        {"nodes": ["sim-node-000", "sim-node-001"], "start": start.isoformat(), "duration_seconds": HOUR, "reason": "PSU"},
        format="json",
    )
    assert made.status_code == 201, made.content
    assert made.json()["running"] == {busy: [long["id"]]}
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/").json()["results"]}
    assert nodes[busy]["maintenance"]["in_the_way"] == [long["id"]] and nodes[busy]["maintenance"]["on"] is False
    other = next(name for name in ("sim-node-000", "sim-node-001") if name != busy)
    assert nodes[other]["maintenance"]["in_the_way"] == [] and nodes[other]["gpus_free"] == 8
    client = Client()
    client.force_login(user)
    page = client.get("/cluster/").content.decode()
    assert page.count('data-testid="node-maintenance"') == 2 and "MAINT from 2026-03-11 10:00" in page
    assert "PSU; in the way: " in page and f"job {long['id']}</a>" in page

    # On now: no GPU of either node is free, the job runs on.
    sim.advance(HOUR + 60)
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/").json()["results"]}
    assert (nodes[busy]["gpus_free"], nodes[other]["gpus_free"]) == (0, 0)
    assert nodes[other]["maintenance"]["on"] is True and nodes[other]["gpus_idle"] == 8
    assert Job.objects.get(pk=long["id"]).state == JobState.RUNNING
    page = client.get("/cluster/").content.decode()
    assert "MAINT until 2026-03-11 11:00" in page
