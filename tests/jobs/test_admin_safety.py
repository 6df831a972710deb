"""Django admin cannot delete or reshape a job that holds GPUs, and deleting an ended job keeps its ledger rows."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Allocation, Job
from jobs.states import JobState
from quotas.models import Quota, UsageCharge
from quotas.selectors import account_usages, accounts_snapshot
from quotas.services import ledger_charge
from tests.conftest import session_for
from tests.jobs.factories import JobFactory, NodeFactory, hours_ago

CHANGELIST = "/admin/jobs/job/"


@pytest.fixture
def admin(admin_user: Any) -> Client:
    return session_for(admin_user)


def change_payload(job: Job, **changes: Any) -> dict[str, Any]:
    """The change form as the admin page posts it, with `changes` applied."""
    data: dict[str, Any] = {
        "name": job.name, "owner": job.owner_id, "team": job.team_id or "", "image": job.image,
        "command": '["true"]', "env": "{}", "nodes": job.nodes, "gpus_per_node": job.gpus_per_node, "rdma_per_node": job.rdma_per_node,
        "wall_time_seconds": job.wall_time_seconds, "priority_class": job.priority_class, "max_restarts": job.max_restarts,
        "simulate": "null",
        "allocations-TOTAL_FORMS": 0, "allocations-INITIAL_FORMS": 0, "events-TOTAL_FORMS": 0, "events-INITIAL_FORMS": 0,
    }  # fmt: skip
    data.update(changes)
    return data


# --- jobs that hold GPUs ---------------------------------------------------------------------------


@pytest.mark.parametrize("state", [JobState.SCHEDULED, JobState.RUNNING])
def test_a_job_holding_gpus_cannot_be_deleted_one_by_one(admin: Client, user: Any, state: str) -> None:
    job = JobFactory(owner=user, scheduled=state == JobState.SCHEDULED, running=state == JobState.RUNNING)
    assert admin.get(f"{CHANGELIST}{job.pk}/delete/").status_code == 403
    assert admin.post(f"{CHANGELIST}{job.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Job.objects.filter(pk=job.pk).exists()
    page = admin.get(f"{CHANGELIST}{job.pk}/change/").content.decode()
    assert f'href="{CHANGELIST}{job.pk}/delete/"' not in page  # no delete link
    assert "cancel it" in page


def test_bulk_delete_refuses_a_selection_with_jobs_holding_gpus(admin: Client, user: Any) -> None:
    running, done = JobFactory(owner=user, running=True), JobFactory(owner=user, finished=True)
    for step in ({}, {"post": "yes"}):  # the confirmation page, and the confirmed post
        response = admin.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [running.pk, done.pk], **step}, follow=True)
        assert response.status_code == 200
        html = response.content.decode()
        assert f"Nothing was deleted: job {running.pk} (RUNNING) holds GPUs" in html
    assert Job.objects.filter(pk__in=[running.pk, done.pk]).count() == 2


def test_bulk_delete_of_ended_and_pending_jobs_works(admin: Client, user: Any) -> None:
    done, pending = JobFactory(owner=user, finished=True, state=JobState.FAILED, exit_code=1), JobFactory(owner=user)
    response = admin.post(CHANGELIST, {"action": "delete_selected", "_selected_action": [done.pk, pending.pk], "post": "yes"}, follow=True)
    assert "Successfully deleted 2 jobs" in response.content.decode()
    assert not Job.objects.filter(pk__in=[done.pk, pending.pk]).exists()


def test_a_running_jobs_shape_is_read_only(admin: Client, user: Any, other_user: Any) -> None:
    job = JobFactory(owner=user, running=True)
    page = admin.get(f"{CHANGELIST}{job.pk}/change/").content.decode()
    assert 'name="nodes"' not in page and 'name="image"' not in page and 'name="owner"' not in page
    assert f"Job {job.pk} is RUNNING" in page and "read-only" in page
    response = admin.post(
        f"{CHANGELIST}{job.pk}/change/",
        change_payload(job, name="renamed", nodes=4, gpus_per_node=2, image="evil:1", owner=other_user.pk, wall_time_seconds=9),
    )
    assert response.status_code == 302, response.content.decode()
    job.refresh_from_db()
    assert job.name == "renamed"  # the label may change
    assert (job.nodes, job.gpus_per_node, job.image, job.owner_id, job.wall_time_seconds) == (1, 8, "busybox:1", user.pk, 86400)
    assert job.state == JobState.RUNNING


def test_a_pending_jobs_shape_is_read_only_but_its_class_and_only_edited_columns_are_written(admin: Client, user: Any) -> None:
    job = JobFactory(owner=user)
    page = admin.get(f"{CHANGELIST}{job.pk}/change/").content.decode()
    # What it runs was checked at submit (cluster size, limits, site maxima): a raw edit would skip all of it.
    assert 'name="nodes"' not in page and 'name="wall_time_seconds"' not in page and 'name="owner"' not in page
    assert 'name="env"' not in page and 'name="priority_class"' in page and "cancel it and submit it again" in page
    stale = Job.objects.get(pk=job.pk)
    # The cycle writes its reason after the admin opened the page: the save must not overwrite it.
    Job.objects.filter(pk=job.pk).update(pending_reason_code="NO_ROOM", pending_reason="No room.")
    response = admin.post(f"{CHANGELIST}{job.pk}/change/", change_payload(stale, priority_class="production", nodes=100, gpus_per_node=99))
    assert response.status_code == 302, response.content.decode()
    job.refresh_from_db()
    assert (job.priority_class, job.nodes, job.gpus_per_node) == ("production", 1, 8)
    assert job.pending_reason_code == "NO_ROOM"
    # A class the site does not have is refused, not stored.
    response = admin.post(f"{CHANGELIST}{job.pk}/change/", change_payload(job, priority_class="bogus"))
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    assert Job.objects.get(pk=job.pk).priority_class == "production"
    assert admin.get(f"{CHANGELIST}add/").status_code == 403  # a job is submitted, never added raw


@pytest.mark.parametrize("running", [False, True])
def test_what_a_job_runs_and_where_is_read_only_and_an_edit_of_it_changes_nothing(admin: Client, user: Any, running: bool) -> None:
    job = JobFactory(owner=user, nodes=2, running=running)
    page = admin.get(f"{CHANGELIST}{job.pk}/change/").content.decode()
    # Every column but the label (and a pending job's class) is shown, never offered: derived from the model.
    for field in ("gpu_fraction", "gpu_memory_gb", "gpu_isolation", "min_nodes", "max_nodes", "volumes", "avoid_nodes",
                  "array_id", "array_index", "checkpoint_step", "checkpoint_attempt", "checkpointed_at", "rdma_per_node"):  # fmt: skip
        assert f'name="{field}"' not in page, field
        assert f'name="{field}_0"' not in page, field  # a split date-time widget
    assert 'name="allocations-0-gpu_slot"' not in page and 'name="allocations-0-node"' not in page
    assert ('name="priority_class"' in page) is not running
    # The edits the walk made: elastic bounds past the cluster, a GPU share on a two-node job (a CHECK, once a 500).
    response = admin.post(
        f"{CHANGELIST}{job.pk}/change/",
        change_payload(job, min_nodes=1, max_nodes=50, gpu_fraction="0.5", gpu_memory_gb="10", volumes='[{"claim": "x"}]'),
    )
    assert response.status_code == 302, response.content.decode()
    job.refresh_from_db()
    assert (job.min_nodes, job.max_nodes, job.gpu_fraction, job.gpu_memory_gb, job.volumes) == (None, None, None, None, [])


def test_an_admin_edit_that_breaks_a_constraint_is_a_form_error_not_a_500(user: Any) -> None:
    # No field offered today can break one; the form checks every constraint anyway, read-only columns included,
    # so one offered later cannot reach the database as a 500 (Django itself checks only those wholly on the form).
    from django.forms import modelform_factory

    from jobs.admin import JobAdminForm

    job = JobFactory(owner=user, nodes=2)
    form_class = modelform_factory(Job, form=JobAdminForm, fields=["name", "gpu_fraction"])
    form = form_class({"name": job.name, "gpu_fraction": "0.5"}, instance=job)
    assert not form.is_valid()
    assert "job_gpu_slice_one_node" in str(form.errors)


def test_a_pending_job_scheduled_while_the_admin_edits_keeps_its_class(admin: Client, user: Any) -> None:
    job = JobFactory(owner=user)
    form = change_payload(job, priority_class="production")
    Job.objects.filter(pk=job.pk).update(state=JobState.SCHEDULED, attempt=1)  # the cycle placed it meanwhile
    response = admin.post(f"{CHANGELIST}{job.pk}/change/", form, follow=True)
    assert "left PENDING (SCHEDULED) while you edited it" in response.content.decode()
    job.refresh_from_db()
    assert job.priority_class == "normal" and job.state == JobState.SCHEDULED


def test_no_allocation_can_be_added_by_hand(admin: Client, user: Any) -> None:
    job = JobFactory(owner=user)
    page = admin.get(f"{CHANGELIST}{job.pk}/change/").content.decode()
    assert "allocations-__prefix__" not in page  # no empty form to add one


def test_admins_cancel_jobs_from_the_list(admin: Client, user: Any) -> None:
    running, done = JobFactory(owner=user, running=True), JobFactory(owner=user, finished=True)
    response = admin.post(CHANGELIST, {"action": "cancel_selected", "_selected_action": [running.pk, done.pk]}, follow=True)
    html = response.content.decode()
    assert f"Cancelled job {running.pk}." in html and f"Already ended, left as they were: {done.pk}." in html
    running.refresh_from_db()
    assert running.state == JobState.CANCELLED
    assert not Allocation.objects.filter(job=running, released_at__isnull=True).exists()


# --- the ledger outlives the job -------------------------------------------------------------------


def test_deleting_an_ended_job_keeps_its_charges_and_the_budget_used(admin: Client, user: Any) -> None:
    Quota.objects.create(user=user, node_hours_per_period=100.0)
    job = JobFactory(owner=user, running=True, gpus_per_node=8, submitted_at=hours_ago(2))
    ledger_charge(job=job, until=timezone.now())
    job_id = job.pk
    Job.objects.filter(pk=job_id).update(state=JobState.SUCCEEDED)
    Allocation.objects.filter(job_id=job_id).update(released_at=timezone.now())
    used_before = account_usages(users=[user])[0].node_hours_used
    assert used_before == pytest.approx(2.0, abs=0.01)

    response = admin.post(f"{CHANGELIST}{job_id}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert not Job.objects.filter(pk=job_id).exists()
    (charge,) = UsageCharge.objects.all()
    assert charge.job_id is None and charge.job_number == job_id and charge.user_id == user.pk
    assert str(charge).startswith(f"job {job_id} in period")
    assert account_usages(users=[user])[0].node_hours_used == pytest.approx(used_before)
    left = accounts_snapshot(now=timezone.now(), users=[user.username], teams=[])[f"user:{user.username}"].node_hours_left
    assert left == pytest.approx(100.0 - used_before)


def test_charges_carry_the_job_number(user: Any) -> None:
    job = JobFactory(owner=user, running=True)
    ledger_charge(job=job, until=timezone.now())
    assert list(UsageCharge.objects.values_list("job_id", "job_number")) == [(job.pk, job.pk)]


# --- nodes ---------------------------------------------------------------------------------------------


def test_a_nodes_fields_are_the_clusters_and_only_its_hold_is_edited_here(admin: Client) -> None:
    node = NodeFactory(name="gpu-07")
    page = admin.get(f"/admin/jobs/node/{node.pk}/change/").content.decode()
    # The sync writes them back every cycle: an edit would be undone within seconds, after saying it was saved.
    assert 'name="name"' not in page and 'name="state"' not in page and 'name="gpus_total"' not in page
    assert 'name="held_reason"' in page
    response = admin.post(
        f"/admin/jobs/node/{node.pk}/change/",
        {"held": "on", "held_reason": "  GPU 3 replaced, back Friday ", "state": "CORDONED", "name": "gpu-07x", "gpus_total": 2},
    )
    assert response.status_code == 302, response.content.decode()
    node.refresh_from_db()
    assert (node.name, node.state, node.gpus_total, node.held) == ("gpu-07", "READY", 8, True)
    assert node.held_reason == "GPU 3 replaced, back Friday"
    assert admin.get("/admin/jobs/node/add/").status_code == 403
    assert admin.get(f"/admin/jobs/node/{node.pk}/delete/").status_code == 403


def test_holding_a_node_takes_a_reason_which_users_waiting_for_it_read(admin: Client, client: Client, user: Any) -> None:
    """It took none: the cluster page showed a bare HELD and waiting jobs read "(held by an admin)"."""
    from django.utils import timezone

    from scheduler.snapshot import node_views

    node = NodeFactory(name="gpu-09")
    refused = admin.post(f"/admin/jobs/node/{node.pk}/change/", {"held": "on", "held_reason": "  "})
    assert refused.status_code == 200
    assert "Say why the node is held: users waiting for it read this." in refused.content.decode()
    node.refresh_from_db()
    assert not node.held
    # The node list's column releases, but does not hold without a reason.
    listed = {"form-TOTAL_FORMS": 1, "form-INITIAL_FORMS": 1, "form-0-id": node.pk, "form-0-held": "on", "_save": "Save"}
    refused = admin.post("/admin/jobs/node/", listed)
    assert "A hold takes a reason: hold gpu-09 from its own page, which asks for one." in refused.content.decode()
    node.refresh_from_db()
    assert not node.held

    assert admin.post(f"/admin/jobs/node/{node.pk}/change/", {"held": "on", "held_reason": "PSU swap, back 14:00"}).status_code == 302
    client.force_login(user)
    cluster = client.get("/cluster/").content.decode()
    assert '<span class="node-held-reason" data-testid="node-held-reason">PSU swap, back 14:00</span>' in cluster
    assert {view.name: view.closed_why for view in node_views(timezone.now())}["gpu-09"] == "held: PSU swap, back 14:00"
    # Ticked again on the list (kept held), its reason stays; edited on its page, it changes.
    listed["form-0-held"] = "on"
    assert admin.post("/admin/jobs/node/", listed).status_code == 302
    node.refresh_from_db()
    assert (node.held, node.held_reason) == (True, "PSU swap, back 14:00")


def test_holding_and_releasing_a_node_in_admin_is_on_the_audit_trail(admin: Client) -> None:
    from audit.models import AuditEntry

    node = NodeFactory(name="gpu-08")
    # From the change form, then from the node list's editable column (the way an admin releases several at once).
    assert admin.post(f"/admin/jobs/node/{node.pk}/change/", {"held": "on", "held_reason": "fan noise"}).status_code == 302
    listed = {"form-TOTAL_FORMS": 1, "form-INITIAL_FORMS": 1, "form-0-id": node.pk, "_save": "Save"}
    assert admin.post("/admin/jobs/node/", listed).status_code == 302  # "held" left out: unticked
    node.refresh_from_db()
    assert not node.held
    entries = list(AuditEntry.objects.order_by("id").values_list("action", "target_type", "target_repr", "actor_username", "changes"))
    assert entries == [
        ("node.hold", "node", "gpu-08", "root", {"held": [False, True], "held_reason": ["", "fan noise"]}),
        ("node.release", "node", "gpu-08", "root", {"held": [True, False], "held_reason": ["fan noise", ""]}),
    ]
    # The audit page shows them to admins.
    assert "node.release" in admin.get("/audit/").content.decode()
