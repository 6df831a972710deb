"""A replay whose worker stops (make run's Ctrl-C: a cold shutdown) or died leaves its run failed, saying so: not
"running" forever."""

from __future__ import annotations

import gzip
import signal
from typing import Any
from unittest import mock

import pytest
from celery.signals import worker_ready
from django.conf import settings

from config.celery import app as celery_app
from tests.processes import ROOT, Processes, wait_for
from tests.whatif.traces import TINY
from whatif import services
from whatif.models import WhatIfRun
from whatif.services import RunRequest, whatif_execute, whatif_start, whatif_worker_stopped

STOPPED = "Stopped when its worker (whatif@a) stopped"


def _queued(trace: str = TINY, **changes: Any) -> WhatIfRun:
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        return whatif_start(RunRequest(source="upload", trace_name="tiny", trace=trace, policies=("fifo",), nodes=2, **changes), actor=None)


def _running(worker: str, progress: float = 0.25) -> WhatIfRun:
    run = _queued()
    WhatIfRun.objects.filter(pk=run.pk).update(status="running", worker=worker, progress=progress)
    return run


@pytest.mark.django_db
def test_a_stopped_worker_marks_its_running_runs_and_no_others() -> None:
    mine, other = _running("whatif@a", 0.42), _running("whatif@b")
    done = _queued()
    whatif_execute(done.pk, worker="whatif@a")
    assert WhatIfRun.objects.get(pk=done.pk).worker == "whatif@a"

    assert whatif_worker_stopped(worker="whatif@a") == 1
    mine.refresh_from_db()
    assert mine.status == "failed" and mine.finished_at is not None
    assert mine.error == f"{STOPPED}, 42% through: start it again as a new run."
    assert WhatIfRun.objects.get(pk=other.pk).status == "running"
    assert WhatIfRun.objects.get(pk=done.pk).status == "done"
    assert whatif_worker_stopped(worker="") == 0


class _Worker:
    hostname = "whatif@a"


@pytest.mark.django_db
def test_the_worker_marks_its_runs_as_it_starts_and_as_it_exits() -> None:
    run = _running("whatif@a")
    with mock.patch("atexit.register") as at_exit:
        worker_ready.send(sender=_Worker())
    assert WhatIfRun.objects.get(pk=run.pk).error.startswith(STOPPED)
    at_exit.assert_called_once_with(whatif_worker_stopped, worker="whatif@a")


@pytest.mark.django_db
def test_a_run_marked_stopped_while_it_replays_stays_so() -> None:
    """The replay's own end (done) must not write over a run marked stopped meanwhile."""
    run = _queued()
    replay = services.replay_policies

    def stopped_midway(*args: Any, **kwargs: Any) -> Any:
        whatif_worker_stopped(worker="whatif@a")
        return replay(*args, **kwargs)

    with mock.patch.object(services, "replay_policies", stopped_midway):
        whatif_execute(run.pk, worker="whatif@a")
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith(STOPPED) and run.summary is None


WORKER = ("worker", "-Q", settings.WHATIF_QUEUE, "--hostname", "whatif@a", "--concurrency", "1")
QUIET = ("--without-heartbeat", "--without-gossip", "--without-mingle", "--loglevel", "WARNING")


@pytest.mark.worker
@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_ctrl_c_then_a_cold_shutdown_stops_a_replay_at_once_and_says_so(processes: Processes) -> None:
    """As make run stops the what-if worker: the terminal's SIGINT (a warm shutdown, which would wait for the replay),
    then SIGQUIT. The worker exits within seconds and the run reads failed, stopped with its worker."""
    philly = gzip.decompress((ROOT / "replay" / "traces" / "philly-2017-09-10.csv.gz").read_bytes()).decode()
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        run = whatif_start(
            RunRequest(source="upload", trace_name="philly", trace=philly, policies=("muster", "easy", "fifo"), load=1.0), actor=None
        )
    processes.start(*WORKER, *QUIET)
    celery_app.send_task("whatif.tasks.whatif_run", args=[run.pk], queue=settings.WHATIF_QUEUE)
    worker, log = processes.procs[-1]
    try:
        wait_for(lambda: WhatIfRun.objects.get(pk=run.pk).status == "running", 60, "the worker to start the replay")
        worker.send_signal(signal.SIGINT)
        worker.send_signal(signal.SIGQUIT)
        worker.wait(20)
    except BaseException:
        print(processes.logs())
        raise
    run.refresh_from_db()
    assert run.status == "failed" and run.error.startswith(STOPPED), (run.status, run.error, log.read_text())

    # A worker that died without shutting down (SIGKILL) left a run "running": when it starts again, it says so.
    WhatIfRun.objects.filter(pk=run.pk).update(status="running", error="")
    processes.start(*WORKER, *QUIET)
    wait_for(lambda: WhatIfRun.objects.get(pk=run.pk).status == "failed", 60, "the restarted worker to mark the run")
