"""A gunicorn config file (`gunicorn -c config/gunicorn_ready.py`) for `make run`: once this gunicorn holds its port,
it touches MUSTER_GUNICORN_READY_FILE. scripts/run-local.sh prints its banner only after that, so an answer from
another program that took the port first is never taken for Muster's. Its workers leave a Ctrl-C to their master
(`post_fork`).

gunicorn loads it as a file, not as `config.gunicorn_ready`: nothing of the project is imported in its master.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any


def when_ready(server: Any) -> None:
    # gunicorn calls it in the master after it has bound every listener and before it starts workers.
    ready = os.environ.get("MUSTER_GUNICORN_READY_FILE")
    if ready:
        Path(ready).touch()


def post_fork(server: Any, worker: Any) -> None:
    # A Ctrl-C reaches every process of the terminal's group: a worker got its SIGINT and, at once, the SIGQUIT its master
    # sends on the same Ctrl-C. A gthread worker's quick shutdown taken again inside itself (its thread pool's lock held
    # by the first) hung it for good, and `make run` waited 20 s to kill it ("the web server (gunicorn) did not stop").
    # Its master relays the Ctrl-C: the worker ignores SIGINT from when it sets its own handlers.
    set_handlers = worker.init_signals

    def init_signals() -> None:
        set_handlers()
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    worker.init_signals = init_signals


def worker_int(worker: Any) -> None:
    # gunicorn calls it in a worker told to stop at once (SIGQUIT, make run's stop; SIGINT). A `muster logs -f` being
    # served holds one of its threads until the attempt ends (or MUSTER_LOG_FOLLOW_SECONDS), and the worker's exit
    # waits for its threads: the Ctrl-C waited 20 s and killed the web server. The follows end at their next look at
    # the job (the client asks again, as after a restart). Only if a follow ever ran here: nothing is imported now.
    logs = sys.modules.get("jobs.logs")
    if logs is not None:
        logs.FOLLOWS_END.set()
