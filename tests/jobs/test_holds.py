"""`muster hold` / `muster release` (Slurm's scontrol hold/release): a held pending job stays queued but never starts."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.lifecycle import job_preempt
from jobs.models import Job
from jobs.selectors import start_waits
from jobs.states import JobState
from tests.conftest import SimHarness, session_for
from tests.jobs.factories import JobFactory


def hold(client: APIClient, job_id: int) -> Any:
    return client.post(f"/api/v1/jobs/{job_id}/hold/")


def release(client: APIClient, job_id: int) -> Any:
    return client.post(f"/api/v1/jobs/{job_id}/release/")


def test_a_held_job_is_not_started_while_nodes_are_free_and_others_start(api: APIClient, submit: Any, sim: SimHarness) -> None:
    held = submit(nodes=1, gpus_per_node=8)["id"]
    answer = hold(api, held)
    assert answer.status_code == 200, answer.content
    assert answer.json()["held"]["kind"] == "user" and answer.json()["held"]["by"] == "alice"
    later = submit(nodes=1, gpus_per_node=8)["id"]
    report = sim.cycle()
    assert report.placed == [later]
    job = Job.objects.get(pk=held)
    assert (job.state, job.pending_reason_code) == (JobState.PENDING, "HELD")
    assert job.pending_reason.startswith("Held by its owner (alice) at ")
    assert job.pending_reason.endswith(f": `muster release {held}` lets it start.")
    # No estimate and no reservation: nobody knows when it is released.
    assert (job.estimated_start, job.reserved_nodes, job.reserved_start) == (None, [], None)
    shown = api.get(f"/api/v1/jobs/{held}/").json()
    assert shown["pending_reason"]["code"] == "HELD" and shown["estimated_start"] is None
    # It is still in the queue, among the pending jobs, and found by ?held=true.
    assert [j["id"] for j in api.get("/api/v1/jobs/?state=PENDING").json()["results"]] == [held]
    assert [j["id"] for j in api.get("/api/v1/jobs/?held=true").json()["results"]] == [held]
    assert held not in [j["id"] for j in api.get("/api/v1/jobs/?held=false").json()["results"]]
    assert [j["id"] for j in api.get("/api/v1/jobs/?held=1").json()["results"]] == [held]
    # A value it cannot read is refused, not taken as no filter (which listed every job, the running one too).
    refused = api.get("/api/v1/jobs/?held=maybe")
    assert refused.status_code == 400 and refused.json() == {"held": ["Enter true or false."]}


def test_a_released_job_starts_at_the_next_cycle(api: APIClient, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    hold(api, job_id)
    assert sim.cycle().placed == []
    answer = release(api, job_id)
    assert answer.status_code == 200, answer.content
    assert answer.json()["held"] is None
    assert answer.json()["pending_reason"]["message"] == "Released by alice; waiting for the next scheduling cycle."
    assert sim.cycle().placed == [job_id]
    # Both are in its history, which changes no state; the start's wait counts from the release (the time held was the
    # owner's choice, not a wait for the scheduler: the dashboard's latency and /metrics' read it).
    events = [(e["from_state"], e["to_state"], e["reason"]) for e in api.get(f"/api/v1/jobs/{job_id}/").json()["events"]]
    assert events[:3] == [
        ("", "PENDING", "Submitted by alice."),
        ("PENDING", "PENDING", "Held by alice."),
        ("PENDING", "PENDING", "Released by alice."),
    ]
    sim.advance(5)  # its pods up: a start
    job = Job.objects.get(pk=job_id)
    ((started, waited),) = list(start_waits())
    released = job.events.get(reason="Released by alice.").at
    assert waited == pytest.approx((started - released).total_seconds()) and released > job.submitted_at


def test_a_preempted_job_held_is_still_listed_as_preempted(api: APIClient, user: Any) -> None:
    """?state=PREEMPTED reads the latest change of state, which a hold is not."""
    job = job_preempt(JobFactory(owner=user, running=True, history=True), reason="For job 99.", for_job_id=99, now=timezone.now())
    assert [j["id"] for j in api.get("/api/v1/jobs/?state=PREEMPTED").json()["results"]] == [job.pk]
    assert hold(api, job.pk).status_code == 200
    assert [j["id"] for j in api.get("/api/v1/jobs/?state=PREEMPTED").json()["results"]] == [job.pk]
    (note,) = [e for e in api.get(f"/api/v1/jobs/{job.pk}/").json()["events"] if e["from_state"] == e["to_state"]]
    assert note["reason"] == f"Held by {user.username}."


def test_a_held_gang_keeps_its_age_but_blocks_nobody(api: APIClient, submit: Any, sim: SimHarness) -> None:
    # The whole cluster (16 nodes): it would go first by age, and hold every node for itself.
    first = submit(nodes=16, gpus_per_node=8)["id"]
    hold(api, first)
    small = submit(nodes=2, gpus_per_node=8)["id"]
    assert sim.cycle().placed == [small]
    first_job = Job.objects.get(pk=first)
    assert first_job.queue_position == 1 and first_job.submitted_at < Job.objects.get(pk=small).submitted_at


def test_an_admins_hold_cannot_be_released_by_the_owner(
    api: APIClient, admin_api: APIClient, submit: Any, sim: SimHarness, admin_user: Any
) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    answer = hold(admin_api, job_id)
    assert answer.status_code == 200 and answer.json()["held"] == {**answer.json()["held"], "kind": "admin", "by": "root"}
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert job.pending_reason_code == "HELD" and job.pending_reason.startswith("Held by an admin (root) at ")
    assert "only an admin can release it" in job.pending_reason
    refused = release(api, job_id)
    assert refused.status_code == 403
    assert refused.json()["detail"] == f"Job {job_id} is held by an admin (root); only an admin can release it."
    # Holding it again as its owner is refused, saying whose hold it is: it is not the owner's to release.
    again = hold(api, job_id)
    assert again.status_code == 409
    assert again.json()["detail"] == f"Job {job_id} is already held by an admin (root); only an admin can release it."
    assert Job.objects.get(pk=job_id).hold == "admin"
    entry = AuditEntry.objects.get(action="job.hold")
    assert (entry.actor, entry.job_id, entry.changes) == (admin_user, job_id, {"hold": ["", "admin"]})
    assert release(admin_api, job_id).status_code == 200
    assert AuditEntry.objects.get(action="job.release").changes == {"hold": ["admin", ""]}
    assert sim.cycle().placed == [job_id]


def test_an_owners_own_hold_and_release_are_not_audited(api: APIClient, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    hold(api, job_id)
    release(api, job_id)
    assert not AuditEntry.objects.filter(action__in=["job.hold", "job.release"]).exists()


def test_holding_a_running_job_is_409_and_releasing_a_job_not_held_too(api: APIClient, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    not_held = release(api, job_id)
    assert not_held.status_code == 409
    assert not_held.json()["detail"] == f"Job {job_id} is not held; there is nothing to release."
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    refused = hold(api, job_id)
    assert refused.status_code == 409
    assert refused.json()["detail"] == (
        f"Job {job_id} is RUNNING: only a pending job can be held (it has been placed; cancel it to stop it)."
    )


def test_a_held_job_can_be_cancelled(api: APIClient, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    hold(api, job_id)
    assert api.post(f"/api/v1/jobs/{job_id}/cancel/").json()["state"] == JobState.CANCELLED
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["held"] is None


def test_someone_elses_job_cannot_be_held(other_api: APIClient, submit: Any) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    assert hold(other_api, job_id).status_code == 404
    assert not Job.objects.get(pk=job_id).hold


def test_a_job_held_after_the_snapshot_is_not_placed(api: APIClient, submit: Any, sim: SimHarness, monkeypatch: Any) -> None:
    """The cycle read the job as placeable, then its owner held it before the placement was written: not placed."""
    import scheduler.cycle as cycle

    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    real = cycle.build_snapshot

    def snapshot_then_hold(*args: Any, **kwargs: Any) -> Any:
        taken = real(*args, **kwargs)
        hold(api, job_id)
        return taken

    monkeypatch.setattr(cycle, "build_snapshot", snapshot_then_hold)
    assert sim.cycle().placed == []
    assert Job.objects.get(pk=job_id).state == JobState.PENDING


def test_an_action_refuses_a_body_it_would_not_read(api: APIClient, submit: Any) -> None:
    """A cancel sent a field it did not take cancelled the job and dropped it; a hold took a body of 300 KB."""
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    for action in ("cancel", "hold", "release"):
        url = f"/api/v1/jobs/{job_id}/{action}/"
        assert api.post(url, {"force": True}, format="json").json() == {"force": ["Unknown field."]}
        assert api.post(url, "[1, 2]", content_type="application/json").status_code == 400
        assert api.post(url, "notjson", content_type="application/json").status_code == 400
        assert api.post(url, "x", content_type="text/plain").status_code == 415
        assert api.post(url, json.dumps({"x": "y" * 300_000}), content_type="application/json").status_code == 413
    # Nothing was done by any of them.
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.hold) == (JobState.PENDING, "")
    # No body, or an empty object, is what they take.
    assert hold(api, job_id).status_code == 200
    assert api.post(f"/api/v1/jobs/{job_id}/release/", {}, format="json").status_code == 200
    assert api.post(f"/api/v1/jobs/{job_id}/cancel/", "", content_type="application/json").status_code == 200


def test_an_admin_cancelling_someones_job_may_say_why_and_its_owner_reads_it(
    api: APIClient, admin_api: APIClient, admin_user: Any, user: Any, submit: Any
) -> None:
    """The owner read only "Cancelled by root."."""
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    answer = admin_api.post(f"/api/v1/jobs/{job_id}/cancel/", {"reason": "the node goes into maintenance"}, format="json")
    assert answer.status_code == 200, answer.content
    seen = api.get(f"/api/v1/jobs/{job_id}/").json()
    assert seen["events"][-1]["reason"] == f"Cancelled by {admin_user.username}: the node goes into maintenance."
    # The page's Cancel offers the field to whoever cancels someone else's job, not to its owner.
    other = submit(nodes=1)["id"]
    assert 'data-testid="cancel-reason"' in session_for(admin_user).get(f"/jobs/{other}/").content.decode()
    assert 'data-testid="cancel-reason"' not in session_for(user).get(f"/jobs/{other}/").content.decode()
    session_for(admin_user).post(f"/jobs/{other}/cancel/", {"reason": "  quota review  "})
    assert Job.objects.get(pk=other).events.last().reason == f"Cancelled by {admin_user.username}: quota review."
    too_long = admin_api.post(f"/api/v1/jobs/{submit(nodes=1)['id']}/cancel/", {"reason": "x" * 301}, format="json")
    assert too_long.status_code == 400 and "reason" in too_long.json()


def test_a_held_job_is_no_wait_for_the_dashboard_or_metrics(api: APIClient, submit: Any, sim: SimHarness, user: Any) -> None:
    """Jobs held overnight filled the dashboard's longest waits and set /metrics' oldest wait, which pages the on-call."""
    from telemetry.dashboard.selectors import starvation
    from telemetry.exporter import MusterCollector

    held = submit(nodes=16, gpus_per_node=8)["id"]
    hold(api, held)
    sim.cycle()
    later = sim.clock.now + timedelta(hours=3)
    rows = starvation(later)["rows"]
    assert held not in [row["job"].pk for row in rows] and starvation(later)["past_threshold"] == 0
    families = {f.name: f for f in MusterCollector(now=later).collect()}
    assert families["muster_pending_oldest_wait_seconds"].samples[0].value == 0.0


def test_the_queues_summary_counts_a_hold_and_a_release_at_once(api: APIClient, user: Any, sim: SimHarness) -> None:
    """Right after `muster hold` the row read HELD while the summary still counted the job NO_ROOM, until the next cycle."""
    from jobs.models import PlannedQueue

    waiting = [JobFactory(owner=user, queue_position=i, pending_reason_code="NO_ROOM") for i in (1, 2)]
    PlannedQueue.objects.update_or_create(pk=1, defaults={"pending_by_reason": {"NO_ROOM": 2}, "planned_at": timezone.now()})

    def summary() -> dict[str, int]:
        return dict(api.get("/api/v1/queue/").json()["summary"]["pending_by_reason"])

    assert summary() == {"NO_ROOM": 2}
    assert api.post(f"/api/v1/jobs/{waiting[0].pk}/hold/").status_code == 200
    assert summary() == {"HELD": 1, "NO_ROOM": 1}
    assert api.post(f"/api/v1/jobs/{waiting[0].pk}/hold/").status_code == 200  # held already: counted once
    assert summary() == {"HELD": 1, "NO_ROOM": 1}
    assert api.post(f"/api/v1/jobs/{waiting[0].pk}/release/").status_code == 200
    assert summary() == {"NEW": 1, "NO_ROOM": 1}
