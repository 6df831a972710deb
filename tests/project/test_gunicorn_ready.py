"""`make run`'s gunicorn (config/gunicorn_ready.py): a Ctrl-C stops it at once, its workers taking it from their master.

A worker that took the terminal's SIGINT and its master's SIGQUIT together could hang in its own shutdown, and
`make run` waited 20 s to kill it ("the web server (gunicorn) did not stop within 20 s").
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APP = """
def app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]
"""


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _workers(master: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(master)], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


def test_a_ctrl_c_stops_the_web_server_through_its_master(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text(APP)
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    ready = tmp_path / "ready"
    gunicorn = Path(sys.executable).parent / "gunicorn"
    args = [str(gunicorn), "app:app", "-c", str(ROOT / "config" / "gunicorn_ready.py"), "--chdir", str(tmp_path)]
    args += ["--bind", f"127.0.0.1:{port}", "--workers", "2", "--threads", "2", "--log-level", "warning"]
    env = {**os.environ, "MUSTER_GUNICORN_READY_FILE": str(ready)}
    # Its own process group, as make run's in a terminal: a Ctrl-C is a SIGINT to each of its processes.
    master = subprocess.Popen(args, env=env, start_new_session=True, preexec_fn=_default_sigint)
    try:
        deadline = time.monotonic() + 30
        while len(_workers(master.pid)) < 2 or not ready.exists():
            assert time.monotonic() < deadline and master.poll() is None, "gunicorn did not start"
            time.sleep(0.1)
        for _ in range(10):  # each worker up (its handlers set) once both have answered
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as response:
                assert response.read() == b"ok"
        worker = _workers(master.pid)[0]
        os.kill(worker, signal.SIGINT)  # the terminal's part of a Ctrl-C, alone: the worker leaves it to its master
        time.sleep(1)
        assert worker in _workers(master.pid)
        began = time.monotonic()
        os.killpg(master.pid, signal.SIGINT)  # the whole Ctrl-C
        master.wait(timeout=15)
        assert time.monotonic() - began < 10
        assert master.returncode == 0
    finally:
        try:
            os.killpg(master.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert subprocess.run(["pgrep", "-g", str(master.pid)], capture_output=True).returncode == 1
