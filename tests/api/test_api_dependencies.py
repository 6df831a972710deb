"""Job dependencies (`sbatch --dependency`): a job waits (DEPENDENCY) until the jobs it names have ended as asked,
starts after them, and is cancelled, saying why, once its dependency can never be met."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from jobs.models import Job
from tests.conftest import job_payload

JOBS = "/api/v1/jobs/"


def pending_reason(api: APIClient, job_id: int) -> dict[str, Any]:
    return api.get(f"{JOBS}{job_id}/").json()["pending_reason"]


def test_a_job_waits_for_its_dependency_to_succeed_then_starts(api: APIClient, submit: Any, sim: Any) -> None:
    first = submit(nodes=1, simulate={"duration_seconds": 30})
    sim.cycle()
    sim.advance(2)
    then = submit(nodes=1, dependencies=[{"type": "afterok", "job": first["id"]}])
    assert then["dependencies"] == [{"type": "afterok", "job": first["id"], "state": "RUNNING", "met": None}]
    sim.advance(2)
    # 15 nodes are free, but it waits for the first job, with an estimate from when that one is expected to end.
    job = api.get(f"{JOBS}{then['id']}/").json()
    assert job["state"] == "PENDING"
    assert job["pending_reason"] == {
        "code": "DEPENDENCY",
        "message": f"Waits for job {first['id']} to succeed (afterok; it is RUNNING).",
    }
    assert job["estimated_start"] is not None
    sim.advance(30)
    assert Job.objects.get(pk=first["id"]).state == "SUCCEEDED"
    sim.advance(2)
    sim.advance(2)
    job = api.get(f"{JOBS}{then['id']}/").json()
    assert job["state"] == "RUNNING"
    assert job["dependencies"] == [{"type": "afterok", "job": first["id"], "state": "SUCCEEDED", "met": True}]


def test_a_dependency_that_can_never_be_met_cancels_the_job_and_its_own_dependents(api: APIClient, submit: Any, sim: Any) -> None:
    failing = submit(nodes=1, simulate={"duration_seconds": 5, "exit_code": 3})
    on_success = submit(nodes=1, dependencies=[{"type": "afterok", "job": failing["id"]}])
    on_failure = submit(nodes=1, simulate={"duration_seconds": 5}, dependencies=[{"type": "afternotok", "job": failing["id"]}])
    chained = submit(nodes=1, dependencies=[{"type": "afterany", "job": on_success["id"]}])
    sim.cycle()
    sim.advance(2)
    assert pending_reason(api, on_success["id"])["code"] == "DEPENDENCY"
    sim.advance(10)
    assert Job.objects.get(pk=failing["id"]).state == "FAILED"
    sim.advance(2)
    cancelled = Job.objects.get(pk=on_success["id"])
    assert cancelled.state == "CANCELLED"
    assert cancelled.state_reason == (
        f"Cancelled by Muster: its dependency afterok:{failing['id']} can never be met (job {failing['id']} ended FAILED)."
    )
    # afterany is met by a cancel: the chained job runs; the job waiting for a failure runs too.
    sim.advance(2)
    sim.advance(2)
    assert Job.objects.get(pk=chained["id"]).state == "RUNNING"
    assert Job.objects.get(pk=on_failure["id"]).state in ("RUNNING", "SUCCEEDED")


def test_an_arrays_id_names_every_element(api: APIClient, submit: Any, sim: Any) -> None:
    response = api.post(f"{JOBS}array/", {**_payload(), "array": "0-2"}, format="json")
    assert response.status_code == 201, response.content
    array_id = response.json()["array_id"]
    after = submit(nodes=1, dependencies=[{"type": "afterany", "job": array_id}])
    assert [d["job"] for d in after["dependencies"]] == [j["id"] for j in response.json()["jobs"]]


def test_bad_dependencies_are_refused_naming_each_and_nothing_is_queued(
    api: APIClient, other_api: APIClient, submit: Any, sim: Any
) -> None:
    failed = submit(nodes=1, simulate={"duration_seconds": 1, "exit_code": 1})
    sim.cycle()
    sim.advance(2)
    sim.advance(3)
    assert Job.objects.get(pk=failed["id"]).state == "FAILED"
    others = other_api.post(JOBS, _payload(), format="json").json()["id"]
    before = Job.objects.count()
    response = api.post(
        JOBS,
        {
            **_payload(),
            "dependencies": [
                {"type": "afterok", "job": failed["id"]},
                {"type": "afterany", "job": others},
                {"type": "afterany", "job": 99999},
            ],
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["dependencies"] == [
        f"afterok:{failed['id']} can never be met: job {failed['id']} has ended FAILED.",
        f"No job {others} (or none that you may see).",
        "No job 99999 (or none that you may see).",
    ]
    response = api.post(JOBS, {**_payload(), "dependencies": [{"type": "after", "job": failed["id"]}]}, format="json")
    assert response.status_code == 400
    assert "Unknown dependency type 'after'; choose afterok, afterany or afternotok" in str(response.json()["dependencies"])
    mine = submit(nodes=1)["id"]
    before += 1
    response = api.post(
        JOBS,
        {**_payload(), "dependencies": [{"type": "afterok", "job": mine}, {"type": "afternotok", "job": mine}]},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["dependencies"] == [f"Job {mine} is named both afterok and afternotok: no end of it meets both."]
    assert Job.objects.count() == before


def _payload() -> dict[str, Any]:
    return job_payload(nodes=1)
