"""A pending job's Update on its page, as `muster update`: what was changed, checked as the submit form checks it, its
mistakes beside their fields; shown only while the job is pending, to its owner and admins (who see its page)."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

from django.conf import settings
from django.test import Client

from jobs.models import Job
from tests.conftest import SimHarness, session_for


def form_of(job: Job, **changes: Any) -> dict[str, Any]:
    """The form as the page draws it for `job`, with `changes` typed in (an unticked box is not sent)."""
    fields = {
        "update-name": job.name,
        "update-wall_time_minutes": -(-job.wall_time_seconds // 60),
        "update-priority_class": job.priority_class,
        "update-max_restarts": job.max_restarts,
        **({"update-preemptible": "on"} if job.preemptible else {}),
    }
    fields.update({f"update-{k}": v for k, v in changes.items()})
    return {k: v for k, v in fields.items() if v is not None}


class _UpdateFormInputs(HTMLParser):
    """The names and values the page's Update form sends as drawn (a browser's submit with nothing typed in)."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = False
        self.sent: dict[str, str] = {}
        self._select = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.inside = "update-form" in (a.get("class") or "")
        elif self.inside and tag == "input" and (name := a.get("name")) and (a.get("type") != "checkbox" or "checked" in a):
            self.sent[name] = a.get("value") or ""
        elif self.inside and tag == "select":
            self._select = a.get("name") or ""
        elif self.inside and tag == "option" and self._select and "selected" in a:
            self.sent[self._select] = a.get("value") or ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False


def drawn_form(page: Client, job_id: int) -> dict[str, str]:
    parser = _UpdateFormInputs()
    parser.feed(page.get(f"/jobs/{job_id}/").content.decode())
    return parser.sent


def test_a_pending_jobs_page_updates_it(user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8, name="train", wall_time_seconds=3600)["id"]
    page = session_for(user)
    shown = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="update"' in shown and 'value="train"' in shown
    job = Job.objects.get(pk=job_id)
    done = page.post(f"/jobs/{job_id}/update/", form_of(job, name="train-v2", wall_time_minutes=120, max_restarts=2), follow=True)
    said = done.content.decode()
    assert f"Job {job_id} updated: name train-v2, wall time 2 h, max restarts 2; the next scheduling cycle plans it so." in said
    job.refresh_from_db()
    assert (job.name, job.wall_time_seconds, job.max_restarts) == ("train-v2", 7200, 2)


def test_its_mistakes_are_shown_beside_their_fields_as_the_submit_form_shows_them(user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8, name="train")["id"]
    job = Job.objects.get(pk=job_id)
    page = session_for(user)
    most = settings.MUSTER_MAX_WALL_TIME_SECONDS // 60
    answer = page.post(f"/jobs/{job_id}/update/", form_of(job, name="", wall_time_minutes=most + 1, max_restarts=-1))
    assert answer.status_code == 200
    shown = answer.content.decode()
    assert "The job was not updated." in shown and "Fix the 3 marked fields and update again." in shown
    assert "Give the job a name: any label of yours." in shown  # the submit form's own words
    assert f"The site maximum is {most} minutes" in shown
    assert "Give 0 or more restarts: 0 means a failed job is not started again." in shown
    assert '<details class="update card" data-testid="update" open>' in shown
    assert Job.objects.get(pk=job_id).name == "train"  # nothing changed
    # Nothing changed: said, not a silent success.
    same = page.post(f"/jobs/{job_id}/update/", form_of(job)).content.decode()
    assert "Nothing was changed: change a field, then press Update." in same


def test_only_a_pending_job_offers_it_and_a_stale_page_is_told(user: Any, submit: Any, sim: SimHarness) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    job = Job.objects.get(pk=job_id)
    page = session_for(user)
    assert sim.cycle().placed == [job_id]
    assert 'data-testid="update"' not in page.get(f"/jobs/{job_id}/").content.decode()
    stale = page.post(f"/jobs/{job_id}/update/", form_of(job, name="late"), follow=True).content.decode()
    assert f"Job {job_id} is SCHEDULED: only a pending job can be updated" in stale
    assert Job.objects.get(pk=job_id).name == job.name


def test_someone_elses_job_is_not_theirs_to_update_but_an_admins(user: Any, admin_user: Any, django_user_model: Any, submit: Any) -> None:
    job_id = submit(nodes=1, gpus_per_node=8)["id"]
    job = Job.objects.get(pk=job_id)
    other = django_user_model.objects.create_user(username="mallory", password="x")
    assert session_for(other).post(f"/jobs/{job_id}/update/", form_of(job, name="mine")).status_code == 404
    done = session_for(admin_user).post(f"/jobs/{job_id}/update/", form_of(job, name="by-admin"), follow=True).content.decode()
    assert f"Job {job_id} updated: name by-admin" in done


def test_a_page_drawn_before_another_update_changes_only_what_was_typed_in(user: Any, api: Any, submit: Any, sim: SimHarness) -> None:
    """The page's form was drawn; meanwhile `muster update -J ... --max-restarts 2` changed the job; the viewer then
    changes the wall time alone: the name and restarts stay as the other update left them (they were set back)."""
    job_id = submit(nodes=1, gpus_per_node=8, name="train", wall_time_seconds=3600)["id"]
    page = session_for(user)
    drawn = drawn_form(page, job_id)
    assert (drawn["update-name"], drawn["update-max_restarts"]) == ("train", "0")
    assert api.patch(f"/api/v1/jobs/{job_id}/", {"name": "train-cli", "max_restarts": 2}, format="json").status_code == 200
    said = page.post(f"/jobs/{job_id}/update/", {**drawn, "update-wall_time_minutes": "120"}, follow=True).content.decode()
    assert f"Job {job_id} updated: wall time 2 h; the next scheduling cycle plans it so." in said
    job = Job.objects.get(pk=job_id)
    assert (job.name, job.max_restarts, job.wall_time_seconds) == ("train-cli", 2, 7200)
    assert [e.reason for e in job.events.order_by("pk")][-1] == f"Updated by {user.username}: wall time 1 h -> 2 h."
    # The page as drawn, sent again untouched: nothing to change, though the job differs from it now.
    again = page.post(f"/jobs/{job_id}/update/", drawn).content.decode()
    assert "Nothing was changed: change a field, then press Update." in again
    assert Job.objects.get(pk=job_id).name == "train-cli"
    # A mistake shown and fixed keeps the page's first values as what it was drawn with: still only the name is sent.
    wrong = page.post(f"/jobs/{job_id}/update/", {**drawn, "update-name": ""}).content.decode()
    assert "Give the job a name: any label of yours." in wrong
    parser = _UpdateFormInputs()
    parser.feed(wrong)
    assert parser.sent["initial-update-max_restarts"] == "0"
    page.post(f"/jobs/{job_id}/update/", {**parser.sent, "update-name": "train-v2"})
    job.refresh_from_db()
    assert (job.name, job.max_restarts) == ("train-v2", 2)
