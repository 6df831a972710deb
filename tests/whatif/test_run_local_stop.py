"""`make run`'s Ctrl-C (scripts/run-local.sh) stops every process, the what-if worker with a cold shutdown.

The script runs with a stand-in virtualenv: `manage.py` does nothing, `gunicorn` is a little server that answers the
readiness check, and `celery` records the signals it gets. A what-if worker in the middle of a replay ignores SIGINT
and SIGTERM (Celery's warm shutdown waits for the replay, up to its 6-hour limit) and stops on SIGQUIT only.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SERVER = """
import http.server, os, pathlib, sys


class Ok(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


port = int(sys.argv[sys.argv.index("--bind") + 1].rsplit(":", 1)[1])
server = http.server.HTTPServer(("127.0.0.1", port), Ok)
pathlib.Path(os.environ["MUSTER_GUNICORN_READY_FILE"]).touch()
server.serve_forever()
"""

# $LOG/<role>.signals gets each signal's name as it arrives; the what-if worker (-Q ...) stops on QUIT only, or never
# with STUCK set. Python, as Celery is: a shell cannot trap SIGINT and SIGQUIT, which bash ignores in background jobs.
CELERY = """
import os, pathlib, signal, sys, time
args = sys.argv[1:]
role = "whatif" if "-Q" in args else "beat" if "beat" in args else "worker"
log = pathlib.Path(os.environ["LOG"])
stops_on = set() if os.environ.get("STUCK") else {"SIGQUIT"} if role == "whatif" else {"SIGINT", "SIGTERM"}


def got(number, frame):
    name = signal.Signals(number).name
    with open(log / f"{role}.signals", "a") as out:
        out.write(name[3:] + "\\n")
    if name in stops_on:
        sys.exit(0)


for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
    signal.signal(sig, got)
(log / f"{role}.started").touch()
while True:
    time.sleep(0.1)
"""


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def _start(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
    bin_dir, log = tmp_path / "venv" / "bin", tmp_path / "log"
    bin_dir.mkdir(parents=True)
    log.mkdir()
    (tmp_path / "server.py").write_text(SERVER)
    (tmp_path / "celery.py").write_text(CELERY)
    for name, text in (
        ("python", f'#!/bin/sh\nif [ "$1" = manage.py ]; then exit 0; fi\nexec {sys.executable} "$@"\n'),
        ("gunicorn", f'#!/bin/sh\nexec {sys.executable} {tmp_path / "server.py"} "$@"\n'),
        ("celery", f'#!/bin/sh\nexec {sys.executable} {tmp_path / "celery.py"} "$@"\n'),
    ):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    environment = {
        "PATH": "/usr/bin:/bin",
        "VENV": str(tmp_path / "venv"),
        "HOST": "127.0.0.1",
        "PORT": str(_free_port()),
        "MUSTER_DATA_DIR": str(tmp_path / "var"),
        "LOG": str(log),
        **env,
    }
    # Its own process group, as a terminal's foreground job: Ctrl-C is a SIGINT to every process in it.
    script = subprocess.Popen(
        ["bash", "scripts/run-local.sh"],
        cwd=ROOT,
        env=environment,
        stdout=(log / "output").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # As from a terminal: a shell started with SIGINT ignored (a CI job run in the background of a shell without job
        # control) cannot trap it, and the script never heard the Ctrl-C.
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 30
    while "Muster is running" not in (log / "output").read_text():
        if script.poll() is not None or time.monotonic() > deadline:
            _kill(script)
            raise AssertionError(f"it did not start: {(log / 'output').read_text()}")
        time.sleep(0.1)
    # The banner waits for gunicorn only: on a busy machine a worker's stand-in may still be starting.
    while not all((log / f"{role}.started").exists() for role in ("worker", "whatif", "beat")):
        if time.monotonic() > deadline:
            _kill(script)
            raise AssertionError(f"a worker did not start: {sorted(p.name for p in log.iterdir())}")
        time.sleep(0.1)
    return script, log


def _kill(script: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(script.pid, signal.SIGKILL)  # whatever is left
    except ProcessLookupError:
        pass


def _ctrl_c(script: subprocess.Popen[bytes], log: Path) -> tuple[str, float]:
    began = time.monotonic()
    os.killpg(script.pid, signal.SIGINT)
    try:
        script.wait(timeout=30)
    except subprocess.TimeoutExpired:
        # What was still up, and in what state, for a stop that hung (seen once in CI, never here).
        ps = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:20,args", "-g", str(script.pid)], capture_output=True, text=True)
        signals = {path.name: path.read_text().split() for path in log.glob("*.signals")}
        raise AssertionError(f"the script did not stop:\n{ps.stdout}\nsignals: {signals}\n{(log / 'output').read_text()}") from None
    finally:
        _kill(script)
    return (log / "output").read_text(), time.monotonic() - began


def _signals(log: Path, role: str) -> list[str]:
    path = log / f"{role}.signals"
    return path.read_text().split() if path.exists() else []


def test_ctrl_c_stops_a_replaying_what_if_worker_with_a_cold_shutdown(tmp_path: Path) -> None:
    script, log = _start(tmp_path)
    output, took = _ctrl_c(script, log)
    assert "stopping Muster..." in output
    assert took < 10, output
    # The terminal's SIGINT began a warm shutdown, which would wait for the replay; SIGQUIT made it a cold one. (The
    # terminal's signal and the script's reach a process in either order on two cores: a QUIT first ends it before the
    # INT, as a TERM first ends the others.)
    assert _signals(log, "whatif")[-1] == "QUIT" and set(_signals(log, "whatif")) <= {"INT", "QUIT"}
    for role in ("worker", "beat"):
        assert _signals(log, role) and set(_signals(log, role)) <= {"INT", "TERM"}, role
    assert "did not stop" not in output
    assert subprocess.run(["pgrep", "-g", str(script.pid)], capture_output=True).returncode == 1  # nothing left


def test_a_process_that_does_not_stop_is_killed_and_named(tmp_path: Path) -> None:
    script, log = _start(tmp_path, STUCK="1", MUSTER_STOP_SECONDS="1")
    output, took = _ctrl_c(script, log)
    assert took < 10, output
    assert sorted(_signals(log, "whatif")) == ["INT", "QUIT"]
    assert "the what-if worker did not stop within 1 s; killing it" in output
    assert subprocess.run(["pgrep", "-g", str(script.pid)], capture_output=True).returncode == 1
