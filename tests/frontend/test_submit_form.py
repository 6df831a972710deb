"""The submit form's server side: one round of errors, the estimate's JSON, and a signed-out submit kept for after the sign-in."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from audit.models import AuditEntry
from jobs.models import Job, JobEvent
from quotas.models import Quota, UsageCharge
from tests.conftest import PASSWORD, session_for
from tests.frontend.forms import submit_form

pytestmark = pytest.mark.django_db


def test_field_errors_cross_field_errors_and_limits_come_in_one_round(user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8, max_wall_time_seconds=3600, max_node_hours_per_job=1)
    page = session_for(user).post("/jobs/new/", submit_form(image="Not A Ref", min_nodes="3", wall_time_minutes="90"))
    errors = page.context["form"].errors
    assert set(errors) == {"image", "nodes", "wall_time_minutes"}
    # Elastic 3..2 is a mistake across two fields; the quota's limits are checked beside it anyway.
    assert any("max_nodes (2) must be more than min_nodes (3)" in e for e in errors["nodes"])
    assert errors["wall_time_minutes"] == ["your quota (user alice) allows at most 60 minutes (1 h) per job; you asked for 90."]
    assert not Job.objects.exists()


def test_the_estimate_answers_json_and_writes_nothing(user: Any, sim: Any) -> None:
    client = session_for(user)
    body = client.post("/jobs/new/estimate/", submit_form()).json()
    assert (body["accepted"], body["fits_limits"], body["start"], body["errors"]) == (True, True, "now", 0)
    assert 'data-kind="now"' in body["html"] and "Would start now" in body["html"]
    body = client.post("/jobs/new/estimate/", submit_form(nodes="17", image="x y")).json()
    assert (body["accepted"], body["errors"]) == (False, 2)
    assert "the whole cluster has 16 such nodes" in body["html"]
    assert not (Job.objects.exists() or JobEvent.objects.exists() or UsageCharge.objects.exists() or AuditEntry.objects.exists())
    assert Client().post("/jobs/new/estimate/", submit_form()).status_code == 401


def test_a_signed_out_submit_is_kept_for_after_the_sign_in_and_never_sent(user: Any, sim: Any) -> None:
    client = Client()
    response = client.post("/jobs/new/", submit_form(name="kept", notify_on="fail"))
    assert response.status_code == 302 and response["Location"] == "/accounts/login/?next=/jobs/new/"
    assert not Job.objects.exists()
    client.post("/accounts/login/?next=/jobs/new/", {"username": user.username, "password": PASSWORD})
    page = client.get("/jobs/new/")
    assert page.context["restored"] is True
    filled = page.context["form"]
    assert (filled["name"].value(), filled["command"].value(), filled["nodes"].value()) == ("kept", "python train.py", "2")
    assert filled["notify_on"].value() == ["fail"]
    assert not Job.objects.exists()
    assert "restored" not in client.get("/jobs/new/").context  # kept once
