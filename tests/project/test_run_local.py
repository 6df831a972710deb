"""`make run` (scripts/run-local.sh) refuses a port another program listens on before it starts anything.

The script runs with a stand-in virtualenv whose `python` runs the real one except for `manage.py`, where it stops
the script: nothing of the stack is started, and reaching `manage.py` shows the port check let it through.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STOPPED = 97


def _run(tmp_path: Path, port: int | str, *, manage: str = "") -> subprocess.CompletedProcess[str]:
    """run-local.sh with a stand-in venv: `manage.py` runs `manage` (by default: stops the script), `gunicorn` is the real
    one, `celery` sleeps."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    stop = f'echo "started: $*"; exit {STOPPED}'
    for name, text in (
        ("python", f'if [ "$1" = manage.py ]; then {manage or stop}; fi\nexec {sys.executable} "$@"'),
        ("gunicorn", f'exec {Path(sys.executable).parent / "gunicorn"} "$@"'),
        ("celery", "exec sleep 30"),
    ):
        (bin_dir / name).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / name).chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "VENV": str(tmp_path / "venv"),
        "HOST": "127.0.0.1",
        "PORT": str(port),
        "MUSTER_DATA_DIR": str(tmp_path / "var"),
    }
    return subprocess.run(["bash", "scripts/run-local.sh"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=False)


def test_a_port_another_program_listens_on_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as other:
        port = other.getsockname()[1]
        result = _run(tmp_path, port)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "started" not in result.stdout  # neither migrate nor anything after it
    assert "Muster is running" not in result.stdout
    assert f"make run: port {port} on 127.0.0.1 is in use by another program; Muster did not start." in result.stderr
    assert "Choose another port: PORT=" in result.stderr
    suggested = int(result.stderr.split("PORT=")[1].split()[0])
    with socket.create_server(("127.0.0.1", suggested)):  # the port it suggests is free
        pass


def test_a_free_port_lets_it_start(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    result = _run(tmp_path, port)
    assert result.returncode == STOPPED, result.stderr
    assert result.stdout.startswith("started: manage.py migrate")
    assert "in use" not in result.stderr


def test_a_port_that_is_not_a_number_is_refused(tmp_path: Path) -> None:
    result = _run(tmp_path, "80x")
    assert result.returncode == 1
    assert "make run: PORT=80x is not a port number; Muster did not start." in result.stderr


def test_the_banner_waits_for_its_own_web_server_not_another_that_took_the_port_meanwhile(tmp_path: Path) -> None:
    """Another program takes the port after the check (here: during migrate). It answers the readiness request, but
    gunicorn cannot listen: no banner sending the user to that program, and the port is named."""
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    pid_file, site = tmp_path / "other.pid", tmp_path / "other-site"
    (site / "accounts" / "login").mkdir(parents=True)
    (site / "accounts" / "login" / "index.html").write_text("another program's login page")  # answers 200, as a Muster would
    wait = tmp_path / "wait.py"  # until the other program listens
    wait.write_text(f"import socket, time\nwhile socket.socket().connect_ex(('127.0.0.1', {port})):\n    time.sleep(0.1)\n")
    other = (
        f'if [ "$2" = migrate ]; then {sys.executable} -m http.server {port} --bind 127.0.0.1 --directory {site} >/dev/null 2>&1 & '
        f"echo $! > {pid_file}; timeout 10 {sys.executable} {wait}; fi; exit 0"
    )
    try:
        result = _run(tmp_path, port, manage=other)
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Muster is running" not in result.stdout
    assert f"make run: the web server could not listen on 127.0.0.1:{port}" in result.stderr
