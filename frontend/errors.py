"""The site's error pages: what went wrong in words, and a way on that keeps the user's place.

A stale form (signed in or out in another tab, or left open past a restart) fails Django's CSRF check; the page
that says so carries the form's fields again, under a fresh token, so one click sends them as they were.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.templatetags.static import static

from frontend.form_stash import NOT_CARRIED, form_kept_for, form_stash


def favicon(request: HttpRequest) -> HttpResponse:
    """/favicon.ico, which browsers ask for whatever the pages say: the static icon (its hashed name in production)."""
    return redirect(static("frontend/favicon.svg"), permanent=False)


def forbidden(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """handler403: who may open the page, and the way back."""
    return render(request, "403.html", {"why": str(exception or "")}, status=403)


def bad_query(request: HttpRequest, errors: dict[str, list[str]], *, back: str, back_label: str) -> HttpResponse:
    """A page's query asking what it cannot show (?attempt=9 of a job that had 2): a 400 naming each parameter and
    the values it takes, as the API answers one, and the way on, `back` (the page without them)."""
    return render(request, "frontend/bad_query.html", {"errors": errors, "back": back, "back_label": back_label}, status=400)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """CSRF_FAILURE_VIEW: the form's own fields again, under a fresh token, to send once more."""
    fields = [(key, value) for key, values in request.POST.lists() if key not in NOT_CARRIED for value in values]
    # Signed out (the session expired with the cookies): the submit form keeps them through the sign-in instead.
    kept = not request.user.is_authenticated and form_kept_for(request.path) and bool(fields)
    if kept:
        form_stash(request, request.POST)
    return render(request, "csrf.html", {"fields": fields, "action": request.get_full_path(), "kept": kept}, status=403)
