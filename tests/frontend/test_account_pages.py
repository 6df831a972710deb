"""The account pages in the site's look: logging out (a GET asks, a POST does it)."""

from __future__ import annotations

from typing import Any

from django.test import Client

from tests.conftest import session_for


def test_a_get_of_the_logout_url_asks_with_a_button_and_logs_nobody_out(user: Any) -> None:
    """It was an empty 405: a typed or bookmarked /accounts/logout/ showed the browser's error page."""
    client = session_for(user)
    client.handler.enforce_csrf_checks = True
    page = client.get("/accounts/logout/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "You are signed in as <strong>alice</strong>. Log out of Muster in this browser?" in html
    assert '<form method="post" action="/accounts/logout/"' in html and 'name="csrfmiddlewaretoken"' in html
    assert client.get("/").status_code == 200  # still signed in: only the POST logs out
    token = page.context["csrf_token"]
    logged_out = client.post("/accounts/logout/", {"csrfmiddlewaretoken": str(token)})
    assert logged_out.status_code == 302 and logged_out["Location"] == "/accounts/login/"
    assert client.get("/").status_code == 302  # signed out


def test_the_logout_post_still_needs_its_csrf_token(user: Any) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.post("/accounts/logout/").status_code == 403
    assert client.get("/").status_code == 200


def test_the_logout_page_signed_out_offers_the_login(db: None) -> None:
    html = Client().get("/accounts/logout/").content.decode()
    assert 'You are not signed in. <a href="/accounts/login/">Log in</a>' in html
