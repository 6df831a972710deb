"""The CLI against the server in this process: a user signed in with a token, as `muster login` leaves one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from muster_client import config

from accounts.services import token_create
from jobs.hooks import job_hooks
from tests.conftest import SimHarness


@pytest.fixture
def signed_in(live_server: Any, tx_sim: SimHarness, django_user_model: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("MUSTER_URL", "MUSTER_TOKEN", "MUSTER_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(job_hooks, "queue_changed", [])
    user = django_user_model.objects.create_user(username="dana", password="x")
    config.save_token(live_server.url, token_create(user=user, name="cli").secret)
    monkeypatch.setenv("MUSTER_URL", live_server.url)
    return user
