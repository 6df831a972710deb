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


def config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "muster" / "config.json"


@dataclass(frozen=True)
class Settings:
    url: str | None
    token: str | None


def load(path: Path | None = None) -> dict[str, Any]:
    """The stored file, or an empty config if there is none (or it is not valid JSON: login writes it afresh)."""
    path = path or config_path()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save_token(url: str, token: str, *, username: str = "", expires_at: str | None = None, path: Path | None = None) -> Path:
    """Store `token` for `url` and make `url` the default server. Returns the file's path."""
    path = path or config_path()
    data = load(path)
    url = server_url(url)
    servers = _servers(data)
    servers[url] = {"token": token, "username": username, "expires_at": expires_at}
    data.update({"url": url, "servers": servers})
    _write_private(path, json.dumps(data, indent=2) + "\n")
    return path


def _servers(data: dict[str, Any]) -> dict[str, Any]:
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
    data = load(path)
    url = url or os.environ.get("MUSTER_URL") or data.get("url")
    token = token or os.environ.get("MUSTER_TOKEN")
    if url and not token:
        entry = _servers(data).get(server_url(url))
        token = entry.get("token") if isinstance(entry, dict) else None
    return Settings(url=server_url(url) if url else None, token=token or None)
