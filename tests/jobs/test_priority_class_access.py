"""Who may submit in a priority class (MUSTER_PRIORITY_CLASS_ACCESS): the highest goes first and may preempt, so an admin gives it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from rest_framework.test import APIClient

from config.settings import _priority_class_access
from jobs.models import Job
from tests.conftest import client_for, job_payload, session_for
from tests.quotas.factories import TeamFactory

CLASSES = ["production", "normal", "preemptible"]


def post(client: APIClient, **fields: Any) -> Any:
    return client.post("/api/v1/jobs/", job_payload(nodes=1, **fields), format="json")


def test_by_default_only_admins_submit_in_the_highest_class(api: APIClient, admin_api: APIClient, sim: Any) -> None:
    refused = post(api, priority_class="production")
    assert refused.status_code == 400
    assert refused.json()["priority_class"] == [
        "The production class is kept for admins; you may use normal, preemptible. (An admin sets who may: MUSTER_PRIORITY_CLASS_ACCESS.)"
    ]
    assert not Job.objects.exists()
    # A dry run says the same.
    assert api.post("/api/v1/jobs/validate/", job_payload(nodes=1, priority_class="production"), format="json").status_code == 400
    assert post(api, priority_class="normal").status_code == 201
    assert post(admin_api, priority_class="production").status_code == 201


def test_a_class_given_to_teams_is_for_jobs_submitted_for_them(user: Any, other_user: Any, settings: Any, sim: Any) -> None:
    settings.MUSTER_PRIORITY_CLASS_ACCESS = {"production": frozenset({"infra"})}
    TeamFactory(name="infra").members.add(user)
    TeamFactory(name="vision").members.add(user, other_user)
    alice, bob = client_for(user), client_for(other_user)
    assert post(alice, priority_class="production", team="infra").status_code == 201
    # Charged to another team, the job is not infra's to rank first.
    refused = post(alice, priority_class="production", team="vision")
    assert refused.status_code == 400
    assert refused.json()["priority_class"][0].startswith(
        "The production class is kept for admins and jobs of team infra; you may use normal"
    )
    assert post(bob, priority_class="production", team="vision").status_code == 400
    settings.MUSTER_PRIORITY_CLASS_ACCESS = {}
    assert post(bob, priority_class="production", team="vision").status_code == 201


def test_the_setting_is_read_strictly() -> None:
    assert _priority_class_access(None, CLASSES, "normal") == {"production": frozenset()}
    assert _priority_class_access(None, CLASSES, "production") == {}
    assert _priority_class_access("", CLASSES, "normal") == {}
    assert _priority_class_access("production=infra, serving;preemptible=", CLASSES, "normal") == {
        "production": frozenset({"infra", "serving"}),
        "preemptible": frozenset(),
    }
    with pytest.raises(ImproperlyConfigured, match="'urgent=ops' is not"):
        _priority_class_access("urgent=ops", CLASSES, "normal")
    with pytest.raises(ImproperlyConfigured, match="must be open to all"):
        _priority_class_access("normal=ops", CLASSES, "normal")


def offered(user: Any) -> list[str]:
    form = session_for(user).get("/jobs/new/").content.decode()
    select = re.search(r'<select name="priority_class".*?</select>', form, re.S)
    assert select is not None
    return re.findall(r'<option value="([^"]+)"', select.group(0))


def test_the_submit_form_offers_only_the_classes_its_user_may_use(
    user: Any, other_user: Any, admin_user: Any, settings: Any, sim: Any
) -> None:
    """It offered production to a researcher, and the submit was then refused for it."""
    assert offered(user) == ["normal", "preemptible"]
    assert offered(admin_user) == CLASSES
    settings.MUSTER_PRIORITY_CLASS_ACCESS = {"production": frozenset({"infra"})}
    TeamFactory(name="infra").members.add(user)
    assert offered(user) == CLASSES and offered(other_user) == ["normal", "preemptible"]


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("production=gpu-prod,urgent=x", "urgent is not a class of MUSTER_PRIORITY_CLASSES"),
        ("production=Bad_Name", "Bad_Name is not a PriorityClass name"),
        ("production=a,production=b", "names a class twice"),
    ],
)
def test_a_bad_kubernetes_priority_class_mapping_stops_the_start(value: str, said: str) -> None:
    """Read once, at the start: a name the API server would refuse failed every launch of the class instead."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "MUSTER_K8S_PRIORITY_CLASSES": value}
    started = subprocess.run([sys.executable, "-c", "import config.settings"], env=env, capture_output=True, text=True, timeout=60)
    assert started.returncode != 0 and said in started.stderr, started.stderr[-500:]
