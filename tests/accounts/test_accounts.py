"""Tokens a person manages (named, expiring, hashed, revocable), and brute force and write rates held back."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.sessions.models import Session
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import ApiToken
from accounts.services import token_create
from accounts.throttling import DryRunRateThrottle, TokenRequestRateThrottle, WriteRateThrottle
from tests.accounts.factories import UserFactory
from tests.conftest import PASSWORD, client_for, job_payload, session_for

TOKENS = "/api/v1/tokens/"
EXCHANGE = "/api/v1/auth/token/"


def bearer(secret: str, keyword: str = "Bearer") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{keyword} {secret}")
    return client


# --- tokens ---------------------------------------------------------------------------------


def test_a_token_is_stored_only_as_a_hash_and_works_as_bearer_or_token(user: Any, sim: Any) -> None:
    created = client_for(user).post(TOKENS, {"name": "laptop", "expires_in_days": 30}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    secret = body["token"]
    assert secret.startswith("mst_") and len(secret) > 40 and body["state"] == "active"
    row = ApiToken.objects.get(pk=body["id"])
    assert row.digest == hashlib.sha256(secret.encode()).hexdigest()
    with connection.cursor() as cursor:  # the secret is nowhere in the table
        cursor.execute("SELECT * FROM accounts_apitoken")
        assert not any(secret in str(value) for row in cursor.fetchall() for value in row)
    assert bearer(secret).get("/api/v1/jobs/").status_code == 200
    assert bearer(secret, "Token").post("/api/v1/jobs/", job_payload(), format="json").status_code == 201
    listed = client_for(user).get(TOKENS).json()["results"]
    assert [t["name"] for t in listed] == ["laptop"] and "token" not in listed[0] and listed[0]["last_used_at"]


def test_a_token_made_without_expires_in_days_never_expires_and_the_schema_says_so(user: Any, db: None) -> None:
    """Only the schema's "Omit or null for a token that never expires." said it, while the Tokens page offers 90 days
    first: kept (scripts made long-lived tokens so), and said loudly where it is read."""
    made = client_for(user).post(TOKENS, {"name": "ci"}, format="json")
    assert made.status_code == 201, made.content
    assert made.json()["expires_at"] is None and ApiToken.objects.get(pk=made.json()["id"]).expires_at is None
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]["TokenCreateRequest"]
    assert "Left out or null, the token NEVER expires" in schema["properties"]["expires_in_days"]["description"]
    page = session_for(user).get("/account/tokens/").content.decode()
    assert '<option value="90" selected>' in page


def test_revoked_and_expired_tokens_get_401_saying_so(user: Any) -> None:
    revoked = token_create(user=user, name="old laptop")
    assert client_for(user).delete(f"{TOKENS}{revoked.token.pk}/").status_code == 204
    response = bearer(revoked.secret).get("/api/v1/jobs/")
    assert response.status_code == 401 and "was revoked on" in response.json()["detail"]
    expired = token_create(user=user, name="ci", expires_at=timezone.now() - timedelta(seconds=1))
    response = bearer(expired.secret).get("/api/v1/jobs/")
    assert response.status_code == 401 and "expired on" in response.json()["detail"]
    assert bearer("mst_not-a-token").get("/api/v1/jobs/").json() == {"detail": "Invalid token."}
    assert client_for(user).get(TOKENS).json()["results"][1]["state"] == "revoked"


def test_a_token_revokes_itself_at_tokens_current_and_only_itself(user: Any) -> None:
    """`muster logout`: the client revokes the token it holds without knowing its id."""
    laptop, ci = token_create(user=user, name="laptop"), token_create(user=user, name="ci")
    assert bearer(laptop.secret).delete(f"{TOKENS}current/").status_code == 204
    response = bearer(laptop.secret).get("/api/v1/jobs/")
    assert response.status_code == 401 and "was revoked on" in response.json()["detail"]
    assert bearer(ci.secret).get("/api/v1/jobs/").status_code == 200
    states = {t["name"]: t["state"] for t in client_for(user).get(TOKENS).json()["results"]}
    assert states == {"laptop": "revoked", "ci": "active"}
    # A browser's session holds no token: said, and nothing revoked.
    response = session_for(user).delete(f"{TOKENS}current/")
    assert response.status_code == 400 and "not sent with an API token" in response.json()["detail"]
    assert bearer(ci.secret).get("/api/v1/jobs/").status_code == 200
    # A body is refused as on DELETE /tokens/{id}/, and the token still works.
    response = bearer(ci.secret).delete(f"{TOKENS}current/", {"x": 1}, format="json")
    assert response.status_code == 400
    assert bearer(ci.secret).get("/api/v1/jobs/").status_code == 200


def test_nobody_sees_or_revokes_another_persons_tokens(user: Any, other_user: Any, admin_user: Any) -> None:
    mine = token_create(user=user, name="laptop")
    assert client_for(other_user).delete(f"{TOKENS}{mine.token.pk}/").status_code == 404
    assert client_for(admin_user).get(TOKENS).json()["results"] == []
    assert bearer(mine.secret).get("/api/v1/jobs/").status_code == 200
    assert APIClient().get(TOKENS).status_code == 401


def test_revoking_a_token_refuses_a_body_as_cancel_does(user: Any) -> None:
    """`DELETE /tokens/{id}/` with `{"x": 1}` revoked it (204), while cancel, hold and release refuse such a body."""
    mine = token_create(user=user, name="laptop")
    api = client_for(user)
    refused = api.delete(f"{TOKENS}{mine.token.pk}/", {"x": 1}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"x": ["Unknown field."]})
    assert api.delete(f"{TOKENS}{mine.token.pk}/", "null", content_type="application/json").status_code == 400
    assert bearer(mine.secret).get("/api/v1/jobs/").status_code == 200  # not revoked
    assert api.delete(f"{TOKENS}{mine.token.pk}/", {}, format="json").status_code == 204
    assert bearer(mine.secret).get("/api/v1/jobs/").status_code == 401


@pytest.mark.parametrize(
    "body,field",
    [
        ({}, "name"),
        ({"name": ""}, "name"),
        ({"name": "x" * 101}, "name"),
        ({"name": "bad\nname"}, "name"),
        ({"name": "ok", "expires_in_days": 0}, "expires_in_days"),
        ({"name": "ok", "expires_in_days": 367}, "expires_in_days"),
        ({"name": "ok", "scope": "admin"}, "scope"),
    ],
)
def test_bad_token_requests_are_400_naming_the_field(user: Any, body: dict[str, Any], field: str) -> None:
    response = client_for(user).post(TOKENS, body, format="json")
    assert response.status_code == 400 and field in response.json()
    assert not ApiToken.objects.exists()


def test_two_active_tokens_cannot_share_a_name(user: Any) -> None:
    token_create(user=user, name="laptop")
    response = client_for(user).post(TOKENS, {"name": "laptop"}, format="json")
    assert response.status_code == 400 and "already have an active token" in response.json()["name"][0]


def test_the_password_exchange_makes_an_expiring_named_token(user: Any, settings: Any) -> None:
    settings.MUSTER_TOKEN_EXCHANGE_EXPIRY_DAYS = 7
    response = APIClient().post(EXCHANGE, {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 200
    token = ApiToken.objects.get(user=user)
    assert token.name.startswith("password exchange") and abs(token.expires_at - timezone.now() - timedelta(days=7)) < timedelta(minutes=1)
    assert bearer(response.json()["token"]).get(TOKENS).status_code == 200


def test_the_password_exchange_sets_no_session(user: Any) -> None:
    """Each exchange set a sessionid cookie (that authenticated nothing) and wrote a django_session row: django-axes
    made a session to key its access log by."""
    client = APIClient()
    for password in (PASSWORD, "wrong", PASSWORD):
        response = client.post(EXCHANGE, {"username": "alice", "password": password}, format="json")
        assert "sessionid" not in response.cookies, password
    assert not Session.objects.exists()
    # A signed-in browser calling it keeps its own session.
    browser = session_for(user)
    key = browser.cookies["sessionid"].value
    assert browser.post(EXCHANGE, {"username": "alice", "password": PASSWORD}, content_type="application/json").status_code == 200
    assert browser.cookies["sessionid"].value == key and Session.objects.filter(session_key=key).exists()


def test_the_tokens_page_shows_a_new_secret_once_and_revokes(user: Any) -> None:
    page = session_for(user)
    made = page.post("/account/tokens/", {"name": "notebook", "expires_in_days": "90"})
    assert made.status_code == 200
    secret = made.context["new_secret"]
    assert secret in made.content.decode()
    assert secret not in page.get("/account/tokens/").content.decode()  # shown once
    token = ApiToken.objects.get(user=user)
    assert page.post(f"/account/tokens/{token.pk}/revoke/").status_code == 302
    assert "revoked" in page.get("/account/tokens/").content.decode()
    assert bearer(secret).get("/api/v1/jobs/").status_code == 401
    refused = page.post("/account/tokens/", {"name": "", "expires_in_days": "90"})
    assert refused.status_code == 400 and ApiToken.objects.count() == 1


def test_legacy_plain_text_tokens_are_moved_hashed_by_the_migration(transactional_db: None, django_user_model: Any) -> None:
    from django.db.migrations.executor import MigrationExecutor

    owner = django_user_model.objects.create_user(username="old-script", password=PASSWORD)
    executor = MigrationExecutor(connection)
    executor.migrate([("accounts", "0001_api_tokens")])
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE IF NOT EXISTS authtoken_token (key varchar(40) PRIMARY KEY, created timestamp with time zone, user_id bigint)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES (%s, %s, %s)", ["a" * 40, timezone.now(), owner.pk])
    try:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate([("accounts", "0002_legacy_tokens")])
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM authtoken_token")
            assert cursor.fetchone()[0] == 0  # no plain-text secret left behind
        assert bearer("a" * 40).get("/api/v1/jobs/").status_code == 200
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE authtoken_token")


# --- brute force ----------------------------------------------------------------------------


def test_wrong_passwords_at_the_token_endpoint_lock_the_account_out_with_429(user: Any, settings: Any) -> None:
    client = APIClient()
    answered = 0
    for _ in range(30):
        response = client.post(EXCHANGE, {"username": "alice", "password": "guess"}, format="json", REMOTE_ADDR="198.51.100.7")
        if response.status_code == 429:
            break
        assert response.status_code == 401
        answered += 1
    print(f"\ntoken endpoint: {answered} wrong passwords answered 401 before a 429")
    assert answered == settings.AXES_FAILURE_LIMIT - 1
    assert int(response["Retry-After"]) == int(settings.AXES_COOLOFF_TIME.total_seconds())
    assert "try again in 15 minutes" in response.json()["detail"]
    # The right password is refused too while locked, from another address as well (by account) ...
    right = client.post(EXCHANGE, {"username": "alice", "password": PASSWORD}, format="json", REMOTE_ADDR="203.0.113.9")
    assert right.status_code == 429 and "token" not in right.json()
    # ... and the address is locked for other accounts (by address).
    UserFactory(username="carol").save()
    other = client.post(EXCHANGE, {"username": "carol", "password": PASSWORD}, format="json", REMOTE_ADDR="198.51.100.7")
    assert other.status_code == 429


def test_the_lockout_ends_after_the_cool_off(user: Any, settings: Any) -> None:
    from axes.models import AccessAttempt

    for _ in range(settings.AXES_FAILURE_LIMIT):
        APIClient().post(EXCHANGE, {"username": "alice", "password": "guess"}, format="json")
    AccessAttempt.objects.update(attempt_time=timezone.now() - settings.AXES_COOLOFF_TIME - timedelta(seconds=1))
    assert APIClient().post(EXCHANGE, {"username": "alice", "password": PASSWORD}, format="json").status_code == 200


def test_wrong_passwords_at_the_login_form_lock_out_with_a_page_and_429(user: Any, settings: Any) -> None:
    browser = Client()
    answered = 0
    for _ in range(30):
        response = browser.post("/accounts/login/", {"username": "alice", "password": "guess"})
        if response.status_code == 429:
            break
        assert response.status_code == 200 and "Please enter a correct username and password" in response.content.decode()
        answered += 1
    print(f"\nlogin form: {answered} wrong passwords answered before a 429")
    assert answered == settings.AXES_FAILURE_LIMIT - 1
    assert response["Retry-After"] == str(int(settings.AXES_COOLOFF_TIME.total_seconds()))
    assert "Sign-in paused" in response.content.decode()
    assert browser.post("/accounts/login/", {"username": "alice", "password": PASSWORD}).status_code == 429


def test_signing_in_with_another_account_does_not_reset_the_count(user: Any, other_user: Any, settings: Any) -> None:
    """A guesser who holds one valid account cannot clear the failures against another by signing in with it."""
    client = APIClient()
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post(EXCHANGE, {"username": "alice", "password": "guess"}, format="json").status_code == 401
    assert client.post(EXCHANGE, {"username": "bob", "password": PASSWORD}, format="json").status_code == 200
    assert client.post(EXCHANGE, {"username": "alice", "password": "guess"}, format="json").status_code == 429


# --- request rates --------------------------------------------------------------------------


def test_writes_per_user_are_throttled_with_retry_after_and_reads_are_not(user: Any, sim: Any, settings: Any) -> None:
    settings.MUSTER_THROTTLE_WRITES = "3/minute"
    cache.delete(WriteRateThrottle.cache_format % {"scope": WriteRateThrottle.scope, "ident": user.pk})
    api = client_for(user)
    statuses = [api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=1), format="json").status_code for _ in range(4)]
    assert statuses == [201, 201, 201, 429]
    throttled = api.post("/api/v1/jobs/", job_payload(), format="json")
    assert throttled.status_code == 429 and 0 < int(throttled["Retry-After"]) <= 60
    # Which rate, and its setting, in Muster's words: DRF's "Request was throttled. Expected available in 36 seconds."
    # named neither, and a script's author could not tell a write throttle from a dry-run's.
    wait = throttled["Retry-After"]
    detail = throttled.json()["detail"]
    assert detail.startswith("Too many writes from this account (submits, cancels, updates")
    assert detail.endswith(f": at most 3 a minute (MUSTER_THROTTLE_WRITES); try again in {wait} s.")
    assert api.get("/api/v1/jobs/").status_code == 200


def test_a_submits_dry_runs_are_not_writes_and_have_their_own_rate(user: Any, sim: Any, settings: Any) -> None:
    """validate and estimate counted as writes: a client estimating as its user typed used up the user's submits."""
    settings.MUSTER_THROTTLE_WRITES, settings.MUSTER_THROTTLE_DRY_RUNS = "2/minute", "4/minute"
    for throttle in (WriteRateThrottle, DryRunRateThrottle):
        cache.delete(throttle.cache_format % {"scope": throttle.scope, "ident": user.pk})
    api = client_for(user)
    body = job_payload(nodes=1, gpus_per_node=1)
    dry_runs = [api.post(f"/api/v1/jobs/{which}/", body, format="json").status_code for which in ("validate", "estimate") * 2]
    assert dry_runs == [200, 200, 200, 200]
    throttled = api.post("/api/v1/jobs/estimate/", body, format="json")
    assert throttled.status_code == 429 and 0 < int(throttled["Retry-After"]) <= 60
    # The user's writes are all still theirs.
    assert [api.post("/api/v1/jobs/", body, format="json").status_code for _ in range(3)] == [201, 201, 429]
    settings.MUSTER_THROTTLE_DRY_RUNS = ""
    assert api.post("/api/v1/jobs/validate/", body, format="json").status_code == 200  # and the writes' 429 is not theirs


def test_password_exchanges_per_address_are_throttled(user: Any, settings: Any) -> None:
    settings.MUSTER_THROTTLE_TOKEN_REQUESTS = "2/minute"
    cache.delete(TokenRequestRateThrottle.cache_format % {"scope": TokenRequestRateThrottle.scope, "ident": "192.0.2.44"})
    client = APIClient()
    ok = [client.post(EXCHANGE, {"username": "alice", "password": PASSWORD}, format="json", REMOTE_ADDR="192.0.2.44") for _ in range(3)]
    assert [r.status_code for r in ok] == [200, 200, 429]
    assert "Retry-After" in ok[2]
    assert (
        ok[2].json()["detail"].startswith("Too many token requests from this address: at most 2 a minute (MUSTER_THROTTLE_TOKEN_REQUESTS)")
    )
