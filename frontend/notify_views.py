"""The notifications page: a user's default for being told when their jobs start, end, fail or are requeued."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ObjectDoesNotExist
from django.http import HttpResponse
from django.shortcuts import redirect, render

from accounts.requests import AuthenticatedHttpRequest
from api.jobs.serializers import NotifySerializer
from jobs.models import Job
from notify.models import Asks, Delivery
from notify.services import EVENTS, deliveries_failing, preference_of, preference_save

LABELS = {
    "start": "it starts running",
    "end": "it ends (however it ends)",
    "fail": "it fails or reaches its wall time",
    "requeue": "it goes back to the queue after running (preempted, its node lost or drained, a pod deleted, a failed attempt restarted)",
}


@login_required
def notifications_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    preference = preference_of(request.user)
    errors: dict[str, list[str]] = {}
    if request.method == "POST":
        asked = [e for e in EVENTS if request.POST.get(f"on_{e}")]
        data = {
            "on": asked,
            "email": bool(request.POST.get("email")),
            "webhook": request.POST.get("webhook", "").strip(),
        }
        serializer = NotifySerializer(data=data, context={"request": request})
        if serializer.is_valid():
            preference_save(request.user, serializer.validated_data)
            messages.success(request, "Saved: new jobs of yours follow it unless their submit says otherwise.")
            return redirect("frontend:notifications")
        errors = {key: [str(e) for e in value] for key, value in serializer.errors.items()}
        # The form again as it was sent, not as it is stored, for the mistake to be mended.
        preference.webhook_url = str(data["webhook"])
        preference.email = bool(data["email"])
        for event in EVENTS:
            setattr(preference, f"on_{event}", event in asked)
    events = [(e, LABELS[e], e in preference.events) for e in EVENTS]
    context = {"preference": preference, "events": events, "errors": errors, "failing": deliveries_failing(request.user)}
    context["max_tries"] = settings.MUSTER_NOTIFY_MAX_TRIES
    return render(request, "frontend/notifications.html", context)


# A job page's words for each event: "Tell me when it starts, ends".
SHORT_LABELS = {"start": "starts", "end": "ends", "fail": "fails (or reaches its wall time)", "requeue": "is requeued after running"}


def job_notifications(job: Job) -> dict[str, Any]:
    """What the job's page says of its notifications: when its owner is told and how (the submit's own asks, or the
    owner's default when it asked none, as notify.services tells), and the messages written for it so far. The submit
    form's "Tell me when it starts" was saved and shown nowhere but the API."""
    asks: Asks
    try:
        asks = job.notify  # notify.JobNotify: the submit's own
        own = True
    except ObjectDoesNotExist:
        asks = preference_of(job.owner)  # read when it is told: today's default, which may change before then
        own = False
    channels = []
    if asks.email:
        channels.append(f"by e-mail to {job.owner.email}" if job.owner.email else "by e-mail (the account has no address: none is sent)")
    if asks.webhook_url:
        channels.append(f"to the webhook {asks.webhook_url}")
    events = asks.events
    words = [SHORT_LABELS[event] for event in events]
    when = ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else "".join(words)
    deliveries = list(Delivery.objects.filter(job=job).order_by("id"))
    return {"own": own, "when": when, "how": " and ".join(channels) or "by no channel", "deliveries": deliveries}
