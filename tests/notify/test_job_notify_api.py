"""A job's `notify` is on its detail, as the submit sent it: an integrator can check it and re-submit the job alike."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from notify.models import JobNotify
from tests.conftest import job_payload

ASKS = {"on": ["end"], "email": False, "webhook": "http://127.0.0.1:9/hook"}


def test_the_detail_says_the_submits_notify_to_its_owner_and_admins_only(
    api: APIClient, other_api: APIClient, admin_api: APIClient, submit: Any, settings: Any
) -> None:
    """The submit took `notify`, but neither its 201 nor the job's detail said it."""
    settings.MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    created = submit(notify=ASKS)
    assert created["notify"] == ASKS
    url = f"/api/v1/jobs/{created['id']}/"
    assert api.get(url).json()["notify"] == ASKS
    assert admin_api.get(url).json()["notify"] == ASKS
    assert other_api.get(url).status_code == 404  # the webhook with it: a job is its owner's and the admins'
    queued = api.get("/api/v1/queue/").json()["results"]
    assert all("notify" not in entry and "webhook" not in str(entry) for entry in queued)  # everyone reads the queue
    # Sent back as it was read, it asks the same.
    again = submit(notify=api.get(url).json()["notify"])
    assert JobNotify.objects.get(job_id=again["id"]).webhook_url == ASKS["webhook"]


def test_a_job_submitted_without_notify_says_null_its_owners_default(api: APIClient, submit: Any) -> None:
    job = submit()
    assert job["notify"] is None
    assert api.get(f"/api/v1/jobs/{job['id']}/").json()["notify"] is None
    assert submit(notify=None)["notify"] is None


def test_the_schema_has_notify_on_the_detail_read_only(db: None) -> None:
    schemas = APIClient().get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    notify = schemas["JobDetail"]["properties"]["notify"]
    assert notify["readOnly"] is True and notify["nullable"] is True


@pytest.mark.parametrize(
    "sent,said",
    [
        ("END", '"END" is not an event: the API takes "start", "end", "fail" or "requeue", in lowercase; Slurm\'s END '
         '(muster submit --mail-type) is "end" here.'),
        ("begin", '"begin" is not an event: the API takes "start", "end", "fail" or "requeue", in lowercase; Slurm\'s BEGIN '
         '(muster submit --mail-type) is "start" here.'),
        ("ALL", '"ALL" is not an event: the API takes "start", "end", "fail" or "requeue", in lowercase; Slurm\'s ALL '
         "(muster submit --mail-type) is all four here."),
        ("often", '"often" is not an event: the API takes "start", "end", "fail" or "requeue", in lowercase.'),
    ],
)  # fmt: skip
def test_an_event_by_another_name_is_refused_naming_the_events_taken(api: APIClient, sim: Any, sent: str, said: str) -> None:
    """`notify.on` took `["end"]` but said only '"END" is not a valid choice.' of Slurm's names, which the CLI and docs use."""
    for url in ("/api/v1/jobs/", "/api/v1/notifications/"):
        body = {"notify": {"on": [sent]}, **job_payload()} if url == "/api/v1/jobs/" else {"on": [sent]}
        answer = (api.post if url == "/api/v1/jobs/" else api.put)(url, body, format="json")
        assert answer.status_code == 400, answer.content
        errors = answer.json()
        on = errors["notify"]["on"] if url == "/api/v1/jobs/" else errors["on"]
        assert on == {"0": [said]}, errors
