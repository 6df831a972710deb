"""The dashboard's numbers: what the queue and the GPUs did over the last day or week.

Pure reads (a fixed number of queries) returning plain numbers; `telemetry.dashboard.figures`
draws them and `telemetry.dashboard.page` puts the page together. History comes from the
database, not from Prometheus, so the page works with no monitoring stack, and the database
sums it per chart bucket (`telemetry.dashboard.buckets`): a row per bucket, team or reason,
never one per job, event or allocation in the window (the node grid reads a row per GPU held):
- queue depth over time: the JobEvent history's moves backwards from the current counts
  (pending now minus every move since the window began gives pending at its start), and each
  bucket's highest count;
- GPUs allocated over time and GPU-hours per team: Allocation rows (allocated_at, released_at);
- scheduling latency: every start in the window, from when the job (re-)entered the queue
  (`jobs.selectors.starts_with_queued_at`); percentiles by nearest rank, so every figure is a
  wait that really happened;
- GPUs used: the telemetry summaries written when runs end (mean GPU utilisation x GPU-seconds).
  Running jobs have none yet, so "used now" is unknown rather than guessed.

The time series span the window, or less on a young install: from the first JobEvent ever
written (`Span`), in steps that keep about as many points as the whole window would, so a
site an hour old sees its hour across the whole chart, not squeezed into its last pixel.

Per-team numbers follow the usage report's rule: staff see every team; others see their own
teams by name and the rest summed as "other teams".
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db.models import BigIntegerField, Count, F, FloatField, Min, Q, Sum, Value
from django.db.models.functions import Coalesce, Greatest, Least
from django.db.models.lookups import Exact

from jobs.amounts import gpu_amount
from jobs.maintenance import maintenance_by_node
from jobs.models import Allocation, Job, JobEvent, Node, NodeState
from jobs.selectors import node_gpus_free, node_gpus_idle, node_settles_until, node_slices_free, nodes_with_usage, waiting_jobs
from jobs.states import ACTIVE_STATES, JobState
from quotas.selectors import AboveQuota, accounts_above_quota, teams_visible_to
from scheduler.queue import is_starving, starving_count
from telemetry.dashboard.buckets import (
    US,
    Buckets,
    Microseconds,
    highest_counts,
    instant,
    mean_gpus_allocated,
    state_moves,
    wait_percentiles,
)
from telemetry.models import JobTelemetrySummary

NO_TEAM = "no team"
OTHER_TEAMS = "other teams"
PERCENTILES = (50, 90, 99)
# How many of the longest-waiting jobs the starvation chart lists.
STARVATION_ROWS = 15


@dataclass(frozen=True)
class Window:
    key: str
    label: str
    seconds: int
    # Bucket of the time series (queue depth, GPUs allocated) and of the latency percentiles over time.
    step: int
    latency_step: int


WINDOWS = {
    "24h": Window("24h", "last 24 hours", 24 * 3600, 300, 3600),
    "7d": Window("7d", "last 7 days", 7 * 24 * 3600, 1800, 6 * 3600),
}
DEFAULT_WINDOW = "24h"


def window_for(key: str | None) -> Window:
    return WINDOWS.get(key or "", WINDOWS[DEFAULT_WINDOW])


# Bucket lengths a shorter span may use (seconds), up to the window's own.
NICE_STEPS = (10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600)


@dataclass(frozen=True)
class Span:
    """What the time series cover: the window, or from the first data on if that came later; and their buckets."""

    start: datetime
    end: datetime
    # Bucket of the time series and of the latency percentiles: the window's, or finer for a shorter span so
    # that it gets about as many buckets as the window.
    step: int
    latency_step: int

    @property
    def range_ms(self) -> list[int]:
        """[start, end] in milliseconds since the epoch: what the time axes show."""
        return [int(self.start.timestamp() * 1000), int(self.end.timestamp() * 1000)]


def _nice_step(seconds: float, longest: int) -> int:
    """The shortest of NICE_STEPS at least `seconds` long, and never above `longest`."""
    return min(longest, next((s for s in NICE_STEPS if s >= seconds), longest))


def first_data() -> datetime | None:
    """When the first job event was written (every submit writes one): where the site's history begins."""
    return JobEvent.objects.aggregate(first=Min("at"))["first"]


def span_for(window: Window, now: datetime, first: datetime | None = None) -> Span:
    """The span of the time series: the window, starting no earlier than `first` (the site's first data)."""
    start = now - timedelta(seconds=window.seconds)
    if first is not None and start < first < now:
        start = first
    seconds = (now - start).total_seconds()
    step = _nice_step(seconds / (window.seconds / window.step), window.step)
    latency_step = _nice_step(seconds / (window.seconds / window.latency_step), window.latency_step)
    return Span(start, now, step, latency_step)


# --- arithmetic ------------------------------------------------------------------------------------


def _x(start: datetime, count: int, step: int) -> list[int]:
    """Bucket starts in milliseconds since the epoch (what a Plotly date axis reads)."""
    first = int(start.timestamp() * 1000)
    return [first + i * step * 1000 for i in range(count)]


# --- team visibility -------------------------------------------------------------------------------


def _team_namer(viewer: User | AnonymousUser) -> Any:
    """Maps a job's team name to what this viewer may see: the name, or OTHER_TEAMS."""
    if getattr(viewer, "is_staff", False):
        return lambda name: name or NO_TEAM
    # The usage report's rule (quotas.selectors.teams_visible_to): a viewer's own teams by name.
    mine = set(teams_visible_to(viewer).values_list("name", flat=True)) if viewer.is_authenticated else set()

    def name_for(name: str | None) -> str:
        if not name:
            return NO_TEAM
        return name if name in mine else OTHER_TEAMS

    return name_for


# --- the sections ----------------------------------------------------------------------------------


def queue_depth(window: Window, now: datetime, span: Span | None = None) -> dict[str, Any]:
    """Pending and GPU-holding jobs over the window (highest count per bucket), from the JobEvent history.

    The counts at the window's start are the current counts less every move since: the database sums those, and the
    highest of each count per bucket (`buckets.highest_counts`), so the rows read are the buckets', not the events'.
    """
    span = span or span_for(window, now, first_data())
    current = dict.fromkeys(("pending", "active"), 0)
    for state, in_state in _state_counts():
        if state == JobState.PENDING:
            current["pending"] += in_state
        elif state in ACTIVE_STATES:
            current["active"] += in_state
    pending_moves, active_moves = state_moves([JobState.PENDING]), state_moves(ACTIVE_STATES)
    # Every event since the window began, including any stamped after `now` (clock skew), so that subtracting their
    # moves from the current counts gives exactly the counts at the window's start.
    since = JobEvent.objects.filter(at__gt=span.start).aggregate(
        pending=Sum(pending_moves),
        active=Sum(active_moves),
        changes=Count("id", filter=~Q(Exact(pending_moves, 0))) + Count("id", filter=~Q(Exact(active_moves, 0))),
    )
    initial = [current["pending"] - (since["pending"] or 0), current["active"] - (since["active"] or 0)]
    pending, active = highest_counts(initial, [pending_moves, active_moves], Buckets(span.start, now, span.step))
    return {
        "x": _x(span.start, len(pending), span.step),
        "range": span.range_ms,
        "pending": pending,
        "active": active,
        "pending_now": current["pending"],
        "active_now": current["active"],
        "changes": since["changes"] or 0,
    }


def _state_counts() -> list[tuple[str, int]]:
    return list(
        Job.objects.filter(state__in=[JobState.PENDING, *ACTIVE_STATES])
        .values_list("state")
        .annotate(n=Count("id"))
        .values_list("state", "n")
    )


def latency(window: Window, now: datetime, span: Span | None = None) -> dict[str, Any]:
    """Queued-to-start percentiles of the starts in the window, overall and per latency_step bucket (ranked by the
    database: a row per bucket, not per start)."""
    span = span or span_for(window, now, first_data())
    buckets = Buckets(span.start, now, span.latency_step)
    waits = wait_percentiles(PERCENTILES, after=now - timedelta(seconds=window.seconds), until=now, buckets=buckets)
    return {
        "count": waits.count,
        "overall": waits.overall,
        "max": waits.longest,
        "x": _x(span.start, buckets.count, span.latency_step),
        "range": span.range_ms,
        "series": waits.series,
        "counts": waits.counts,
    }


def starvation(now: datetime) -> dict[str, Any]:
    """The longest current waits, and how many pending jobs are past their starvation threshold."""
    threshold = settings.MUSTER_STARVATION_SECONDS
    pending = waiting_jobs()
    past = starving_count(pending, now)
    longest = list(pending.select_related("owner", "team").order_by("submitted_at", "id")[:STARVATION_ROWS])
    rows = [
        {
            "job": job,
            "wait_seconds": max(0.0, (now - job.submitted_at).total_seconds()),
            "starving": is_starving(job, now),
        }
        for job in longest
    ]
    return {"threshold_seconds": threshold, "past_threshold": past, "rows": rows}


def quota_standing(viewer: User | AnonymousUser) -> dict[str, Any]:
    """Jobs holding GPUs within their quota or borrowing beyond it, with GPUs per (visible) team; pending by reason."""
    team_name = _team_namer(viewer)
    within: dict[str, float] = defaultdict(float)
    over: dict[str, float] = defaultdict(float)
    jobs = {"within": 0, "over": 0}
    gpus: dict[str, float] = {"within": 0, "over": 0}
    # What the jobs hold (their live allocations: a slice its share, a gang its nodes whole), as "GPUs allocated" counts;
    # summed by the database per standing and team, a row for each, never one per running job.
    for over_quota, team, n, held in (
        Job.objects.filter(state__in=ACTIVE_STATES)
        .values_list("over_quota", "team__name")
        .annotate(n=Count("id", distinct=True), held=Sum("allocations__gpus", filter=Q(allocations__released_at__isnull=True)))
        .order_by()
    ):
        standing = "over" if over_quota else "within"
        jobs[standing] += n
        gpus[standing] += held or 0.0
        (over if over_quota else within)[team_name(team)] += held or 0.0
    reasons: dict[str, int] = defaultdict(int)
    # Counted by reason in the database: a row per reason, not one per pending job.
    for code, n in Job.objects.filter(state=JobState.PENDING).values_list("pending_reason_code").annotate(n=Count("id")).order_by():
        reasons[code or "NEW"] += n
    teams = sorted(set(within) | set(over), key=lambda t: (-(within[t] + over[t]), t))
    # Accounts above a quota lowered under their running jobs: "within quota" above counts their jobs as they were
    # placed. An admin sees every account, anyone else their own and their teams' (as team names are shown).
    me = viewer.get_username() if viewer.is_authenticated else None

    def shown(a: AboveQuota) -> bool:
        if getattr(viewer, "is_staff", False):
            return True
        return a.limits.name == me if a.limits.kind == "user" else team_name(a.limits.name) == a.limits.name

    above = [a.above_quota_text for a in accounts_above_quota() if shown(a)]
    return {
        "above": above,
        "jobs": jobs,
        "gpus": gpus,
        "teams": teams,
        "within_by_team": [within[t] for t in teams],
        "over_by_team": [over[t] for t in teams],
        "pending_by_reason": dict(sorted(reasons.items())),
    }


def gpus(window: Window, now: datetime, viewer: User | AnonymousUser, span: Span | None = None) -> dict[str, Any]:
    """GPUs allocated over time (time-weighted mean per bucket), GPU-hours per team, and measured use.

    Summed by the database: the GPUs held at the series' start and now, each bucket's GPU-time
    (`buckets.mean_gpus_allocated`) and each team's GPU-hours; a row per bucket and per team, not per allocation.
    """
    span = span or span_for(window, now, first_data())
    start = now - timedelta(seconds=window.seconds)
    team_name = _team_namer(viewer)
    total = Node.objects.exclude(state=NodeState.GONE).aggregate(total=Sum("gpus_total"))["total"] or 0

    def held_at(moment: datetime) -> Q:
        return Q(allocated_at__lte=moment) & (Q(released_at__isnull=True) | Q(released_at__gt=moment))

    # Allocated after `now` (a skewed clock): not held yet. Released after it: held now.
    held = Allocation.objects.filter(allocated_at__lte=now).aggregate(
        at_span=Sum("gpus", filter=held_at(span.start)), now=Sum("gpus", filter=held_at(now))
    )
    allocated_now = float(held["now"] or 0.0)
    levels = mean_gpus_allocated(float(held["at_span"] or 0.0), Buckets(span.start, now, span.step))
    # GPU-hours count the whole window (the series starts where the span does: nothing was held before the first data).
    held_in_window = Microseconds(Least(Coalesce("released_at", instant(now)), instant(now)), Greatest("allocated_at", instant(start)))
    in_window = Greatest(held_in_window, Value(0, output_field=BigIntegerField()))
    per_team: dict[str, float] = defaultdict(float)
    for team, gpu_us in (
        Allocation.objects.filter(Q(released_at__isnull=True) | Q(released_at__gt=start), allocated_at__lte=now)
        .values_list("job__team__name")
        .annotate(gpu_us=Sum(F("gpus") * in_window, output_field=FloatField()))
        .order_by()
    ):
        per_team[team_name(team)] += (gpu_us or 0.0) / US / 3600
    teams = sorted((t for t, h in per_team.items() if h > 0), key=lambda t: (-per_team[t], t))
    return {
        "total": total,
        "allocated_now": allocated_now,
        "x": _x(span.start, len(levels), span.step),
        "range": span.range_ms,
        "allocated": [round(mean, 2) for mean in levels],
        "team_hours": {t: per_team[t] for t in teams},
        "used": measured_use(window, now, team_name),
    }


def measured_use(window: Window, now: datetime, team_name: Any) -> dict[str, Any]:
    """Allocated vs busy GPU-hours of the runs that ended in the window and have a telemetry summary, summed per team
    by the database."""

    start = now - timedelta(seconds=window.seconds)
    rows = (
        JobTelemetrySummary.objects.filter(
            job__finished_at__gt=start, job__finished_at__lte=now, gpu_util_mean__isnull=False, gpu_seconds__gt=0
        )
        .values_list("job__team__name")
        .annotate(n=Count("pk"), allocated_s=Sum("gpu_seconds"), busy_s=Sum(F("gpu_seconds") * F("gpu_util_mean") / 100))
        .order_by()
    )
    jobs = 0
    allocated: dict[str, float] = defaultdict(float)
    busy: dict[str, float] = defaultdict(float)
    for team, n, gpu_seconds, busy_seconds in rows:
        jobs += n
        allocated[team_name(team)] += gpu_seconds / 3600
        busy[team_name(team)] += busy_seconds / 3600
    teams = sorted(allocated, key=lambda t: (-allocated[t], t))
    total_allocated = sum(allocated.values())
    return {
        "jobs": jobs,
        "teams": teams,
        "allocated_hours": [allocated[t] for t in teams],
        "busy_hours": [busy[t] for t in teams],
        "total_allocated_hours": total_allocated,
        "total_busy_hours": sum(busy.values()),
        "utilisation": (sum(busy.values()) / total_allocated * 100) if total_allocated else None,
    }


@dataclass(frozen=True)
class GridNode:
    """A node as the cluster page's grid draws it: one cell per GPU, "used" by Muster's jobs, held by "other" pods
    Muster did not start, or "free"."""

    name: str
    rack: str
    state: str
    gpu_model: str
    gpus_total: int
    # What the nodes API and `muster nodes` say: whole GPUs, or on a shared node the shares its slices leave (7.5).
    gpus_free: int | float
    gpu_cells: list[str]
    held: bool = False
    held_reason: str = ""
    # The jobs holding GPUs (or slices) here now, by id.
    jobs: tuple[int, ...] = ()
    # GPUs held by pods Muster did not start (a shared node: the GPUs their slices take up).
    gpus_foreign: int = 0
    # Back from NotReady: no new work until then (jobs.selectors.node_settles_until).
    settling_until: datetime | None = None
    # Why a CORDONED node takes no new pods ("cordoned", "tainted key=value:Effect").
    closed_by: str = ""
    # A shared node (time-slicing, MPS, MIG: docs/gpu-sharing.md) takes GPU slices only: its mode and slices.
    sharing: str = ""
    slices_free: int = 0
    slices_total: int = 0
    # GPUs nothing holds: `gpus_free` on a node that takes new work; on one that takes none, its idle GPUs (not free).
    gpus_idle: int | float = 0
    # The owner of each of `jobs`, in the same order: who may follow its link (jobs.selectors.job_visible_to's rule).
    job_owners: tuple[int, ...] = ()
    # Its maintenance window on now, else the next planned (jobs.maintenance.maintenance_by_node: start, end, reason,
    # on, in_the_way); None: none.
    maintenance: dict[str, Any] | None = None

    @property
    def takes_work(self) -> bool:
        """Ready, not held by an admin, not settling after being unready: its free GPUs may take new work."""
        return self.state == NodeState.READY and not self.held and self.settling_until is None


@dataclass(frozen=True)
class ClusterFree:
    """The free GPUs the cluster page and the dashboard sum, as `muster nodes` does: those of nodes that take new work.
    Whole-GPU nodes' whole GPUs (what whole-GPU and multi-node jobs may take, as the queue's reasons count them), and
    apart from them the shares shared nodes' slices leave, which only GPU-slice jobs take."""

    nodes: int
    gpus_free: int
    gpus_total: int
    shared_nodes: int = 0
    shared_gpus_free: int | float = 0
    shared_gpus_total: int = 0


def gpus_free_for_work(nodes: Iterable[GridNode]) -> int:
    """The free GPUs whole-GPU work may take: on ready nodes no admin holds and not settling after being unready (a
    cordoned, not-ready, held or settling node's free GPUs take nothing), and not shared (a shared node takes GPU slices
    only), as `muster nodes` and the queue's reasons count them."""
    return sum(int(n.gpus_free) for n in nodes if n.takes_work and not n.sharing)


def cluster_free(nodes: Sequence[GridNode]) -> ClusterFree:
    """`gpus_free_for_work` of the whole-GPU nodes, and the shared nodes' free shares apart (summed as shown per node)."""
    shared = [n for n in nodes if n.sharing]
    return ClusterFree(
        nodes=len(nodes),
        gpus_free=gpus_free_for_work(nodes),
        gpus_total=sum(n.gpus_total for n in nodes if not n.sharing),
        shared_nodes=len(shared),
        shared_gpus_free=gpu_amount(sum(n.gpus_free for n in shared if n.takes_work)),
        shared_gpus_total=sum(n.gpus_total for n in shared),
    )


def node_grid() -> list[GridNode]:
    """Known nodes by rack, each with one cell per GPU (held or free) and the jobs holding it: the cluster page's grid."""
    holders: dict[str, dict[int, int]] = defaultdict(dict)
    slots: dict[str, set[int]] = defaultdict(set)
    live = (
        Allocation.objects.filter(released_at__isnull=True)
        .order_by("job_id")
        .values_list("node__name", "job_id", "job__owner_id", "gpu_slot")
    )
    for name, job_id, owner_id, slot in live:
        holders[name][job_id] = owner_id
        if slot is not None:
            slots[name].add(slot)
    grid = []
    windows = maintenance_by_node()
    for node in sorted(nodes_with_usage(), key=lambda n: (n.rack, n.name)):
        if node.slices_per_gpu:
            # A GPU any of Muster's slices is on shows as used; other pods' slices as the fewest GPUs they fill (the
            # device plugin, not Muster, picks their GPUs). The figure beside the cells is the shares left, as the API's.
            held = min(len(slots[node.name]), node.gpus_total)
            foreign = min(node.gpus_foreign + math.ceil(node.slices_foreign / node.slices_per_gpu), node.gpus_total - held)
        else:
            held = min(math.ceil(node.gpus_held or 0), node.gpus_total)
            foreign = min(node.gpus_foreign, node.gpus_total - held)
        # One cell per GPU, so a glance shows which nodes are whole, partly used or full.
        cells = ["used"] * held + ["other"] * foreign + ["free"] * (node.gpus_total - held - foreign)
        grid.append(
            GridNode(
                node.name, node.rack, node.state, node.gpu_model, node.gpus_total, node_gpus_free(node), cells, node.held,
                node.held_reason, tuple(holders[node.name]), foreign, node_settles_until(node), node.closed_by,
                node.sharing, node_slices_free(node), node.slices_per_gpu * node.gpus_total, node_gpus_idle(node),
                tuple(holders[node.name].values()), windows.get(node.name),
            )
        )  # fmt: skip
    return grid
