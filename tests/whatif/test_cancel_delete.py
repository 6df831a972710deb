"""A what-if run can be cancelled while queued or running (its replay stops) and deleted once it has ended: from its
page, the list and Django admin, by admins, POST only, audited."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.urls import reverse

from audit.models import AuditEntry
from tests.conftest import session_for
from tests.whatif.traces import TINY
from whatif import runs, services
from whatif.models import WhatIfRun
from whatif.services import RunRequest, whatif_execute, whatif_start

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(admin_user):
    return session_for(admin_user)


def _run(status: str = "queued", policies: tuple[str, ...] = ("fifo",)) -> WhatIfRun:
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        run = whatif_start(RunRequest(source="upload", trace_name="tiny.csv", trace=TINY, policies=policies, nodes=2), actor=None)
    if status == "done":
        whatif_execute(run.pk)
    elif status != "queued":
        WhatIfRun.objects.filter(pk=run.pk).update(status=status)
    return WhatIfRun.objects.get(pk=run.pk)


def _url(name: str, run: WhatIfRun) -> str:
    return reverse(f"whatif:{name}", args=[run.pk])


def test_a_queued_run_is_cancelled_from_its_page_and_never_starts(admin, admin_user) -> None:
    run = _run()
    page = admin.get(_url("detail", run)).content.decode()
    assert 'data-testid="whatif-cancel"' in page and f'data-confirm="Cancel what-if run {run.pk} (tiny.csv)?' in page
    assert 'data-testid="whatif-delete"' not in page

    response = admin.post(_url("cancel", run), follow=True)
    assert response.redirect_chain[-1][0] == _url("detail", run)
    page = response.content.decode()
    assert f"What-if run {run.pk} is cancelled." in page and f"by {admin_user.username}," in page and "it has no results" in page
    run.refresh_from_db()
    assert run.status == "cancelled" and run.cancelled_by == admin_user and run.finished_at is not None
    entry = AuditEntry.objects.get(action="whatif.cancel")
    assert entry.actor == admin_user and entry.target_id == str(run.pk) and entry.changes["status"] == ["queued", "cancelled"]

    whatif_execute(run.pk)  # its task, delivered later, does not start it
    run.refresh_from_db()
    assert run.status == "cancelled" and run.started_at is None


def test_a_running_replay_stops_at_its_next_progress_step_once_cancelled(admin_user) -> None:
    run = _run(policies=("fifo", "easy", "muster"))
    simulated: list[str] = []
    simulate = runs.simulate

    def cancelled_during_the_first(jobs: Any, **kwargs: Any) -> Any:
        simulated.append(kwargs["policy"])
        if len(simulated) == 1:
            services.whatif_cancel(run_id=run.pk, actor=admin_user)
        return simulate(jobs, **kwargs)

    with mock.patch.object(runs, "simulate", cancelled_during_the_first), mock.patch.object(services, "PROGRESS_INTERVAL_SECONDS", 0):
        whatif_execute(run.pk, worker="whatif@a")
    run.refresh_from_db()
    assert simulated == ["fifo"]  # easy and muster never replayed: the worker is free
    assert run.status == "cancelled" and run.summary is None and run.error == ""


def test_an_ended_run_is_deleted_from_its_page_and_the_list(admin, admin_user) -> None:
    done, failed = _run("done"), _run("failed")
    listing = admin.get(reverse("whatif:list")).content.decode()
    assert f'form="whatif-delete-{done.pk}"' in listing and f'id="whatif-delete-{done.pk}"' in listing
    page = admin.get(_url("detail", done)).content.decode()
    assert f'data-confirm="Delete what-if run {done.pk} (tiny.csv) with its trace and report? This cannot be undone."' in page
    assert 'data-testid="whatif-cancel"' not in page

    for run in (done, failed):
        response = admin.post(_url("delete", run), follow=True)
        assert response.redirect_chain[-1][0] == reverse("whatif:list")
        assert f"What-if run {run.pk} is deleted." in response.content.decode()
    assert not WhatIfRun.objects.exists()
    entries = AuditEntry.objects.filter(action="whatif.delete").order_by("pk")
    assert [e.target_id for e in entries] == [str(done.pk), str(failed.pk)]
    assert entries[0].actor == admin_user and entries[0].changes["trace"] == ["tiny.csv", None]
    assert entries[0].changes["status"] == ["done", None]


def test_a_running_run_is_not_deleted_and_an_ended_one_not_cancelled(admin) -> None:
    running, done = _run("running"), _run("done")
    listing = admin.get(reverse("whatif:list")).content.decode()
    assert f'form="whatif-cancel-{running.pk}"' in listing and f'form="whatif-delete-{running.pk}"' not in listing

    page = admin.post(_url("delete", running), follow=True).content.decode()
    assert f"What-if run {running.pk} is running: cancel it before deleting it." in page
    page = admin.post(_url("cancel", done), follow=True).content.decode()
    assert f"What-if run {done.pk} has already ended (done): there is nothing to cancel." in page
    assert WhatIfRun.objects.get(pk=running.pk).status == "running" and WhatIfRun.objects.get(pk=done.pk).status == "done"
    assert not AuditEntry.objects.exclude(action="whatif.run").exists()


def test_only_admins_cancel_or_delete_and_only_by_post(client, user, admin) -> None:
    queued, done = _run(), _run("done")
    for name, run in (("cancel", queued), ("delete", done)):
        assert admin.get(_url(name, run)).status_code == 405
        assert session_for(user).post(_url(name, run)).status_code == 403
        assert client.post(_url(name, run)).status_code == 302  # to the sign-in page
    assert admin.post(reverse("whatif:cancel", args=[999])).status_code == 404
    assert WhatIfRun.objects.get(pk=queued.pk).status == "queued" and WhatIfRun.objects.filter(pk=done.pk).exists()


def test_django_admin_shows_runs_read_only_and_cancels_and_deletes_through_the_services(admin, admin_user) -> None:
    queued, done = _run(), _run("done")
    changelist = reverse("admin:whatif_whatifrun_changelist")
    assert "tiny.csv" in admin.get(changelist).content.decode()
    page = admin.get(reverse("admin:whatif_whatifrun_change", args=[done.pk])).content.decode()
    assert "Save" not in page and "TINY" not in page  # read-only; the trace stays out
    assert admin.get(reverse("admin:whatif_whatifrun_add")).status_code == 403

    admin.post(changelist, {"action": "cancel_selected", "_selected_action": [queued.pk, done.pk]})
    assert WhatIfRun.objects.get(pk=queued.pk).status == "cancelled"
    assert AuditEntry.objects.filter(action="whatif.cancel", target_id=str(queued.pk)).exists()

    admin.post(changelist, {"action": "delete_selected", "_selected_action": [queued.pk, done.pk], "post": "yes"})
    assert not WhatIfRun.objects.exists()
    assert AuditEntry.objects.filter(action="whatif.delete").count() == 2
