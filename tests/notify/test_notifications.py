"""Told when a job starts, ends, fails or is requeued: by e-mail and webhook, per job and by default, sent after the commit, retried."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core import mail
from rest_framework.test import APIClient

from jobs.lifecycle import job_launch_failed, job_preempt, job_retry_or_fail
from jobs.models import Allocation, Job, Node, SimulatedPod
from jobs.states import JobState
from notify.models import Delivery
from notify.services import deliveries_send_due, preference_of
from tests.conftest import SimHarness, job_payload, session_for


@pytest.fixture(autouse=True)
def _mail(settings: Any, user: Any) -> None:
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    settings.MUSTER_BASE_URL = "https://muster.example"
    user.email = "alice@example.org"
    user.save(update_fields=["email"])


class Hook:
    """A webhook receiver on a free loopback port: what it was sent, and what it answers."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.status = 204
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.received.append(json.loads(body))
                self.send_response(hook.status)
                if 300 <= hook.status < 400:
                    self.send_header("Location", f"{hook.url}elsewhere")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/muster"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def hook(settings: Any) -> Iterator[Hook]:
    settings.MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # the receiver is on loopback: allowed by the admin
    receiver = Hook()
    yield receiver
    receiver.server.shutdown()


def send(sim: SimHarness, later: float = 0.0) -> int:
    """The sender at the simulated cluster's time (the state changes were stamped with it), `later` seconds on."""
    return deliveries_send_due(now=sim.clock() + timedelta(seconds=later))


def test_a_job_asking_for_start_and_end_is_told_both_by_email_and_webhook(sim: SimHarness, submit: Any, hook: Hook) -> None:
    job = submit(nodes=1, gpus_per_node=1, simulate={"duration_seconds": 5}, notify={"on": ["start", "end"], "webhook": hook.url})
    sim.cycle()
    sim.advance(2)  # running
    assert send(sim) == 2
    (started,) = mail.outbox
    assert started.to == ["alice@example.org"]
    assert started.subject == f"[Muster] job {job['id']} (train-llm) started running"
    assert f"https://muster.example/jobs/{job['id']}/" in started.body
    assert hook.received[0]["event"] == "start" and hook.received[0]["job"]["state"] == "RUNNING"
    sim.advance(10)  # succeeded
    assert send(sim) == 2
    assert mail.outbox[1].subject.endswith("succeeded") and hook.received[1]["event"] == "end"
    assert send(sim) == 0  # nothing owed twice


def test_a_failure_is_one_message_even_when_end_and_fail_are_both_asked(sim: SimHarness, submit: Any) -> None:
    submit(nodes=1, gpus_per_node=1, simulate={"duration_seconds": 1, "exit_code": 3}, notify={"on": ["end", "fail"]})
    sim.cycle()
    sim.advance(2)
    sim.advance(5)
    assert Job.objects.get().state == "FAILED"
    assert send(sim) == 1
    assert mail.outbox[0].subject.endswith("failed") and Delivery.objects.get().event == "fail"


def test_the_users_default_applies_unless_the_submit_says_otherwise(sim: SimHarness, submit: Any, api: APIClient) -> None:
    saved = api.put("/api/v1/notifications/", {"on": ["start"], "email": True}, format="json")
    assert saved.status_code == 200 and saved.json() == {"on": ["start"], "email": True, "webhook": ""}
    by_default = submit(nodes=1, gpus_per_node=1, name="default")
    quiet = submit(nodes=1, gpus_per_node=1, name="quiet", notify={"on": []})
    sim.cycle()
    sim.advance(2)
    send(sim)
    assert [m.subject for m in mail.outbox] == [f"[Muster] job {by_default['id']} (default) started running"]
    assert not Delivery.objects.filter(job_id=quiet["id"]).exists()


def test_a_webhook_that_fails_is_tried_again_later_and_the_job_is_unaffected(sim: SimHarness, submit: Any, hook: Hook) -> None:
    hook.status = 503
    job = submit(nodes=1, gpus_per_node=1, notify={"on": ["start"], "email": False, "webhook": hook.url})
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job["id"]).state == "RUNNING"
    assert send(sim) == 0
    owed = Delivery.objects.get()
    assert (owed.tries, owed.sent_at, owed.last_error) == (1, None, "the webhook answered 503")
    assert send(sim) == 0  # not due again yet (a minute on)
    hook.status = 200
    assert send(sim, later=120) == 1
    assert len(hook.received) == 2  # the failed try, then the one that went
    assert Delivery.objects.get().sent_at is not None


def test_messages_that_could_not_be_sent_are_listed_on_the_notifications_page(sim: SimHarness, submit: Any, hook: Hook, user: Any) -> None:
    """A webhook that failed every time was known only to the server's log."""
    page = session_for(user).get("/account/notifications/").content.decode()
    assert 'data-testid="undelivered-none"' in page
    hook.status = 503
    job = submit(nodes=1, gpus_per_node=1, name="nightly", notify={"on": ["start"], "email": False, "webhook": hook.url})
    sim.cycle()
    sim.advance(2)
    send(sim)
    page = session_for(user).get("/account/notifications/").content.decode()
    row = re.search(r'<table data-testid="undelivered">.*?</table>', page, re.S)
    assert row is not None
    assert f"{job['id']}</a> nightly" in row.group(0) and "the webhook answered 503" in row.group(0) and "start" in row.group(0)


def test_bad_notify_asks_are_refused(sim: SimHarness, api: APIClient, user: Any) -> None:
    from tests.conftest import job_payload

    bad_event = api.post("/api/v1/jobs/", job_payload(notify={"on": ["BEGIN"]}), format="json")
    assert bad_event.status_code == 400 and "BEGIN" in str(bad_event.json())
    bad_url = api.post("/api/v1/jobs/", job_payload(notify={"on": ["end"], "webhook": "not a url"}), format="json")
    assert bad_url.status_code == 400 and "webhook" in str(bad_url.json())
    # A URL Django takes, but no webhook is ever sent to.
    ftp = api.post("/api/v1/jobs/", job_payload(notify={"on": ["end"], "webhook": "ftp://example.com/x"}), format="json")
    webhook_url = "A webhook is an http:// or https:// URL, e.g. https://hooks.example.org/muster."
    assert ftp.status_code == 400 and ftp.json()["notify"]["webhook"] == [webhook_url]
    # One mistake, one error: Django's own URL check said "Enter a valid URL." beside it.
    for wrong in ("ftp://hooks", "not a url", "http://"):
        refused = api.post("/api/v1/jobs/", job_payload(notify={"on": ["end"], "webhook": wrong}), format="json")
        assert refused.json()["notify"]["webhook"] == [webhook_url], wrong
    # Events to be told of, with no way to be told.
    silent = api.post("/api/v1/jobs/", job_payload(notify={"on": ["fail"], "email": False}), format="json")
    assert silent.status_code == 400 and "Nothing would be sent" in silent.json()["notify"]["on"][0]
    assert not Job.objects.exists()
    preference = api.put("/api/v1/notifications/", {"on": ["fail"], "email": False, "webhook": ""}, format="json")
    assert preference.status_code == 400 and "Nothing would be sent" in str(preference.json())
    # E-mail, to an account with no address: nothing would be sent either.
    user.email = ""
    user.save(update_fields=["email"])
    nowhere = api.put("/api/v1/notifications/", {"on": ["fail"], "email": True, "webhook": ""}, format="json")
    assert nowhere.status_code == 400 and "your account has no e-mail address" in nowhere.json()["email"][0]
    nowhere = api.post("/api/v1/jobs/", job_payload(notify={"on": ["end"]}), format="json")
    assert nowhere.status_code == 400 and "your account has no e-mail address" in nowhere.json()["notify"]["email"][0]
    assert api.put("/api/v1/notifications/", {"on": ["fail"], "webhook": "https://example.org/hook"}, format="json").status_code == 200


def test_the_notifications_page_saves_the_default_and_the_form_ticks_it(sim: SimHarness, user: Any) -> None:
    client = session_for(user)
    page = client.get("/account/notifications/").content.decode()
    assert "To alice@example.org." in page
    response = client.post("/account/notifications/", {"on_end": "on", "on_fail": "on", "email": "on", "webhook": ""})
    assert response.status_code == 302
    form = client.get("/jobs/new/").content.decode()
    ticked = {m for m in re.findall(r'<input type="checkbox" name="notify_on" value="(\w+)"[^>]*checked', form)}
    assert ticked == {"end", "fail"}
    bad = client.post("/account/notifications/", {"on_end": "on", "webhook": "ftp://x"})
    said = bad.content.decode()
    assert bad.status_code == 200 and said.count("A webhook is an http:// or https:// URL, e.g. https://hooks.example.org/muster.") == 1
    assert "Enter a valid URL." not in said
    silent = client.post("/account/notifications/", {"on_fail": "on", "webhook": ""}).content.decode()
    assert "Nothing would be sent: ask for e-mail, give a webhook, or choose no events." in silent
    # The form comes back as it was sent: "it fails" ticked, e-mail not, for the mistake to be mended.
    assert re.search(r'name="on_fail" checked', silent) and not re.search(r'name="email" checked', silent)
    assert preference_of(user).on_end  # nothing was saved


def test_the_submit_form_says_nothing_can_be_sent_to_an_account_without_an_address(sim: SimHarness, user: Any) -> None:
    """Said beside "Tell me when", before a submit that ticks it is refused for it."""
    client = session_for(user)
    said = "Nothing can be sent now: your account has no e-mail address"
    assert said not in client.get("/jobs/new/").content.decode()
    User.objects.filter(pk=user.pk).update(email="")
    assert said in client.get("/jobs/new/").content.decode()
    client.post("/account/notifications/", {"on_end": "on", "email": "on", "webhook": "https://hooks.example.org/muster"})
    assert said not in client.get("/jobs/new/").content.decode()  # a webhook is told


@pytest.mark.parametrize(
    ("webhook", "address"),
    [
        ("http://127.0.0.1:8000/admin/", "127.0.0.1"),
        ("http://169.254.169.254/latest/meta-data/", "169.254.169.254"),  # the cloud's metadata service
        ("https://10.0.0.7/hook", "10.0.0.7"),
        ("http://[::1]:9000/", "::1"),
        ("http://localhost:6379/", None),  # by name: whatever it resolves to here is loopback
    ],
)
def test_a_webhook_inside_the_sites_network_is_refused(sim: SimHarness, api: APIClient, webhook: str, address: str | None) -> None:
    """A user's webhook would have Muster's worker POST inside the site's network (SSRF)."""
    refused = api.put("/api/v1/notifications/", {"on": ["end"], "webhook": webhook}, format="json")
    assert refused.status_code == 400
    (message,) = refused.json()["webhook"]
    assert "an address inside the site's network" in message and "MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS" in message
    if address:  # an address is said once
        assert message.startswith(f"Muster will not send to this webhook: {address} is an address inside the site's network")
    else:  # a name, with the address it resolves to
        assert message.startswith("Muster will not send to this webhook: its host localhost is ") and ", an address inside" in message
    job = api.post("/api/v1/jobs/", job_payload(notify={"on": ["end"], "webhook": webhook}), format="json")
    assert job.status_code == 400 and "Muster will not send to this webhook" in job.json()["notify"]["webhook"][0]
    assert not Job.objects.exists()


def test_a_webhook_allowed_when_given_but_inside_the_network_when_sent_is_not_sent(
    sim: SimHarness, submit: Any, hook: Hook, settings: Any
) -> None:
    """The name may resolve elsewhere by the time the message goes (or the admin narrowed the networks): checked again."""
    job = submit(nodes=1, gpus_per_node=1, notify={"on": ["start"], "email": False, "webhook": hook.url})
    settings.MUSTER_NOTIFY_WEBHOOK_ALLOWED_NETWORKS = []
    sim.cycle()
    sim.advance(2)
    assert send(sim) == 0 and hook.received == []
    delivery = Delivery.objects.get(job_id=job["id"])
    assert delivery.tries == 1 and delivery.last_error.startswith("not sent: 127.0.0.1 is an address inside the site's network")


def test_a_webhook_that_redirects_is_not_followed(sim: SimHarness, submit: Any, hook: Hook) -> None:
    """A redirect could lead past the check of the URL: it is a failed try like any other 3xx."""
    hook.status = 302
    job = submit(nodes=1, gpus_per_node=1, notify={"on": ["start"], "email": False, "webhook": hook.url})
    sim.cycle()
    sim.advance(2)
    assert send(sim) == 0 and len(hook.received) == 1
    assert Delivery.objects.get(job_id=job["id"]).last_error == "the webhook answered 302"


# --- requeue (Slurm's REQUEUE) ---------------------------------------------------------------------


def running_job(sim: SimHarness, submit: Any, **notify: Any) -> Job:
    job = submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 86400}, notify={"on": ["requeue"], **notify})
    sim.cycle()
    sim.advance(2)
    running = Job.objects.get(pk=job["id"])
    assert running.state == JobState.RUNNING
    return running


def test_a_preempted_job_is_told_once_why_and_which_attempt_ended(sim: SimHarness, submit: Any, hook: Hook) -> None:
    """A preemption passes PREEMPTED then PENDING in one go: one message, with the preemption's reason."""
    job = running_job(sim, submit, webhook=hook.url)
    job_preempt(
        job, reason="Preempted for job 99: it is of a lower priority class. The work since its start is lost (16.0 GPU-hours).",
        for_job_id=99, now=sim.clock(),
    )  # fmt: skip
    assert send(sim) == 2
    (told,) = mail.outbox
    assert told.subject == f"[Muster] job {job.pk} (train-llm) was requeued (attempt 1 ended)"
    assert "its attempt 1, which had been running, ended early; it waits in the queue to start again as attempt 2" in told.body
    assert "Preempted for job 99: it is of a lower priority class." in told.body
    assert "Requeued after preemption by job 99." in told.body
    (payload,) = hook.received
    assert payload["event"] == "requeue" and payload["from_state"] == "PREEMPTED"
    assert payload["job"]["state"] == "PENDING" and payload["job"]["attempt"] == 1
    assert payload["reason"].startswith("Preempted for job 99") and payload["reason"].endswith("Requeued after preemption by job 99.")
    assert send(sim) == 0


def test_a_job_whose_node_left_is_told_it_was_requeued(sim: SimHarness, submit: Any) -> None:
    job = running_job(sim, submit)
    sim.cluster.nodes = 15  # the last node leaves; move the job there first
    Allocation.objects.filter(job=job).update(node=Node.objects.get(name="sim-node-015"))
    SimulatedPod.objects.filter(job_id=job.pk).update(node_name="sim-node-015")
    sim.cycle()  # requeued and placed again as attempt 2
    send(sim)
    assert [m.subject for m in mail.outbox] == [f"[Muster] job {job.pk} (train-llm) was requeued (attempt 1 ended)"]
    assert "Node sim-node-015 left the cluster" in mail.outbox[0].body


def test_a_failed_attempt_restarted_is_a_requeue_but_a_launch_retried_is_not(sim: SimHarness, submit: Any) -> None:
    """A launch that never came up ran none of the job's work: retried with backoff, it would send one message a try."""
    job = submit(nodes=1, gpus_per_node=8, max_restarts=1, notify={"on": ["requeue", "fail"]})
    sim.cycle()
    launching = Job.objects.get(pk=job["id"])
    assert launching.state == JobState.SCHEDULED
    launched_again = job_launch_failed(launching, now=sim.clock(), why="Back-off pulling image")
    assert launched_again.state == JobState.PENDING
    assert send(sim) == 0 and not Delivery.objects.exists()
    # Placed again after its backoff; it runs, and its attempt fails: restarted, which the owner is told (no `fail`:
    # it did not end).
    sim.clock.advance((launched_again.launch_not_before - sim.clock()).total_seconds())
    sim.cycle()
    sim.advance(2)
    running = Job.objects.get(pk=job["id"])
    assert (running.state, running.attempt) == (JobState.RUNNING, 2)
    job_retry_or_fail(running, now=sim.clock(), why="Rank 0 exited with code 1.", exit_code=1)
    assert send(sim) == 1
    assert mail.outbox[0].subject == f"[Muster] job {running.pk} (train-llm) was requeued (attempt 2 ended)"
    assert "Attempt 2 failed: Rank 0 exited with code 1. Restarting (1 of 1)." in mail.outbox[0].body


def test_a_job_preempted_while_it_launched_is_not_told(sim: SimHarness, submit: Any) -> None:
    job = submit(nodes=1, gpus_per_node=8, notify={"on": ["requeue"]})
    sim.cycle()
    launching = Job.objects.get(pk=job["id"])
    assert launching.state == JobState.SCHEDULED
    job_preempt(launching, reason="Preempted for job 99.", for_job_id=99, now=sim.clock())
    assert not Delivery.objects.exists()


def test_requeue_is_asked_for_like_the_other_events(sim: SimHarness, user: Any, api: APIClient) -> None:
    saved = api.put("/api/v1/notifications/", {"on": ["fail", "requeue"], "email": True}, format="json")
    assert saved.status_code == 200 and saved.json()["on"] == ["fail", "requeue"]
    client = session_for(user)
    page = client.get("/account/notifications/").content.decode()
    assert re.search(r'name="on_requeue" checked> it goes back to the queue after running \(preempted', page)
    form = client.get("/jobs/new/").content.decode()
    ticked = {m for m in re.findall(r'<input type="checkbox" name="notify_on" value="(\w+)"[^>]*checked', form)}
    assert ticked == {"fail", "requeue"}
    assert client.post("/account/notifications/", {"on_start": "on", "email": "on", "webhook": ""}).status_code == 302
    assert preference_of(user).events == ["start"]
