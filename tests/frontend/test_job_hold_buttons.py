"""The job page's Hold and Release buttons for a pending job, as `muster hold` / `muster release`."""

from __future__ import annotations

from typing import Any

from jobs.models import Job
from jobs.services import job_hold
from jobs.states import JobState
from tests.conftest import SimHarness, session_for


def test_hold_and_release_from_the_job_page(user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    page = session_for(user)
    shown = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="hold"' in shown and 'data-testid="release"' not in shown
    held = page.post(f"/jobs/{job_id}/hold/", follow=True).content.decode()
    assert f"Job {job_id} held: it stays in the queue but is not started until released." in held
    assert "Held by its owner (alice) at " in held and 'data-testid="release"' in held and 'data-testid="hold"' not in held
    # The reason as the API stores and answers it names the command; the job page, beside its Release button, says the
    # button (it read "`muster release 8` lets it start." there), also when it updates in place.
    assert Job.objects.get(pk=job_id).pending_reason.endswith(f": `muster release {job_id}` lets it start.")
    assert ": the Release button lets it start." in held and "muster release" not in held and "`" not in held
    live = page.get(f"/jobs/{job_id}/live/").content.decode()
    assert ": the Release button lets it start." in live and "muster release" not in live
    # The queue, which has no button, keeps the command, as code rather than between backticks.
    cluster = page.get("/cluster/").content.decode()
    assert f"<code>muster release {job_id}</code>" in cluster and "`muster" not in cluster
    assert sim.cycle().placed == []
    released = page.post(f"/jobs/{job_id}/release/", follow=True).content.decode()
    assert f"Job {job_id} released: it may start from the next scheduling cycle." in released
    assert sim.cycle().placed == [job_id]
    # Placed: no Hold any more, and a hold sent from a stale page says why not.
    shown = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="hold"' not in shown
    stale = page.post(f"/jobs/{job_id}/hold/", follow=True).content.decode()
    assert f"Job {job_id} is SCHEDULED: only a pending job can be held" in stale
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED


def test_an_admins_hold_offers_its_owner_no_release(user: Any, admin_user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    job_hold(job=Job.objects.get(pk=job_id), by=admin_user)
    shown = session_for(user).get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="release"' not in shown and "Held by an admin: only an admin can release it." in shown
    refused = session_for(user).post(f"/jobs/{job_id}/release/", follow=True).content.decode()
    assert f"Job {job_id} is held by an admin (root); only an admin can release it." in refused
    assert 'data-testid="release"' in session_for(admin_user).get(f"/jobs/{job_id}/").content.decode()
