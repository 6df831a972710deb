"""`PATCH /api/v1/jobs/{id}/` and `POST /api/v1/jobs/update-array/` (`muster update`, Slurm's `scontrol update`): a
pending job's name, wall time, class, restarts, preemptibility and dependencies change before it starts, checked as its
submit was; anything else is refused by name, and a job that has started is a 409."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.models import Job
from quotas.models import Quota
from tests.conftest import SimHarness, job_payload

UPDATE_ARRAY = "/api/v1/jobs/update-array/"


def url(job_id: int) -> str:
    return f"/api/v1/jobs/{job_id}/"


def test_an_owner_changes_a_pending_jobs_wall_time_and_name_and_its_history_says_so(api: APIClient, submit: Any) -> None:
    job = submit(name="train", wall_time_seconds=3600)
    response = api.patch(url(job["id"]), {"wall_time_seconds": 7200, "name": "train-v2"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["wall_time_seconds"], body["state"]) == ("train-v2", 7200, "PENDING")
    last = body["events"][-1]
    assert (last["from_state"], last["to_state"]) == ("PENDING", "PENDING")
    assert last["reason"] == "Updated by alice: name 'train' -> 'train-v2', wall time 1 h -> 2 h."
    assert not AuditEntry.objects.filter(action="job.update").exists()  # its owner's own: in its history only
    # The same again changes nothing and writes nothing.
    again = api.patch(url(job["id"]), {"wall_time_seconds": 7200}, format="json").json()
    assert len(again["events"]) == len(body["events"])


def test_every_other_field_is_refused_by_name_and_bad_values_as_a_submit_refuses_them(api: APIClient, submit: Any) -> None:
    job = submit()
    response = api.patch(url(job["id"]), {"nodes": 4, "image": "x", "colour": "red", "wall_time_seconds": 60}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "Not changed by an update" in errors["nodes"][0] and "cancel the job and submit it again" in errors["image"][0]
    assert errors["colour"] == ["Unknown field."]
    response = api.patch(url(job["id"]), {"wall_time_seconds": 10**9, "priority_class": "gold", "max_restarts": 99}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert errors["wall_time_seconds"][0].startswith("The site maximum wall time is")
    assert errors["priority_class"] == ["Unknown priority class 'gold'; choose one of production, normal, preemptible."]
    assert errors["max_restarts"][0].startswith("At most")
    response = api.patch(url(job["id"]), {}, format="json")
    assert response.status_code == 400 and "Nothing to update" in str(response.json())
    assert api.put(url(job["id"]), job_payload(), format="json").status_code == 405
    assert Job.objects.get(pk=job["id"]).wall_time_seconds == 3600


def test_the_owners_limits_are_checked_all_at_once_and_an_admin_may_give_a_reserved_class(
    api: APIClient, admin_api: APIClient, submit: Any, user: Any
) -> None:
    Quota.objects.create(user=user, max_wall_time_seconds=7200)
    job = submit(wall_time_seconds=3600)
    response = api.patch(url(job["id"]), {"wall_time_seconds": 9000, "priority_class": "production"}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert "allows at most 7200 s" in errors["wall_time_seconds"][0]
    assert errors["priority_class"][0].startswith("The production class is kept for admins")
    assert Job.objects.get(pk=job["id"]).priority_class == "normal"
    # Raising it within the owner's own limit is theirs to do (Slurm keeps raising for operators; see docs/cli.md).
    assert api.patch(url(job["id"]), {"wall_time_seconds": 7200}, format="json").status_code == 200
    # An admin gives the class, audited; the owner's wall-time limit still holds for them.
    response = admin_api.patch(url(job["id"]), {"priority_class": "production", "wall_time_seconds": 9000}, format="json")
    assert response.status_code == 400 and list(response.json()) == ["wall_time_seconds"]
    response = admin_api.patch(url(job["id"]), {"priority_class": "production"}, format="json")
    assert response.status_code == 200 and response.json()["priority_class"] == "production"
    (entry,) = AuditEntry.objects.filter(action="job.update")
    assert entry.changes == {"priority_class": ["normal", "production"]} and entry.actor_username == "root"


def test_only_a_pending_job_is_updated_and_only_by_its_owner_or_an_admin(
    api: APIClient, other_api: APIClient, submit: Any, sim: SimHarness
) -> None:
    job = submit(simulate={"duration_seconds": 600})
    assert other_api.patch(url(job["id"]), {"name": "mine"}, format="json").status_code == 404
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job["id"]).state == "RUNNING"
    response = api.patch(url(job["id"]), {"wall_time_seconds": 60}, format="json")
    assert response.status_code == 409
    assert response.json()["detail"].startswith(
        f"Job {job['id']} is RUNNING: only a pending job can be updated (a placed or running job's wall time"
    )
    assert api.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200
    response = api.patch(url(job["id"]), {"name": "x"}, format="json")
    assert response.status_code == 409 and "has already ended (CANCELLED)" in response.json()["detail"]


def test_the_stored_estimate_is_cleared_at_once_and_the_next_cycle_plans_by_the_new_wall_time(
    api: APIClient, submit: Any, sim: SimHarness
) -> None:
    first = submit(nodes=16, simulate={"duration_seconds": 3000})  # the whole cluster, for an hour
    waiting = submit(nodes=2)
    sim.cycle()
    sim.advance(2)
    job = Job.objects.get(pk=waiting["id"])
    assert job.estimated_start is not None
    assert Job.objects.get(pk=first["id"]).state in ("SCHEDULED", "RUNNING")
    body = api.patch(url(job.pk), {"wall_time_seconds": 1800, "preemptible": True}, format="json").json()
    assert (body["estimated_start"], body["wall_time_seconds"], body["preemptible"]) == (None, 1800, True)
    sim.cycle()
    again = Job.objects.get(pk=job.pk)
    assert again.estimated_start is not None and again.wall_time_seconds == 1800


def submit_array(client: APIClient, indices: str = "0-3", **overrides: Any) -> list[dict[str, Any]]:
    body = {**job_payload(name="sweep", nodes=1, gpus_per_node=1, **overrides), "array": indices}
    response = client.post("/api/v1/jobs/array/", body, format="json")
    assert response.status_code == 201, response.content
    return sorted(response.json()["jobs"], key=lambda job: job["array_index"])


def test_an_arrays_id_updates_every_pending_element_in_one_request_and_indices_some(api: APIClient, other_api: APIClient) -> None:
    elements = submit_array(api, "0-3")
    array_id = elements[0]["array_id"]
    response = api.post(UPDATE_ARRAY, {"array_id": array_id, "wall_time_seconds": 600}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [j["array_index"] for j in body["updated"]] == [0, 1, 2, 3]
    assert {j["wall_time_seconds"] for j in body["updated"]} == {600}
    response = api.post(UPDATE_ARRAY, {"array_id": array_id, "indices": [1, 3], "name": "sweep-b"}, format="json")
    assert response.status_code == 200 and response.json()["name"] == "sweep-b"
    names = dict(Job.objects.filter(array_id=array_id).values_list("array_index", "name"))
    assert names == {0: "sweep", 1: "sweep-b", 2: "sweep", 3: "sweep-b"}
    response = api.post(UPDATE_ARRAY, {"array_id": array_id, "indices": [1, 9], "name": "x"}, format="json")
    assert response.status_code == 400
    assert response.json()["indices"] == {
        "1": [f"Array {array_id} has no element 9; nothing was updated (GET /api/v1/jobs/?array={array_id} lists its elements)."]
    }
    assert other_api.post(UPDATE_ARRAY, {"array_id": array_id, "name": "x"}, format="json").status_code == 404
    assert api.post(UPDATE_ARRAY, {"name": "x"}, format="json").json() == {"array_id": ["This field is required."]}
    # An element that is not pending refuses the whole update: none is changed.
    assert api.post(f"/api/v1/jobs/{elements[2]['id']}/cancel/").status_code == 200
    response = api.post(UPDATE_ARRAY, {"array_id": array_id, "indices": [1, 2], "max_restarts": 2}, format="json")
    assert response.status_code == 409 and "has already ended (CANCELLED)" in response.json()["detail"]
    assert set(Job.objects.filter(array_id=array_id).values_list("max_restarts", flat=True)) == {0}
    # Without indices, the pending ones only.
    response = api.post(UPDATE_ARRAY, {"array_id": array_id, "max_restarts": 2}, format="json")
    assert [j["array_index"] for j in response.json()["updated"]] == [0, 1, 3]


def test_a_pending_jobs_dependencies_are_replaced_or_cleared_as_scontrol_update_dependency_does(
    api: APIClient, admin_api: APIClient, submit: Any, sim: SimHarness
) -> None:
    prep = submit(nodes=1, simulate={"duration_seconds": 600})
    sweep = api.post("/api/v1/jobs/array/", {**job_payload(nodes=1), "array": "0-3"}, format="json").json()
    job = submit(nodes=1)
    asked = [{"type": "afterok", "job": prep["id"]}, {"type": "afterany", "job": sweep["array_id"]}]
    response = api.patch(url(job["id"]), {"dependencies": asked}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [d["job"] for d in body["dependencies"]] == [prep["id"], *(e["id"] for e in sweep["jobs"])]
    # Its history names them as -d writes them, an array's elements together; its reason waits for the next cycle.
    a = sweep["array_id"]
    assert body["events"][-1]["reason"] == f"Updated by alice: dependencies none -> afterok:{prep['id']},afterany:{a}_[0-3]."
    assert body["pending_reason"]["code"] == "NEW"
    sim.cycle()
    assert Job.objects.get(pk=job["id"]).pending_reason_code == "DEPENDENCY"
    # An admin changes it to one element (Slurm's ARRAYID_INDEX): audited, with what it was and what it is.
    response = admin_api.patch(url(job["id"]), {"dependencies": [{"type": "afterok", "job": f"{a}_2"}]}, format="json")
    assert response.status_code == 200, response.content
    assert [(d["job"], d["array_index"]) for d in response.json()["dependencies"]] == [(sweep["jobs"][2]["id"], 2)]
    (entry,) = AuditEntry.objects.filter(action="job.update")
    assert entry.changes == {"dependencies": [f"afterok:{prep['id']},afterany:{a}_[0-3]", f"afterok:{a}_2"]}
    # An empty list clears them: the job no longer waits.
    response = api.patch(url(job["id"]), {"dependencies": []}, format="json")
    assert response.json()["dependencies"] == []
    assert response.json()["events"][-1]["reason"] == f"Updated by alice: dependencies afterok:{a}_2 -> none."
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job["id"]).state == "RUNNING"
    # Checked as at submit: no such job, or one ended so that it can never be met.
    response = api.patch(url(sweep["jobs"][3]["id"]), {"dependencies": [{"type": "afternotok", "job": 99999}]}, format="json")
    assert response.status_code == 400 and response.json()["dependencies"] == ["No job 99999 (or none that you may see)."]


def test_a_dependency_that_would_make_a_job_wait_on_itself_is_refused(api: APIClient, submit: Any) -> None:
    first = submit(nodes=1)
    second = submit(nodes=1, dependencies=[{"type": "afterok", "job": first["id"]}])
    third = submit(nodes=1, dependencies=[{"type": "afterany", "job": second["id"]}])
    before = list(Job.objects.get(pk=first["id"]).dependencies.all())
    response = api.patch(url(first["id"]), {"dependencies": [{"type": "afterok", "job": third["id"]}]}, format="json")
    assert response.status_code == 400
    assert response.json()["dependencies"] == [
        f"Job {first['id']} would wait for itself: it would wait for job {third['id']}, which waits for job {second['id']}, "
        f"which waits for job {first['id']}; none of them could ever start."
    ]
    response = api.patch(url(first["id"]), {"dependencies": [{"type": "afterok", "job": first["id"]}]}, format="json")
    assert response.json()["dependencies"] == [f"Job {first['id']} cannot wait for itself."]
    assert list(Job.objects.get(pk=first["id"]).dependencies.all()) == before
    # An array's elements made to wait for their own array: each would wait for itself, said for three and counted.
    sweep = api.post("/api/v1/jobs/array/", {**job_payload(nodes=1), "array": "0-4"}, format="json").json()
    a, ids = sweep["array_id"], [e["id"] for e in sweep["jobs"]]
    response = api.post(UPDATE_ARRAY, {"array_id": a, "dependencies": [{"type": "afterany", "job": a}]}, format="json")
    assert response.status_code == 400
    assert response.json()["dependencies"] == [*(f"Job {i} cannot wait for itself." for i in ids[:3]), "And 2 more jobs so."]
    # One past the three said: one more job, not "1 more jobs".
    four = {"array_id": a, "indices": [0, 1, 2, 3], "dependencies": [{"type": "afterany", "job": a}]}
    response = api.post(UPDATE_ARRAY, four, format="json")
    assert response.json()["dependencies"][-1] == "And 1 more job so."


def test_a_dependency_without_its_type_is_refused_by_name_in_an_update_as_at_submit(api: APIClient, submit: Any) -> None:
    # DRF's partial update skipped a nested dependency's missing fields: {"job": 1, "index": 0} alone was a 500 (found by
    # the schema fuzzing in tests/api/test_api_schemathesis.py).
    first = submit(nodes=1)
    waiting = submit(nodes=1, dependencies=[{"type": "afterany", "job": first["id"]}])
    response = api.patch(url(waiting["id"]), {"dependencies": [{"job": first["id"]}]}, format="json")
    assert response.status_code == 400
    assert response.json() == {"dependencies": {"0": {"type": ["This field is required."]}}}
    sweep = submit_array(api, "0-1")
    body = {"array_id": sweep[0]["array_id"], "dependencies": [{"index": 0, "job": sweep[0]["array_id"]}]}
    response = api.post(UPDATE_ARRAY, body, format="json")
    assert response.status_code == 400 and response.json() == {"dependencies": {"0": {"type": ["This field is required."]}}}
    response = api.patch(url(waiting["id"]), {"dependencies": [{"type": "afterok"}]}, format="json")
    assert response.json() == {"dependencies": {"0": {"job": ["This field is required."]}}}
    assert [(d.kind, d.on_id) for d in Job.objects.get(pk=waiting["id"]).dependencies.all()] == [("afterany", first["id"])]


def test_an_update_is_refused_only_for_what_it_changes_not_for_a_limit_lowered_under_the_job(
    api: APIClient, admin_api: APIClient, submit: Any, user: Any
) -> None:
    # Two nodes for an hour: 2 node-hours; then the admin lowers the per-job limit to 1 (the job waits with JOB_LIMIT)
    # and the period's budget to 1.5 (it could never start this period).
    job = submit(wall_time_seconds=3600)
    Quota.objects.create(user=user, max_node_hours_per_job=1, node_hours_per_period=1.5)
    # Its class alone, as `muster update 12 --priority-class production` sends it: refused for `nodes` before.
    response = admin_api.patch(url(job["id"]), {"priority_class": "production"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["priority_class"] == "production"
    # Its owner renames it and changes its restarts, or its class back: nothing of its size or time, nothing refused.
    response = api.patch(url(job["id"]), {"name": "renamed", "max_restarts": 1}, format="json")
    assert response.status_code == 200, response.content
    # Its time is rechecked: longer is past both limits, as at submit, and said of what was changed.
    response = api.patch(url(job["id"]), {"wall_time_seconds": 7200}, format="json")
    assert response.status_code == 400
    errors = response.json()
    assert set(errors) == {"nodes", "wall_time_seconds"}
    assert "allows at most 1 node-hour per job" in errors["nodes"][0]
    # Shortened to fit, it is accepted: the limits then let it run.
    response = api.patch(url(job["id"]), {"wall_time_seconds": 1800}, format="json")
    assert response.status_code == 200, response.content
