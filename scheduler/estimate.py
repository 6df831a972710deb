"""What if this job were submitted now: would it be accepted, which limits hold it, and when would it start.

`sbatch --test-only` for Muster. The submit's own checks say whether it would be accepted (every refusal at
once: `jobs.services.job_submit_problems`); the owner's limits are read as the usage page reads them; the start is
the cycle's own: the snapshot the cycle would build, with the job added as it would be queued (its id after every
job's, submitted now), through the same `policy.schedule`, whose forecast plans every waiting job forward as the
work is expected to run (predicted run times where there are any, wall times otherwise). Reads only: nothing is
written (no job, no charge, no audit row, no stored plan).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db.models import Max
from django.utils import timezone

from jobs.dependencies import waits_of as dependency_waits_of
from jobs.lifecycle import fit_reason
from jobs.models import Job
from jobs.services import ResourceAsk, job_check_fits_cluster, job_fit_elastic_range, job_submit_problems
from policy.budget import budget_beside_need, budget_need, node_hours_words, whole_gpu_node_sizes
from policy.model import ESTIMATE_AFTER, ESTIMATE_NONE, ESTIMATE_PLANNED, ESTIMATE_RESERVED, PendingJob
from policy.schedule import schedule
from policy.sharing import Slices
from quotas.selectors import AccountUsage, account_usages
from quotas.services import held_gpus, least_node_hours
from scheduler.snapshot import build_snapshot, node_views, pending_job, policy_config

# What an estimated start means (`StartEstimate.kind`): the stored plan's kinds, and two of its own.
START_NOW = "now"  # it would be placed by the next cycle
START_UNKNOWN = "unknown"  # nothing can be known (the reason says why), or it would be refused
KIND_OF = {ESTIMATE_RESERVED: "reserved", ESTIMATE_PLANNED: "planned", ESTIMATE_AFTER: "after", ESTIMATE_NONE: START_UNKNOWN}

# A limit check's outcome: it lets the job run now, makes it wait (GPUs in use, the period's budget), or refuses it.
OK, WAITS, REFUSED = "ok", "waits", "refused"


@dataclass(frozen=True)
class LimitCheck:
    name: str  # "cluster", "gpus", "wall_time", "node_hours", "budget"
    status: str  # OK, WAITS or REFUSED
    text: str


@dataclass(frozen=True)
class OtherJob:
    """A running job a submit would preempt or shrink, as the queue shows it to everyone (`squeue`)."""

    id: int
    name: str
    owner: str


@dataclass(frozen=True)
class Shrink:
    """An elastic job a submit would shrink, from and to how many nodes."""

    id: int
    name: str
    owner: str
    from_nodes: int
    to_nodes: int


@dataclass(frozen=True)
class StartEstimate:
    kind: str  # START_NOW, "reserved", "planned", "after" or START_UNKNOWN
    at: datetime | None
    reason_code: str = ""
    reason: str = ""
    position: int | None = None  # its place in the queue (1: next), when it would wait
    preempts: int = 0  # running jobs it would stop to start now
    # Which: those it would stop, and the elastic jobs it would shrink (from, to nodes), each with its name and owner.
    stopped: tuple[OtherJob, ...] = ()
    shrunk: tuple[Shrink, ...] = ()
    # The nodes it would start on now (the policy's placement: an elastic job's most that fit), and an elastic job's range.
    nodes: int | None = None
    min_nodes: int | None = None
    max_nodes: int | None = None


@dataclass(frozen=True)
class SubmitEstimate:
    accepted: bool
    problems: dict[str, list[str]]  # what a submit would refuse, by field (empty when accepted)
    limits: tuple[LimitCheck, ...]
    start: StartEstimate
    count: int = 1  # the jobs the submit would create (an array's elements)
    array_index: int | None = None  # an array's: the element estimated (its first)
    note: str = ""  # how far an elastic range beyond the cluster may grow on it for now, as the dry run says it

    @property
    def fits_limits(self) -> bool:
        return self.accepted and all(limit.status == OK for limit in self.limits)


def job_estimate(*, owner: User, spec: dict[str, Any], now: datetime | None = None, indices: Sequence[int] | None = None) -> SubmitEstimate:
    """The estimate for a submit of `spec` (the submit serializer's validated data) by `owner`, at `now`.

    An array (`indices`) is estimated by its first element, as `sbatch --test-only --array` answers for the array's
    first task: every element asks the same and is checked once, and the others would queue behind it."""
    now = now or timezone.now()
    array = {"count": len(indices), "array_index": indices[0]} if indices else {}
    # Estimated as it would be queued, with the range asked: the policy caps its growth at the nodes there are.
    spec, cut = job_fit_elastic_range(spec)
    problems = job_submit_problems(owner=owner, **spec)
    job = _as_queued(owner, spec, now)
    limits = _limit_checks(owner, spec, job, now, count=len(indices) if indices else 1, cut=cut)
    if problems or job is None:
        refused = StartEstimate(START_UNKNOWN, None, reason="It would be refused: see why.")
        return SubmitEstimate(False, problems, limits, refused, **array, note=cut)
    return SubmitEstimate(True, {}, limits, _start(job, now), **array, note=cut)


def _as_queued(owner: User, spec: dict[str, Any], now: datetime) -> PendingJob | None:
    """The job as the cycle would see it queued (its id after every job's, submitted now); None without its size."""
    if any(spec.get(field) is None for field in ("nodes", "gpus_per_node", "wall_time_seconds")):
        return None
    team = spec.get("team")
    # Its dependencies not met yet keep it waiting (DEPENDENCY), its start from when those jobs are expected to end:
    # estimated without them, a job after one running for hours read "starts now".
    waits_for, after = dependency_waits_of(spec.get("dependencies") or [])
    return pending_job(
        job_id=(Job.objects.aggregate(last=Max("id"))["last"] or 0) + 1,
        nodes=spec["nodes"],
        gpus_per_node=spec["gpus_per_node"],
        priority_class=spec.get("priority_class") or "",
        submitted_at=now,
        user=owner.get_username(),
        team=team.name if team is not None else None,
        wall_time_seconds=spec["wall_time_seconds"],
        min_nodes=spec.get("min_nodes"),
        max_nodes=spec.get("max_nodes"),
        gpu_fraction=spec.get("gpu_fraction"),
        gpu_memory_gb=spec.get("gpu_memory_gb"),
        gpu_isolation=bool(spec.get("gpu_isolation")),
        preemptible=bool(spec.get("preemptible")),
        rdma_per_node=spec.get("rdma_per_node") or 0,
        waits_for=waits_for,
        after=after,
        queued=False,
    )


def _start(job: PendingJob, now: datetime) -> StartEstimate:
    decisions = schedule(build_snapshot(now, extra=(job,)), policy_config())
    placed = next((p for p in decisions.placements if p.job_id == job.id), None)
    if placed is not None:
        stops = [p.job_id for p in decisions.preemptions if p.for_job_id == job.id]
        shrinks = {r.job_id: (len(r.node_names) + len(r.removed), len(r.node_names)) for r in decisions.resizes if r.for_job_id == job.id}
        named = {
            pk: OtherJob(pk, name, owner)
            for pk, name, owner in Job.objects.filter(pk__in=[*stops, *shrinks]).values_list("pk", "name", "owner__username")
        }
        low, high = (job.min_nodes, job.nodes) if job.elastic else (None, None)
        return StartEstimate(
            START_NOW,
            now,
            preempts=len(stops),
            stopped=tuple(named[pk] for pk in sorted(stops) if pk in named),
            shrunk=tuple(Shrink(pk, named[pk].name, named[pk].owner, *sizes) for pk, sizes in sorted(shrinks.items()) if pk in named),
            nodes=len(placed.node_names),
            min_nodes=low,
            max_nodes=high,
        )
    wait = next(w for w in decisions.waiting if w.job_id == job.id)
    at = datetime.fromtimestamp(wait.estimated_start, UTC) if wait.estimated_start is not None else None
    kind = KIND_OF.get(wait.estimate, START_UNKNOWN) if at is not None else START_UNKNOWN
    return StartEstimate(kind, at, wait.reason_code, fit_reason(wait.reason), wait.position)


def _limit_checks(
    owner: User, spec: dict[str, Any], job: PendingJob | None, now: datetime, *, count: int = 1, cut: str = ""
) -> tuple[LimitCheck, ...]:
    """Each limit the job meets or not, in words: the cluster's size, then the owner's and the team's limits. `count`:
    an array's elements, each asking the same (the budget says how many of them what is left covers); `cut`: how far an
    elastic range the cluster cannot hold may grow on it for now (`job_fit_elastic_range`)."""
    if spec.get("nodes") is None or spec.get("gpus_per_node") is None:
        return ()
    ask = ResourceAsk.of(spec)
    try:
        job_check_fits_cluster(ask)
    except ValidationError as exc:
        checks = [LimitCheck("cluster", REFUSED, " ".join(m for ms in exc.message_dict.values() for m in ms))]
    else:
        checks = [LimitCheck("cluster", OK, f"Fits this cluster. {cut}" if cut else "Fits this cluster.")]
    wall = spec.get("wall_time_seconds")
    if wall is not None:
        most = settings.MUSTER_MAX_WALL_TIME_SECONDS
        checks.append(LimitCheck("wall_time", OK if wall <= most else REFUSED, f"Wall time: {_span(wall)}; the site allows {_span(most)}."))
    team = spec.get("team")
    usages = account_usages(users=[owner], teams=[team] if team is not None else [], now=now)
    need, least = None, None
    if job is not None and any(usage.budget is not None for usage in usages):
        # What the cycle will hold it to: the share of the nodes it may hold, as the ledger charges.
        nodes = node_views(now)
        need = budget_need(job, whole_gpu_node_sizes(nodes), Slices(nodes, (), now.timestamp()))
        # What the submit holds it to: at least this much of a whole period's budget, or it is refused.
        least = least_node_hours(spec["nodes"], spec["gpus_per_node"], spec["wall_time_seconds"], spec.get("gpu_fraction"))
    for usage in usages:
        checks += _account_checks(usage, ask, wall, bool(spec.get("preemptible")), need, least, count)
    return tuple(checks)


def _account_checks(
    usage: AccountUsage,
    ask: ResourceAsk,
    wall: int | None,
    preemptible: bool,
    need: tuple[float, str] | None,
    least: float | None,
    count: int = 1,
) -> list[LimitCheck]:
    limits = usage.limits
    whose = f"your quota (user {limits.name})" if limits.kind == "user" else f"team {limits.name}'s quota"
    # An elastic job starts on its least: that is what its limits must let it run. A gang holds its nodes whole.
    nodes = ask.min_nodes or ask.nodes
    gpus = float(ask.gpu_fraction) if ask.gpu_fraction else held_gpus(nodes, ask.gpus_per_node)
    checks = []
    if limits.max_gpus is not None:
        # What borrows beyond the quota counts against none (the cycle's QUOTA_GPUS check counts the same).
        room = limits.max_gpus - usage.gpus_within_quota
        if gpus <= room:
            status = OK
        elif gpus <= limits.max_gpus or preemptible:
            status = WAITS
        else:
            status = REFUSED
        borrow = " (preemptible: it may borrow idle GPUs beyond it)" if preemptible and gpus > room else ""
        beyond = usage.gpus_in_use - usage.gpus_within_quota
        held = f"{usage.gpus_within_quota:g} in use now" + (f" (and {beyond:g} borrowed beyond it)" if beyond > 0 else "")
        text = f"GPUs: {gpus:g} at once; {whose} allows {limits.max_gpus}, {held}{borrow}."
        checks.append(LimitCheck("gpus", status, text))
    if wall is not None and limits.max_wall_time_seconds is not None:
        ok = wall <= limits.max_wall_time_seconds
        text = f"Wall time: {_span(wall)}; {whose} allows {_span(limits.max_wall_time_seconds)}."
        checks.append(LimitCheck("wall_time", OK if ok else REFUSED, text))
    if wall is not None:
        node_hours = nodes * wall / 3600
        if limits.max_node_hours_per_job is not None:
            ok = node_hours <= limits.max_node_hours_per_job
            text = (
                f"Node-hours per job (whole nodes x wall time): {node_hours:.3g} for this job; "
                f"{whose} allows {limits.max_node_hours_per_job:.3g}."
            )
            checks.append(LimitCheck("node_hours", OK if ok else REFUSED, text))
    budget = usage.budget
    if budget is not None and need is not None:
        # In the words of the BUDGET reason: what running jobs may still use is committed, a new job fits in the rest.
        words, uses = budget_beside_need(budget, need[0])
        text = f"Budget: this job may use {node_hours_words(uses)} ({need[1]}); {whose} has {words} this period."
        whole = usage.budget_this_period  # the quota's and what admins added to this period, as the submit counts it
        if least is not None and whole is not None and least > whole:
            # More than a whole period gives: the submit refuses it (quota_check_job), so it does not wait, whatever is left.
            text += f" It gives {node_hours_words(whole, '.3g')} a {settings.MUSTER_BUDGET_PERIOD} in all, so the job could never start."
            status = REFUSED
        elif count > 1:
            # An array's elements each commit their need as they start: "this job may use 1.0" read as the whole
            # array's, [ok], when what was left covered 17 of its 100 elements and the rest would wait for the budget.
            covered = min(count, int(budget.uncommitted / need[0] + 1e-9)) if need[0] > 0 else count
            text = text.replace("this job may use", f"each of the array's {count} elements may use", 1)
            if covered < count:
                text += f" That covers {covered} of them; the other {count - covered} would wait for the budget (BUDGET)."
            else:
                text += f" That covers all {count} of them."
            status = OK if covered == count else WAITS
        else:
            status = OK if need[0] <= budget.uncommitted else WAITS
        checks.append(LimitCheck("budget", status, text))
    return checks


def _span(seconds: float) -> str:
    """A wall time in minutes, the unit the form asks in, with hours or days beside: `90 min (1 h 30 min)`."""
    minutes = round(seconds / 60)
    hours, rest = divmod(minutes, 60)
    if minutes < 60:
        return f"{minutes} min"
    if hours % 24 == 0 and not rest:
        return f"{minutes} min ({hours // 24} d)" if hours >= 24 else f"{minutes} min ({hours} h)"
    return f"{minutes} min ({hours} h{f' {rest} min' if rest else ''})"
