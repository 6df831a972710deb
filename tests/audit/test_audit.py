"""The audit trail: each recorded action through its real entry point (API, pages, Django admin), who sees what,
the API's filters, and the warnings when a quota or budget is set below what an account holds or used."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from audit.services import audit_record
from jobs.models import Job
from quotas.models import Quota, Team
from tests.conftest import client_for, session_for
from tests.jobs.factories import JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory, UsageChargeFactory
from whatif.models import WhatIfRun

AUDIT = "/api/v1/audit/"
ADMIN_ADDR = "10.1.2.3"


@pytest.fixture
def admin_api(admin_user: Any) -> APIClient:
    client = client_for(admin_user)
    client.defaults["REMOTE_ADDR"] = ADMIN_ADDR
    return client


@pytest.fixture
def admin_page(admin_user: Any) -> Client:
    client = session_for(admin_user)
    client.defaults["REMOTE_ADDR"] = ADMIN_ADDR
    return client


def only_entry(**filters: Any) -> AuditEntry:
    (entry,) = AuditEntry.objects.filter(**filters)
    return entry


def assert_recent(entry: AuditEntry) -> None:
    assert timezone.now() - timedelta(minutes=1) < entry.at <= timezone.now()


# --- quotas: API and pages ---------------------------------------------------------------------------


def test_a_quota_change_over_the_api_is_recorded_with_before_and_after(
    admin_api: APIClient, admin_user: Any, user: Any, settings: Any
) -> None:
    settings.MUSTER_DEFAULT_MAX_GPUS = 8
    response = admin_api.patch(f"/api/v1/quotas/users/{user.username}/", {"max_gpus": 16}, format="json")
    assert response.status_code == 200, response.content
    entry = only_entry(action="quota.update")
    assert (entry.actor, entry.actor_username, entry.remote_addr) == (admin_user, "root", ADMIN_ADDR)
    assert (entry.target_type, entry.target_id, entry.target_repr) == ("user", str(user.pk), "user alice")
    assert entry.changes == {"max_gpus": [8, 16], "is_default": [True, False]}
    assert entry.job is None
    assert_recent(entry)
    # Saving the same values again changes nothing and records nothing.
    assert admin_api.patch(f"/api/v1/quotas/users/{user.username}/", {"max_gpus": 16}, format="json").status_code == 200
    assert AuditEntry.objects.count() == 1


def test_a_quota_reset_over_the_api_is_recorded(admin_api: APIClient, user: Any, settings: Any) -> None:
    settings.MUSTER_DEFAULT_NODE_HOURS_PER_PERIOD = None
    Quota.objects.create(user=user, node_hours_per_period=50.0, fair_share_weight=2.0)
    assert admin_api.delete(f"/api/v1/quotas/users/{user.username}/").status_code == 204
    entry = only_entry(action="quota.reset")
    assert entry.changes["node_hours_per_period"] == [50.0, None]
    assert entry.changes["fair_share_weight"] == [2.0, 1.0]
    assert entry.changes["is_default"] == [False, True]
    # Nothing left to reset: nothing recorded.
    assert admin_api.delete(f"/api/v1/quotas/users/{user.username}/").status_code == 204
    assert AuditEntry.objects.filter(action="quota.reset").count() == 1


def test_team_quota_changes_on_the_pages_are_recorded(admin_page: Client, admin_user: Any) -> None:
    team = TeamFactory(name="vision")
    form = {
        "max_gpus": "32",
        "max_wall_time_seconds": "",
        "max_node_hours_per_job": "",
        "node_hours_per_period": "100",
        "fair_share_weight": "3",
    }
    response = admin_page.post("/quotas/teams/vision/", form)
    assert response.status_code == 302, response.content.decode()
    entry = only_entry(action="quota.update")
    assert (entry.actor_username, entry.target_type, entry.target_id, entry.target_repr) == ("root", "team", str(team.pk), "team vision")
    assert entry.changes == {
        "max_gpus": [None, 32],
        "node_hours_per_period": [None, 100.0],
        "fair_share_weight": [1.0, 3.0],
    }  # no `is_default: True -> False`: a team without a quota is unlimited, which its limits say
    assert entry.remote_addr == ADMIN_ADDR
    assert admin_page.post("/quotas/teams/vision/reset/").status_code == 302
    reset = only_entry(action="quota.reset")
    assert reset.changes == {"max_gpus": [32, None], "node_hours_per_period": [100.0, None], "fair_share_weight": [3.0, 1.0]}
    assert reset.remote_addr == ADMIN_ADDR


def test_a_team_quota_saved_as_unlimited_records_no_change(admin_api: APIClient) -> None:
    """A team given a quota that limits nothing is as unlimited as before: no entry reading `is_default: True -> False`
    and nothing else."""
    TeamFactory(name="vision")
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"max_gpus": None}, format="json").status_code == 200
    assert not AuditEntry.objects.filter(action="quota.update").exists()
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"max_gpus": 8}, format="json").status_code == 200
    assert only_entry(action="quota.update").changes == {"max_gpus": [None, 8]}


def test_the_address_comes_from_x_forwarded_for_only_behind_a_trusted_proxy(admin_user: Any, user: Any, settings: Any) -> None:
    client = client_for(admin_user)
    headers = {"REMOTE_ADDR": "127.0.0.1", "HTTP_X_FORWARDED_FOR": "203.0.113.7, 10.0.0.1"}
    settings.MUSTER_TRUSTED_PROXY = False
    client.patch("/api/v1/quotas/users/alice/", {"max_gpus": 1}, format="json", **headers)
    settings.MUSTER_TRUSTED_PROXY = True
    client.patch("/api/v1/quotas/users/alice/", {"max_gpus": 2}, format="json", **headers)
    client.patch("/api/v1/quotas/users/alice/", {"max_gpus": 3}, format="json", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="not-an-ip")
    assert list(AuditEntry.objects.order_by("id").values_list("remote_addr", flat=True)) == ["127.0.0.1", "203.0.113.7", None]


# --- teams in Django admin ----------------------------------------------------------------------------


# The team page's inline list of volumes, sent empty (Django's formset management form).
NO_VOLUMES = {"volumes-TOTAL_FORMS": "0", "volumes-INITIAL_FORMS": "0"}


def team_form(team: Team, **changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": team.name, "description": team.description, "members": [u.pk for u in team.members.all()], **NO_VOLUMES,
    }  # fmt: skip
    for flag in ("allow_host_network", "allow_run_as_root", "allow_writable_root_filesystem"):
        if getattr(team, flag):
            data[flag] = "on"
    data.update(changes)
    return {k: v for k, v in data.items() if v is not None}


def test_team_settings_and_members_changed_in_django_admin_are_recorded(admin_page: Client, user: Any, other_user: Any) -> None:
    team = TeamFactory(name="vision")
    team.members.add(user)
    response = admin_page.post(f"/admin/quotas/team/{team.pk}/change/", team_form(team, allow_host_network="on", members=[other_user.pk]))
    assert response.status_code == 302, response.content.decode()
    update = only_entry(action="team.update")
    assert update.changes == {"allow_host_network": [False, True]}
    assert (update.actor_username, update.target_type, update.target_repr, update.remote_addr) == ("root", "team", "vision", ADMIN_ADDR)
    members = only_entry(action="team.members")
    assert members.changes == {"members": [["alice"], ["bob"]]}
    # Saving unchanged records nothing more.
    team.refresh_from_db()
    assert admin_page.post(f"/admin/quotas/team/{team.pk}/change/", team_form(team)).status_code == 302
    assert AuditEntry.objects.count() == 2


def test_a_team_created_in_django_admin_is_recorded(admin_page: Client, user: Any) -> None:
    response = admin_page.post(
        "/admin/quotas/team/add/", {"name": "speech", "description": "", "members": [user.pk], "allow_run_as_root": "on", **NO_VOLUMES}
    )
    assert response.status_code == 302, response.content.decode()
    created = only_entry(action="team.create")
    assert created.changes["allow_run_as_root"] == [None, True] and created.changes["name"] == [None, "speech"]
    assert only_entry(action="team.members").changes == {"members": [[], ["alice"]]}


# --- jobs ------------------------------------------------------------------------------------------------


def test_an_admin_cancelling_someone_elses_job_is_recorded(admin_api: APIClient, api: APIClient, user: Any) -> None:
    job = JobFactory(owner=user, running=True, state_reason="Running on node-01.")
    answer = admin_api.post(f"/api/v1/jobs/{job.pk}/cancel/", {"reason": "node-01 goes into maintenance"}, format="json")
    assert answer.status_code == 200
    entry = only_entry(action="job.cancel")
    assert (entry.job_id, entry.target_type, entry.target_id, entry.actor_username) == (job.pk, "job", str(job.pk), "root")
    # Why as well as who: the reason its owner reads.
    reason = ["Running on node-01.", "Cancelled by root: node-01 goes into maintenance."]
    assert entry.changes == {"state": ["RUNNING", "CANCELLED"], "reason": reason} and entry.remote_addr == ADMIN_ADDR
    # The owner cancelling their own job is no admin action.
    own = JobFactory(owner=user)
    assert api.post(f"/api/v1/jobs/{own.pk}/cancel/").status_code == 200
    assert not AuditEntry.objects.filter(job=own).exists()


def test_an_admin_cancelling_on_the_job_page_is_recorded(admin_page: Client, user: Any) -> None:
    job = JobFactory(owner=user)
    assert admin_page.post(f"/jobs/{job.pk}/cancel/").status_code == 302
    entry = only_entry(action="job.cancel")
    assert entry.job_id == job.pk and entry.changes["state"] == ["PENDING", "CANCELLED"] and entry.remote_addr == ADMIN_ADDR
    assert entry.changes["reason"][1] == "Cancelled by root."


def test_django_admin_edits_and_deletes_of_jobs_are_recorded(admin_page: Client, user: Any) -> None:
    from tests.jobs.test_admin_safety import change_payload

    job = JobFactory(owner=user)
    response = admin_page.post(f"/admin/jobs/job/{job.pk}/change/", change_payload(job, priority_class="production", name="renamed"))
    assert response.status_code == 302, response.content.decode()
    edit = only_entry(action="job.admin_edit")
    assert edit.changes == {"name": [job.name, "renamed"], "priority_class": ["normal", "production"]}
    assert edit.job_id == job.pk and edit.remote_addr == ADMIN_ADDR

    done = JobFactory(owner=user, finished=True)
    assert admin_page.post(f"/admin/jobs/job/{done.pk}/delete/", {"post": "yes"}).status_code == 302
    deleted = only_entry(action="job.admin_delete")
    assert (deleted.target_id, deleted.job_id) == (str(done.pk), None)  # the link goes with the job, the entry stays
    assert deleted.changes["state"] == ["SUCCEEDED", None] and deleted.changes["owner"] == ["alice", None]


# --- who sees what ----------------------------------------------------------------------------------------


@pytest.fixture
def entries(admin_user: Any, user: Any, other_user: Any) -> dict[str, AuditEntry]:
    alices, bobs = JobFactory(owner=user), JobFactory(owner=other_user)
    team = TeamFactory(name="vision")
    return {
        "alice": audit_record(
            actor=admin_user, action="job.cancel", target=alices, changes={"state": ["PENDING", "CANCELLED"]}, job=alices
        ),
        "bob": audit_record(actor=admin_user, action="job.admin_edit", target=bobs, changes={"name": ["a", "b"]}, job=bobs),
        "team": audit_record(actor=admin_user, action="team.update", target=team, changes={"allow_host_network": [False, True]}),
        "quota": audit_record(
            actor=admin_user, action="quota.update", target=user, changes={"max_gpus": [8, 16]}, target_repr="user alice"
        ),
    }


def ids(response: Any) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_a_user_sees_only_entries_about_their_own_jobs(entries: dict[str, AuditEntry], api: APIClient, other_api: APIClient) -> None:
    assert ids(api.get(AUDIT)) == {entries["alice"].pk}
    assert ids(other_api.get(AUDIT)) == {entries["bob"].pk}
    assert api.get(f"{AUDIT}{entries['bob'].pk}/").status_code == 404
    row = api.get(f"{AUDIT}{entries['alice'].pk}/").json()
    assert row["actor"] == "root" and row["action"] == "job.cancel" and row["job"] == entries["alice"].job_id
    assert row["remote_addr"] is None  # an admin's address is for admins


def test_admins_see_every_entry_and_anonymous_is_401(entries: dict[str, AuditEntry], admin_api: APIClient) -> None:
    assert ids(admin_api.get(AUDIT)) == {e.pk for e in entries.values()}
    assert APIClient().get(AUDIT).status_code == 401


def test_the_list_costs_a_fixed_number_of_queries(
    entries: dict[str, AuditEntry], admin_api: APIClient, django_assert_max_num_queries: Any
) -> None:
    with django_assert_max_num_queries(4):
        assert len(ids(admin_api.get(AUDIT))) == 4


def test_the_api_filters(entries: dict[str, AuditEntry], admin_api: APIClient, admin_user: Any) -> None:
    assert ids(admin_api.get(AUDIT, {"action": "team.update"})) == {entries["team"].pk}
    assert ids(admin_api.get(AUDIT, {"target_type": "job"})) == {entries["alice"].pk, entries["bob"].pk}
    assert ids(admin_api.get(AUDIT, {"job": entries["bob"].job_id})) == {entries["bob"].pk}
    assert ids(admin_api.get(AUDIT, {"actor": "root"})) == {e.pk for e in entries.values()}
    assert ids(admin_api.get(AUDIT, {"actor": "nobody"})) == set()
    old = audit_record(actor=None, action="quota.update", target=admin_user, changes={})
    AuditEntry.objects.filter(pk=old.pk).update(at=timezone.now() - timedelta(days=40))
    today = timezone.localdate()
    assert old.pk not in ids(admin_api.get(AUDIT, {"since": today.isoformat()}))
    assert ids(admin_api.get(AUDIT, {"until": (today - timedelta(days=30)).isoformat()})) == {old.pk}
    assert len(ids(admin_api.get(AUDIT, {"since": (today - timedelta(days=41)).isoformat(), "until": today.isoformat()}))) == 5


@pytest.mark.parametrize(
    "query,field",
    [
        ({"since": "yesterday"}, "since"),
        ({"until": "2026-02-30"}, "until"),
        ({"since": "2026-11-20", "until": "2026-11-01"}, "until"),
        ({"since": "0001-01-01"}, "since"),
        ({"job": "abc"}, "job"),
        ({"job": "1.5"}, "job"),
        ({"job": str(2**70)}, "job"),
        ({"target_type": "planet"}, "target_type"),
    ],
)
def test_bad_filters_are_400_naming_the_field(admin_api: APIClient, query: dict[str, str], field: str) -> None:
    response = admin_api.get(AUDIT, query)
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_a_bad_target_type_or_day_is_said_with_what_would_do(admin_api: APIClient) -> None:
    # Django's "Select a valid choice. planet is not one of the available choices." and "Enter a valid date." named none.
    assert admin_api.get(AUDIT, {"target_type": "planet"}).json()["target_type"][0].startswith("Unknown target type planet; the types are ")
    for name in ("since", "until"):
        assert admin_api.get(AUDIT, {name: "yesterday"}).json() == {
            name: ["Not a day: write it as YYYY-MM-DD (2026-11-01), a date that exists."]
        }


# --- the page ---------------------------------------------------------------------------------------------


def test_the_audit_page_lists_what_the_viewer_may_see(entries: dict[str, AuditEntry], admin_user: Any, user: Any) -> None:
    html = session_for(user).get("/audit/").content.decode()
    assert f'data-testid="audit-entry-{entries["alice"].pk}"' in html
    assert f'data-testid="audit-entry-{entries["bob"].pk}"' not in html
    assert f'data-testid="audit-entry-{entries["quota"].pk}"' not in html
    assert 'href="/audit/" aria-current="page">Audit' in html
    # Entries about their own jobs only: no "About: user / team / node / whatifrun" that could never match.
    assert 'data-testid="audit-target-type"' not in html and ">whatifrun<" not in html
    admin_html = session_for(admin_user).get("/audit/").content.decode()
    about = re.search(r'data-testid="audit-target-type">(.*?)</select>', admin_html)
    assert about and re.findall(r'<option value="(\w*)"', about.group(1)) == ["", "user", "team", "job", "node", "whatifrun"]
    assert all(f'data-testid="audit-entry-{e.pk}"' in admin_html for e in entries.values())
    assert "allow_host_network</strong>:" in admin_html and "False → True" in admin_html
    filtered = session_for(admin_user).get("/audit/", {"action": "team.update"}).content.decode()
    assert (
        f'data-testid="audit-entry-{entries["team"].pk}"' in filtered and f'data-testid="audit-entry-{entries["bob"].pk}"' not in filtered
    )
    bad = session_for(admin_user).get("/audit/", {"since": "nope"}).content.decode()
    assert 'data-testid="form-errors"' in bad and 'data-testid="audit-empty"' in bad
    # Said with the page's labels (From, to), not the query's names (it read "since: Enter a valid date.").
    assert '<p class="error">From: Not a day: write it as YYYY-MM-DD (2026-11-01), a date that exists.</p>' in bad and "since:" not in bad
    backwards = session_for(admin_user).get("/audit/", {"since": "2026-05-02", "until": "2026-05-01", "job": "x"}).content.decode()
    assert '<p class="error">To: The end date is before the start date.</p>' in backwards
    assert '<p class="error">Job: Enter a whole number.</p>' in backwards


def test_the_page_needs_a_login(db: None) -> None:
    response = Client().get("/audit/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# --- lowering a limit below what is held or used ----------------------------------------------------------


def test_a_gpu_quota_below_what_is_held_warns_in_the_api(admin_api: APIClient, user: Any) -> None:
    for node in ("n1", "n2", "n3", "n4"):
        JobFactory(owner=user, running=True, held=[node])
    queued = JobFactory(owner=user)
    Job.objects.filter(pk=queued.pk).update(nodes=3)  # 24 GPUs: more than the new limit on its own
    response = admin_api.patch("/api/v1/quotas/users/alice/", {"max_gpus": 16}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["max_gpus"] == 16
    assert body["warnings"] == [
        "User alice holds 32 GPUs now, above the new limit of 16: running jobs are not stopped; new jobs of user alice wait "
        "until the GPUs it holds within its quota leave room for them under 16 (preemptible jobs may still borrow idle GPUs).",
        f"1 queued job of user alice needs more than 16 GPUs on its own (job {queued.pk}): it waits until the limit is raised, "
        "or until cancelled.",
    ]
    # Raising it back is no warning.
    assert admin_api.patch("/api/v1/quotas/users/alice/", {"max_gpus": 64}, format="json").json()["warnings"] == []


def test_a_budget_lowered_under_a_queued_jobs_whole_need_warns_that_no_renewal_helps(admin_api: APIClient, user: Any) -> None:
    queued = JobFactory(owner=user)
    Job.objects.filter(pk=queued.pk).update(nodes=2, wall_time_seconds=3 * 3600)  # 6 node-hours at least
    within = JobFactory(owner=user)
    Job.objects.filter(pk=within.pk).update(nodes=2, wall_time_seconds=3600)  # 2 node-hours: within it
    body = admin_api.patch("/api/v1/quotas/users/alice/", {"node_hours_per_period": 4}, format="json").json()
    assert body["warnings"] == [
        f"1 queued job of user alice needs more than the whole budget of 4 node-hours (job {queued.pk}): no renewal gives it "
        "room; it waits until the budget is raised, or until cancelled."
    ]


def test_borrowed_gpus_are_named_in_the_warning(admin_api: APIClient, user: Any) -> None:
    JobFactory(owner=user, running=True, held=["n1"])
    borrower = JobFactory(owner=user, running=True, held=["n2"])
    Job.objects.filter(pk=borrower.pk).update(over_quota=True, preemptible=True)
    full = {"max_gpus": 4, "max_wall_time_seconds": None, "max_node_hours_per_job": None, "node_hours_per_period": None}
    (warning,) = admin_api.put("/api/v1/quotas/users/alice/", {**full, "fair_share_weight": 1.0}, format="json").json()["warnings"]
    assert warning.startswith("User alice holds 16 GPUs now, above the new limit of 4 (8 of them borrowed by preemptible jobs")


def test_lowered_per_job_limits_name_the_queued_jobs_beyond_them_and_a_budget_below_what_runs_is_said(
    admin_api: APIClient, user: Any
) -> None:
    long = JobFactory(owner=user, wall_time_seconds=7200)
    JobFactory(owner=user, wall_time_seconds=600)
    body = admin_api.patch("/api/v1/quotas/users/alice/", {"max_wall_time_seconds": 3600}, format="json").json()
    assert body["warnings"] == [
        f"1 queued job of user alice asks more than the new wall time limit of 1 h (job {long.pk}): accepted under the old "
        "limit, it waits until the limit is raised again; its owners are told so on its page."
    ]
    body = admin_api.patch("/api/v1/quotas/users/alice/", {"max_node_hours_per_job": 0.5}, format="json").json()
    said = f"1 queued job of user alice asks more than the new node-hours per job limit of 0.5 (job {long.pk})"
    assert body["warnings"][0].startswith(said)
    # A running 1-node job with a day of wall time left commits about 24 node-hours: a budget of 10 may be overspent.
    JobFactory(owner=user, running=True, held=["n1"])
    (warning,) = admin_api.patch("/api/v1/quotas/users/alice/", {"node_hours_per_period": 10}, format="json").json()["warnings"]
    assert warning.startswith("User alice has used 0 node-hours this period and its running jobs may use ")
    assert "so the new budget of 10 may be overspent by up to" in warning


def test_a_small_budgets_warnings_say_node_hours_as_the_budget_reasons_do(admin_api: APIClient, user: Any) -> None:
    """They were rounded to one decimal: 'has used 0.0 node-hours ..., above the new budget of 0', and an overspend of
    0.07 read 'up to 0.1'."""
    UsageChargeFactory(job=JobFactory(owner=user, finished=True), node_seconds=3, gpu_seconds=24)
    (warning,) = admin_api.patch("/api/v1/quotas/users/alice/", {"node_hours_per_period": 0}, format="json").json()["warnings"]
    assert warning.startswith("User alice has used 0.00083 node-hours this period, above the new budget of 0: ")
    UsageChargeFactory(job=JobFactory(owner=user, finished=True), node_seconds=0.0196 * 3600 - 3, gpu_seconds=8)
    # One whole node with 360 s of its wall time left: about 0.1 node-hours committed.
    JobFactory(owner=user, running=True, held=["n1"], wall_time_seconds=400, scheduled_at=timezone.now() - timedelta(seconds=40))
    (warning,) = admin_api.patch("/api/v1/quotas/users/alice/", {"node_hours_per_period": 0.05}, format="json").json()["warnings"]
    assert warning.startswith("User alice has used 0.02 node-hours this period and its running jobs may use 0.1 more ")
    assert "the new budget of 0.05 may be overspent by up to 0.07;" in warning


def test_a_budget_below_what_was_used_warns_on_the_quota_page(admin_page: Client, user: Any, settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    job = JobFactory(owner=user, finished=True)
    UsageChargeFactory(job=job, node_seconds=40 * 3600, gpu_seconds=320 * 3600)
    form = {
        "max_gpus": "",
        "max_wall_time_seconds": "",
        "max_node_hours_per_job": "",
        "node_hours_per_period": "25",
        "fair_share_weight": "1",
    }
    page = admin_page.post("/quotas/users/alice/", form, follow=True).content.decode()
    assert "Saved the quota of user alice" in page
    assert 'class="message warning"' in page
    assert "User alice has used 40.0 node-hours this period, above the new budget of 25: running jobs are not stopped" in page
    assert "new jobs of user alice wait until the period renews" in page
    assert only_entry(action="quota.update").changes["node_hours_per_period"] == [None, 25.0]


def test_audit_is_a_low_layer_that_imports_no_other_muster_app() -> None:
    import ast
    from pathlib import Path

    higher = {"jobs", "quotas", "telemetry", "frontend"}
    for path in Path(__file__).resolve().parents[2].joinpath("audit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            assert not {n.split(".")[0] for n in names} & higher, f"{path} imports {names}"


def test_accounts_made_changed_and_deleted_in_django_admin_are_on_the_audit_trail(admin_page: Client, user: Any) -> None:
    """Making four users, deactivating one and making another an admin left no entry."""
    added = admin_page.post("/admin/auth/user/add/", {"username": "carol", "password1": "Xk9#vLm2!qRt", "password2": "Xk9#vLm2!qRt"})
    assert added.status_code == 302, added.content.decode()[:2000]
    carol = get_user_model().objects.get(username="carol")
    made = only_entry(action="user.create")
    assert (made.target_repr, made.changes["username"], made.actor_username) == ("carol", [None, "carol"], "root")
    form = {
        "username": "alice",
        "email": user.email,
        "first_name": "",
        "last_name": "",
        "is_staff": "on",
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "initial-date_joined_0": "2026-01-01",
        "initial-date_joined_1": "00:00:00",
    }  # fmt: skip  (is_active left out: unticked)
    changed = admin_page.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert changed.status_code == 302, changed.content.decode()[:3000]
    entry = only_entry(action="user.update")
    assert entry.changes == {"is_active": [True, False], "is_staff": [False, True]}
    assert admin_page.post(f"/admin/auth/user/{carol.pk}/delete/", {"post": "yes"}).status_code == 302
    assert only_entry(action="user.delete").changes["username"] == ["carol", None]


def test_a_password_an_admin_sets_in_django_admin_is_on_the_audit_trail_never_its_value(admin_page: Client, user: Any) -> None:
    """The user's Set password page saves without save_model: docs/admin.md said "(changed)" was recorded, and nothing was."""
    new = "Xk9#vLm2!qRtzz"
    response = admin_page.post(f"/admin/auth/user/{user.pk}/password/", {"password1": new, "password2": new, "usable_password": "true"})
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = only_entry(action="user.update")
    assert (entry.target_repr, entry.actor_username, entry.changes) == ("alice", "root", {"password": ["(set)", "(changed)"]})
    assert new not in str(AuditEntry.objects.values_list("changes", flat=True)[0])
    # A form that fails (the two differ) changes nothing and records nothing.
    admin_page.post(f"/admin/auth/user/{user.pk}/password/", {"password1": new, "password2": "other", "usable_password": "true"})
    assert AuditEntry.objects.count() == 1


def test_every_kind_of_target_recorded_can_be_filtered_on_and_no_other_can_be_recorded(admin_api: APIClient, admin_user: Any) -> None:
    node = NodeFactory(name="gpu-08")
    hold = audit_record(actor=admin_user, action="node.hold", target=node, changes={"held": [False, True]})
    run = WhatIfRun.objects.create(created_by=admin_user, source="history", trace_name="history")
    started = audit_record(actor=admin_user, action="whatif.run", target=run, changes={})
    assert (hold.target_type, started.target_type) == ("node", "whatifrun")
    assert ids(admin_api.get(AUDIT, {"target_type": "node"})) == {hold.pk}
    assert ids(admin_api.get(AUDIT, {"target_type": "whatifrun"})) == {started.pk}
    html = session_for(admin_user).get("/audit/", {"target_type": "node"}).content.decode()
    assert f'data-testid="audit-entry-{hold.pk}"' in html and 'data-testid="form-errors"' not in html
    assert f'data-testid="audit-entry-{started.pk}"' not in html and '<option value="node" selected>' in html
    assert "nodes held and released" in html and "what-if runs" in html
    with pytest.raises(ValueError, match="not one of user, team, job, node, whatifrun"):
        audit_record(actor=admin_user, action="quota.update", target=Quota(user=admin_user), changes={})
    with pytest.raises(ValueError, match=r"quota\.touch is not an audit action"):
        audit_record(actor=admin_user, action="quota.touch", target=node, changes={})


def test_a_filter_by_an_action_there_is_not_is_refused_naming_those_there_are(admin_api: APIClient, admin_user: Any, user: Any) -> None:
    """?action=nosuch listed no entries, which read as "nothing was done"; the page's Action was free text."""
    node = NodeFactory(name="gpu-09")
    hold = audit_record(actor=admin_user, action="node.hold", target=node, changes={"held": [False, True]})
    assert ids(admin_api.get(AUDIT, {"action": "node.hold"})) == {hold.pk}
    refused = admin_api.get(AUDIT, {"action": "node.held"})
    assert refused.status_code == 400
    assert refused.json()["action"][0].startswith("Unknown action node.held; the actions are job.cancel, job.hold,")
    html = session_for(admin_user).get("/audit/", {"action": "node.held"}).content.decode()
    assert 'data-testid="form-errors"' in html and "Unknown action node.held" in html
    # The page offers the actions as a list: all of them to an admin, those about jobs to anyone else.
    page = session_for(admin_user).get("/audit/", {"action": "node.hold"}).content.decode()
    assert '<option value="node.hold" selected>' in page and '<option value="whatif.delete">' in page
    theirs = session_for(user).get("/audit/").content.decode()
    assert '<option value="job.cancel">' in theirs and "node.hold" not in theirs
