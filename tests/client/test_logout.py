"""`muster logout`: the token `muster login` made is revoked on the server and forgotten; a token given to
`login --token` is only forgotten; the default server moves to the one logged in to before."""

from __future__ import annotations

import json
from typing import Any

import pytest
from muster_client import config

from accounts.models import ApiToken
from accounts.services import token_create
from tests.client.cli_run import run_live as run
from tests.conftest import PASSWORD


def test_logout_revokes_the_token_login_made_and_forgets_it(
    live_server: Any, django_user_model: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MUSTER_URL", "MUSTER_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    django_user_model.objects.create_user(username="ola", password=PASSWORD)
    monkeypatch.setenv("MUSTER_PASSWORD", PASSWORD)
    # Another server logged in to before: it becomes the default again.
    config.save_token("http://other.example:8000", "mst_elsewhere", username="ola")
    code, _, err = run(capsys, "login", "--username", "ola", live_server.url)
    assert code == 0, err
    made = ApiToken.objects.get(user__username="ola")
    assert run(capsys, "jobs")[0] == 0

    code, out, err = run(capsys, "logout")
    assert (code, err) == (0, "")
    assert out == f"Logged out of {live_server.url}: its token is revoked and forgotten.\n"
    made.refresh_from_db()
    assert made.revoked_at is not None
    stored = json.loads(config.config_path().read_text())
    assert list(stored["servers"]) == ["http://other.example:8000"] and stored["url"] == "http://other.example:8000"
    # Not logged in there any more: said, nothing else changed.
    code, _, err = run(capsys, "logout", live_server.url)
    assert code != 0 and f"not logged in to {live_server.url}" in err
    assert list(json.loads(config.config_path().read_text())["servers"]) == ["http://other.example:8000"]


def test_logout_forgets_a_given_token_without_revoking_it(
    signed_in: Any, live_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MUSTER_URL")
    given = token_create(user=signed_in, name="ci")
    assert run(capsys, "login", "--token", given.secret, live_server.url)[0] == 0
    code, out, _ = run(capsys, "logout")
    assert code == 0
    assert out == (
        f"Logged out of {live_server.url}: its token is forgotten. It was made on the Tokens page and still works: "
        "revoke it there if nothing else uses it.\n"
    )
    given.token.refresh_from_db()
    assert given.token.revoked_at is None
    assert config.resolve().token is None
    # A token revoked meanwhile is forgotten all the same.
    config.save_token(live_server.url, token_create(user=signed_in, name="old").secret, username="dana")
    ApiToken.objects.filter(name="old").update(revoked_at=given.token.created_at)
    code, out, _ = run(capsys, "logout", live_server.url)
    assert (code, out) == (0, f"Logged out of {live_server.url}: its token had already been revoked or had expired, and is forgotten.\n")
