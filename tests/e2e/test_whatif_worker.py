"""A what-if run started from the page is replayed by a real Celery worker (its own queue) over Redis."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import AuditEntry
from config.celery import app as celery_app
from tests.conftest import session_for
from tests.processes import Processes, wait_for
from tests.whatif.traces import TINY
from whatif.models import WhatIfRun

pytestmark = [pytest.mark.worker, pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def test_a_run_from_the_page_reaches_done_through_the_worker(processes: Processes, admin_user) -> None:
    # The what-if worker consumes only the what-if queue, as in production (scripts/run-local.sh, docker-compose.yml).
    flags = ("--concurrency", "1", "--without-heartbeat", "--without-gossip", "--without-mingle")
    processes.start("worker", "-Q", settings.WHATIF_QUEUE, "--loglevel", "INFO", *flags)
    wait_for(lambda: celery_app.control.ping(timeout=0.5), 60, "the worker to answer a ping")
    admin = session_for(admin_user)
    response = admin.post(
        reverse("whatif:list"),
        {
            "source": "upload",
            "trace_file": SimpleUploadedFile("tiny.csv", TINY.encode()),
            "nodes": "2",
            "gpus_per_node": "8",
            "policies": ["fifo", "easy", "muster"],
            "settings": "starvation_seconds=600",
            "wall_round_seconds": "3600",
            "runtime_cap_seconds": "",
            "resume": "restart",
        },
    )
    assert response.status_code == 302
    run = WhatIfRun.objects.get()
    try:
        wait_for(lambda: WhatIfRun.objects.get(pk=run.pk).status in ("done", "failed"), 120, "the worker to finish the run")
    except BaseException:
        print(processes.logs())
        raise
    run.refresh_from_db()
    assert run.status == "done", run.error
    assert run.progress == 1.0 and [p["policy"] for p in run.policy_summaries] == ["fifo", "easy", "muster"]
    assert run.summary["settings"]["policy.starvation_seconds"] == 600.0
    assert AuditEntry.objects.filter(action="whatif.run", target_id=str(run.pk)).exists()
    assert admin.get(reverse("whatif:progress", args=[run.pk])).json()["status"] == "done"
