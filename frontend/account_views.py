"""The account pages Django's auth views serve, in the site's look: logging out, and changing one's password (the
header links it; Django admin's own template was the only one, and admin's registration/ templates win by app order).

Django 5 logs out on POST only (a GET that logged out could be triggered by any page's <img>), so a GET of
/accounts/logout/ (typed, bookmarked) was an empty 405: it now asks, with the one button that POSTs.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


class LogoutView(auth_views.LogoutView):
    """POST logs out, as Django's does; GET shows a page with the button that does."""

    http_method_names = ["get", "post", "options"]

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        return render(request, "frontend/logout_confirm.html")


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change (the old password, the new one twice, the site's validators), in the site's look:
    Django admin's template was the only one, and nothing linked to it."""

    template_name = "frontend/password_change.html"


class PasswordChangeDoneView(auth_views.PasswordChangeDoneView):
    template_name = "frontend/password_change_done.html"
