"""What pipelines need from the submit: Idempotency-Key, Location, array submits in one transaction, a dry run."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from api.models import IdempotentSubmit
from jobs.models import Job, JobEvent, SimulatedPod
from quotas.models import Quota
from tests.conftest import PASSWORD, client_for, job_payload

JOBS = "/api/v1/jobs/"
ARRAY = "/api/v1/jobs/array/"
VALIDATE = "/api/v1/jobs/validate/"


def post(client: APIClient, url: str, body: dict[str, Any], key: str | None = None) -> Any:
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(url, body, format="json", **headers)


# --- Idempotency-Key and Location ------------------------------------------------------------------


def test_a_created_job_says_where_it_lives(api: APIClient, sim: Any) -> None:
    response = post(api, JOBS, job_payload())
    assert response.status_code == 201
    job_id = response.json()["id"]
    assert response["Location"] == f"http://testserver/api/v1/jobs/{job_id}/"
    assert api.get(response["Location"]).json()["id"] == job_id


def test_the_same_key_and_body_get_the_same_job_once(api: APIClient, sim: Any) -> None:
    first = post(api, JOBS, job_payload(), key="run-42")
    again = post(api, JOBS, job_payload(), key="run-42")
    assert first.status_code == again.status_code == 201
    assert again.json()["id"] == first.json()["id"]
    assert again["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first
    assert Job.objects.count() == 1
    assert JobEvent.objects.count() == 1


def test_without_a_key_every_post_is_a_new_job(api: APIClient, sim: Any) -> None:
    post(api, JOBS, job_payload())
    post(api, JOBS, job_payload())
    assert Job.objects.count() == 2


def test_the_same_key_with_another_body_is_a_conflict_and_creates_nothing(api: APIClient, sim: Any) -> None:
    post(api, JOBS, job_payload(), key="run-42")
    response = post(api, JOBS, job_payload(nodes=1), key="run-42")
    assert response.status_code == 409
    assert "different request" in response.json()["detail"]
    assert Job.objects.count() == 1


def test_keys_are_per_user(api: APIClient, other_api: APIClient, sim: Any) -> None:
    mine = post(api, JOBS, job_payload(), key="k").json()["id"]
    theirs = post(other_api, JOBS, job_payload(), key="k").json()["id"]
    assert mine != theirs


def test_a_refused_submit_does_not_use_up_its_key(api: APIClient, sim: Any) -> None:
    refused = post(api, JOBS, job_payload(nodes=0), key="k")
    assert refused.status_code == 400
    assert not IdempotentSubmit.objects.exists()
    assert post(api, JOBS, job_payload(), key="k").status_code == 201


def test_an_expired_key_is_forgotten(api: APIClient, sim: Any, settings: Any) -> None:
    first = post(api, JOBS, job_payload(), key="k").json()["id"]
    settings.MUSTER_IDEMPOTENCY_KEY_SECONDS = 0
    second = post(api, JOBS, job_payload(), key="k").json()["id"]
    assert second != first
    assert IdempotentSubmit.objects.count() == 1


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there"])
def test_a_malformed_key_is_a_400(api: APIClient, sim: Any, key: str) -> None:
    response = post(api, JOBS, job_payload(), key=key)
    assert response.status_code == 400
    assert "Idempotency-Key" in response.json()
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_retries_with_one_key_create_one_job(require_postgres: None, tx_sim: Any, django_user_model: Any) -> None:
    owner = django_user_model.objects.create_user(username="carol", password=PASSWORD)
    answers: list[int] = []
    barrier = threading.Barrier(6)

    def send() -> None:
        client = client_for(owner)
        barrier.wait()
        response = post(client, JOBS, job_payload(), key="retry-storm")
        answers.append(response.json()["id"] if response.status_code == 201 else response.status_code)
        connection.close()

    threads = [threading.Thread(target=send) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 6
    assert len(set(answers)) == 1, answers
    assert Job.objects.count() == 1


# --- arrays ------------------------------------------------------------------------------------------


def test_an_array_creates_one_job_per_index(api: APIClient, sim: Any) -> None:
    response = post(api, ARRAY, job_payload(nodes=1, gpus_per_node=1, array="0-9:3,20"))
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["count"] == 5
    assert [j["array_index"] for j in body["jobs"]] == [0, 3, 6, 9, 20]
    assert {j["array_id"] for j in body["jobs"]} == {body["array_id"]}
    assert body["array_id"] == body["jobs"][0]["id"]
    assert response["Location"].endswith(f"/api/v1/jobs/?array={body['array_id']}")
    listed = api.get(JOBS, {"array": body["array_id"]}).json()
    assert listed["count"] == 5
    assert JobEvent.objects.filter(job__array_id=body["array_id"]).count() == 5


def test_each_element_runs_with_its_index_in_the_environment(api: APIClient, sim: Any) -> None:
    body = post(api, ARRAY, job_payload(nodes=1, gpus_per_node=1, array="4-5")).json()
    sim.cycle()
    envs = {pod.job_id: pod.env for pod in SimulatedPod.objects.all()}
    by_index = {j["array_index"]: envs[j["id"]] for j in body["jobs"]}
    assert by_index[4]["MUSTER_ARRAY_INDEX"] == "4"
    assert by_index[5]["MUSTER_ARRAY_INDEX"] == "5"
    assert by_index[5]["MUSTER_ARRAY_ID"] == str(body["array_id"])


@pytest.mark.parametrize(
    ("array", "message"),
    [
        ("", "Give the indices"),
        ("3-1", "ends before it starts"),
        ("0-9:0", "step of 0"),
        ("0-9%2", "not supported"),
        ("a-b", "is not an index"),
        ("0-1000", "at most 1000 elements"),
        ("0-999999999", "Indices go up to"),
    ],
)
def test_a_bad_array_is_refused_and_creates_nothing(api: APIClient, sim: Any, array: str, message: str) -> None:
    response = post(api, ARRAY, job_payload(array=array))
    assert response.status_code == 400
    assert message in " ".join(response.json()["array"])
    assert not Job.objects.exists()


def test_an_array_is_all_or_nothing_against_limits(api: APIClient, sim: Any, user: Any) -> None:
    Quota.objects.create(user=user, max_wall_time_seconds=600)
    response = post(api, ARRAY, job_payload(array="0-99"))
    assert response.status_code == 400
    assert "wall_time_seconds" in response.json()
    assert not Job.objects.exists()


def test_an_array_retried_with_its_key_is_not_doubled(api: APIClient, sim: Any) -> None:
    first = post(api, ARRAY, job_payload(nodes=1, array="0-49"), key="sweep-1").json()
    again = post(api, ARRAY, job_payload(nodes=1, array="0-49"), key="sweep-1")
    assert again.json()["array_id"] == first["array_id"]
    assert again["Idempotent-Replayed"] == "true"
    assert Job.objects.count() == 50


def test_the_plain_submit_refuses_an_array_field(api: APIClient, sim: Any) -> None:
    response = post(api, JOBS, job_payload(array="0-3"))
    assert response.status_code == 400
    assert "array" in response.json()


# --- the dry run -------------------------------------------------------------------------------------


def test_a_dry_run_says_a_job_would_be_accepted_and_writes_nothing(api: APIClient, sim: Any) -> None:
    response = post(api, VALIDATE, job_payload())
    assert response.status_code == 200, response.content
    assert response.json() == {"valid": True, "count": 1}
    assert post(api, VALIDATE, job_payload(array="0-9")).json() == {"valid": True, "count": 10}
    assert not Job.objects.exists()


def test_a_dry_run_names_what_the_submit_would_refuse(api: APIClient, sim: Any, user: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8)
    response = post(api, VALIDATE, job_payload(nodes=4, image=""))
    assert response.status_code == 400
    assert "image" in response.json()
    response = post(api, VALIDATE, job_payload(nodes=4))
    assert response.status_code == 400
    assert "allows at most 8" in " ".join(response.json()["nodes"])
    response = post(api, VALIDATE, job_payload(nodes=40))
    assert "the whole cluster has 16" in " ".join(response.json()["nodes"])
    assert not Job.objects.exists()


@pytest.mark.parametrize("key", ["", "x" * 256, "tab\there"])
def test_a_dry_run_refuses_the_key_the_submit_refuses(api: APIClient, sim: Any, key: str) -> None:
    submitted = post(api, JOBS, job_payload(), key=key)
    checked = post(api, VALIDATE, job_payload(), key=key)
    assert checked.status_code == submitted.status_code == 400
    assert checked.json() == submitted.json()
    assert post(api, VALIDATE, job_payload(), key="x" * 255).json() == {"valid": True, "count": 1}


def test_the_schema_documents_the_dry_run_and_the_estimate_with_the_submits_required_fields(db: None) -> None:
    """The dry run's body was `PatchedJobArraySubmitRequest`, every field optional: generated clients sent `{}`."""
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    for path in (VALIDATE, "/api/v1/jobs/estimate/"):
        body = schema["paths"][path]["post"]["requestBody"]
        assert body["required"] is True, path
        ref = body["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[1]
        assert set(components[ref]["required"]) == set(components["JobSubmitRequest"]["required"]), path
        assert "array" in components[ref]["properties"], path


# --- listing by submit time --------------------------------------------------------------------------


def test_jobs_filter_by_submit_time_in_any_offset(api: APIClient, sim: Any) -> None:
    early = post(api, JOBS, job_payload(name="early")).json()
    Job.objects.filter(pk=early["id"]).update(submitted_at="2026-01-01T00:00:00Z")
    post(api, JOBS, job_payload(name="late"))
    names = lambda **q: [j["name"] for j in api.get(JOBS, q).json()["results"]]  # noqa: E731
    assert names(submitted_before="2026-06-01T00:00:00Z") == ["early"]
    assert names(submitted_after="2026-06-01T00:00:00Z") == ["late"]
    # ISO 8601 allows offsets PostgreSQL does not (past 15:59): compared in UTC, never a 500.
    assert names(submitted_before="2026-01-01T17:30:00+17:20") == ["early"]
    assert api.get(JOBS, {"submitted_after": "0001-01-01T00:00:00+17:00"}).status_code == 400
    assert api.get(JOBS, {"submitted_after": "yesterday"}).status_code == 400
    # Django's "Enter a valid date/time." named no form a script could write.
    assert (
        api.get(JOBS, {"submitted_before": "11/29/2026"})
        .json()["submitted_before"][0]
        .startswith("Not a date and time: write it in ISO 8601, as 2026-11-29T14:00:00Z")
    )


@pytest.mark.parametrize(
    ("parameter", "value"), [("submitted_before", "9999-12-31T23:59:59-14:00"), ("submitted_after", "0001-01-01T00:00:00+14:00")]
)
def test_a_time_with_no_utc_equivalent_is_refused_under_the_parameter_sent(api: APIClient, parameter: str, value: str) -> None:
    """It was refused as `submitted_at`, the model's field, which the client never sent."""
    response = api.get(JOBS, {parameter: value})
    assert response.status_code == 400
    assert list(response.json()) == [parameter]
    assert "out of range" in response.json()[parameter][0]


def test_the_job_lists_array_filter_takes_an_array_id_only(api: APIClient, sim: Any) -> None:
    """`?array=1.5` (and 0) listed nothing with a 200, where the schema says an integer: a script's typo read as "no jobs"."""
    for bad in ("1.5", "0", "1e3", "abc"):
        response = api.get(JOBS, {"array": bad})
        assert response.status_code == 400, bad
        assert list(response.json()) == ["array"]
    assert api.get(JOBS, {"array": "12"}).json()["count"] == 0
