"""`POST /api/v1/jobs/{id}/requeue/` (`muster requeue`, Slurm's `scontrol requeue`): a placed or running job's gang
is stopped and the job waits again in its place, spending no restart; anything else is refused with 409."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.models import Allocation, Job
from tests.conftest import session_for


def url(job_id: int, action: str = "requeue/") -> str:
    return f"/api/v1/jobs/{job_id}/{action}"


def test_requeue_stops_a_running_job_and_it_runs_again_as_its_next_attempt(
    api: APIClient, submit: Any, sim: Any, django_capture_on_commit_callbacks: Any
) -> None:
    job = submit(max_restarts=1, simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    assert api.get(url(job["id"], "")).json()["state"] == "RUNNING"
    with django_capture_on_commit_callbacks(execute=True):
        response = api.post(url(job["id"]), {"reason": "bad data shard, fixed"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "PENDING" and body["restarts"] == 0
    assert body["pending_reason"] == {"code": "REQUEUED", "message": "Requeued by alice: bad data shard, fixed."}
    assert [(e["from_state"], e["to_state"]) for e in body["events"]][-1] == ("RUNNING", "PENDING")
    # Its GPUs are free at once and its pods are gone; the next cycle starts it again, attempt 2.
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()
    assert not sim.cluster.observe_gangs()
    sim.cycle()
    sim.advance(2)
    again = Job.objects.get(pk=job["id"])
    assert (again.state, again.attempt, again.restarts) == ("RUNNING", 2, 0)
    assert not AuditEntry.objects.filter(action="job.requeue").exists()  # its owner's own: in its history only


def test_only_a_placed_or_running_job_is_requeued_and_only_by_its_owner_or_an_admin(
    api: APIClient, other_api: APIClient, admin_api: APIClient, submit: Any, sim: Any
) -> None:
    job = submit()
    response = api.post(url(job["id"]))
    assert response.status_code == 409
    assert response.json()["detail"] == f"Job {job['id']} is PENDING: only a placed or running job can be requeued; it is queued already."
    sim.cycle()
    sim.advance(2)
    assert other_api.post(url(job["id"])).status_code == 404
    assert api.post(url(job["id"]), {"nodes": 3}, format="json").status_code == 400
    assert Job.objects.get(pk=job["id"]).state == "RUNNING"
    response = admin_api.post(url(job["id"]))
    assert response.status_code == 200 and response.json()["pending_reason"]["message"] == "Requeued by root."
    (entry,) = AuditEntry.objects.filter(action="job.requeue")
    assert entry.changes["state"] == ["RUNNING", "PENDING"]
    assert api.post(url(job["id"], "cancel/")).status_code == 200
    response = api.post(url(job["id"]))
    assert response.status_code == 409 and "has already ended (CANCELLED)" in response.json()["detail"]


def test_requeue_with_hold_holds_it_in_the_same_request(api: APIClient, submit: Any, sim: Any) -> None:
    """scontrol requeuehold: two requests (requeue, then hold) left a cycle between them to start it again."""
    job = submit()
    sim.cycle()
    sim.advance(2)
    response = api.post(url(job["id"]), {"hold": True, "reason": "bad node"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "PENDING" and body["held"]["kind"] == "user"
    sim.advance(2)
    assert Job.objects.get(pk=job["id"]).state == "PENDING"
    assert api.post(url(job["id"]), {"hold": "yes"}, format="json").status_code in (400, 409)


def test_a_requeued_jobs_next_attempt_has_not_started_until_its_pods_run(
    api: APIClient, submit: Any, sim: Any, user: Any, django_capture_on_commit_callbacks: Any
) -> None:
    job = submit(simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    first = api.get(url(job["id"], "")).json()
    assert first["started_at"] is not None and first["started_at"] >= first["scheduled_at"]
    with django_capture_on_commit_callbacks(execute=True):
        api.post(url(job["id"]))
    sim.advance(5)
    placed = api.get(url(job["id"], "")).json()
    # Attempt 2 is placed, not running: it read "started" at attempt 1's start, before "placed" (muster show, the page).
    assert (placed["state"], placed["attempt"]) == ("SCHEDULED", 2)
    assert placed["scheduled_at"] > first["started_at"] and placed["started_at"] is None
    assert "<dt>Started</dt>" not in session_for(user).get(f"/jobs/{job['id']}/").content.decode()
    sim.advance(2)
    running = api.get(url(job["id"], "")).json()
    assert running["state"] == "RUNNING" and running["started_at"] >= running["scheduled_at"]
    # Its history reads in the order things happened (it was never out of order: only `started_at` was stale).
    events = [(e["attempt"], e["to_state"]) for e in running["events"]]
    assert events[-3:] == [(1, "PENDING"), (2, "SCHEDULED"), (2, "RUNNING")]
