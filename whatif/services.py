"""Starting a what-if run (validated, audited, queued after commit), executing it (in the worker), cancelling and
deleting it (audited)."""

from __future__ import annotations

import dataclasses
import io
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from config.celery_task import task_named
from policy.model import PolicyConfig
from replay.report import report_figures, summary_document
from replay.trace import Assumptions, TraceJob, read_trace
from scheduler.snapshot import policy_config
from whatif.history import history_write
from whatif.models import ENDED, WhatIfRun
from whatif.runs import cluster_for, replay_policies, settings_used

logger = logging.getLogger(__name__)
# How often a running replay writes its progress to the database at most.
PROGRESS_INTERVAL_SECONDS = 1.0


class RunEnded(ValueError):
    """The run has ended: there is nothing to cancel."""


class RunNotEnded(ValueError):
    """The run is queued or running: cancel it before deleting it."""


class _Stopped(Exception):
    """Raised inside the replay when its run is no longer running (cancelled, or marked stopped): the replay ends."""


@dataclass(frozen=True)
class RunRequest:
    """What a what-if run replays and how; `trace` is the CSV text (history or an upload)."""

    source: str
    trace_name: str
    trace: str
    policies: tuple[str, ...]
    nodes: int | None = None
    load: float | None = None
    start: datetime | None = None
    end: datetime | None = None
    assumptions: Assumptions = field(default_factory=Assumptions)
    changes: dict[str, Any] = field(default_factory=dict)


def assumptions_from(parameters: dict[str, Any]) -> Assumptions:
    return Assumptions(**parameters.get("assumptions", {}))


def trace_read(text: str, *, assumptions: Assumptions, start: datetime | None = None, end: datetime | None = None) -> list[TraceJob]:
    """The trace's jobs; replay.trace.TraceError (with the line number) on the first bad row."""
    return read_trace(io.StringIO(text), assumptions=assumptions, start=start, end=end)


def history_trace(start: datetime | None, end: datetime | None) -> str:
    buffer = io.StringIO()
    history_write(buffer, start, end)
    return buffer.getvalue()


def whatif_start(request: RunRequest, *, actor: User | AnonymousUser | None, http_request: Any = None) -> WhatIfRun:
    """Validate the trace and the cluster, record the run and queue it; nothing is queued when anything is wrong.

    Raises replay.trace.TraceError for a bad row and ValueError for a cluster the trace cannot run on.
    The policy settings are the site's now, with `changes` applied, stored in full so the run can be repeated.
    """
    start, end = (None, None) if request.source == WhatIfRun.Source.HISTORY else (request.start, request.end)
    jobs = trace_read(request.trace, assumptions=request.assumptions, start=start, end=end)
    if not jobs and request.source == WhatIfRun.Source.HISTORY:
        raise ValueError(
            "No job has run to an end on this site in that range, so there is no history to replay: choose a longer range, "
            "or upload a trace (docs/admin.md, What-if replays)."
        )
    if not jobs:
        raise ValueError("The trace has no jobs in that range: choose another range, or check its submit times.")
    cluster = cluster_for(jobs, nodes=request.nodes, load=request.load, gpus_per_node=request.assumptions.gpus_per_node)
    site = policy_config()
    config = dataclasses.replace(site, **request.changes)
    parameters = {
        "source": request.source,
        "trace_name": request.trace_name,
        "start": request.start.isoformat() if request.start else None,
        "end": request.end.isoformat() if request.end else None,
        "nodes": cluster.nodes,
        "load": request.load,
        "policies": list(request.policies),
        "changes": request.changes,
        "assumptions": dataclasses.asdict(request.assumptions),
        "config": dataclasses.asdict(config),
    }
    with transaction.atomic():
        run = WhatIfRun.objects.create(
            source=request.source,
            trace_name=request.trace_name[:200],
            trace=request.trace,
            trace_jobs=len(jobs),
            parameters=parameters,
            created_by=actor if actor is not None and actor.is_authenticated else None,
        )
        changes = {
            "trace": [None, request.trace_name],
            "jobs": [None, len(jobs)],
            "nodes": [None, cluster.nodes],
            "policies": [None, list(request.policies)],
            **{f"setting.{k}": [getattr(site, k), v] for k, v in request.changes.items()},
        }
        audit_record(actor=actor, action="whatif.run", target=run, changes=changes, request=http_request)
        task_named("whatif.tasks.whatif_run").delay_on_commit(run.pk)
    return run


def whatif_execute(run_id: int, *, worker: str = "") -> None:
    """Replay run `run_id`, saving progress as it goes, then the summary and charts; a failure saves the error.

    Idempotent: only a queued run is started (a second delivery of the task finds it running or ended and returns).
    `worker` (the Celery worker's hostname) is kept on the run: whatif_worker_stopped finds it by that.
    Only a run still running is written to: one cancelled or marked stopped meanwhile stays so, and its replay ends at
    the next progress step (every 1% of the trace's jobs, checked at most once a second).
    """
    started = WhatIfRun.objects.filter(pk=run_id, status=WhatIfRun.Status.QUEUED).update(
        status=WhatIfRun.Status.RUNNING, started_at=timezone.now(), progress=0.0, worker=worker[:255]
    )
    if not started:
        return
    run = WhatIfRun.objects.get(pk=run_id)
    running = WhatIfRun.objects.filter(pk=run_id, status=WhatIfRun.Status.RUNNING)
    last = [0.0]

    def progress(policy: str, fraction: float, overall: float) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_INTERVAL_SECONDS:
            last[0] = now
            if not running.update(progress=min(0.99, overall)):
                raise _Stopped

    try:
        parameters = run.parameters
        assumptions = assumptions_from(parameters)
        start, end = (None, None) if run.source == WhatIfRun.Source.HISTORY else (_when(parameters["start"]), _when(parameters["end"]))
        jobs = trace_read(run.trace, assumptions=assumptions, start=start, end=end)
        config = PolicyConfig(**parameters["config"])
        cluster = cluster_for(jobs, nodes=parameters["nodes"], load=None, gpus_per_node=assumptions.gpus_per_node)
        summaries, results = replay_policies(
            jobs, policies=parameters["policies"], cluster=cluster, config=config, assumptions=assumptions, progress=progress
        )
        used = settings_used(cluster, config, assumptions, load=parameters.get("load"))
        document = summary_document(summaries, assumptions=assumptions.describe(), settings_used=used, trace_name=run.trace_name)
        figures = report_figures(results)
    except _Stopped:
        logger.info("what-if run %s was cancelled or stopped: its replay ends", run_id)
        return
    except Exception as exc:  # anything: the run says what went wrong instead of staying "running"
        logger.exception("what-if run %s failed", run_id)
        running.update(status=WhatIfRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:5000], finished_at=timezone.now())
        return
    running.update(status=WhatIfRun.Status.DONE, progress=1.0, summary=document, figures=figures, finished_at=timezone.now())


def whatif_worker_stopped(*, worker: str) -> int:
    """Runs `worker` left running, marked failed as stopped with it; returns how many.

    Called when that worker shuts down (a cold shutdown, as make run's Ctrl-C gives it, kills a replay midway) and
    when it starts (it may have died without shutting down): either way no replay of it is still going, and a run
    that read "running" would never end. The replay is not resumed: its task was taken off the queue when it began.
    """
    if not worker:
        return 0
    stopped = 0
    for run in WhatIfRun.objects.filter(status=WhatIfRun.Status.RUNNING, worker=worker).only("pk", "progress"):
        stopped += WhatIfRun.objects.filter(pk=run.pk, status=WhatIfRun.Status.RUNNING).update(
            status=WhatIfRun.Status.FAILED,
            error=f"Stopped when its worker ({worker}) stopped, {round(100 * run.progress)}% through: start it again as a new run.",
            finished_at=timezone.now(),
        )
    if stopped:
        logger.warning("%s what-if run(s) of worker %s marked as stopped with it", stopped, worker)
    return stopped


def whatif_cancel(*, run_id: int, actor: User | AnonymousUser, http_request: Any = None) -> WhatIfRun:
    """Cancel a queued or running run, saying who did; audited (`whatif.cancel`). RunEnded if it has ended.

    A queued run is never started (whatif_execute starts queued runs only); a running one's replay ends at its next
    progress step, when it finds its run no longer running. The worker is then free for the next run.
    """
    with transaction.atomic():
        run = WhatIfRun.objects.select_for_update().only("pk", "status", "progress", "trace_name").get(pk=run_id)
        if run.ended:
            raise RunEnded(f"What-if run {run.pk} has already ended ({run.get_status_display().lower()}): there is nothing to cancel.")
        before = run.status
        run.status, run.finished_at = WhatIfRun.Status.CANCELLED, timezone.now()
        run.cancelled_by = actor if actor.is_authenticated else None
        run.save(update_fields=["status", "finished_at", "cancelled_by"])
        changes = {"status": [before, run.status], "progress": [round(run.progress, 3), None]}
        audit_record(actor=actor, action="whatif.cancel", target=run, changes=changes, request=http_request)
    return run


def whatif_delete(*, run_id: int, actor: User | AnonymousUser, http_request: Any = None) -> None:
    """Delete an ended run (done, failed or cancelled) with its trace and report; audited (`whatif.delete`, with what
    it was). RunNotEnded if it is queued or running: cancel it first."""
    with transaction.atomic():
        run = WhatIfRun.objects.select_for_update().only("pk", "status", "trace_name", "trace_jobs", "created_by").get(pk=run_id)
        if run.status not in ENDED:
            raise RunNotEnded(f"What-if run {run.pk} is {run.get_status_display().lower()}: cancel it before deleting it.")
        was = {"trace": run.trace_name, "jobs": run.trace_jobs, "status": run.status, "started_by": _username(run.created_by)}
        audit_record(actor=actor, action="whatif.delete", target=run, changes={k: [v, None] for k, v in was.items()}, request=http_request)
        run.delete()


def _username(user: User | None) -> str | None:
    return user.get_username() if user is not None else None


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None
