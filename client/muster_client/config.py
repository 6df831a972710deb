"""Where the CLI keeps its tokens: `$XDG_CONFIG_HOME/muster/config.json` (~/.config/muster), readable by its owner only.

The file maps each server URL to its token, so a token is only ever sent to the server that issued it,
and remembers the last server logged in to. MUSTER_URL and MUSTER_TOKEN override it.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from muster_client.client import server_url
from muster_client.errors import AuthError


class DamagedConfig(AuthError):
    """The config file is there but cannot be read as `muster login` writes it: no token can be taken from it."""


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "muster" / "config.json"


@dataclass(frozen=True)
class Settings:
    url: str | None
    token: str | None


def load(path: Path | None = None, *, strict: bool = False) -> dict[str, Any]:
    """The stored file, or an empty config if there is none. A damaged one (not JSON, or not as login writes it) reads as
    empty, which login writes afresh, unless `strict`: then DamagedConfig names the file and the fix (a command read
    `{"url": 5}` with a traceback, and `{not json` as "no server", naming no file)."""
    path = path or config_path()
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        if strict:
            raise _damaged(path, f"cannot be read: {exc.strerror or exc}") from None
        return {}
    data: Any = None
    problem: str | None = "it is not JSON"
    try:
        data = json.loads(text)
    except ValueError:
        pass
    else:
        problem = _problem(data)
    if problem is None:
        return dict(data)
    if strict:
        raise _damaged(path, problem)
    return {}


def _problem(data: Any) -> str | None:
    """What makes `data` not a config as `save_token` writes it, or None."""
    if not isinstance(data, dict):
        return "it is not a JSON object"
    if "url" in data and not isinstance(data["url"], str):
        return "its url is not text"
    servers = data.get("servers", {})
    if not isinstance(servers, dict) or not all(
        isinstance(entry, dict) and isinstance(entry.get("token", ""), str) for entry in servers.values()
    ):
        return "its servers are not a mapping of each server to its token"
    return None


def _damaged(path: Path, problem: str) -> DamagedConfig:
    return DamagedConfig(
        f"the config file {path} is damaged ({problem}): run `muster login URL` to write it afresh (or set MUSTER_URL and MUSTER_TOKEN)"
    )


def save_token(
    url: str, token: str, *, username: str = "", expires_at: str | None = None, given: bool = False, path: Path | None = None
) -> Path:
    """Store `token` for `url` and make `url` the default server. Returns the file's path. `given`: a token the user made
    on the Tokens page and gave to `login --token` (logout forgets it but does not revoke it: it may be used elsewhere)."""
    path = path or config_path()
    data = load(path)
    url = server_url(url)
    kept = servers(data)
    kept[url] = {"token": token, "username": username, "expires_at": expires_at, **({"given": True} if given else {})}
    data.update({"url": url, "servers": kept})
    _write_private(path, json.dumps(data, indent=2) + "\n")
    return path


def forget_token(url: str, *, path: Path | None = None) -> dict[str, Any] | None:
    """Remove what is stored for `url` and return it (None: nothing was). The default server becomes the one logged in
    to most recently of those left, or none."""
    path = path or config_path()
    data = load(path, strict=True)
    kept = servers(data)
    entry = kept.pop(server_url(url), None)
    if entry is None:
        return None
    if data.get("url") == server_url(url):
        data.pop("url", None)
        if kept:
            data["url"] = list(kept)[-1]
    data["servers"] = kept
    _write_private(path, json.dumps(data, indent=2) + "\n")
    return entry if isinstance(entry, dict) else {}


def servers(data: dict[str, Any]) -> dict[str, Any]:
    """The tokens kept per server (URL -> {token, username, expires_at, given})."""
    servers = data.get("servers")
    return servers if isinstance(servers, dict) else {}


def _write_private(path: Path, text: str) -> None:
    # The directory and the file are the owner's alone from the moment they exist (a token is a password):
    # the file is written under a temporary name created 0600, then renamed over the old one.
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)  # ours alone even if something made it before us with a looser mode
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".config-", suffix=".json")  # mkstemp creates it 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    os.chmod(path, 0o600)


def resolve(url: str | None = None, token: str | None = None, *, path: Path | None = None) -> Settings:
    """The server and token to use: flags first, then MUSTER_URL / MUSTER_TOKEN, then the config file.

    A stored token is used only for the server it was stored for.
    """
    url = url or os.environ.get("MUSTER_URL")
    token = token or os.environ.get("MUSTER_TOKEN")
    # The file only when it is needed: flags or MUSTER_URL and MUSTER_TOKEN work whatever became of it.
    data = load(path, strict=True) if not (url and token) else {}
    url = url or data.get("url")
    if url and not token:
        entry = servers(data).get(server_url(url))
        token = entry.get("token") if isinstance(entry, dict) else None
    return Settings(url=server_url(url) if url else None, token=token or None)
