"""Reads of jobs and nodes, with who may see what."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Count, Exists, F, OuterRef, Prefetch, Q, QuerySet, Subquery, Sum
from django.db.models.lookups import Exact
from django.utils import timezone

from jobs.amounts import gpu_amount
from jobs.models import Allocation, Job, JobEvent, MaintenanceWindow, Node, NodeState
from jobs.states import ACTIVE_STATES, JobState
from policy.model import NodeView

if TYPE_CHECKING:
    from django_stubs_ext import WithAnnotations


def jobs_visible_to(user: User | AnonymousUser) -> QuerySet[Job]:
    """Users see their own jobs; staff see everyone's. One rule for list, detail and cancel."""
    jobs = Job.objects.select_related("owner", "team").prefetch_related(
        Prefetch("allocations", queryset=Allocation.objects.select_related("node").order_by("attempt", "rank"))
    )
    if getattr(user, "is_staff", False):
        return jobs
    if not user.is_authenticated:
        return jobs.none()
    return jobs.filter(owner=user)


def job_visible_to(job: Job, user: User | AnonymousUser) -> bool:
    """`jobs_visible_to` for one job already in hand (the queue page's rows): the same rule."""
    return owners_job_visible_to(job.owner_id, user)


def owners_job_visible_to(owner_id: int, user: User | AnonymousUser) -> bool:
    """`jobs_visible_to` for a job known by its owner alone (the cluster page's nodes read their jobs' owners)."""
    return bool(getattr(user, "is_staff", False) or (user.is_authenticated and owner_id == user.pk))


def _assigned(job: Job) -> list[Allocation]:
    """The allocations of the job's latest attempt, one per rank in rank order (uses prefetched allocations). An elastic
    job's are those of the nodes it holds (or held last): ranks it shrank away from are left out while others hold their
    numbers."""
    if not job.attempt:  # never placed
        return []
    allocations = [a for a in job.allocations.all() if a.attempt == job.attempt]
    by_rank: dict[int, Allocation] = {}
    for a in sorted(allocations, key=lambda a: (a.rank, a.released_at is None, a.released_at or a.allocated_at)):
        by_rank[a.rank] = a  # the live one (or the last released) of each rank number
    ranks = sorted(by_rank)[: job.nodes] if job.elastic else sorted(by_rank)
    return [by_rank[rank] for rank in ranks]


def node_settles_until(node: Node, now: datetime | None = None) -> datetime | None:
    """When a node back from NotReady takes new work again (MUSTER_NODE_SETTLE_SECONDS after it came back), while that
    lies ahead; None otherwise. The cycle's snapshot holds it out by the same rule; the node list says so, or it read
    READY with every GPU free while a waiting job was told none was."""
    if node.state != NodeState.READY or node.ready_since is None:
        return None
    until = node.ready_since + timedelta(seconds=settings.MUSTER_NODE_SETTLE_SECONDS)
    return until if until > (now or timezone.now()) else None


def job_assigned_nodes(job: Job) -> list[str]:
    """Node names of the job's latest attempt, by rank."""
    return [a.node.name for a in _assigned(job)]


def job_assigned_racks(job: Job) -> list[tuple[str, int]]:
    """The racks the job's latest attempt spans, in rank order, each with how many of its nodes are there: what a
    gang's network between ranks depends on."""
    return list(Counter(a.node.rack or "no rack" for a in _assigned(job)).items())


def _latest_allocations(job: Job) -> list[Allocation]:
    """Every allocation of the job's latest attempt, released ones too (uses prefetched allocations)."""
    return [a for a in job.allocations.all() if a.attempt == job.attempt] if job.attempt else []


def _holds_nodes_shown(job: Job) -> bool:
    """Whether the job's latest attempt's nodes are its own to show: not while it waits in the queue again, nor once it
    ended from there (cancelled while requeued: its last attempt let them go before, another job may hold them now)."""
    if job.state == JobState.PENDING:
        return False
    if job.is_finished and job.finished_at is not None:
        released = [a.released_at for a in _latest_allocations(job)]
        # A job that ends holding nodes lets them go in its last move (job_transition): at its finished_at.
        return not released or any(at is None or at >= job.finished_at for at in released)
    return True


def job_nodes_shown(job: Job) -> list[str]:
    """The nodes the job page and the API show as the job's: its latest attempt's (`job_assigned_nodes`), but none while
    it is PENDING, nor once it ended without holding any (cancelled back in the queue). A job back in the queue
    (requeued, preempted) holds nothing; its last attempt's nodes are in its attempts, not its own."""
    return job_assigned_nodes(job) if _holds_nodes_shown(job) else []


def job_gpus_held(job: Job) -> float | None:
    """The GPUs the job's current attempt holds now, as usage and quotas count them: its whole GPUs, or its slice's share
    of a GPU (a MIG 1g slice holds 1/7 of a GPU for an ask of 0.1). None while it holds none. From the allocations
    `jobs_visible_to` prefetches: no query of its own (nor any for a job not placed: a queue page of them)."""
    if job.state not in ACTIVE_STATES:
        return None
    held = [a.gpus for a in job.allocations.all() if a.released_at is None and a.attempt == job.attempt]
    return gpu_amount(sum(held)) if held else None


def job_racks_shown(job: Job) -> list[tuple[str, int]]:
    """The racks of `job_nodes_shown` (`job_assigned_racks`): none when it shows no nodes."""
    return job_assigned_racks(job) if _holds_nodes_shown(job) else []


def job_never_ran(job: Job) -> bool:
    """An ended job whose code never ran: it ended while queued, or after launches none of which came up (cancelled
    back in the queue or while launching again, or FAILED after MUSTER_LAUNCH_MAX_FAILURES). `launch_failures` still
    counts those launches: a launch that came up (its pods running, or one of them exiting) clears it."""
    return job.is_finished and (not job.attempt or (job.started_at is None and job.launch_failures > 0))


def job_run_seconds(job: Job, *, now: datetime | None = None) -> float | None:
    """How long the job's latest attempt held its nodes: from its placement (what the wall time counts from) until it let
    them go, so far while it holds them. The ledger charges those same allocations. None before it is first placed,
    while it waits in the queue again, and for an ended job that never ran (`job_never_ran`): the moments its failed
    launches held GPUs read "Run time 0 s" on its page, as if it had run. A job cancelled back in the queue ran only
    until its requeue, not until the cancel."""
    if not job.attempt or job.state == JobState.PENDING or job_never_ran(job):
        return None
    allocations = _latest_allocations(job)
    placed = job.scheduled_at or min((a.allocated_at for a in allocations), default=None) or job.started_at
    if placed is None:
        return None
    released = [a.released_at for a in allocations]
    if allocations and all(at is not None for at in released):
        end = max(at for at in released if at is not None)
    elif job.is_finished and job.finished_at is not None:
        end = job.finished_at
    else:
        end = now or timezone.now()
    return max(0.0, (end - placed).total_seconds())


class NodeUsage(TypedDict):
    gpus_held: float | None  # None while the node holds no live allocation
    slices_held: int
    in_maintenance: bool  # in a maintenance window on now (jobs/maintenance.py): it takes no new work


def nodes_with_usage() -> QuerySet[WithAnnotations[Node, NodeUsage]]:
    """Known nodes, each annotated with `gpus_held` by live allocations (a slice counts its share), `slices_held`, and
    `in_maintenance` (in a window on now)."""
    live = Q(allocations__released_at__isnull=True)
    now = timezone.now()
    on = MaintenanceWindow.objects.filter(nodes=OuterRef("pk"), cancelled_at__isnull=True, starts_at__lte=now, ends_at__gt=now)
    return (
        Node.objects.exclude(state=NodeState.GONE)
        .annotate(
            gpus_held=Sum("allocations__gpus", filter=live),
            slices_held=Count("allocations", filter=live & Q(allocations__gpu_slot__isnull=False)),
            in_maintenance=Exists(on),
        )
        .order_by("name")
    )


def node_takes_work(node: Node) -> bool:
    """Ready, not held by an admin, not in maintenance, not settling after being unready: the cycle gives new work only
    to such a node, so only its idle GPUs are free."""
    in_maintenance = getattr(node, "in_maintenance", False)  # a node not from nodes_with_usage: not known here
    return node.state == NodeState.READY and not node.held and not in_maintenance and node_settles_until(node) is None


def node_gpus_idle(node: Node) -> int | float:
    """GPUs neither Muster's jobs nor other pods hold (`node` from `nodes_with_usage`), whether or not the node takes
    new work; on a shared node, less the shares its slices hold (1.75 of 2), other pods' slices included (30
    quarter-GPU slices held by other pods leave 0.5 of 8)."""
    foreign = node.gpus_foreign + node.slices_foreign * node.slice_gpus
    return gpu_amount(max(0.0, node.gpus_total - float(getattr(node, "gpus_held", 0) or 0) - foreign))


def node_gpus_free(node: Node) -> int | float:
    """The idle GPUs new work may take: none on a node that takes no new work (cordoned, tainted, NotReady, held,
    settling), whose idle GPUs read "8/8" free beside "0 of 64 GPUs free". The one figure the nodes API, the cluster
    page and `muster nodes` give."""
    return node_gpus_idle(node) if node_takes_work(node) else 0


def node_slices_free(node: Node) -> int:
    """Slices no job and no other pod holds on a node that takes new work (`node` from `nodes_with_usage`); 0 on a
    node whose GPUs are not shared or that takes no new work."""
    if not node_takes_work(node):
        return 0
    return max(0, node.slices_per_gpu * node.gpus_total - (getattr(node, "slices_held", 0) or 0) - node.slices_foreign)


def nodes_overfilled(names: Iterable[str]) -> list[str]:
    """Of these nodes, those where pods Muster did not start hold GPUs (slices, on a shared node), and together with
    Muster's live allocations more than the node has: a pod placed there cannot be bound until one of them ends."""
    overfilled = []
    for n in nodes_with_usage().filter(name__in=list(names)):
        if n.slices_per_gpu:
            over = n.slices_foreign > 0 and (n.slices_held or 0) + n.slices_foreign > n.gpus_total * n.slices_per_gpu
        else:
            over = n.gpus_foreign > 0 and (n.gpus_held or 0) + n.gpus_foreign > n.gpus_total
        if over:
            overfilled.append(n.name)
    return overfilled


# The events that changed the job's state: not a hold or release, which stays PENDING (JobEvent).
STATE_CHANGES = ~Q(from_state=F("to_state"))


def waiting_jobs() -> QuerySet[Job]:
    """The jobs waiting to be started: pending and not held (a held job waits for its release, by its owner's or an
    admin's choice: not a wait the dashboard's starvation, /metrics' oldest wait or an alert should count)."""
    return Job.objects.filter(state=JobState.PENDING, hold="")


def with_queued_at(jobs: QuerySet[Job]) -> QuerySet[Job]:
    """`jobs` with `queued_at`: when each last entered the queue (its submit, a requeue after a preemption or a failed
    attempt, a release) or was held there; what a pending job's wait counts from, as `start_waits` counts it. A job
    preempted after 10 minutes read "waiting 10 minutes" the moment it was back in the queue."""
    entered = JobEvent.objects.filter(job=OuterRef("pk"), to_state=JobState.PENDING).order_by("-id").values("at")[:1]
    return jobs.annotate(queued_at=Subquery(entered))


def waiting_after_preemption() -> Q:
    """The jobs back in the queue after a preemption, as a filter on jobs: what `?state=PREEMPTED` means.

    PREEMPTED is a state a job passes through: `job_preempt` moves it on to PENDING in the same transaction, so no
    job is ever found in it. A PENDING job's latest event is its entry into the queue; these entered it from
    PREEMPTED. The pending reason says so only until the next cycle writes its own (NO_ROOM, ...), so it is not read.
    """
    entered_from = JobEvent.objects.filter(STATE_CHANGES, job=OuterRef("pk")).order_by("-id").values("from_state")[:1]
    return Q(state=JobState.PENDING) & Q(Exact(Subquery(entered_from), JobState.PREEMPTED))


class QueuedAt(TypedDict):
    queued_at: datetime | None  # None for a start with no entry into the queue before it


def starts_with_queued_at(*, after: datetime | None = None, until: datetime | None = None) -> QuerySet[WithAnnotations[JobEvent, QueuedAt]]:
    """Every start of every job (all pods running) in (after, until], with `queued_at`: when the job last entered the
    queue before it (None for a start with no entry before it). What `start_waits` reads, the dashboard's latency
    chart ranks in the database and /metrics' latency totals add one by one as each start is recorded
    (`telemetry.latency`; `wait_histogram` counts them all from here to check them).

    A wait runs from when the job last entered the queue, its submit or its requeue after a
    failed attempt or a preemption, to that start. Counting restarts from the submit would add
    the job's earlier runs to its wait, and one long job restarted once would look like a
    starved queue.
    """
    # Events are numbered in the order they happened: the latest entry into the queue before this start.
    # A release counts as an entry: the time a job was held is its owner's choice, not a wait for the scheduler.
    queued = JobEvent.objects.filter(job=OuterRef("job"), to_state=JobState.PENDING, id__lt=OuterRef("id")).order_by("-id")
    # A start moves the job into RUNNING: a note on a running job (from and to RUNNING: within its quota now) is none.
    # Counted as one, it added a start whose wait ran from the job's queue entry to the note, its run time included.
    starts = JobEvent.objects.filter(to_state=JobState.RUNNING).exclude(from_state=JobState.RUNNING)
    if after is not None:
        starts = starts.filter(at__gt=after)
    if until is not None:
        starts = starts.filter(at__lte=until)
    return starts.annotate(queued_at=Subquery(queued.values("at")[:1]))


def start_waits(*, after: datetime | None = None, until: datetime | None = None) -> Iterator[tuple[datetime, float]]:
    """(start, seconds waited) for every start of every job (all pods running) in (after, until]: from when the job
    last entered the queue (`starts_with_queued_at`)."""
    rows = starts_with_queued_at(after=after, until=until).values_list("at", "queued_at")
    for started, queued_at in rows.iterator():
        if queued_at is not None:
            yield started, max(0.0, (started - queued_at).total_seconds())


@dataclass(frozen=True)
class SharedPool:
    """Nodes whose GPUs are shared the same way: the mode, slices per GPU, a slice's share and guaranteed memory."""

    sharing: str
    slices_per_gpu: int
    slice_gpus: float
    slice_memory_gb: float
    nodes: int

    def view(self) -> NodeView:
        """One of its nodes as the policy sees it, to ask whether its slices meet a job's asks (policy.sharing)."""
        return NodeView("", 1, 0, sharing=self.sharing, slices_per_gpu=self.slices_per_gpu, slice_gpus=self.slice_gpus,
                        slice_memory_gb=self.slice_memory_gb)  # fmt: skip

    def __str__(self) -> str:
        memory = f"{self.slice_memory_gb:g} GB each" if self.slice_memory_gb else "no memory guarantee"
        return f"{self.sharing} slices of {self.slice_gpus:.3g} GPU ({memory}) on {self.nodes} node{'s' if self.nodes != 1 else ''}"


def shared_pools() -> list[SharedPool]:
    """The ways this cluster's known nodes share their GPUs, with how many nodes each (empty: none shares)."""
    rows = (
        Node.objects.exclude(state=NodeState.GONE)
        .exclude(sharing="")
        .values_list("sharing", "slices_per_gpu", "slice_gpus", "slice_memory_gb")
        .annotate(n=Count("id"))
        .order_by("sharing", "slice_gpus", "slice_memory_gb", "slices_per_gpu")
    )
    return [SharedPool(*row) for row in rows]
