"""Reads the database into the policy's plain data: nodes, running and pending jobs, accounts, knobs."""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime, timedelta
from typing import Any, cast

from django.conf import settings
from django.db.models import Case, Count, F, Max, Q, QuerySet, Value, When, Window
from django.db.models.functions import RowNumber
from django.utils import timezone

from jobs.dependencies import waits as dependency_waits
from jobs.holds import hold_reason
from jobs.maintenance import maintenance_not_over
from jobs.models import Allocation, Job, JobEvent, Node, NodeState
from jobs.selectors import node_settles_until, nodes_with_usage
from jobs.states import ACTIVE_STATES, JobState
from policy.model import MaintenanceWindow, NodeView, PendingJob, PolicyConfig, Reservation, RunningJob, Snapshot, when
from policy.runtime import ONE_NODE, RECENT_JOBS, SEVERAL_NODES, SLICE, expected_runtime, runtime_kind
from quotas.selectors import accounts_snapshot


def class_rank(priority_class: str) -> int:
    classes = settings.MUSTER_PRIORITY_CLASSES
    return classes.index(priority_class) if priority_class in classes else len(classes)


def policy_config() -> PolicyConfig:
    return PolicyConfig(
        weight_fair_share=settings.MUSTER_PRIORITY_WEIGHT_FAIR_SHARE,
        weight_age=settings.MUSTER_PRIORITY_WEIGHT_AGE,
        weight_class=settings.MUSTER_PRIORITY_WEIGHT_CLASS,
        weight_size=settings.MUSTER_PRIORITY_WEIGHT_SIZE,
        weight_short=settings.MUSTER_PRIORITY_WEIGHT_SHORT,
        short_max_seconds=settings.MUSTER_PRIORITY_SHORT_MAX_SECONDS,
        age_max_seconds=settings.MUSTER_PRIORITY_AGE_MAX_SECONDS,
        half_life_seconds=settings.MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS,
        class_count=len(settings.MUSTER_PRIORITY_CLASSES),
        starvation_seconds=settings.MUSTER_STARVATION_SECONDS,
        starvation_wall_factor=settings.MUSTER_STARVATION_WALL_FACTOR,
        max_reservations=settings.MUSTER_MAX_RESERVATIONS,
        plan_jobs=settings.MUSTER_PLAN_JOBS,
        preemption_min_runtime_seconds=settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS,
        preemption=settings.MUSTER_PREEMPTION,
        max_preemptions=settings.MUSTER_MAX_PREEMPTIONS,
        max_fair_share_preemptions=settings.MUSTER_MAX_FAIR_SHARE_PREEMPTIONS,
        reborrow_hysteresis_seconds=settings.MUSTER_REBORROW_HYSTERESIS_SECONDS,
        preemption_max_lost_ratio=settings.MUSTER_PREEMPTION_MAX_LOST_RATIO,
        preemption_defer_seconds=settings.MUSTER_PREEMPTION_DEFER_SECONDS,
        fair_share_preemption=settings.MUSTER_FAIR_SHARE_PREEMPTION,
        fair_share_preemption_gap=settings.MUSTER_FAIR_SHARE_PREEMPTION_GAP,
        max_jobs=settings.MUSTER_CYCLE_MAX_JOBS,
    )


def node_views(now: datetime) -> tuple[NodeView, ...]:
    """Every known node with the GPUs not held by a live allocation (on a shared node: its slices held per GPU); a node
    back from NotReady takes no new work until it has been Ready for MUSTER_NODE_SETTLE_SECONDS."""
    slices: dict[str, Counter[int]] = defaultdict(Counter)
    live_slices = Allocation.objects.filter(released_at__isnull=True, gpu_slot__isnull=False, node__slices_per_gpu__gt=0)
    for node, gpu in live_slices.values_list("node__name", "gpu_slot"):
        slices[node][gpu or 0] += 1
    nodes = [(n, node_settles_until(n, now)) for n in nodes_with_usage()]
    return tuple(
        NodeView(
            name=n.name,
            gpus_total=n.gpus_total,
            gpus_free=max(0, n.gpus_total - int(n.gpus_held or 0) - n.gpus_foreign),
            rack=n.rack,
            block=n.block,
            rdma=n.rdma_devices,
            schedulable=not n.held and n.state == NodeState.READY and settles is None,
            sharing=n.sharing,
            slices_per_gpu=n.slices_per_gpu,
            slice_gpus=n.slice_gpus,
            slice_memory_gb=n.slice_memory_gb,
            slices_used=slices_used(slices.get(n.name, Counter()), n.gpus_total, n.slices_per_gpu, n.slices_foreign),
            gpus_foreign=n.gpus_foreign,
            closed_why=_closed_why(n, settles),
            opens_at=settles.timestamp() if settles is not None and not n.held and n.state == NodeState.READY else None,
        )
        for n, settles in nodes
    )


def _closed_why(node: Node, settles: datetime | None) -> str:
    """Why a node takes no new work, as a waiting job's reason names it beside the node (empty if it takes work)."""
    if node.held:
        return f"held: {node.held_reason}" if node.held_reason else "held by an admin"
    if node.state == NodeState.CORDONED:
        return node.closed_by or "cordoned"
    if node.state == NodeState.NOT_READY:
        return "not ready"
    return f"settling until {when(settles.timestamp())}" if settles is not None else ""


def slices_used(held: Counter[int], gpus: int, slices_per_gpu: int, foreign: int) -> tuple[int, ...]:
    """Slices in use on each GPU of a shared node: Muster's where its allocations say, and those other pods hold on
    the fullest GPUs first. Which GPU the device plugin gave them is not said; kube-scheduler counts only slices left."""
    used = [held[gpu] for gpu in range(gpus)]
    for gpu in sorted(range(gpus), key=lambda g: -used[g]):
        take = min(foreign, max(0, slices_per_gpu - used[gpu]))
        used[gpu] += take
        foreign -= take
    return tuple(used) if any(used) else ()


def preemption_history() -> dict[int, tuple[int, datetime]]:
    """Per pending or active job: how often it was preempted, and when last (one aggregate over its events)."""
    rows = (
        JobEvent.objects.filter(to_state=JobState.PREEMPTED, job__state__in=[JobState.PENDING, *ACTIVE_STATES])
        .order_by()
        .values_list("job_id")
        .annotate(n=Count("id"), last=Max("at"))
    )
    return {job_id: (n, last) for job_id, n, last in rows}


# (owner, policy.runtime.runtime_kind) -> their latest run times, newest first.
Runtimes = dict[tuple[str, str], list[float]]


def pending_jobs(history: dict[int, tuple[int, datetime]] | None = None, runtimes: Runtimes | None = None) -> tuple[PendingJob, ...]:
    rows = Job.objects.filter(state=JobState.PENDING).values_list(
        "id",
        "nodes",
        "gpus_per_node",
        "priority_class",
        "submitted_at",
        "owner__username",
        "team__name",
        "preemptible",
        "wall_time_seconds",
        "launch_failures",
        "launch_not_before",
        "avoid_nodes",
        "rdma_per_node",
        "gpu_fraction",
        "gpu_memory_gb",
        "gpu_isolation",
        "min_nodes",
        "max_nodes",
        "hold",
        "held_by__username",
        "held_at",
        "array_id",
    )
    if runtimes is None:
        runtimes = recent_runtimes({row[5] for row in rows})
    waiting_on = dependency_waits()
    jobs = []
    for row in rows:
        pk, nodes, gpus, pc, submitted, user, team, preemptible, wall, failures, not_before, avoid, rdma = row[:13]
        fraction, memory, isolation, low, high, hold, held_by, held_at, array_id = row[13:]
        jobs.append(
            pending_job(
                job_id=pk,
                nodes=nodes,
                gpus_per_node=gpus,
                priority_class=pc,
                submitted_at=submitted,
                user=user,
                team=team,
                preemptible=preemptible,
                wall_time_seconds=wall,
                launch_failures=failures,
                not_before=not_before.timestamp() if not_before else None,
                preempted_at=history[pk][1].timestamp() if history and pk in history else None,
                avoid_nodes=tuple(avoid or ()),
                rdma_per_node=rdma,
                gpu_fraction=fraction,
                gpu_memory_gb=memory,
                gpu_isolation=isolation,
                min_nodes=low,
                max_nodes=high,
                expected_seconds=expected_runtime(runtimes.get((user, _kind(nodes, fraction, memory, isolation, low)), ()), wall),
                held=hold_reason(job_id=pk, hold=hold, held_by=held_by, held_at=held_at),
                waits_for=waiting_on[pk][0] if pk in waiting_on else "",
                after=waiting_on[pk][1] if pk in waiting_on else (),
                array_id=array_id,
            )
        )
    return tuple(jobs)


def pending_job(
    *,
    job_id: int,
    nodes: int,
    gpus_per_node: int,
    priority_class: str,
    submitted_at: datetime,
    user: str,
    team: str | None,
    wall_time_seconds: float,
    min_nodes: int | None = None,
    max_nodes: int | None = None,
    gpu_fraction: float | None = None,
    gpu_memory_gb: float | None = None,
    **rest: Any,
) -> PendingJob:
    """A waiting job as the policy sees it, from a job's fields (a stored row's, or a submit's not yet written)."""
    return PendingJob(
        id=job_id,
        # An elastic job waits for its most (its `nodes` is the size it last held).
        nodes=max_nodes or nodes,
        gpus_per_node=gpus_per_node,
        class_rank=class_rank(priority_class),
        submitted_at=submitted_at.timestamp(),
        user=user,
        team=team,
        wall_seconds=float(wall_time_seconds),
        gpu_fraction=gpu_fraction or 0.0,
        gpu_memory_gb=gpu_memory_gb or 0.0,
        min_nodes=min_nodes or 0,
        **rest,
    )


def running_jobs(history: dict[int, tuple[int, datetime]] | None = None, runtimes: Runtimes | None = None) -> tuple[RunningJob, ...]:
    """Jobs holding GPUs, with where (their live allocations) and until when (start + wall time)."""
    held: dict[int, list[tuple[int, str, float]]] = defaultdict(list)
    for job_id, rank, node, gpus in Allocation.objects.filter(released_at__isnull=True).values_list("job_id", "rank", "node__name", "gpus"):
        held[job_id].append((rank, node, gpus))
    rows = Job.objects.filter(state__in=ACTIVE_STATES).values_list(
        "id",
        "priority_class",
        "scheduled_at",
        "started_at",
        "wall_time_seconds",
        "owner__username",
        "team__name",
        "preemptible",
        "over_quota",
        "min_nodes",
        "max_nodes",
        "gpus_per_node",
        "rdma_per_node",
        "checkpointed_at",
        "launch_not_before",
        "nodes",
        "gpu_fraction",
        "gpu_memory_gb",
        "gpu_isolation",
    )
    if runtimes is None:
        runtimes = recent_runtimes({row[5] for row in rows})
    result = []
    for row in rows:
        pk, pc, scheduled, started, wall, user, team, preemptible, over_quota, low, high, gpus, rdma, checkpointed, hold = row[:15]
        predicted = expected_runtime(runtimes.get((user, _kind(*row[15:], low)), ()), wall)
        ranks = sorted(held.get(pk, []))
        # An active job has been placed, so scheduled_at (and so each of these) is set.
        start = cast(datetime, started or scheduled).timestamp()
        # Wall time counts from placement (the GPUs are held from then), so start-up time cannot push an end later.
        placed = cast(datetime, scheduled or started).timestamp()
        result.append(
            RunningJob(
                id=pk,
                node_names=tuple(n for _, n, _ in ranks),
                gpus_held=tuple(g for _, _, g in ranks),
                class_rank=class_rank(pc),
                started_at=start,
                ends_at=placed + wall,
                expected_end=start + predicted if predicted is not None else None,
                user=user,
                team=team,
                preemptible=preemptible,
                over_quota=over_quota,
                preemptions=history[pk][0] if history and pk in history else 0,
                min_nodes=low or 0,
                max_nodes=high or 0,
                gpus_per_node=gpus,
                rdma_per_node=rdma,
                checkpointed_at=checkpointed.timestamp() if checkpointed else None,
                # A launch's backoff is cleared once it runs; on a running job it holds back its growth.
                grow_not_before=hold.timestamp() if hold and started else None,
            )
        )
    return tuple(result)


RECENT_RUNTIME_DAYS = 30


def _kind(nodes: int, fraction: float | None, memory: float | None, isolation: bool, min_nodes: int | None) -> str:
    return runtime_kind(nodes=nodes, shares_gpu=bool(fraction or memory or isolation), elastic=min_nodes is not None)


# runtime_kind in SQL, to keep each owner's latest run times of each kind in one read.
_KIND = Case(
    When(Q(gpu_fraction__isnull=False) | Q(gpu_memory_gb__isnull=False) | Q(gpu_isolation=True), then=Value(SLICE)),
    When(Q(nodes__gt=1) | Q(min_nodes__isnull=False), then=Value(SEVERAL_NODES)),
    default=Value(ONE_NODE),
)


def recent_runtimes(users: set[str] | QuerySet[Job, str]) -> Runtimes:
    """Each user's latest run times in seconds, newest first (policy/runtime.py averages them): jobs that ran and ended
    within RECENT_RUNTIME_DAYS (older ones say little of what the user runs now, and the bound keeps the read small).
    `users` may be a query of names: it is then a subquery of this one read (no users: no read at all)."""
    latest = Window(RowNumber(), partition_by=[F("owner_id"), _KIND], order_by=F("finished_at").desc())
    rows = (
        Job.objects.filter(
            owner__username__in=users,
            state__in=(JobState.SUCCEEDED, JobState.FAILED, JobState.TIMED_OUT),
            started_at__isnull=False,
            finished_at__gte=timezone.now() - timedelta(days=RECENT_RUNTIME_DAYS),
        )
        .annotate(latest=latest, kind=_KIND)
        .filter(latest__lte=RECENT_JOBS)
        .order_by("owner_id", "kind", "latest")
        .values_list("owner__username", "kind", "started_at", "finished_at")
    )
    runtimes: Runtimes = defaultdict(list)
    for user, kind, started, finished in rows:
        if started and finished:  # never None here (filtered); the row's type cannot say so
            runtimes[(user, kind)].append((finished - started).total_seconds())
    return runtimes


def held_reservations() -> tuple[Reservation, ...]:
    """The reservations the last cycle stored on pending jobs: promises this cycle keeps (they live only in the database)."""
    rows = (
        Job.objects.filter(state=JobState.PENDING, reserved_start__isnull=False)
        .order_by("reserved_start", "id")
        .values_list("id", "reserved_nodes", "reserved_start")
    )
    return tuple(
        Reservation(job_id=pk, node_names=tuple(nodes or ()), start=cast(datetime, start).timestamp()) for pk, nodes, start in rows
    )


def maintenance_windows(now: datetime) -> tuple[MaintenanceWindow, ...]:
    """The maintenance windows not cancelled and not over yet, as the policy reads them (policy/maintenance.py)."""
    return tuple(
        MaintenanceWindow(
            id=w.pk,
            node_names=tuple(n.name for n in w.nodes.all()),
            start=w.starts_at.timestamp(),
            end=w.ends_at.timestamp(),
            reason=w.reason,
        )
        for w in maintenance_not_over(now)
    )


def build_snapshot(now: datetime, *, extra: tuple[PendingJob, ...] = ()) -> Snapshot:
    """The world as the policy sees it; `extra`: jobs not written, waiting beside the queue (a what-if estimate's)."""
    history = preemption_history()
    # One read of recent run times for the owners of every waiting and running job (pending_jobs and running_jobs
    # would each make their own).
    owners = Job.objects.filter(state__in=(JobState.PENDING, *ACTIVE_STATES)).values_list("owner__username", flat=True)
    runtimes = recent_runtimes(owners)
    pending = (*pending_jobs(history, runtimes), *extra)
    running = running_jobs(history, runtimes)
    jobs: tuple[PendingJob | RunningJob, ...] = (*pending, *running)
    users = {j.user for j in jobs}
    teams = {j.team for j in jobs if j.team}
    return Snapshot(
        nodes=node_views(now),
        pending=pending,
        running=running,
        accounts=accounts_snapshot(now=now, users=users, teams=teams),
        now=now.timestamp(),
        reservations=held_reservations(),
        maintenance=maintenance_windows(now),
    )
