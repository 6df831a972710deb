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


def test_a_user_changes_their_password_from_the_header_in_the_sites_look(user: Any) -> None:
    """/accounts/password_change/ was Django admin's page, linked from nowhere."""
    from tests.accounts.factories import PASSWORD

    client = session_for(user)
    home = client.get("/").content.decode()
    assert '<a href="/accounts/password_change/" data-testid="password-change-link">Change password</a>' in home
    page = client.get("/accounts/password_change/").content.decode()
    assert "<h1>Change your password</h1>" in page and 'href="/cluster/"' in page  # the site's header, not admin's
    assert "Django administration" not in page
    wrong = client.post("/accounts/password_change/", {"old_password": "nope", "new_password1": "x", "new_password2": "y"})
    assert wrong.status_code == 200 and "Your old password was entered incorrectly." in wrong.content.decode()
    new = "a-new-long-passphrase-7"
    done = client.post("/accounts/password_change/", {"old_password": PASSWORD, "new_password1": new, "new_password2": new}, follow=True)
    assert "Your password was changed." in done.content.decode()
    assert client.get("/").status_code == 200  # this browser stays signed in
    user.refresh_from_db()
    assert user.check_password(new)
