"""The site's error pages: what went wrong in words, and a way on that keeps the user's place.

A stale form (signed in or out in another tab, or left open past a restart) fails Django's CSRF check; the page
that says so carries the form's fields again, under a fresh token, so one click sends them as they were.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static

# Never carried into the resubmitted form: the stale token, and what must be typed again.
NOT_CARRIED = {"csrfmiddlewaretoken", "password", "password1", "password2", "old_password", "new_password1", "new_password2"}


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for whatever the pages say: the static icon (its hashed name in production)."""
    return redirect(static("frontend/favicon.svg"), permanent=False)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: who may open the page, and the way back."""
    return render(request, "403.html", {"why": str(exception or "")}, status=403)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the form's own fields again, under a fresh token, to send once more."""
    fields = [(key, value) for key, values in request.POST.lists() if key not in NOT_CARRIED for value in values]
    return render(request, "csrf.html", {"fields": fields, "action": request.get_full_path()}, status=403)
