"""A job's page says when its owner is told of it and how, and what was sent: the submit form's "Tell me when it
starts" was saved (the API's `notify.on: ["start"]`) and shown nowhere on the page."""

from __future__ import annotations

import re
from typing import Any

from django.core import mail

from jobs.models import Job
from notify.services import deliveries_send_due, preference_save
from tests.conftest import session_for
from tests.frontend.forms import submit_form


def notifications(html: str) -> str:
    said = re.search(r'<dd data-testid="notifications">(.*?)</dd>', html, re.S)
    assert said, "the job page says nothing of notifications"
    return " ".join(re.sub(r"<[^>]+>", "", said.group(1)).split())


def test_the_page_says_what_the_submit_asked_and_what_was_sent(user: Any, admin_user: Any, sim: Any, settings: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    user.email = "alice@example.org"
    user.save(update_fields=["email"])
    client = session_for(user)
    response = client.post("/jobs/new/", submit_form(name="told", nodes="1", notify_on="start"))
    assert response.status_code == 302
    job = Job.objects.get(name="told")
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert notifications(page) == "You are told when it starts, by e-mail to alice@example.org. Your default"
    # An admin reads whose asks they are.
    assert notifications(session_for(admin_user).get(f"/jobs/{job.pk}/").content.decode()).startswith(
        "alice is told when it starts, by e-mail to alice@example.org."
    )

    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job.pk).state == "RUNNING"
    assert notifications(client.get(f"/jobs/{job.pk}/").content.decode()).endswith("start, e-mail: waiting to be sent")
    assert deliveries_send_due(now=sim.clock()) == 1 and len(mail.outbox) == 1
    assert notifications(client.get(f"/jobs/{job.pk}/").content.decode()).endswith("start, e-mail: sent just now")


def test_a_job_that_asked_nothing_of_its_own_says_its_owners_default(user: Any, sim: Any) -> None:
    client = session_for(user)
    client.post("/jobs/new/", submit_form(name="quiet", nodes="1"))
    job = Job.objects.get(name="quiet")
    said = notifications(client.get(f"/jobs/{job.pk}/").content.decode())
    assert said.startswith("none: its submit asked nothing of its own, and the owner's default (the Notifications page) asks nothing.")
    preference_save(user, {"on": ["end", "fail"], "email": False, "webhook": "https://hooks.example/muster"})
    said = notifications(client.get(f"/jobs/{job.pk}/").content.decode())
    assert said.startswith(
        "You are told when it ends or fails (or reaches its wall time), to the webhook https://hooks.example/muster "
        "(the owner's default, on the Notifications page: its submit asked nothing of its own)."
    )
