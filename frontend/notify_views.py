"""The notifications page: a user's default for being told when their jobs start, end, fail or are requeued."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render

from accounts.requests import AuthenticatedHttpRequest
from api.jobs.serializers import NotifySerializer
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
