"""`POST /api/v1/jobs/cancel-array/`: an array cancelled as `scancel 4` does it, in one request and all or nothing."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from accounts.throttling import WriteRateThrottle
from audit.models import AuditEntry
from jobs import services
from jobs.models import Job, JobEvent
from jobs.states import JobState
from tests.conftest import SimHarness, job_payload

CANCEL_ARRAY = "/api/v1/jobs/cancel-array/"


def submit_array(client: APIClient, indices: str = "0-3", **overrides: Any) -> list[dict[str, Any]]:
    body = {**job_payload(name="sweep", nodes=1, gpus_per_node=1, **overrides), "array": indices}
    response = client.post("/api/v1/jobs/array/", body, format="json")
    assert response.status_code == 201, response.content
    return sorted(response.json()["jobs"], key=lambda job: job["array_index"])


def cancel_array(client: APIClient, array_id: Any, indices: Any = None) -> Any:
    body = {"array_id": array_id} if indices is None else {"array_id": array_id, "indices": indices}
    return client.post(CANCEL_ARRAY, body, format="json")


def states(elements: list[dict[str, Any]]) -> list[str]:
    by_id = dict(Job.objects.filter(pk__in=[e["id"] for e in elements]).values_list("pk", "state"))
    return [by_id[e["id"]] for e in elements]


def test_an_arrays_id_cancels_every_element_left_in_one_request_and_reports_the_ended(
    api: APIClient, sim: SimHarness, django_capture_on_commit_callbacks: Any
) -> None:
    elements = submit_array(api)
    array_id = elements[0]["array_id"]
    sim.cycle()
    sim.advance(2)
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{elements[1]['id']}/cancel/").status_code == 200
    assert states(elements) == [JobState.RUNNING, JobState.CANCELLED, JobState.RUNNING, JobState.RUNNING]
    assert len(sim.cluster.observe_gangs()) == 3

    with django_capture_on_commit_callbacks(execute=True):
        response = cancel_array(api, array_id)
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["array_id"], body["name"]) == (array_id, "sweep")
    assert [(job["array_index"], job["state"]) for job in body["cancelled"]] == [(0, "CANCELLED"), (2, "CANCELLED"), (3, "CANCELLED")]
    assert [(job["id"], job["state"]) for job in body["ended"]] == [(elements[1]["id"], "CANCELLED")]
    assert set(states(elements)) == {JobState.CANCELLED}
    # Each as a single cancel leaves it: its reason, its event, its GPUs free and its pods deleted after the commit.
    job = Job.objects.get(pk=elements[0]["id"])
    assert job.state_reason == "Cancelled by alice."
    assert JobEvent.objects.filter(job=job, from_state=JobState.RUNNING, to_state=JobState.CANCELLED).count() == 1
    assert not sim.cluster.observe_gangs()
    assert not AuditEntry.objects.exists()  # her own jobs


def test_only_the_indices_given_and_a_pending_array_alike(api: APIClient, sim: SimHarness) -> None:
    elements = submit_array(api, "0-5")
    response = cancel_array(api, elements[0]["array_id"], [1, 2, 4])
    assert response.status_code == 200, response.content
    assert [job["array_index"] for job in response.json()["cancelled"]] == [1, 2, 4]
    assert response.json()["ended"] == []
    cancelled, pending = JobState.CANCELLED, JobState.PENDING
    assert states(elements) == [pending, cancelled, cancelled, pending, cancelled, pending]


def test_ended_elements_among_those_asked_are_reported_not_refused(api: APIClient, sim: SimHarness) -> None:
    elements = submit_array(api)
    array_id = elements[0]["array_id"]
    assert cancel_array(api, array_id, [1]).status_code == 200
    response = cancel_array(api, array_id, [1, 2])
    assert response.status_code == 200, response.content
    assert [job["array_index"] for job in response.json()["cancelled"]] == [2]
    assert [(job["array_index"], job["state"]) for job in response.json()["ended"]] == [(1, "CANCELLED")]


def test_nothing_left_to_cancel_is_a_409_listing_what_had_ended(api: APIClient, sim: SimHarness) -> None:
    elements = submit_array(api, "0-2")
    array_id = elements[0]["array_id"]
    assert cancel_array(api, array_id).status_code == 200
    events = JobEvent.objects.count()

    response = cancel_array(api, array_id)
    assert response.status_code == 409
    body = response.json()
    assert body["detail"] == f"Array {array_id} has ended: its 3 jobs had already ended; there is nothing to cancel."
    assert body["cancelled"] == [] and [job["array_index"] for job in body["ended"]] == [0, 1, 2]

    one = cancel_array(api, array_id, [1])
    assert one.status_code == 409
    assert one.json()["detail"] == f"Job {elements[1]['id']} ({array_id}_1) has already ended (CANCELLED); there is nothing to cancel."
    some = cancel_array(api, array_id, [0, 2])
    assert some.status_code == 409
    said = f"2 elements of array {array_id} ({array_id}_[0,2]) had already ended; there is nothing to cancel in them."
    assert some.json()["detail"] == said
    assert JobEvent.objects.count() == events


def test_an_index_the_array_lacks_is_a_400_naming_it_and_nothing_is_cancelled(api: APIClient, sim: SimHarness) -> None:
    elements = submit_array(api)
    array_id = elements[0]["array_id"]
    response = cancel_array(api, array_id, [1, 9, 2, 12])
    assert response.status_code == 400
    lists = f"GET /api/v1/jobs/?array={array_id} lists its elements"
    assert response.json() == {
        "indices": {
            "1": [f"Array {array_id} has no element 9; nothing was cancelled ({lists})."],
            "3": [f"Array {array_id} has no element 12; nothing was cancelled ({lists})."],
        }
    }
    assert set(states(elements)) == {JobState.PENDING}


def test_a_failure_half_way_cancels_nothing(api: APIClient, sim: SimHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The third element's cancel fails (here: its audit, its event, anything): the first two stay as they were."""
    elements = submit_array(api)
    transition, calls = services.job_transition, []

    def failing_on_the_third(job: Job, to_state: str, **kwargs: Any) -> Job:
        calls.append(job.pk)
        if len(calls) == 3:
            raise RuntimeError("the database went away")
        return transition(job, to_state, **kwargs)

    monkeypatch.setattr(services, "job_transition", failing_on_the_third)
    with pytest.raises(RuntimeError):
        cancel_array(api, elements[0]["array_id"])
    assert len(calls) == 3
    assert set(states(elements)) == {JobState.PENDING}
    assert not JobEvent.objects.filter(to_state=JobState.CANCELLED).exists()


def test_unknown_arrays_and_other_users_arrays_are_404_alike(api: APIClient, other_api: APIClient, sim: SimHarness) -> None:
    theirs = submit_array(other_api, "0-1")
    array_id = theirs[0]["array_id"]
    for asked in (array_id, 999_999):
        response = cancel_array(api, asked)
        assert response.status_code == 404
        assert response.json() == {"detail": f"No array {asked} (or none that you may see)."}
    # Indices do not tell an array that exists from one that does not.
    assert cancel_array(api, array_id, [7]).status_code == 404
    # An element's own id is not an array's id; a job of no array is no array.
    assert cancel_array(other_api, theirs[1]["id"]).status_code == 404
    assert set(states(theirs)) == {JobState.PENDING}


def test_an_admin_cancels_anyones_array_on_the_audit_trail(other_api: APIClient, admin_api: APIClient, sim: SimHarness) -> None:
    theirs = submit_array(other_api, "0-2")
    response = cancel_array(admin_api, theirs[0]["array_id"], [0, 2])
    assert response.status_code == 200, response.content
    assert [job["owner"] for job in response.json()["cancelled"]] == ["bob", "bob"]
    entries = AuditEntry.objects.filter(action="job.cancel").order_by("job_id")
    assert [(e.actor.username, e.job_id, e.changes) for e in entries] == [
        ("root", theirs[0]["id"], {"state": ["PENDING", "CANCELLED"], "reason": ["", "Cancelled by root."]}),
        ("root", theirs[2]["id"], {"state": ["PENDING", "CANCELLED"], "reason": ["", "Cancelled by root."]}),
    ]
    assert Job.objects.get(pk=theirs[0]["id"]).state_reason == "Cancelled by root."


def test_every_problem_of_the_body_at_once(api: APIClient, sim: SimHarness) -> None:
    response = api.post(CANCEL_ARRAY, {"array_id": "four", "indices": [1, -2, "x"], "index": 3}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert set(body) == {"array_id", "indices", "index"}
    assert body["index"] == ["Unknown field."]
    assert set(body["indices"]) == {"1", "2"}
    assert api.post(CANCEL_ARRAY, {}, format="json").json() == {"array_id": ["This field is required."]}
    empty = cancel_array(api, 4, [])
    assert empty.json() == {"indices": ["Give at least one index, or leave `indices` out to cancel every element."]}


def test_a_thousand_element_array_is_one_write(api: APIClient, user: Any, sim: SimHarness, settings: Any) -> None:
    """The CLI used to send one cancel per element: under MUSTER_THROTTLE_WRITES a large array took minutes."""
    settings.MUSTER_MAX_ARRAY_SIZE = 1000
    elements = submit_array(api, "0-999")
    settings.MUSTER_THROTTLE_WRITES = "2/minute"
    cache.delete(WriteRateThrottle.cache_format % {"scope": WriteRateThrottle.scope, "ident": user.pk})
    response = cancel_array(api, elements[0]["array_id"])
    assert response.status_code == 200, response.content
    assert len(response.json()["cancelled"]) == 1000
    assert Job.objects.filter(array_id=elements[0]["array_id"], state=JobState.CANCELLED).count() == 1000
    assert cancel_array(api, elements[0]["array_id"]).status_code == 409  # the second write: not throttled yet


def test_an_arrays_cancel_may_say_why(api: APIClient, sim: SimHarness) -> None:
    body = api.post("/api/v1/jobs/array/", job_payload(nodes=1, gpus_per_node=1, array="0-2"), format="json").json()
    answer = api.post("/api/v1/jobs/cancel-array/", {"array_id": body["array_id"], "reason": "wrong learning rate"}, format="json")
    assert answer.status_code == 200, answer.content
    reasons = set(JobEvent.objects.filter(job__array_id=body["array_id"], to_state=JobState.CANCELLED).values_list("reason", flat=True))
    assert len(reasons) == 1 and reasons.pop().endswith(": wrong learning rate.")
