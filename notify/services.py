"""Telling a job's owner when it starts, ends, fails or is requeued: by e-mail or a webhook, per job or by their default.

The events are Slurm's `--mail-type` words in Muster's states: `start` (BEGIN) is a move to RUNNING, `end` (END)
any end (SUCCEEDED, FAILED, TIMED_OUT, CANCELLED), `fail` (FAIL) a FAILED or TIMED_OUT end, `requeue` (REQUEUE) a job
whose attempt had been RUNNING going back to the queue (preempted, its node lost or drained, a pod deleted, a failed
attempt restarted). A launch that never came up and is placed again is no requeue: no work of the job ran. A state
change that matches what was asked writes one Delivery per channel in its own transaction (so a rolled-back change
tells nobody), and the send task runs after the commit; a message that cannot be sent is tried again, each wait twice
the one before, up to MUSTER_NOTIFY_MAX_TRIES.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from config.celery_task import task_named
from jobs.models import Job, JobEvent
from jobs.states import JobState
from notify.models import Asks, Delivery, JobNotify, NotifyPreference
from notify.webhooks import webhook_opener, webhook_refusal

logger = logging.getLogger(__name__)

SEND_TASK = "notify.tasks.send_due"
EVENTS = ("start", "end", "fail", "requeue")
ENDS = {JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT, JobState.CANCELLED}
FAILS = {JobState.FAILED, JobState.TIMED_OUT}


def events_of(to_state: str, *, ran: bool = False) -> set[str]:
    """What a move to this state is, in the words a user asks by. `ran`: the attempt that ended had been RUNNING, so
    a move back to PENDING is a requeue of work that ran (a launch that never came up, placed again, is not)."""
    if to_state == JobState.RUNNING:
        return {"start"}
    if to_state == JobState.PENDING:
        return {"requeue"} if ran else set()
    return ({"end"} if to_state in ENDS else set()) | ({"fail"} if to_state in FAILS else set())


def asks_for(job: Job) -> Asks | None:
    """The job's own asks, else its owner's default; None when neither asks for anything."""
    asks: Asks | None = JobNotify.objects.filter(job=job).first() or NotifyPreference.objects.filter(user_id=job.owner_id).first()
    return asks if asks is not None and asks.events else None


def notify_job_transition(*, job: Job, from_state: str, to_state: str, reason: str, now: datetime) -> None:
    """The `state_changed` hook: the messages this change owes, written in its transaction, sent after its commit."""
    ran, reason = _requeue_of(job, from_state=from_state, to_state=to_state, reason=reason)
    happened = events_of(to_state, ran=ran)
    if not happened:
        return
    asks = asks_for(job)
    if asks is None or not happened & set(asks.events):
        return
    event = next(e for e in ("fail", "end", "start", "requeue") if e in happened)
    owner = User.objects.only("email", "username").get(pk=job.owner_id)
    verb = f"was requeued (attempt {job.attempt} ended)" if event == "requeue" else _verb(to_state)
    subject = f"[Muster] job {job.pk} ({job.name}) {verb}"
    link = f"{settings.MUSTER_BASE_URL.rstrip('/')}/jobs/{job.pk}/" if settings.MUSTER_BASE_URL else f"/jobs/{job.pk}/"
    moved = f"went from {from_state} to {to_state} at {now:%Y-%m-%d %H:%M:%S %Z}"
    if event == "requeue":
        moved = (
            f"was requeued at {now:%Y-%m-%d %H:%M:%S %Z}: its attempt {job.attempt}, which had been running, ended early; "
            f"it waits in the queue to start again as attempt {job.attempt + 1}"
        )
    body = f"Job {job.pk} ({job.name}) of {owner.username} {moved}.\n{reason}\n\n{link}\n"
    payload = {
        "event": event,
        "job": {"id": job.pk, "name": job.name, "owner": owner.username, "state": to_state, "attempt": job.attempt, "url": link},
        "from_state": from_state,
        "reason": reason,
        "at": now.isoformat(),
    }
    targets = []
    if asks.email and owner.email:
        targets.append((Delivery.EMAIL, owner.email))
    if asks.webhook_url:
        targets.append((Delivery.WEBHOOK, asks.webhook_url))
    for channel, target in targets:
        Delivery.objects.create(
            job=job, event=event, channel=channel, target=target, subject=subject, body=body, payload=payload, created_at=now, due_at=now
        )
    if targets:
        task_named(SEND_TASK).delay_on_commit()


def _requeue_of(job: Job, *, from_state: str, to_state: str, reason: str) -> tuple[bool, str]:
    """Whether this move is a requeue of an attempt that had been RUNNING, and the reason to tell.

    A preemption passes PREEMPTED then PENDING in one transaction: the move to PENDING is the one message, told with
    the preemption's own reason (whose job took the nodes, the work lost) before the requeue's. A job preempted while
    its launch was still coming up (SCHEDULED) had not run, as a failed launch placed again has not: no requeue.
    """
    if to_state != JobState.PENDING:
        return False, reason
    if from_state == JobState.RUNNING:
        return True, reason
    if from_state != JobState.PREEMPTED:
        return False, reason
    preempted = JobEvent.objects.filter(job_id=job.pk, to_state=JobState.PREEMPTED).order_by("-id").values_list("from_state", "reason")
    before, why = preempted.first() or ("", "")
    return before == JobState.RUNNING, f"{why} {reason}".strip()


def _verb(to_state: str) -> str:
    return {
        JobState.RUNNING: "started running",
        JobState.SUCCEEDED: "succeeded",
        JobState.FAILED: "failed",
        JobState.TIMED_OUT: "reached its wall time",
        JobState.CANCELLED: "was cancelled",
    }.get(JobState(to_state), f"is {to_state}")


def _asks_fields(asks: Mapping[str, Any]) -> dict[str, Any]:
    """Asks as the API and the pages give them ({"on": [...], "email": bool, "webhook": url}) as the models' fields."""
    on = set(asks.get("on") or ())
    return {
        "on_start": "start" in on,
        "on_end": "end" in on,
        "on_fail": "fail" in on,
        "on_requeue": "requeue" in on,
        "email": bool(asks.get("email", True)),
        "webhook_url": asks.get("webhook") or "",
    }


def asks_json(asks: Asks) -> dict[str, Any]:
    """The models' fields back in the API's and the pages' shape."""
    return {"on": asks.events, "email": asks.email, "webhook": asks.webhook_url}


def job_notify_save(job: Job, asks: Mapping[str, Any]) -> JobNotify:
    """A submit's `notify` as the job's own asks."""
    return JobNotify.objects.create(job=job, **_asks_fields(asks))


def preference_of(user: User) -> NotifyPreference:
    """The user's default (unsaved, asking nothing, when they never set one)."""
    return NotifyPreference.objects.filter(user=user).first() or NotifyPreference(user=user)


def preference_save(user: User, asks: Mapping[str, Any]) -> NotifyPreference:
    preference, _ = NotifyPreference.objects.update_or_create(user=user, defaults=_asks_fields(asks))
    return preference


def deliveries_send_due(*, now: datetime | None = None, limit: int = 100) -> int:
    """Send the messages owed and due; returns how many went. A failure is tried again later, then given up."""
    now = now or timezone.now()
    sent = 0
    with transaction.atomic():
        due = list(
            Delivery.objects.select_for_update(skip_locked=True).filter(sent_at__isnull=True, due_at__lte=now).order_by("due_at")[:limit]
        )
        for delivery in due:
            try:
                _send(delivery)
            except Exception as exc:  # any failure of the channel is a try; the state change stands
                delivery.tries += 1
                delivery.last_error = str(exc)[:500]
                if delivery.tries >= settings.MUSTER_NOTIFY_MAX_TRIES:
                    logger.error(
                        "gave up telling %s about job %s after %s tries: %s", delivery.target, delivery.job_id, delivery.tries, exc
                    )
                    delivery.due_at = now + timedelta(days=3650)  # kept, for the record, but owed no more
                else:
                    delivery.due_at = now + timedelta(seconds=settings.MUSTER_NOTIFY_RETRY_SECONDS * 2 ** (delivery.tries - 1))
                delivery.save(update_fields=["tries", "last_error", "due_at"])
                continue
            delivery.sent_at = now
            delivery.save(update_fields=["sent_at"])
            sent += 1
    return sent


def _send(delivery: Delivery) -> None:
    if delivery.channel == Delivery.EMAIL:
        send_mail(delivery.subject, delivery.body, settings.DEFAULT_FROM_EMAIL, [delivery.target])
        return
    refused = webhook_refusal(delivery.target, resolve_fails_ok=False)
    if refused:
        raise RuntimeError(f"not sent: {refused}")
    request = urllib.request.Request(
        delivery.target,
        data=json.dumps(delivery.payload).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "Muster-notify"},
        method="POST",
    )
    try:
        with webhook_opener.open(request, timeout=settings.MUSTER_NOTIFY_WEBHOOK_TIMEOUT_SECONDS) as response:
            if response.status >= 300:
                raise RuntimeError(f"the webhook answered {response.status}")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(f"the webhook answered {exc.code}") from exc


UNDELIVERED_SHOWN = 10


def deliveries_failing(user: User) -> list[Delivery]:
    """The user's latest messages that could not be sent (still being retried, or given up), newest first: shown on
    the notifications page, else a webhook that never worked was known only to the server's log."""
    failing = Delivery.objects.filter(job__owner=user, sent_at__isnull=True, tries__gt=0).select_related("job")
    return list(failing.order_by("-created_at", "-id")[:UNDELIVERED_SHOWN])
