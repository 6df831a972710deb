"""The admins' Settings page: every setting the web server runs with, as `manage.py muster_settings` prints it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from config.effective_settings import effective_settings, unknown_variables


@login_required
def settings_view(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("Only admins see the site's settings.")
    rows = effective_settings()
    only_changed = request.GET.get("changed") == "1"
    return render(
        request,
        "frontend/settings.html",
        {
            "rows": [s for s in rows if s.from_environment] if only_changed else rows,
            "only_changed": only_changed,
            "changed_count": sum(s.from_environment for s in rows),
            "total": len(rows),
            "unknown": unknown_variables(),
        },
    )
