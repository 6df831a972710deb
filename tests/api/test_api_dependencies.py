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
    of_no_array = {"array_id": None, "array_index": None}
    assert then["dependencies"] == [{"type": "afterok", "job": first["id"], **of_no_array, "state": "RUNNING", "met": None}]
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
    assert job["dependencies"] == [{"type": "afterok", "job": first["id"], **of_no_array, "state": "SUCCEEDED", "met": True}]


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


def _array(api: APIClient, indices: str) -> tuple[int, list[dict[str, Any]]]:
    response = api.post(f"{JOBS}array/", {**_payload(), "array": indices}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["array_id"], response.json()["jobs"]


def test_an_arrays_element_is_named_as_slurm_writes_it_and_checked_as_a_job_is(
    api: APIClient, other_api: APIClient, submit: Any, sim: Any
) -> None:
    array_id, elements = _array(api, "0-2")
    # ARRAYID_INDEX as a string (what -d and the form send), or as job and index: one element each, not the array.
    after = submit(nodes=1, dependencies=[{"type": "afterok", "job": f"{array_id}_0"}, {"type": "afterany", "job": array_id, "index": 2}])
    assert [(d["type"], d["job"], d["array_id"], d["array_index"]) for d in after["dependencies"]] == [
        ("afterok", elements[0]["id"], array_id, 0),
        ("afterany", elements[2]["id"], array_id, 2),
    ]
    plain = submit(nodes=1)["id"]
    theirs, _ = _array(other_api, "0-1")
    api.post(f"{JOBS}{elements[1]['id']}/cancel/")
    response = api.post(
        JOBS,
        {
            **_payload(),
            "dependencies": [
                {"type": "afterok", "job": f"{array_id}_7"},
                {"type": "afterok", "job": array_id, "index": 99999999999999999999},
                {"type": "afterok", "job": f"{plain}_0"},
                {"type": "afterok", "job": f"{elements[1]['id']}_0"},
                {"type": "afterok", "job": f"{theirs}_0"},
                {"type": "afterok", "job": f"{array_id}_1"},
                {"type": "afterok", "job": array_id},
            ],
        },
        format="json",
    )
    assert response.status_code == 400
    e1 = elements[1]["id"]
    assert response.json()["dependencies"] == [
        f"Array {array_id} has no element 7 (its elements: {array_id}_[0-2]).",
        # Past any index: said as any other, not as the field's bound (Ensure this value is less than or equal to ...).
        f"Array {array_id} has no element 99999999999999999999 (its elements: {array_id}_[0-2]).",
        f"{plain}_0: job {plain} is not an array; name it as {plain}.",
        f"{e1}_0: job {e1} is {array_id}_1, an element of array {array_id}, not an array's id.",
        f"No job {theirs}_0 (or none that you may see).",
        f"afterok:{array_id}_1 can never be met: job {e1} ({array_id}_1) has ended CANCELLED.",
        f"afterok:{array_id} can never be met: job {e1} ({array_id}_1) has ended CANCELLED.",
    ]


def test_an_array_waited_for_reads_as_slurm_names_it_in_the_reason_the_detail_and_the_cancel(api: APIClient, submit: Any, sim: Any) -> None:
    array_id, elements = _array(api, "0-9")
    waiting = submit(nodes=1, name="after-sweep", dependencies=[{"type": "afterok", "job": array_id}])
    sim.cycle()
    sim.advance(2)
    job = api.get(f"{JOBS}{waiting['id']}/").json()
    # One entry for the ten elements, not "job 1 ..., job 2 ..., job 3 ... and 7 more".
    assert job["pending_reason"]["message"] == f"Waits for {array_id}_[0-9] to succeed (afterok; 10 are RUNNING)."
    assert len(job["dependencies"]) == 10  # the API still lists each job, with its array and index
    api.post(f"{JOBS}{elements[3]['id']}/cancel/")
    sim.advance(2)
    cancelled = Job.objects.get(pk=waiting["id"])
    assert cancelled.state == "CANCELLED"
    assert cancelled.state_reason == (
        f"Cancelled by Muster: its dependency afterok:{array_id}_[0-9] can never be met ({array_id}_3, job {elements[3]['id']}, "
        "ended CANCELLED)."
    )


def test_a_job_named_as_text_is_taken_as_its_id_and_other_text_says_how_to_name_one(api: APIClient, submit: Any, sim: Any) -> None:
    # "12_1" was taken and "12" refused (Must be an integer, not the string '12'): both are how -d and YAML write them.
    first = submit(nodes=1)["id"]
    after = submit(nodes=1, dependencies=[{"type": "afterok", "job": str(first)}])
    assert [d["job"] for d in after["dependencies"]] == [first]
    for text, said in (
        (f"{first}_x", f"'{first}_x' is not a job: give its id, 12, or an array's element as Slurm writes it, 12_1."),
        ("twelve", "'twelve' is not a job: give its id, 12, or an array's element as Slurm writes it, 12_1."),
    ):
        response = api.post(JOBS, {**_payload(), "dependencies": [{"type": "afterok", "job": text}]}, format="json")
        assert response.status_code == 400
        assert response.json()["dependencies"] == {"0": {"job": [said]}}
    both = [{"type": "afterok", "job": f"{first}_1", "index": 1}]
    response = api.post(JOBS, {**_payload(), "dependencies": both}, format="json")
    said = f"'{first}_1' names an element already: give 12_1, or job 12 with index 1, not both."
    assert response.json()["dependencies"] == {"0": {"job": [said]}}
