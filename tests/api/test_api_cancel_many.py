"""`scancel 12 13 17`: several jobs cancelled in one transaction, so none of them is started by the cycle in between."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from jobs.models import Job, JobEvent
from jobs.states import JobState
from tests.conftest import SimHarness

CANCEL_MANY = "/api/v1/jobs/cancel-many/"


def test_several_jobs_are_cancelled_at_once_and_the_rest_is_said(
    api: APIClient, other_api: APIClient, submit: Any, sim: SimHarness
) -> None:
    running = submit(nodes=16, simulate={"duration_seconds": 3600})  # the whole cluster
    sim.cycle()
    assert Job.objects.get(pk=running["id"]).state in (JobState.SCHEDULED, JobState.RUNNING)
    waiting = submit(nodes=16, simulate={"duration_seconds": 3600})  # starts when the first frees its nodes
    ended = submit(nodes=1)
    Job.objects.filter(pk=ended["id"]).update(state=JobState.SUCCEEDED)
    theirs = submit(client=other_api, nodes=1)

    ids = [running["id"], waiting["id"], ended["id"], theirs["id"], 999_999]
    answer = api.post(CANCEL_MANY, {"ids": ids, "reason": "wrong dataset"}, format="json")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert [j["id"] for j in body["cancelled"]] == [running["id"], waiting["id"]]
    assert all(j["state"] == "CANCELLED" and j["state_reason"] == "Cancelled by alice: wrong dataset." for j in body["cancelled"])
    assert [j["id"] for j in body["ended"]] == [ended["id"]]
    assert body["not_found"] == [theirs["id"], 999_999]  # another's job reads as none, as a single cancel's 404
    assert Job.objects.get(pk=theirs["id"]).state == JobState.PENDING
    sim.cycle()
    # The waiting job was never placed on the nodes the running one freed (one by one, it was: placed, then cancelled).
    assert not JobEvent.objects.filter(job_id=waiting["id"], to_state=JobState.SCHEDULED).exists()


def test_a_cancel_of_several_refuses_what_it_cannot_read_and_cancels_nothing(api: APIClient, submit: Any) -> None:
    job = submit(nodes=1)
    for body, field, said in (
        ({"ids": []}, "ids", "Give at least one job id."),
        ({"ids": list(range(1, 1002))}, "ids", "At most 1000 jobs in one cancel."),
        ({"ids": [job["id"]], "why": "x"}, "why", None),
        ({"ids": ["abc"]}, "ids", None),
    ):
        refused = api.post(CANCEL_MANY, body, format="json")
        assert refused.status_code == 400 and field in refused.json(), (body, refused.content)
        if said:
            assert said in str(refused.json()[field])
    assert Job.objects.get(pk=job["id"]).state == JobState.PENDING
