"""`make run` (scripts/run-local.sh) refuses a port another program listens on before it starts anything.

The script runs with a stand-in virtualenv whose `python` runs the real one except for `manage.py`, where it stops
the script: nothing of the stack is started, and reaching `manage.py` shows the port check let it through.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
STOPPED = 97


def _run(tmp_path: Path, port: int | str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nif [ "$1" = manage.py ]; then echo "started: $*"; exit {STOPPED}; fi\nexec {sys.executable} "$@"\n')
    python.chmod(0o755)
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
