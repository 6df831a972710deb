"""Services enqueue some tasks by name (config.celery_task.task_named): a process that never imported the tasks
modules (a web process, a management command) must still find them, or a state change would fail with NotRegistered."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENQUEUED_BY_NAME = ("telemetry.tasks.telemetry_store_run", "whatif.tasks.whatif_run")


def test_tasks_enqueued_by_name_are_found_in_a_fresh_process() -> None:
    script = (
        "import django; django.setup()\n"
        "from celery import current_app\n"
        "from config.celery_task import task_named\n"
        f"names = {ENQUEUED_BY_NAME!r}\n"
        "print(sum(n in current_app.tasks for n in names))\n"
        "print(' '.join(task_named(n).name for n in names))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={"DJANGO_SETTINGS_MODULE": "config.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    before, found = run.stdout.split("\n")[:2]
    assert before == "0"  # nothing had imported them: the lookup itself must
    assert found.split() == list(ENQUEUED_BY_NAME)
