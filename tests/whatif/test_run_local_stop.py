"""`make run`'s Ctrl-C (scripts/run-local.sh) stops every process, the what-if worker with a cold shutdown.

The script runs with a stand-in virtualenv: `manage.py` does nothing, `gunicorn` is a little server that answers the
readiness check, and `celery` records the signals it gets. A what-if worker in the middle of a replay ignores SIGINT
and SIGTERM (Celery's warm shutdown waits for the replay, up to its 6-hour limit) and stops on SIGQUIT only. As
Celery does, each stand-in says on stdout what a signal began, and takes one more while it stops as "again": a
traceback on stderr (Celery's WorkerTerminate, at a third Ctrl-C).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVER = """
import http.server, os, pathlib, signal, sys

# As gunicorn: SIGINT and SIGQUIT a quick shutdown, SIGTERM a graceful one (here: never done, a worker that hangs).
for sig in (signal.SIGINT, signal.SIGQUIT):
    signal.signal(sig, lambda number, frame: os._exit(0))
signal.signal(signal.SIGTERM, lambda number, frame: None)


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


stopping = False


def got(number, frame):
    global stopping
    name = signal.Signals(number).name
    with open(log / f"{role}.signals", "a") as out:
        out.write(name[3:] + "\\n")
    if stopping:
        sys.stderr.write("Traceback (most recent call last):\\ncelery.exceptions.WorkerTerminate: 1\\n")
        sys.exit(1)
    print(f"{role}: Warm shutdown (MainProcess)", flush=True)  # as Celery's safe_say, on stdout
    if name in stops_on:
        stopping = True
        # A shutdown that takes a while (a busy machine, a task to end): longer than the script's 2 s before it asks again.
        time.sleep(float(os.environ.get("STOP_TAKES", "0")))
        sys.exit(0)


if os.environ.get("BOOTING") == role:
    # Still starting when the Ctrl-C comes, as Celery loading the project: its handlers are not set yet, and SIGINT
    # and SIGQUIT are ignored, as `make run &` from a script without job control starts everything it runs.
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_IGN)
    (log / f"{role}.started").touch()
    time.sleep(2)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGQUIT):
    signal.signal(sig, got)
(log / f"{role}.started").touch()
while True:
    time.sleep(0.1)
"""


def _default_signals() -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(sig, signal.SIG_DFL)


def _ignored_sigint() -> None:
    """As `make run &` from a script or a CI job: a shell without job control starts it with SIGINT ignored."""
    _default_signals()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _free_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        return int(probe.getsockname()[1])


def _start(tmp_path: Path, *, signals: Callable[[], None] = _default_signals, **env: str) -> tuple[subprocess.Popen[bytes], Path]:
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
        # As from a terminal by default (the test process itself may run with SIGINT ignored, as a CI job in the
        # background of a shell without job control); `_ignored_sigint` for a script's `make run &`.
        preexec_fn=signals,
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
    # Whatever is left: the script's processes are in its session (start_new_session), each in a group of its own.
    subprocess.run(["pkill", "-KILL", "-s", str(script.pid)], check=False)


def _left(script: subprocess.Popen[bytes]) -> str:
    """What of the script's session still runs ("" when nothing does)."""
    return subprocess.run(["pgrep", "-a", "-s", str(script.pid)], capture_output=True, text=True).stdout


def _ctrl_c(script: subprocess.Popen[bytes], log: Path, *, again_after: float | None = None) -> tuple[str, float]:
    """A Ctrl-C, and with `again_after` a second one that many seconds later (an impatient user)."""
    began = time.monotonic()
    os.killpg(script.pid, signal.SIGINT)
    if again_after is not None:
        time.sleep(again_after)
        os.killpg(script.pid, signal.SIGINT)
    try:
        script.wait(timeout=30)
    except subprocess.TimeoutExpired:
        # What was still up, and in what state, for a stop that hung (seen once in CI, never here).
        ps = subprocess.run(["ps", "-o", "pid,ppid,stat,wchan:20,args", "-s", str(script.pid)], capture_output=True, text=True)
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
    # SIGQUIT, a cold shutdown: the terminal's SIGINT, a warm one, would wait for the replay (and no longer reaches it).
    assert _signals(log, "whatif") == ["QUIT"]
    for role in ("worker", "beat"):
        assert _signals(log, role) == ["TERM"], role
    assert "did not stop" not in output
    assert _left(script) == ""


def test_a_process_that_does_not_stop_is_killed_and_named(tmp_path: Path) -> None:
    script, log = _start(tmp_path, STUCK="1", MUSTER_STOP_SECONDS="1")
    output, took = _ctrl_c(script, log)
    assert took < 10, output
    assert _signals(log, "whatif") == ["QUIT"]  # heard, so not asked again while it hangs
    assert "the what-if worker did not stop within 1 s; killing it" in output
    assert _left(script) == ""


@pytest.mark.parametrize("signals", [_default_signals, _ignored_sigint], ids=["from a terminal", "in the background of a script"])
def test_ctrl_c_is_a_stop_not_a_crash(tmp_path: Path, signals: Callable[[], None]) -> None:
    """The script says it is stopping, never that one of them "exited", and exits 130, an interrupt (make printed
    "Error 1", a crash, when beat and the worker exited of the terminal's SIGINT before the script ran its trap).
    Several times over, for the race there was."""
    for run in range(3):
        script, log = _start(tmp_path / str(run), signals=signals)
        output, took = _ctrl_c(script, log)
        assert "stopping Muster..." in output
        assert "exited" not in output and "stopping the rest" not in output, output
        assert script.returncode == 130, output
        assert took < 10, output
        for role in ("worker", "beat"):
            assert _signals(log, role) == ["TERM"], role  # the script's stop, and not the terminal's SIGINT too
        assert _left(script) == ""


def test_a_process_that_dies_alone_is_named_and_the_rest_stopped(tmp_path: Path) -> None:
    """Not a Ctrl-C: beat alone is stopped (by someone's kill, or a crash). The script says which and stops the rest, the
    web server with a quick shutdown (a graceful one waited out its workers, past MUSTER_STOP_SECONDS)."""
    script, log = _start(tmp_path, MUSTER_STOP_SECONDS="8")
    beat = subprocess.run(
        ["pgrep", "-s", str(script.pid), "-f", "celery.py -A config --quiet beat"], capture_output=True, text=True
    ).stdout.split()
    assert len(beat) == 1, beat
    os.kill(int(beat[0]), signal.SIGTERM)
    try:
        script.wait(timeout=30)
    finally:
        _kill(script)
    output = (log / "output").read_text()
    assert "Celery beat exited (status 0); stopping the rest" in output
    assert "stopping Muster..." in output
    assert "did not stop" not in output, output
    assert script.returncode == 1
    assert _left(script) == ""


def test_a_process_still_starting_at_the_ctrl_c_is_stopped_once_it_can_be(tmp_path: Path) -> None:
    """The what-if worker is still loading (its handlers not set) when Ctrl-C comes right after the banner: the script
    asks it again until it has them, instead of waiting out MUSTER_STOP_SECONDS and killing it."""
    script, log = _start(tmp_path, BOOTING="whatif", MUSTER_STOP_SECONDS="8")
    output, took = _ctrl_c(script, log)
    assert "did not stop" not in output, output
    assert took < 7, output
    assert _signals(log, "whatif") == ["QUIT"]  # the first QUIT went unheard; it is asked again until it hears one
    assert script.returncode == 130


def test_ctrl_c_is_quiet_each_process_hearing_one_stop(tmp_path: Path) -> None:
    """A Ctrl-C printed Celery's own words ("Hitting Ctrl+C again will terminate all running tasks!") and, once, a
    WorkerTerminate traceback: Celery heard the terminal's SIGINT, then the script's signal and, for a shutdown longer
    than 2 s, the script's again, as a second and third Ctrl-C. Each process now hears one stop; the output is the
    script's own line, and it exits 130. A second Ctrl-C while it stops changes nothing: the processes are out of the
    terminal's reach, and the script, which would leave them running if it ended, goes on stopping them."""
    script, log = _start(tmp_path, STOP_TAKES="3")
    output, took = _ctrl_c(script, log, again_after=0.5)
    assert script.returncode == 130, output
    assert output.split("Ctrl-C stops everything.", 1)[1].strip() == "stopping Muster...", output
    assert took < 10, output
    assert {role: _signals(log, role) for role in ("worker", "whatif", "beat")} == {
        "worker": ["TERM"],
        "whatif": ["QUIT"],
        "beat": ["TERM"],
    }
    assert _left(script) == ""
