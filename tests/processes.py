"""Real processes the end-to-end tests start on the test database: Celery worker and beat, and waiting on them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


def database_url() -> str:
    s = connection.settings_dict
    return f"postgres://{s['USER']}:{s['PASSWORD']}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


class Processes:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[tuple[subprocess.Popen[bytes], Path]] = []
        # The worker reads the test database, so it sees what the API wrote.
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "MUSTER_CLUSTER": "simulated",
            "MUSTER_SIM_START_SECONDS": "0.5",
            "MUSTER_CYCLE_INTERVAL_SECONDS": "1",
            "MUSTER_DATA_DIR": str(tmp_path),
        }

    def start(self, *args: str) -> None:
        log = self.tmp_path / f"{args[0]}.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", *args], cwd=ROOT, env=self.env, stdout=log.open("wb"), stderr=subprocess.STDOUT
        )
        self.procs.append((proc, log))

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}\n{log.read_text()[-3000:]}" for _, log in self.procs)

    def stop(self) -> None:
        for proc, _ in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc, _ in self.procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
