"""One scheduling cycle: observe running gangs, heal drift, admit gangs, launch them.

The policy (`policy`) decides; this module reads the world into it and
carries its decisions out. Only one cycle runs at a time cluster-wide.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from typing import TypeVar, cast

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from jobs.amounts import duration, plural
from jobs.cluster import (
    ClusterBackend,
    ClusterDeletingGangs,
    ClusterNode,
    ClusterRefuses,
    ClusterUnavailable,
    GangSpec,
    PodPhase,
    PodStatus,
    get_backend,
)
from jobs.cluster.base import (
    DEADLINE_EXCEEDED,
    LAUNCH_ERRORS,
    UNSCHEDULABLE,
    GpuSlice,
    LaunchRefused,
    refused_by_node,
    stopped_by_cluster,
)
from jobs.errors import IllegalTransition
from jobs.hooks import pod_secret_env
from jobs.lifecycle import (
    job_launch_failed,
    job_launch_note,
    job_launch_overdue,
    job_mark_running,
    job_not_launched,
    job_note,
    job_place,
    job_preempt,
    job_requeue,
    job_resize,
    job_retry_or_fail,
    job_succeed,
    job_time_out,
    job_wall_time_end,
    job_wall_time_passed,
    job_within_quota,
)
from jobs.logs import gang_logs_capture, gang_teardown
from jobs.models import Allocation, ClusterHealth, Job, Node, NodeState
from jobs.selectors import job_assigned_nodes, nodes_overfilled
from jobs.services import jobs_cancel_unmeetable, node_gang_failed, nodes_gang_succeeded, nodes_sync
from jobs.states import ACTIVE_STATES, JobState
from policy.model import Decisions, Placement, Preemption, Resize
from policy.schedule import schedule
from quotas.services import ledger_charge_active
from scheduler.counters import cycle_counters_record
from scheduler.lock import cycle_lock
from scheduler.plans import store_plans
from scheduler.snapshot import build_snapshot, policy_config

logger = logging.getLogger(__name__)
Written = TypeVar("Written")


@dataclass
class CycleReport:
    ran: bool
    placed: list[int] = field(default_factory=list)
    launched: list[int] = field(default_factory=list)
    ended: dict[int, str] = field(default_factory=dict)
    requeued: list[int] = field(default_factory=list)
    preempted: list[int] = field(default_factory=list)
    # Failed launches (requeued with a backoff, or failed after too many): the cluster refused it, a container could not
    # start (ImagePullBackOff), a gang not up in time; counted for /metrics.
    launch_failed: list[int] = field(default_factory=list)
    orphans_removed: list[tuple[int, int]] = field(default_factory=list)
    # Elastic jobs resized: (job id, ranks added, ranks removed).
    resized: list[tuple[int, list[int], list[int]]] = field(default_factory=list)
    cluster_error: str = ""
    seconds: float = 0.0


def run_cycle(*, backend: ClusterBackend | None = None, now: datetime | None = None) -> CycleReport:
    """Run one cycle if no other is running; return what it did, and add it to the counters /metrics exports."""
    started = time.monotonic()
    report = _run_cycle(backend=backend, now=now)
    # Persisted, not kept in this process: the web process serves /metrics (telemetry/exporter.py).
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
        clock_given = now is not None
        now = now or timezone.now()
        report = CycleReport(ran=True)
        # One read of the row for the cycle: the watch's count of other pods' changes now, and the last cycle's health.
        health, _ = ClusterHealth.objects.get_or_create(pk=1)
        deleting = ""
        try:
            backend = backend or get_backend()
            try:
                backend.prepare()
            except ClusterRefuses as exc:
                # Nothing new is placed, but the gangs running are still followed where the cluster lets Muster see them:
                # a job whose pods it deletes (the jobs' namespace being deleted) stopped running then, not once the
                # cluster takes jobs again (it stayed RUNNING, charged, for as long as the namespace was Terminating).
                report.cluster_error = str(exc)
                deleting = exc.cause if isinstance(exc, ClusterDeletingGangs) else ""
            backend.note_foreign_pods_version(health.foreign_pods_version)
            cluster_nodes = backend.list_nodes()
            # Nodes gangs can go on running on: a node NotReady past its grace loses its pods as surely as a deleted one.
            present = {n.name for n in nodes_sync(cluster_nodes=cluster_nodes, now=now) if not _lost_to_gangs(n, now)}
            _show_holds(backend, cluster_nodes)
            gangs = backend.observe_gangs()
            followed = _observe_active(backend, gangs, present, now, report, deleting=deleting)
            # After the gangs were followed: a gang that ended before this cycle is charged up to its end, not to now.
            _charge_active(now)
            if not report.cluster_error:
                _reconcile(backend, gangs, set(gangs) - followed, report)
        except ClusterUnavailable as exc:
            # Jobs stay queued and nothing is lost; the next cycle tries again. A refusal met first says more.
            report.cluster_error = report.cluster_error or str(exc)
        if report.cluster_error or backend is None:  # (None: making the backend itself failed)
            # Unreachable, or refusing new objects (a launch being completed met it): nothing is placed on it.
            _say_unavailable(health, now, report.cluster_error)
            _record_health(health, now, report.cluster_error)
            return report
        decisions, stopped, now = _admit(now, report, stamp_after_snapshot=not clock_given)
        # Preempted gangs get the grace period to checkpoint on SIGTERM.
        for job_id, attempt, ranks in stopped:
            gang_teardown(backend, job_id, attempt, range(ranks), grace_seconds=settings.MUSTER_PREEMPTION_GRACE_SECONDS)
        _apply_resizes(backend, report)
        _launch(backend, decisions, now, report)
        if report.cluster_error:
            # A launch found the cluster refusing (a role revoked, the namespace deleted): every page says so at once.
            _say_unavailable(health, now, report.cluster_error)
        elif not health.reachable:
            logger.warning("cluster available again after %s: jobs are placed and launched", _since(health, now))
        # Last, stamped as its placements were: a launching gang short of pods after this is not a launch cut short
        # (`_follow`). A cycle that dies on its way leaves the stamp of the last that got here.
        _record_health(health, now, report.cluster_error)
        report.seconds = time.monotonic() - started
        return report


# While the cluster is unavailable, it is said once, then at most once a minute, and once when it is back: one line every
# 2-s cycle was ~1,800 an hour.
UNAVAILABLE_LOG_SECONDS = 60


def _say_unavailable(health: ClusterHealth, now: datetime, error: str) -> None:
    """Log the cluster unavailable when it becomes so, then when each minute of it begins, from the health row as this
    cycle read it (shared by every worker, so several workers do not each say it)."""
    if health.reachable:
        logger.warning("cluster unavailable, jobs wait (said again at most once a minute while it lasts): %s", error)
        return
    since = health.down_since or now
    every = timedelta(seconds=UNAVAILABLE_LOG_SECONDS)
    if (now - since) // every != ((health.last_cycle_at or since) - since) // every:
        logger.warning("cluster still unavailable after %s, jobs wait: %s", _since(health, now), error)


def _since(health: ClusterHealth, now: datetime) -> str:
    return duration(max(0, int((now - (health.down_since or now)).total_seconds())))


def _show_holds(backend: ClusterBackend, cluster_nodes: list[ClusterNode]) -> None:
    """Show Muster's node holds on the cluster's nodes (Kubernetes: a label and an annotation) where they show otherwise:
    a hold made, re-worded or released, also while the cluster was unreachable, shows from the first cycle that reads
    the nodes, and a mark someone changed by hand is put back."""
    held = dict(Node.objects.filter(held=True).values_list("name", "held_reason"))
    marks = {n.name: held.get(n.name) for n in cluster_nodes if n.hold_mark != held.get(n.name)}
    if marks:
        backend.mark_holds(marks)


def _lost_to_gangs(node: Node, now: datetime) -> bool:
    """A NotReady node's pods are lost to their gangs once it has stayed so for MUSTER_NODE_NOT_READY_GRACE_SECONDS, as
    Kubernetes itself waits (its not-ready toleration) before it evicts them: a kubelet's blip of a few seconds
    requeued multi-day gangs whose pods ran on."""
    if node.state != NodeState.NOT_READY:
        return False
    since = node.not_ready_since or now
    return now >= since + timedelta(seconds=settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS)


def _observe_active(
    backend: ClusterBackend,
    gangs: dict[tuple[int, int], list[PodStatus]],
    present: set[str],
    now: datetime,
    report: CycleReport,
    *,
    deleting: str = "",
) -> set[tuple[int, int]]:
    """Move every SCHEDULED/RUNNING job by what its pods do; returns the gangs it looked at. `deleting`: why the cluster
    is deleting every gang, when it is (ClusterDeletingGangs.cause)."""
    followed: set[tuple[int, int]] = set()
    notes = backend.gang_notes()
    for job in Job.objects.filter(state__in=ACTIVE_STATES).select_related("owner", "team").order_by("id"):
        followed.add((job.pk, job.attempt))
        pods = gangs.get((job.pk, job.attempt), [])
        try:
            # One job's changes together: a call the cluster refuses half-way (a 403 of a role without a verb) leaves
            # none of them, and the next cycle finds the job as it was.
            with transaction.atomic():
                for note in notes.get((job.pk, job.attempt), []):
                    job_note(job, now=now, note=note)
                _follow(backend, job, pods, present, now, report, deleting=deleting)
        except IllegalTransition as exc:
            # Someone (a cancel) moved the job while we looked; their move stands.
            logger.info("job %s moved during the cycle: %s", job.pk, exc)
        except ClusterUnavailable:
            raise  # the whole cluster: the cycle stops here and says so
        except Exception:
            # One job's trouble is not everyone's: an elastic job whose shrink the cluster refused stopped every cycle,
            # and no job started anywhere until it was cancelled. Its job is followed again next cycle.
            logger.exception("following job %s failed; the other jobs are followed and the queue goes on", job.pk)
    return followed


def _follow(
    backend: ClusterBackend, job: Job, pods: list[PodStatus], present: set[str], now: datetime, report: CycleReport, *, deleting: str = ""
) -> None:
    """Pick what the gang's pods say about the job (jobs.lifecycle) and tear down what ended. `deleting`: why the
    cluster is deleting every gang, when it is."""
    # An elastic job's ranks are 0..nodes-1; pods of ranks it shrank away may still be terminating.
    pods = [p for p in pods if p.rank < job.nodes]
    now = _gang_ended_at(job, pods, now)
    if job_wall_time_passed(job, now=now):
        if job.state == JobState.SCHEDULED:
            # Its gang never came up: a launch that failed (placed again), not a run that used its wall time. Before, a
            # job whose pods could not be bound ended TIMED_OUT, for good, though its page promised another placement.
            _not_up(backend, job, pods, now, report, f"when its wall time ({job.wall_time_seconds} s) ran out")
            return
        _ended(backend, job_time_out(job, now=job_wall_time_end(job, now=now)), report)
        return
    missing = {*range(job.nodes)} - {p.rank for p in pods}
    # Where the missing ranks ran, by their allocations: Kubernetes deletes a deleted node's pods (the pod GC), so
    # often no pod is left to say so by the time the cycle looks.
    missing_on = _nodes_of(job, missing) if missing else {}
    lost = {p.node_name for p in pods if p.node_name and p.node_name not in present} | (missing_on.keys() - present)
    if lost:
        # The cluster's fault, not the job's: back to the queue without spending a restart, to resume elsewhere.
        what = f"Node {', '.join(sorted(lost))} left the cluster or stopped being Ready under attempt {job.attempt}"
        names = job_assigned_nodes(job)
        if _shrunk_for_loss(backend, job, {r for r, name in enumerate(names) if name in lost}, what, pods, now):
            return
        _requeued(backend, job_requeue(job, now=now, why=f"{what}; requeued."), report)
        return
    disrupted = next((p for p in pods if stopped_by_cluster(p)), None)
    if disrupted is not None:
        # The cluster stops the pod (an eviction, the scheduler's preemption, a NoExecute taint, the node's shutdown): as
        # Kubernetes' own Jobs ignore such failures (podFailurePolicy on DisruptionTarget), no restart is spent; the
        # gang cannot go on.
        if disrupted.disruption == TAINT_EVICTION:
            # Its node reads CORDONED too (a taint Muster's pods do not tolerate), but nobody drained it.
            why = (
                f"Rank {disrupted.rank} on {disrupted.node_name or 'its node'} was evicted for a NoExecute taint on the node "
                f"under attempt {job.attempt}; requeued."
            )
        elif disrupted.disruption == SCHEDULER_PREEMPTION:
            # kube-scheduler's Preempted event on the pod names the pod it made room for, where the cluster keeps it.
            how = backend.pods_gone_how(job.pk, job.attempt, [disrupted.rank]) or (
                "preempted by the Kubernetes scheduler for a pod of a higher priority"
            )
            why = f"Rank {disrupted.rank} on {disrupted.node_name or 'its node'} was {how} under attempt {job.attempt}; requeued."
        elif Node.objects.filter(name=disrupted.node_name, state=NodeState.CORDONED).exists():
            why = _drained_why([disrupted.node_name], job.attempt)
        else:
            told = f": {disrupted.message.rstrip('.')}" if disrupted.message else ""
            why = (
                f"Rank {disrupted.rank} on {disrupted.node_name or 'its node'} was stopped by the cluster "
                f"({disrupted.disruption}{told}) under attempt {job.attempt}; requeued."
            )
        stopped = {p.rank for p in pods if stopped_by_cluster(p)}
        if _shrunk_for_loss(backend, job, stopped, why.removesuffix("; requeued."), pods, now):
            return
        _requeued(backend, job_requeue(job, now=now, why=why), report)
        return
    if len(pods) < job.nodes and deleting:
        # The cluster is deleting every gang (the jobs' namespace being deleted; its pods are gone or being deleted,
        # which observe_gangs leaves out): the job stops running now, charged up to now and spending no restart, and
        # is placed again once the cluster takes jobs. No shrink of an elastic job: its other ranks go the same way.
        why = (
            f"The cluster deleted {_pods_of(len(missing), job.nodes)} ({_ranks(missing)}) under "
            f"attempt {job.attempt}: {deleting}; requeued without spending a restart, and placed again once the cluster "
            "takes jobs."
        )
        _requeued(backend, job_requeue(job, now=now, why=why), report)
        return
    if len(pods) < job.nodes and job.state == JobState.SCHEDULED and not _launched(job):
        _complete_launch(backend, job, now, report)
        return
    if len(pods) < job.nodes:
        drained = sorted(name for name, state in missing_on.items() if state == NodeState.CORDONED)
        if drained:
            # A drain (cordon, then evictions) is an operator's doing, not the job's: no restart is spent.
            why = _drained_why(drained, job.attempt)
            if _shrunk_for_loss(backend, job, missing, why.removesuffix("; requeued."), pods, now):
                return
            _requeued(backend, job_requeue(job, now=now, why=why), report)
            return
        # Deleted through the API while their nodes stay (an eviction seen only after the pod was gone, an operator's
        # kubectl delete): no code of the job's did it, and a pod that fails stays until Muster deletes it. So no
        # restart is spent, as for a disruption the cluster marks. A gang still starting goes the same way: all or
        # nothing, as Kueue and Volcano hold a gang (before, the pod was made again under the same attempt, unsaid).
        starting = ", before it was running" if job.state == JobState.SCHEDULED else ""
        # Where the cluster still says how (their Service deleted, which took them with it), the page names it.
        how = backend.pods_gone_how(job.pk, job.attempt, sorted(missing)) or "deleted outside Muster (an eviction or by hand)"
        why = (
            f"{_pods_of(len(missing), job.nodes).capitalize()} ({_ranks(missing)}) {_was(len(missing))} {how} "
            f"under attempt {job.attempt}{starting}; requeued."
        )
        if _shrunk_for_loss(backend, job, missing, why.removesuffix("; requeued."), pods, now):
            return
        _requeued(backend, job_requeue(job, now=now, why=why), report)
        return
    failed = [p for p in pods if p.phase == PodPhase.FAILED]
    if any(p.reason == DEADLINE_EXCEEDED for p in failed):
        # The cluster enforced the wall time (activeDeadlineSeconds) before this cycle saw it pass.
        _ended(backend, job_time_out(job, now=now), report)
        return
    refused = next((p for p in failed if refused_by_node(p.reason)), None)
    if refused is not None:
        _refused_by_node(backend, job, refused, now, report)
        return
    if failed:
        first = failed[0]
        why = first.message or f"rank {first.rank} failed on {first.node_name}."
        _failed_attempt(backend, job, now, report, why, first.exit_code, failed_on=first.node_name or "")
        return
    phases = {p.phase for p in pods}
    if phases <= {PodPhase.RUNNING, PodPhase.SUCCEEDED} and job.state == JobState.SCHEDULED:
        job = job_mark_running(job, now=_gang_running_at(job, pods, now))
    if phases == {PodPhase.SUCCEEDED}:
        nodes_gang_succeeded(p.node_name for p in pods if p.node_name)
        # It failed on the node it avoided and succeeded elsewhere: the node, not the job's code, was at fault.
        for name in job.avoid_nodes:
            node_gang_failed(name, job_id=job.pk, attempt=job.attempt - 1)
        _ended(backend, job_succeed(job, now=now), report)
        return
    if job.state == JobState.RUNNING and job.elastic and (stalled := _stalled_growth(job, pods, now)):
        # Only the ranks it grew by are not running: the job goes on with the nodes it had.
        rank_from, why, known = stalled
        _shrink_back(backend, job, rank_from, why, now, started=[p.rank for p in pods if p.phase == PodPhase.RUNNING], hold=not known)
        return
    stuck = next((p for p in pods if p.phase == PodPhase.PENDING and p.reason in LAUNCH_ERRORS), None)
    if stuck is not None:
        why = f"Rank {stuck.rank} on {stuck.node_name or 'its node'} could not start: {stuck.message.rstrip('.')}."
        _launch_failed(backend, job, now, report, why)
        return
    if job.state == JobState.SCHEDULED and (unbindable := _cannot_bind(job, pods)):
        # The cluster's doing, not the job's: no failed launch, no backoff; the next placement sees what changed.
        _requeued(backend, job_requeue(job, now=now, why=unbindable), report)
        return
    if job_launch_overdue(job, now=now):
        _not_up(backend, job, pods, now, report, f"{settings.MUSTER_LAUNCH_TIMEOUT_SECONDS} s after launch")
        return
    if job.state == JobState.SCHEDULED:
        _note_unbound(job, [p for p in pods if p.phase == PodPhase.PENDING and p.reason == UNSCHEDULABLE])


def _pods_of(count: int, nodes: int) -> str:
    """Some of a gang's pods, as a reason names them: "1 of 8 pods", "its pod" for a one-node job (not "1 of 1 pods")."""
    return "its pod" if nodes == 1 else f"{count} of {plural(nodes, 'pod')}"


def _was(count: int) -> str:
    """The verb for `count` pods: "1 of 8 pods (rank 3) was deleted", never "were"."""
    return "was" if count == 1 else "were"


def _ranks(ranks: set[int]) -> str:
    """The ranks a reason names: "rank 3", "ranks 1, 3"."""
    return f"rank{'' if len(ranks) == 1 else 's'} {', '.join(str(rank) for rank in sorted(ranks))}"


def _not_up(backend: ClusterBackend, job: Job, pods: list[PodStatus], now: datetime, report: CycleReport, when: str) -> None:
    """A launch whose pods were not all running by `when`: a failed launch, placed again."""
    pending = [p for p in pods if p.phase == PodPhase.PENDING]
    said = next((p for p in pending if p.message), None)
    detail = f"; rank {said.rank}: {said.message.rstrip('.')}." if said is not None else "."
    why = f"{_pods_of(len(pending), job.nodes).capitalize()} {_was(len(pending))} not running {when}{detail}"
    # Where kube-scheduler would not bind a rank (a node short of CPU or memory for pods Muster did not start, say),
    # the next attempt goes elsewhere if it fits: else it was placed on the same node again and again.
    planned = job_assigned_nodes(job)
    unbound = [p for p in pending if p.reason == UNSCHEDULABLE]
    avoid = sorted({planned[p.rank] for p in unbound if p.rank < len(planned)})
    _launch_failed(backend, job, now, report, why, avoid_nodes=avoid)


def _note_unbound(job: Job, unbound: list[PodStatus]) -> None:
    """A launching gang's rank kube-scheduler will not bind, for a cause Muster does not know (CPU or memory other pods
    hold, a volume claim that does not exist): said on the job while the launch timeout runs."""
    said = next((p for p in unbound if p.message), None)
    note = ""
    if said is not None and job.scheduled_at is not None:
        # The launch timeout, or its wall time if that ends first: either way a launch not up is placed again.
        until = job.scheduled_at + timedelta(seconds=min(settings.MUSTER_LAUNCH_TIMEOUT_SECONDS, job.wall_time_seconds))
        note = (
            f"kube-scheduler cannot bind rank {said.rank} ({said.message.rstrip('.')}). If it still cannot at "
            f"{until:%H:%M:%S} UTC (MUSTER_LAUNCH_TIMEOUT_SECONDS), the job is placed again, elsewhere if it fits."
        )
    job_launch_note(job, note=note)


def _gang_ended_at(job: Job, pods: list[PodStatus], now: datetime) -> datetime:
    """When a gang whose every pod has ended did end (its last container's end), so its state, run time and charge
    are taken then; `now` for a gang still running, or whose pods do not say.

    A gang that ended while no cycle looked (Muster stopped, the API server unreachable) was timed and charged to when a
    cycle saw it: a 20 s job read 1m1s, and a job that ended within its wall time was timed out. Never before what was
    charged already (the ledger only moves forward; the kubelet's clock counts whole seconds)."""
    if len(pods) < job.nodes or any(p.phase not in (PodPhase.SUCCEEDED, PodPhase.FAILED) or p.finished_at is None for p in pods):
        return now
    ended = max(cast(datetime, p.finished_at) for p in pods)
    floor = job.charged_until or job.started_at or job.scheduled_at
    return min(now, max(ended, floor) if floor else ended)


def _gang_running_at(job: Job, pods: list[PodStatus], now: datetime) -> datetime:
    """When the gang came up: its last pod's containers' start where the cluster says every pod's (between its placement
    and now), else now. Its RUNNING then begins when its code began, not when a cycle saw it (up to a cycle later, more on
    a busy machine, which read as starting time)."""
    starts = [p.started_at for p in pods]
    if not pods or any(at is None for at in starts):
        return now
    up = max(cast(datetime, at) for at in starts)
    return min(now, max(up, job.scheduled_at) if job.scheduled_at else up)


def _refused_by_node(backend: ClusterBackend, job: Job, pod: PodStatus, now: datetime, report: CycleReport) -> None:
    """A node's kubelet refused a pod kube-scheduler had bound there: no restart is spent, and the next attempt avoids
    that node where it fits elsewhere. At launch it is a failed launch that never fails the job (transient): a cluster
    whose nodes refuse every launch backs off instead of looping."""
    said = f": {pod.message.rstrip('.')}" if pod.message else ""
    why = f"Rank {pod.rank} was refused by the kubelet of {pod.node_name or 'its node'} ({pod.reason}{said})"
    avoid = [pod.node_name] if pod.node_name else []
    if job.state == JobState.SCHEDULED:
        _launch_failed(backend, job, now, report, f"{why}.", transient=True, avoid_nodes=avoid)
        return
    _requeued(backend, job_requeue(job, now=now, why=f"{why} under attempt {job.attempt}; requeued.", avoid_nodes=avoid), report)


# What keeps kube-scheduler from binding a launching gang's pod to a node of its placement, by the node's state.
_CLOSED = {NodeState.CORDONED: "is cordoned or tainted", NodeState.NOT_READY: "is not Ready", NodeState.GONE: "left the cluster"}


def _cannot_bind(job: Job, pods: list[PodStatus]) -> str:
    """Why the launching gang cannot come up until the cluster changes again, or "" if it may yet.

    Its placement read the cluster a moment before the launch; since then a node of it stopped taking pods (cordoned,
    tainted, not Ready, gone), or a pod Muster did not start was bound there (the watch of other pods narrows that
    moment; nothing closes it), and kube-scheduler cannot bind the gang's pod. Waiting out the launch timeout would
    hold the gang's other nodes idle for nothing."""
    found = _unbindable(job, pods)
    if found is None:
        return ""
    if found.closed:
        return f"{found.closed}, so attempt {job.attempt}'s pods cannot all be bound{found.said}; requeued to be placed again."
    return (
        f"Pods Muster did not start hold GPUs on {', '.join(found.nodes)} that attempt {job.attempt} was placed on{found.said}; "
        "requeued to be placed again."
    )


@dataclass(frozen=True)
class _Unbindable:
    nodes: list[str]  # the nodes of the job's unbound pods that kube-scheduler cannot bind them to
    closed: str  # how those nodes are closed ("n1 is cordoned or tainted; ..."), or "": other pods took their GPUs
    said: str  # what kube-scheduler said of one of its unbound pods, in parentheses, or ""


def _unbindable(job: Job, pods: list[PodStatus]) -> _Unbindable | None:
    """What keeps kube-scheduler from binding the job's unbound pods to their planned nodes, or None when nothing
    Muster knows of does."""
    unbound = [p for p in pods if p.phase == PodPhase.PENDING and p.reason == UNSCHEDULABLE]
    if not unbound:
        return None
    # The nodes its unbound pods are to go to: those of the placement none of its pods is bound to yet.
    planned = job_assigned_nodes(job)
    nodes = set(planned) - {p.node_name for p in pods if p.node_name}

    def said(culprits: set[str]) -> str:
        # What kube-scheduler said of the rank planned on a node at fault, not of rank 0, which may only wait for it
        # (a gang's "pod group is unschedulable, waiting for minCount pods" while a node of it was deleted).
        pod = next((p for p in unbound if p.rank < len(planned) and planned[p.rank] in culprits), unbound[0])
        return f" (rank {pod.rank}: {pod.message.rstrip('.')})" if pod.message else ""

    closed = Node.objects.filter(name__in=nodes, state__in=list(_CLOSED)).order_by("name").values_list("name", "state", "closed_by")
    if closed:
        how = "; ".join(f"{name} {f'is {by}' if by else _CLOSED[NodeState(state)]}" for name, state, by in closed)
        return _Unbindable([name for name, _, _ in closed], how, said({name for name, _, _ in closed}))
    overfilled = nodes_overfilled(nodes)
    return _Unbindable(list(overfilled), "", said(set(overfilled))) if overfilled else None


def _shrunk_for_loss(backend: ClusterBackend, job: Job, ranks: set[int], what: str, pods: list[PodStatus], now: datetime) -> bool:
    """A running elastic job that lost ranks at or above its minimum runs on without them, as torchrun's rendezvous does
    when a node goes: ranks stay 0..n-1, so every rank from the first lost one goes. Before, rank 3 of 4 deleted
    requeued all four, a restart from the last checkpoint on whatever nodes were free. False: requeue it (it is not
    running, not elastic, or it would fall below its minimum)."""
    if not ranks or job.state != JobState.RUNNING or job.min_nodes is None or min(ranks) < job.min_nodes:
        return False
    first = min(ranks)
    why = f"{what}; shrunk from {job.nodes} to {plural(first, 'node')}, and runs on."
    running = [p.rank for p in pods if p.phase == PodPhase.RUNNING and p.rank not in ranks]
    _shrink_back(backend, job, first, why, now, started=running, hold=False)
    return True


def _stalled_growth(job: Job, pods: list[PodStatus], now: datetime) -> tuple[int, str, bool] | None:
    """A running elastic job's ranks it grew by that will not run (a launch error, nowhere kube-scheduler may bind
    them) or do not after the launch timeout: the first rank to let go (every later one goes with it: ranks stay
    0..n-1), why, and whether the next cycle knows the cause (a closed node, other pods' GPUs: it will not grow there
    again); None while they may yet. Ranks still starting on nodes that take them are left to start.

    Without this such a rank stayed Pending for good, its node held and charged, while the job read as running."""
    pending = sorted((p for p in pods if p.phase == PodPhase.PENDING), key=lambda p: p.rank)
    if not pending:
        return None

    def shrunk(first: int) -> str:
        return f"shrunk back from {job.nodes} to {plural(first, 'node')}."

    stuck = next((p for p in pending if p.reason in LAUNCH_ERRORS), None)
    if stuck is not None:
        told = stuck.message.rstrip(".")
        return (
            stuck.rank,
            f"Rank {stuck.rank} it grew by on {stuck.node_name or 'its node'} could not start: {told}; {shrunk(stuck.rank)}",
            False,
        )
    held = {
        rank: (node, at)
        for rank, node, at in Allocation.objects.filter(job=job, attempt=job.attempt, released_at__isnull=True).values_list(
            "rank", "node__name", "allocated_at"
        )
    }
    found = _unbindable(job, pods)
    if found is not None:
        first = min((p.rank for p in pending if p.rank in held and held[p.rank][0] in found.nodes), default=pending[0].rank)
        if found.closed:
            return first, f"{found.closed}, so the pods it grew by cannot all be bound{found.said}; {shrunk(first)}", True
        grew_onto = f"Pods Muster did not start hold GPUs on {', '.join(found.nodes)} that it grew onto{found.said}"
        return first, f"{grew_onto}; {shrunk(first)}", True
    timeout = settings.MUSTER_LAUNCH_TIMEOUT_SECONDS
    late = next((p for p in pending if p.rank in held and now >= held[p.rank][1] + timedelta(seconds=timeout)), None)
    if late is None:
        return None
    told = f": {late.message.rstrip('.')}" if late.message else ""
    return late.rank, f"Rank {late.rank} it grew by was not running {timeout} s after it was started{told}; {shrunk(late.rank)}", False


# How soon a growth the cluster refused for a passing cause (LaunchRefused.transient) is tried again.
TRANSIENT_GROWTH_RETRY_SECONDS = 60


def _shrink_back(
    backend: ClusterBackend,
    job: Job,
    first: int,
    why: str,
    now: datetime,
    started: Sequence[int] = (),
    *,
    hold: bool = True,
    hold_seconds: float | None = None,
) -> None:
    """Undo a growth that did not come up: ranks `first` on go (the output of those that did start is kept: ranks stay
    0..n-1, so a later rank that came up goes with them), and the job goes on with the nodes it had. Its nodes are
    charged up to now, as a launch that did not come up.

    With `hold`, a cause the next cycle cannot see (a refusal, an image that does not pull, a timeout), it grows again
    no sooner than a failed launch is retried at the longest (MUSTER_LAUNCH_BACKOFF_MAX_SECONDS), and says from when:
    else it would grow onto the same node, hold and be charged for it each launch timeout. A cause the snapshot shows
    (a closed node, other pods' GPUs) needs no hold: the next cycle grows onto other idle nodes, if any."""
    names = job_assigned_nodes(job)
    ranks = list(range(first, len(names)))
    if kept := [rank for rank in started if rank >= first]:
        gang_logs_capture(backend, job.pk, job.attempt, kept)
    backend.teardown_ranks(job.pk, job.attempt, ranks)
    node_ids = dict(Node.objects.filter(name__in=names[first:]).values_list("name", "id"))
    until = now + timedelta(seconds=settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS if hold_seconds is None else hold_seconds) if hold else None
    if until is not None:
        why = f"{why} It grows again from {until:%Y-%m-%d %H:%M:%S} UTC."
    job_resize(
        job, node_names=names[:first], added=(), removed=names[first:], node_ids=node_ids, reason=why, now=now, grow_not_before=until
    )


def _ended(backend: ClusterBackend, job: Job, report: CycleReport) -> None:
    """The job ended: its output is kept and its gang goes (an unreachable cluster stops the cycle here; the next one
    tears it down, as it does when the output could not be kept yet)."""
    gang_teardown(backend, job.pk, job.attempt, range(job.nodes))
    report.ended[job.pk] = job.state


def _requeued(backend: ClusterBackend, job: Job, report: CycleReport) -> None:
    _teardown_or_leave_to_reconcile(backend, job)
    report.requeued.append(job.pk)


def _teardown_or_leave_to_reconcile(backend: ClusterBackend, job: Job) -> None:
    # The ranks the attempt had: a requeued elastic job's nodes read its most again, not what it held.
    ranks = sorted(set(Allocation.objects.filter(job=job, attempt=job.attempt).values_list("rank", flat=True)))
    try:
        gang_teardown(backend, job.pk, job.attempt, ranks or range(job.nodes))
    except ClusterUnavailable:
        # The attempt is no longer live, so reconciliation deletes what is left once the cluster answers.
        logger.warning("could not tear down job %s attempt %s now; reconciliation will", job.pk, job.attempt)


# The DisruptionTarget reason of a pod the taint manager deletes for a NoExecute taint it does not tolerate.
TAINT_EVICTION = "DeletionByTaintManager"
# The DisruptionTarget reason of a pod kube-scheduler preempts for a pod of a higher priority.
SCHEDULER_PREEMPTION = "PreemptionByScheduler"


def _drained_why(nodes: list[str], attempt: int) -> str:
    """A node closed under the gang and its pods gone: drained (cordoned, then evicted), or evicted for a NoExecute
    taint, which `kubectl uncordon` does not undo (it read "drained" for a taint)."""
    closed_by = dict(Node.objects.filter(name__in=nodes).values_list("name", "closed_by"))
    tainted = sorted(name for name in nodes if closed_by.get(name, "").startswith("tainted"))
    if tainted:
        how = "; ".join(f"{name} was {closed_by[name]}" for name in tainted)
        return f"Node {how}, and the gang's pods there were evicted under attempt {attempt}; requeued."
    return f"Node {', '.join(nodes)} was drained (cordoned, its pods evicted) under attempt {attempt}; requeued."


def _nodes_of(job: Job, ranks: set[int]) -> dict[str, str]:
    """The nodes the attempt's given ranks hold, with each node's state."""
    held = Allocation.objects.filter(job=job, attempt=job.attempt, rank__in=ranks, released_at__isnull=True)
    return dict(held.values_list("node__name", "node__state"))


def _failed_attempt(
    backend: ClusterBackend, job: Job, now: datetime, report: CycleReport, why: str, exit_code: int | None, *, failed_on: str = ""
) -> None:
    job = job_retry_or_fail(job, now=now, why=why, exit_code=exit_code, failed_on=failed_on)
    if job.state == JobState.PENDING:
        _requeued(backend, job, report)
    else:
        _ended(backend, job, report)


def _launch_failed(
    backend: ClusterBackend,
    job: Job,
    now: datetime,
    report: CycleReport,
    why: str,
    *,
    transient: bool = False,
    avoid_nodes: Sequence[str] = (),
) -> None:
    """Requeued with a backoff, or FAILED after too many launches in a row (jobs.lifecycle.job_launch_failed).

    Every failed launch passes here and is counted (muster_launch_failures_total): not only the launches the API server
    refused, but the common failures an admin alerts on, an image that does not pull or a gang not up in time."""
    report.launch_failed.append(job.pk)
    job = job_launch_failed(job, now=now, why=why, transient=transient, avoid_nodes=avoid_nodes)
    if job.state == JobState.PENDING:
        _requeued(backend, job, report)
        return
    _teardown_or_leave_to_reconcile(backend, job)
    report.ended[job.pk] = job.state


def foreign_pods_changed() -> None:
    """Say that a pod Muster did not start took or freed devices (the watch saw it): every worker's next cycle reads
    those pods again instead of a read younger than MUSTER_K8S_FOREIGN_PODS_SECONDS."""
    if not ClusterHealth.objects.filter(pk=1).update(foreign_pods_version=F("foreign_pods_version") + 1):
        ClusterHealth.objects.get_or_create(pk=1)  # no cycle has run yet: its first reads them anyway


def _record_health(health: ClusterHealth, now: datetime, error: str) -> None:
    """Record what this cycle found of the cluster; `health` is the row as the cycle read it (only cycles write
    these fields, one at a time under the cycle's lock)."""
    down_since = None if not error else (health.down_since if not health.reachable else now)
    ClusterHealth.objects.filter(pk=1).update(last_cycle_at=now, reachable=not error, error=error, down_since=down_since)


def _reconcile(
    backend: ClusterBackend, gangs: dict[tuple[int, int], list[PodStatus]], unfollowed: set[tuple[int, int]], report: CycleReport
) -> None:
    """Delete gangs the database does not account for (finished, cancelled or unknown jobs), their output kept first;
    a gang whose output could not be kept yet stays for the next cycle's try."""
    live = set(Job.objects.filter(state__in=ACTIVE_STATES).values_list("id", "attempt"))
    for job_id, attempt in sorted(unfollowed - live):
        if gang_teardown(backend, job_id, attempt, sorted({pod.rank for pod in gangs[(job_id, attempt)]})):
            report.orphans_removed.append((job_id, attempt))


def _charge_active(now: datetime) -> None:
    """Bring the ledger up to now for every job holding GPUs, so budgets are current for this cycle."""
    ledger_charge_active(until=now)


@transaction.atomic
def _admit(
    now: datetime, report: CycleReport, *, stamp_after_snapshot: bool = False
) -> tuple[Decisions, list[tuple[int, int, int]], datetime]:
    """Carry out the policy's decisions. Each job's writes stand or fall alone.

    The snapshot is read before the writes, so a job may be cancelled, deleted or edited in
    between. Such a job is skipped with a log line; every other placement and preemption of
    the cycle stands (a skipped placement only leaves its GPUs idle until the next cycle).
    Then every job left waiting gets its plan stored (`scheduler.plans`), which is all reads show. Returns the
    time its writes were stamped with, for the launches that follow.
    """
    # A job whose dependency can never be met any more would wait for ever: cancelled first, saying why.
    jobs_cancel_unmeetable()
    decisions = schedule(build_snapshot(now), policy_config())
    if stamp_after_snapshot:
        # Every job the snapshot holds was committed before it was read, so a placement stamped from now on never reads
        # as before its submit. From the cycle's start, a job submitted while the cluster was observed did.
        now = timezone.now()
    node_ids = dict(Node.objects.values_list("name", "id"))
    ids = [p.job_id for p in decisions.placements] + [p.job_id for p in decisions.preemptions] + [r.job_id for r in decisions.resizes]
    jobs = Job.objects.in_bulk([*ids, *decisions.within_quota])
    for job_id in decisions.within_quota:
        _unless_moved(job_id, jobs.get(job_id), partial(job_within_quota, now=now))
    stopped: list[tuple[int, int, int]] = []
    for preemption in decisions.preemptions:
        gang = _unless_moved(preemption.job_id, jobs.get(preemption.job_id), partial(_preempted, preemption=preemption, now=now))
        if gang is not None:
            stopped.append(gang)
            report.preempted.append(preemption.job_id)
    for resize in decisions.resizes:
        ranks = _unless_moved(resize.job_id, jobs.get(resize.job_id), partial(_resized, resize=resize, node_ids=node_ids, now=now))
        if ranks is not None:
            report.resized.append((resize.job_id, *ranks))
    placed: list[Placement] = []
    for placement in decisions.placements:
        if _unless_moved(placement.job_id, jobs.get(placement.job_id), partial(_placed, placement=placement, node_ids=node_ids, now=now)):
            placed.append(placement)
            report.placed.append(placement.job_id)
    store_plans(decisions.waiting, decisions.priorities, decisions.reservations)
    return replace(decisions, placements=tuple(placed)), stopped, now


def _unless_moved(job_id: int, job: Job | None, write: Callable[[Job], Written]) -> Written | None:
    """Do one job's writes in a savepoint; if the job moved or vanished since the snapshot, undo them, log, go on (None)."""
    if job is None:
        logger.info("job %s was deleted since this cycle's snapshot; skipped", job_id)
        return None
    try:
        with transaction.atomic():
            return write(job)
    except IllegalTransition as exc:
        logger.info("job %s changed since this cycle's snapshot (%s); skipped", job_id, exc)
        return None


def _resized(job: Job, *, resize: Resize, node_ids: dict[str, int], now: datetime) -> tuple[list[int], list[int]]:
    return job_resize(
        job, node_names=resize.node_names, added=resize.added, removed=resize.removed, node_ids=node_ids, reason=resize.reason, now=now
    )


def _apply_resizes(backend: ClusterBackend, report: CycleReport) -> None:
    """The pods of what the cycle resized: shrunk ranks go (their output kept), grown ones start. A growth the cluster
    refuses is undone at once (the job keeps running on the nodes it had). One job's trouble here (a teardown the
    cluster refuses) is logged and leaves the others' resizes and the launches after them to go on."""
    for job_id, added, removed in report.resized:
        try:
            _apply_resize(backend, job_id, added, removed)
        except Exception:
            logger.exception("resizing job %s on the cluster failed; the next cycles follow its pods", job_id)


def _apply_resize(backend: ClusterBackend, job_id: int, added: list[int], removed: list[int]) -> None:
    """One resize's pods: the shrunk ranks go, the grown ones start, or the growth is shrunk back."""
    job = Job.objects.select_related("owner", "team").get(pk=job_id)
    if removed:
        gang_logs_capture(backend, job.pk, job.attempt, removed)
        backend.teardown_ranks(job.pk, job.attempt, removed, grace_seconds=settings.MUSTER_PREEMPTION_GRACE_SECONDS)
    if not added:
        return
    names = job_assigned_nodes(job)
    try:
        backend.launch_ranks(_gang_spec(job, tuple(names)), added)
    except Exception as exc:  # refused, or the cluster went away: either way the grown ranks are not running
        logger.warning("growing job %s onto %s failed: %s", job.pk, names[min(added) :], exc)
        first = min(added)
        why = f"The cluster refused the pods it grew by ({exc}); shrunk back from {job.nodes} to {plural(first, 'node')}."
        # A refusal that passes (a rank's old pod still terminating, gone within a minute or so) is tried again
        # soon: an elastic job ran short of an idle node for the whole launch backoff, 10 minutes.
        transient = isinstance(exc, LaunchRefused) and exc.transient
        _shrink_back(backend, job, first, why, timezone.now(), hold_seconds=TRANSIENT_GROWTH_RETRY_SECONDS if transient else None)


def _preempted(job: Job, *, preemption: Preemption, now: datetime) -> tuple[int, int, int]:
    held = job.nodes  # an elastic job back in the queue reads its most again
    job = job_preempt(job, reason=preemption.reason, for_job_id=preemption.for_job_id, now=now)
    return job.pk, job.attempt, held


def _placed(job: Job, *, placement: Placement, node_ids: dict[str, int], now: datetime) -> Job:
    return job_place(
        job,
        node_names=placement.node_names,
        gpus_held=placement.gpus_held,
        over_quota=placement.over_quota,
        node_ids=node_ids,
        now=now,
        gpu_slot=placement.gpu_slot,
    )


def _gang_spec(job: Job, node_names: tuple[str, ...]) -> GangSpec:
    gpu_slice = _gpu_slice(job)
    return GangSpec(
        job_id=job.pk,
        attempt=job.attempt,
        name=job.name,
        image=job.image,
        command=tuple(job.command),
        env=dict(job.env),
        array_id=job.array_id,
        array_index=job.array_index,
        priority_class=job.priority_class,
        # The job's own push token, so its pods can send NCCL results to its telemetry (and only its).
        secret_env=pod_secret_env(job.pk),
        node_names=node_names,
        gpus_per_node=job.gpus_per_node,
        wall_time_seconds=job.wall_time_seconds,
        owner=job.owner.get_username(),
        team=job.team.name if job.team else "",
        host_network=bool(job.team and job.team.allow_host_network),
        run_as_root=bool(job.team and job.team.allow_run_as_root),
        writable_root_filesystem=bool(job.team and job.team.allow_writable_root_filesystem),
        simulate=dict(job.simulate or {}),
        volumes=_volumes(job),
        rdma_per_node=job.rdma_per_node,
        image_pull_secrets=job.team.pull_secrets if job.team else (),
        gpu_slice=gpu_slice,
        min_nodes=job.min_nodes or 0,
        max_nodes=job.max_nodes or 0,
        gpus_held=() if gpu_slice else _gpus_held(job, node_names),
    )


def _gpus_held(job: Job, node_names: tuple[str, ...]) -> tuple[int, ...]:
    """The whole GPUs the job's current attempt holds on each of `node_names` (its live allocations): all of a node's
    for a job that holds its nodes whole, which its pods then ask for. `gpus_per_node` where none is recorded."""
    held = dict(Allocation.objects.filter(job=job, attempt=job.attempt, released_at__isnull=True).values_list("node__name", "gpus"))
    return tuple(int(held.get(name, job.gpus_per_node)) for name in node_names)


def _gpu_slice(job: Job) -> GpuSlice | None:
    """The GPU slice the job's current attempt holds, as its node offers it; None for whole GPUs."""
    if not job.shares_gpu:
        return None
    allocation = Allocation.objects.select_related("node").filter(job=job, attempt=job.attempt).first()
    if allocation is None or not allocation.node.slice_resource:
        return None
    node = allocation.node
    return GpuSlice(node.slice_resource, node.sharing, allocation.gpus, node.slice_memory_gb, allocation.gpu_slot or 0)


def _volumes(job: Job) -> tuple[tuple[str, str, bool], ...]:
    """The job's volumes as its team has them now: a volume taken from the team since the submit refuses the launch."""
    if not job.volumes:
        return ()
    given = dict(job.team.volumes.values_list("claim", "read_only")) if job.team else {}
    taken = sorted({v["claim"] for v in job.volumes} - set(given))
    if taken:
        raise VolumeWithdrawn(f"Team {job.team} no longer has the volume {', '.join(taken)} this job mounts.")
    return tuple((v["claim"], v["mount_path"], bool(v.get("read_only")) or given[v["claim"]]) for v in job.volumes)


class VolumeWithdrawn(Exception):
    """An admin took a volume from the job's team after the job was submitted."""


def _launched(job: Job) -> bool:
    """Whether the cycle that placed the job got through its launches (a cycle records its stamp, ClusterHealth's
    last_cycle_at, last; this cycle's is not written yet): then a pod its gang lacks was there and went. Else the launch
    was cut short (a worker killed half-way) and is completed."""
    last = ClusterHealth.objects.filter(pk=1).values_list("last_cycle_at", flat=True).first()
    return job.scheduled_at is not None and last is not None and job.scheduled_at <= last


def _complete_launch(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport) -> None:
    """A launch cut short (a worker killed half-way) left part of a gang: create the rest.

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
    except ClusterRefuses as exc:
        # The cluster's cause (the namespace being deleted, a role cut): the job waits, spending nothing, and this
        # cycle places nothing (`_run_cycle`).
        logger.warning("completing the launch of job %s attempt %s waits: %s", job.pk, job.attempt, exc)
        report.cluster_error = str(exc)
        _not_launched(backend, job, now, report, str(exc))
    except ClusterUnavailable:
        raise
    except Exception as exc:
        # One line, as on the launch's own path (a refusal's words say why); a traceback only for the unexpected.
        if isinstance(exc, VolumeWithdrawn | LaunchRefused):
            logger.warning("completing the launch of job %s attempt %s failed: %s", job.pk, job.attempt, exc)
        else:
            logger.exception("completing the launch of job %s attempt %s failed", job.pk, job.attempt)
        transient = isinstance(exc, LaunchRefused) and exc.transient
        _launch_failed(backend, job, now, report, f"The cluster refused the launch: {exc}", transient=transient)


def _not_launched(backend: ClusterBackend, job: Job, now: datetime, report: CycleReport, why: str) -> None:
    """Back to the queue spending nothing (jobs.lifecycle.job_not_launched); what the launch made is deleted now, or by
    reconciliation once the cluster lets Muster (a role cut refuses the delete too)."""
    job = job_not_launched(job, now=now, why=why)
    try:
        _requeued(backend, job, report)
    except Exception as exc:
        logger.warning("could not tear down job %s attempt %s now (%s); reconciliation will", job.pk, job.attempt, exc)


def _launch(backend: ClusterBackend, decisions: Decisions, now: datetime, report: CycleReport) -> None:
    refused = ""
    for placement in decisions.placements:
        job = Job.objects.select_related("owner", "team").get(pk=placement.job_id)
        if job.state != JobState.SCHEDULED:
            continue  # cancelled between admission and launch
        try:
            if refused:
                # An earlier launch of this cycle found the cluster refusing: the rest would be refused the same way.
                raise ClusterRefuses(refused)
            backend.launch_gang(_gang_spec(job, placement.node_names))
        except ClusterRefuses as exc:
            # The cluster's cause, not the job's (the namespace gone or being deleted, a role cut): no failed launch,
            # no backoff; it is placed again in the first cycle the cluster takes jobs, and every page says why.
            logger.warning("launch of job %s attempt %s waits: %s", job.pk, job.attempt, exc)
            refused = report.cluster_error = str(exc)
            try:
                _not_launched(backend, job, now, report, refused)
            except IllegalTransition:
                pass
            continue
        except Exception as exc:
            if isinstance(exc, ClusterUnavailable | VolumeWithdrawn | LaunchRefused):  # expected, its message says why: no traceback
                logger.warning("launch of job %s attempt %s failed: %s", job.pk, job.attempt, exc)
            else:
                logger.exception("launch of job %s attempt %s failed", job.pk, job.attempt)
            try:
                transient = isinstance(exc, ClusterUnavailable) or (isinstance(exc, LaunchRefused) and exc.transient)
                why = f"The cluster {'failed' if isinstance(exc, ClusterUnavailable) else 'refused'} the launch: {exc}"
                _launch_failed(backend, job, now, report, why, transient=transient)
            except IllegalTransition:
                pass
            continue
        report.launched.append(job.pk)
