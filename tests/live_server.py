"""A real Muster web server (gunicorn) on a free loopback port, on the test database, and a small JSON client for it."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.conftest import PASSWORD
from tests.processes import ROOT, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    def __init__(self, base: str) -> None:
        self.base = base
        self.token = ""

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Token {self.token}"
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read()[:300]

    def login(self, username: str) -> str:
        """Exchange the test password for a token, as a script would."""
        status, body = self.call("POST", "/api/v1/auth/token/", {"username": username, "password": PASSWORD})
        assert status == 200, body
        self.token = body["token"]
        return self.token


def start_gunicorn(env: dict[str, str], log: Path) -> tuple[subprocess.Popen[bytes], Api]:
    """Serve the API with the given environment; returns the process and a client once it answers."""
    port = free_port()
    web = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "config.wsgi",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "2",
            "--threads",
            "8",
            "--timeout",
            "60",
        ],
        cwd=ROOT,
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    api = Api(f"http://127.0.0.1:{port}")

    def up() -> bool:
        try:
            return api.call("GET", "/api/schema/")[0] == 200
        except OSError:
            return web.poll() is not None  # exited: stop waiting, the caller's assertion shows the log

    wait_for(up, 60, "gunicorn to answer")
    assert web.poll() is None, log.read_text()[-3000:]
    return web, api
