"""One scheduling cycle: observe running gangs, heal drift, admit gangs, launch them.

The policy (`jobs.scheduling`) decides; this module reads the world into it and
carries its decisions out. Only one cycle runs at a time cluster-wide.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.cluster import ClusterBackend, ClusterUnavailable, GangSpec, PodPhase, PodStatus, get_backend
from jobs.cluster.base import DEADLINE_EXCEEDED
from jobs.errors import IllegalTransition
from jobs.locks import cycle_lock
from jobs.metrics import cycle_counters_record
from jobs.models import Allocation, ClusterHealth, Job, Node
from jobs.scheduling.model import Decisions, Placement
from jobs.scheduling.policy import schedule
from jobs.services import job_transition, nodes_sync
from jobs.snapshot import build_snapshot, policy_config
from jobs.states import ACTIVE_STATES, JobState
from quotas.services import ledger_charge_active
from telemetry.tokens import telemetry_pod_env

logger = logging.getLogger(__name__)

# Reasons are stored in columns of this many characters (Job.pending_reason, Job.state_reason, JobEvent.reason).
REASON_MAX_CHARS = 500
# What `fit_reason` keeps of a long reason's end: the sentence saying what happens next.
REASON_TAIL_CHARS = 160


def fit_reason(text: str) -> str:
    """A reason that fits its column. Long ones (a gang's node list) lose their middle, keeping how they end.

    A reason too long for PostgreSQL's varchar(500) would make the write fail and with it the whole cycle.
    """
    if len(text) <= REASON_MAX_CHARS:
        return text
    head = REASON_MAX_CHARS - REASON_TAIL_CHARS - 1
    return f"{text[:head]}…{text[-REASON_TAIL_CHARS:]}"


@dataclass
class CycleReport:
    ran: bool
    placed: list[int] = field(default_factory=list)
    launched: list[int] = field(default_factory=list)
    ended: dict[int, str] = field(default_factory=dict)
    requeued: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    # Placed jobs whose launch the cluster refused (requeued): counted for /metrics.
    launch_failed: list[int] = field(default_factory=list)
    orphans_removed: list[tuple[int, int]] = field(default_factory=list)
    cluster_error: str = ""
    seconds: float = 0.0


def run_cycle(*, backend: ClusterBackend | None = None, now: datetime | None = None) -> CycleReport:
    """Run one cycle if no other is running; return what it did, and add it to the counters /metrics exports."""
    started = time.monotonic()
    report = _run_cycle(backend=backend, now=now)
    # Persisted, not kept in this process: the web process serves /metrics (jobs/metrics.py).
    cycle_counters_record(
        ran=report.ran,
        seconds=report.seconds or (time.monotonic() - started),
        launched=len(report.launched),
        launch_failed=len(report.launch_failed),
        preempted=len(report.preempted),
        cluster_error=bool(report.cluster_error),
    )
    return report


def _run_cycle(*, backend: ClusterBackend | None, now: datetime | None) -> CycleReport:
    started = time.monotonic()
    with cycle_lock() as acquired:
        if not acquired:
            return CycleReport(ran=False)
        now = now or timezone.now()
        report = CycleReport(ran=True)
        try:
            backend = backend or get_backend()
            present = {n.name for n in nodes_sync(cluster_nodes=backend.list_nodes())}
            _charge_active(now)
            gangs = backend.observe_gangs()
            followed = _observe_active(backend, gangs, present, now, report)
            _reconcile(backend, set(gangs) - followed, report)
        except ClusterUnavailable as exc:
            # Jobs stay queued and nothing is lost; the next cycle tries again.
            report.cluster_error = str(exc)
            logger.warning("cluster unavailable, skipping this cycle: %s", exc)
            _record_health(now, str(exc))
            return report
        _record_health(now, "")
        decisions, stopped = _admit(now, report)
        # Preempted gangs get the grace period to checkpoint on SIGTERM.
        for job_id, attempt in stopped:
            backend.teardown_gang(job_id, attempt, grace_seconds=settings.MUSTER_PREEMPTION_GRACE_SECONDS)
        _launch(backend, decisions, now, report)
        report.seconds = time.monotonic() - started
        return report


def _observe_active(
    backend: ClusterBackend, gangs: dict[tuple[int, int], list[PodStatus]], present: set[str], now: datetime, report: CycleReport
) -> set[tuple[int, int]]:
    """Move every SCHEDULED/RUNNING job by what its pods do; returns the gangs it looked at."""
    followed: set[tuple[int, int]] = set()
    for job in Job.objects.filter(state__in=ACTIVE_STATES).select_related("owner", "team").order_by("id"):
        followed.add((job.pk, job.attempt))
        pods = gangs.get((job.pk, job.attempt), [])
        try:
            _follow(backend, job, pods, present, now, report)
        except IllegalTransition as exc:
            # Someone (a cancel) moved the job while we looked; their move stands.
            logger.info("job %s moved during the cycle: %s", job.pk, exc)
    return followed


def _follow(backend: ClusterBackend, job: Job, pods: list[PodStatus], present: set[str], now: datetime, report: CycleReport) -> None:
    # Wall time counts from placement, when the GPUs were taken: the end the scheduler planned reservations by.
    placed = job.scheduled_at or job.started_at
    if placed and now >= placed + timedelta(seconds=job.wall_time_seconds):
        job_transition(job, JobState.TIMED_OUT, reason=f"Stopped: wall time of {job.wall_time_seconds} s reached.", now=now)
        backend.teardown_gang(job.pk, job.attempt)
        report.ended[job.pk] = JobState.TIMED_OUT
        return
    lost = sorted({p.node_name for p in pods if p.node_name and p.node_name not in present})
    if lost:
        # The cluster's fault, not the job's: back to the queue without spending a restart, to resume elsewhere.
        _requeue(backend, job, now, report, f"Node {', '.join(lost)} left the cluster under attempt {job.attempt}; requeued.")
        return
    if len(pods) < job.nodes and job.state == JobState.SCHEDULED:
        _complete_launch(backend, job, now, report)
        return
    if len(pods) < job.nodes:
        _retry_or_fail(backend, job, now, report, f"{job.nodes - len(pods)} of {job.nodes} pods vanished from the cluster.", None)
        return
    failed = [p for p in pods if p.phase == PodPhase.FAILED]
    if any(p.reason == DEADLINE_EXCEEDED for p in failed):
        # The cluster enforced the wall time (activeDeadlineSeconds) before this cycle saw it pass.
        job_transition(job, JobState.TIMED_OUT, reason=f"Stopped: wall time of {job.wall_time_seconds} s reached.", now=now)
        backend.teardown_gang(job.pk, job.attempt)
        report.ended[job.pk] = JobState.TIMED_OUT
        return
    if failed:
        first = failed[0]
        _retry_or_fail(backend, job, now, report, first.message or f"rank {first.rank} failed on {first.node_name}.", first.exit_code)
        return
    phases = {p.phase for p in pods}
    if phases <= {PodPhase.RUNNING, PodPhase.SUCCEEDED} and job.state == JobState.SCHEDULED:
        job = job_transition(
            job,
            JobState.RUNNING,
            reason=f"All {job.nodes} pods are running.",
            now=now,
            started_at=now,
            launch_failures=0,
            launch_not_before=None,
        )
    if phases == {PodPhase.SUCCEEDED}:
        job_transition(job, JobState.SUCCEEDED, reason="All pods exited with code 0.", now=now, exit_code=0)
        backend.teardown_gang(job.pk, job.attempt)
        report.ended[job.pk] = JobState.SUCCEEDED
        return
    if (
        job.state == JobState.SCHEDULED
        and job.scheduled_at
        and now >= job.scheduled_at + timedelta(seconds=settings.MUSTER_LAUNCH_TIMEOUT_SECONDS)
    ):
        waiting = sum(1 for p in pods if p.phase == PodPhase.PENDING)
        _launch_failed(
            backend,
            job,
            now,
            report,
            f"{waiting} of {job.nodes} pods were not running {settings.MUSTER_LAUNCH_TIMEOUT_SECONDS} s after launch.",
        )


def _retry_or_fail(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport, why: str, exit_code: int | None) -> None:
    if job.restarts < job.max_restarts:
        _requeue(
            backend,
            job,
            now,
            report,
            f"Attempt {job.attempt} failed: {why} Restarting ({job.restarts + 1} of {job.max_restarts}).",
            restarts=job.restarts + 1,
        )
        return
    job_transition(job, JobState.FAILED, reason=fit_reason(f"Attempt {job.attempt} failed: {why}"), now=now, exit_code=exit_code)
    backend.teardown_gang(job.pk, job.attempt)
    report.ended[job.pk] = JobState.FAILED


def _launch_failed(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport, why: str, *, transient: bool = False) -> None:
    """A launch that did not come up: back to the queue after a pause that doubles each time, or FAILED after too many.

    Without the pause a launch that can never succeed (a manifest the API server rejects, an
    admission policy, an image that never pulls) would be placed, fail and be requeued cycle
    after cycle, holding GPUs others could use each time. Restarts are not spent: the job's
    code never ran. A `transient` failure (the API server unreachable, overloaded, or failing
    with a 5xx) backs off the same way but never fails the job: it is the cluster's trouble.
    """
    failures = job.launch_failures + 1
    limit = settings.MUSTER_LAUNCH_MAX_FAILURES
    if failures >= limit and not transient:
        job_transition(
            job,
            JobState.FAILED,
            reason=fit_reason(f"{failures} launches in a row did not come up; the last: {why}"),
            now=now,
            launch_failures=failures,
        )
        try:
            backend.teardown_gang(job.pk, job.attempt)
        except ClusterUnavailable:
            logger.warning("could not tear down job %s attempt %s now; reconciliation will", job.pk, job.attempt)
        report.ended[job.pk] = JobState.FAILED
        return
    delay = min(settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS, settings.MUSTER_LAUNCH_BACKOFF_SECONDS * 2 ** (failures - 1))
    _requeue(
        backend,
        job,
        now,
        report,
        f"{why} Failed launch {failures}{'' if transient else f' of at most {limit}'} in a row; tried again in {delay} s.",
        launch_failures=failures,
        launch_not_before=now + timedelta(seconds=delay),
    )


def _requeue(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport, why: str, **fields: object) -> None:
    # The job keeps its submit time, so it keeps its place among jobs of its class.
    why = fit_reason(why)
    job_transition(job, JobState.PENDING, reason=why, now=now, pending_reason_code="REQUEUED", pending_reason=why, **fields)
    try:
        backend.teardown_gang(job.pk, job.attempt)
    except ClusterUnavailable:
        # The attempt is no longer live, so reconciliation deletes what is left once the cluster answers.
        logger.warning("could not tear down job %s attempt %s now; reconciliation will", job.pk, job.attempt)
    report.requeued.append(job.pk)


def _record_health(now: datetime, error: str) -> None:
    health, _ = ClusterHealth.objects.get_or_create(pk=1)
    down_since = None if not error else (health.down_since if not health.reachable else now)
    ClusterHealth.objects.filter(pk=1).update(last_cycle_at=now, reachable=not error, error=error, down_since=down_since)


def _reconcile(backend: ClusterBackend, unfollowed: set[tuple[int, int]], report: CycleReport) -> None:
    """Delete gangs the database does not account for (finished, cancelled or unknown jobs)."""
    live = set(Job.objects.filter(state__in=ACTIVE_STATES).values_list("id", "attempt"))
    for job_id, attempt in sorted(unfollowed - live):
        backend.teardown_gang(job_id, attempt)
        report.orphans_removed.append((job_id, attempt))


def _charge_active(now: datetime) -> None:
    """Bring the ledger up to now for every job holding GPUs, so budgets are current for this cycle."""
    ledger_charge_active(until=now)


@transaction.atomic
def _admit(now: datetime, report: CycleReport) -> tuple[Decisions, list[tuple[int, int]]]:
    """Carry out the policy's decisions. Each job's writes stand or fall alone.

    The snapshot is read before the writes, so a job may be cancelled, deleted or edited in
    between. Such a job is skipped with a log line; every other placement and preemption of
    the cycle stands (a skipped placement only leaves its GPUs idle until the next cycle).
    """
    decisions = schedule(build_snapshot(now), policy_config())
    node_ids = dict(Node.objects.values_list("name", "id"))
    ids = [p.job_id for p in decisions.placements] + [w.job_id for w in decisions.waiting] + [p.job_id for p in decisions.preemptions]
    jobs = Job.objects.in_bulk(ids)
    stopped: list[tuple[int, int]] = []
    for preemption in decisions.preemptions:
        job = jobs.get(preemption.job_id)
        # The lambdas bind the loop's values as defaults; mypy cannot infer a lambda with defaults.
        if _unless_moved(preemption.job_id, job, lambda j=job, p=preemption: stopped.append(_preempt(j, p.reason, p.for_job_id, now))):  # type: ignore[misc]
            report.preempted.append(preemption.job_id)
    placed: list[Placement] = []
    for placement in decisions.placements:
        job = jobs.get(placement.job_id)
        if _unless_moved(placement.job_id, job, lambda j=job, p=placement: _place(j, p, node_ids, now)):  # type: ignore[misc]
            placed.append(placement)
            report.placed.append(placement.job_id)
    for wait in decisions.waiting:
        job = jobs.get(wait.job_id)
        if job is None:
            continue
        estimated = datetime.fromtimestamp(wait.estimated_start, UTC) if wait.estimated_start is not None else None
        reason = fit_reason(wait.reason)
        if (job.pending_reason_code, job.pending_reason, job.estimated_start) != (wait.reason_code, reason, estimated):
            Job.objects.filter(pk=job.pk, state=JobState.PENDING).update(
                pending_reason_code=wait.reason_code, pending_reason=reason, estimated_start=estimated
            )
    return replace(decisions, placements=tuple(placed)), stopped


def _unless_moved(job_id: int, job: Job | None, write: Callable[[], object]) -> bool:
    """Do one job's writes in a savepoint; if the job moved or vanished since the snapshot, undo them, log, go on."""
    if job is None:
        logger.info("job %s was deleted since this cycle's snapshot; skipped", job_id)
        return False
    try:
        with transaction.atomic():
            write()
    except IllegalTransition as exc:
        logger.info("job %s changed since this cycle's snapshot (%s); skipped", job_id, exc)
        return False
    return True


def _preempt(job: Job, reason: str, for_job_id: int, now: datetime) -> tuple[int, int]:
    job = job_transition(job, JobState.PREEMPTED, reason=fit_reason(reason), now=now)
    # Requeued at once, keeping its submit time and so its age.
    why = f"Requeued after preemption by job {for_job_id}."
    job_transition(job, JobState.PENDING, reason=why, now=now, pending_reason_code="PREEMPTED", pending_reason=why, over_quota=False)
    return job.pk, job.attempt


def _place(job: Job, placement: Placement, node_ids: dict[str, int], now: datetime) -> None:
    attempt = job.attempt + 1
    job_transition(
        job,
        JobState.SCHEDULED,
        reason=fit_reason(
            f"Placed on {', '.join(placement.node_names)}" + (" (borrowing idle GPUs beyond its quota)." if placement.over_quota else ".")
        ),
        now=now,
        attempt=attempt,
        scheduled_at=now,
        over_quota=placement.over_quota,
        estimated_start=None,
        charged_until=now,
    )
    Allocation.objects.bulk_create(
        Allocation(job=job, node_id=node_ids[name], attempt=attempt, rank=rank, gpus=gpus, allocated_at=now)
        for rank, (name, gpus) in enumerate(zip(placement.node_names, placement.gpus_held, strict=True))
    )


def _gang_spec(job: Job, node_names: tuple[str, ...]) -> GangSpec:
    return GangSpec(
        job_id=job.pk,
        attempt=job.attempt,
        name=job.name,
        image=job.image,
        command=tuple(job.command),
        env=dict(job.env),
        # The job's own push token, so its pods can send NCCL results to its telemetry (and only its).
        secret_env=telemetry_pod_env(job.pk),
        node_names=node_names,
        gpus_per_node=job.gpus_per_node,
        wall_time_seconds=job.wall_time_seconds,
        owner=job.owner.get_username(),
        team=job.team.name if job.team else "",
        host_network=bool(job.team and job.team.allow_host_network),
        run_as_root=bool(job.team and job.team.allow_run_as_root),
        writable_root_filesystem=bool(job.team and job.team.allow_writable_root_filesystem),
        simulate=dict(job.simulate or {}),
    )


def _complete_launch(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport) -> None:
    """A launch cut short (a worker killed half-way, a dropped connection) left part of a gang: create the rest.

    Names derive from job and attempt and creating what exists is success, so this never doubles a gang.
    """
    if job.scheduled_at and now >= job.scheduled_at + timedelta(seconds=settings.MUSTER_LAUNCH_TIMEOUT_SECONDS):
        _launch_failed(backend, job, now, report, f"The gang was not complete {settings.MUSTER_LAUNCH_TIMEOUT_SECONDS} s after launch.")
        return
    nodes = tuple(
        Allocation.objects.filter(job=job, attempt=job.attempt, released_at__isnull=True)
        .order_by("rank")
        .values_list("node__name", flat=True)
    )
    try:
        backend.launch_gang(_gang_spec(job, nodes))
    except ClusterUnavailable:
        raise
    except Exception as exc:
        logger.exception("completing the launch of job %s attempt %s failed", job.pk, job.attempt)
        _launch_failed(backend, job, now, report, f"The cluster refused the launch: {exc}")


def _launch(backend: ClusterBackend, decisions: Decisions, now: datetime, report: CycleReport) -> None:
    for placement in decisions.placements:
        job = Job.objects.select_related("owner", "team").get(pk=placement.job_id)
        if job.state != JobState.SCHEDULED:
            continue  # cancelled between admission and launch
        spec = _gang_spec(job, placement.node_names)
        try:
            backend.launch_gang(spec)
        except Exception as exc:
            logger.exception("launch of job %s attempt %s failed", job.pk, job.attempt)
            report.launch_failed.append(job.pk)
            try:
                transient = isinstance(exc, ClusterUnavailable)
                why = f"The cluster {'failed' if transient else 'refused'} the launch: {exc}"
                _launch_failed(backend, job, now, report, why, transient=transient)
            except IllegalTransition:
                pass
            continue
        report.launched.append(job.pk)
