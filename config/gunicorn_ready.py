"""A gunicorn config file (`gunicorn -c config/gunicorn_ready.py`) for `make run`: once this gunicorn holds its port,
it touches MUSTER_GUNICORN_READY_FILE. scripts/run-local.sh prints its banner only after that, so an answer from
another program that took the port first is never taken for Muster's.

gunicorn loads it as a file, not as `config.gunicorn_ready`: nothing of the project is imported in its master.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


def when_ready(server: Any) -> None:
    # gunicorn calls it in the master after it has bound every listener and before it starts workers.
    ready = os.environ.get("MUSTER_GUNICORN_READY_FILE")
    if ready:
        Path(ready).touch()
