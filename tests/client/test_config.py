"""Where the CLI keeps tokens: private to the user, one per server, overridden by the environment."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from muster_client import config

from tests.client.cli_run import run


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


@pytest.mark.parametrize(
    ("text", "problem"),
    [("{not json", "it is not JSON"), ('{"url": 5}', "its url is not text"), ('{"servers": []}', "its servers are not")],
)
def test_a_damaged_file_is_named_with_its_fix_and_login_replaces_it(text: str, problem: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`{"url": 5}` gave a traceback, and `{not json` "no server: run muster login", naming no file."""
    path = config.config_path()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(config.DamagedConfig) as refused:
        config.resolve()
    assert str(refused.value).startswith(f"the config file {path} is damaged ({problem}")
    assert str(refused.value).endswith(": run `muster login URL` to write it afresh (or set MUSTER_URL and MUSTER_TOKEN)")
    # The environment alone needs no file.
    monkeypatch.setenv("MUSTER_URL", "http://ci:8000")
    monkeypatch.setenv("MUSTER_TOKEN", "from-env")
    assert config.resolve() == config.Settings("http://ci:8000", "from-env")
    monkeypatch.delenv("MUSTER_URL")
    monkeypatch.delenv("MUSTER_TOKEN")
    config.save_token("http://a:8000", "secret-a")
    assert config.resolve().token == "secret-a"


def test_a_damaged_config_file_is_named_never_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    path = config.config_path()
    path.parent.mkdir(parents=True)
    for text in ('{"url": 5}', "{not json"):
        path.write_text(text)
        code, out, err = run(capsys, "jobs")
        assert (code, out) == (4, "")
        assert err.startswith(f"muster: error: the config file {path} is damaged (") and "run `muster login URL`" in err
