"""Where the CLI keeps tokens: private to the user, one per server, overridden by the environment."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from muster_client import config


@pytest.fixture(autouse=True)
def _own_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MUSTER_URL", raising=False)
    monkeypatch.delenv("MUSTER_TOKEN", raising=False)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_token_file_is_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = config.save_token("http://a:8000", "secret-a", username="alice")
    assert path == tmp_path / "xdg" / "muster" / "config.json"
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700


def test_a_file_left_readable_by_others_is_made_private_when_rewritten(tmp_path: Path) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True, mode=0o755)
    path.write_text("{}")
    path.chmod(0o644)
    config.save_token("http://a:8000", "secret-a")
    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind


def test_each_server_keeps_its_own_token_and_the_last_login_is_the_default() -> None:
    config.save_token("http://a:8000", "secret-a")
    config.save_token("http://b:8000/", "secret-b")
    assert config.resolve() == config.Settings("http://b:8000", "secret-b")
    assert config.resolve("http://a:8000") == config.Settings("http://a:8000", "secret-a")
    # A server nobody logged in to gets no one else's token.
    assert config.resolve("http://c:8000") == config.Settings("http://c:8000", None)


def test_environment_overrides_the_file_and_flags_override_both(monkeypatch: pytest.MonkeyPatch) -> None:
    config.save_token("http://a:8000", "secret-a")
    monkeypatch.setenv("MUSTER_URL", "http://ci:8000")
    monkeypatch.setenv("MUSTER_TOKEN", "from-env")
    assert config.resolve() == config.Settings("http://ci:8000", "from-env")
    assert config.resolve("http://flag:8000", "from-flag") == config.Settings("http://flag:8000", "from-flag")


def test_a_broken_file_reads_as_empty_and_login_replaces_it() -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert config.resolve() == config.Settings(None, None)
    config.save_token("http://a:8000", "secret-a")
    assert config.resolve().token == "secret-a"
