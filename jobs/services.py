"""Writes to jobs: submit, transition, cancel (a job, several or an array), hold and release, and the node inventory."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from audit.services import audit_record
from jobs.amounts import duration, plural
from jobs.arrays import index_ranges
from jobs.cluster import ClusterBackend, ClusterNode, get_backend
from jobs.dependencies import (
    Asked,
    contradictions,
    dependencies_cycles,
    dependencies_graph_lock,
    dependencies_replace,
    dependencies_said,
    dependencies_unmeetable,
    dependencies_wanted,
)
from jobs.errors import (
    ArrayEnded,
    ArrayIndicesMissing,
    ArrayNotFound,
    HoldNotYours,
    IllegalTransition,
    JobFinished,
    JobNotHoldable,
    JobNotRequeueable,
    JobNotUpdatable,
)
from jobs.holds import hold_reason
from jobs.hooks import job_hooks, queue_changed
from jobs.logs import gang_teardown
from jobs.models import (
    Allocation,
    ClusterHealth,
    Job,
    JobDependency,
    JobEvent,
    JobHold,
    Node,
    NodeState,
    PlannedQueue,
    job_plan_cleared,
)
from jobs.selectors import jobs_visible_to, shared_pools
from jobs.states import ACTIVE_STATES, TERMINAL_STATES, JobState, can_transition
from policy.model import HELD, PendingJob
from policy.sharing import describe_ask, slice_fits

if TYPE_CHECKING:
    from quotas.models import Team  # Job.team's model; a type-only name, see docs/architecture.md

logger = logging.getLogger(__name__)


def nodes_sync(*, cluster_nodes: Iterable[ClusterNode], now: datetime | None = None) -> list[Node]:
    """Make the Node table match what the cluster reports; nodes it no longer reports are GONE. `now`: the cycle's
    clock, which times how long a node has been NotReady or back."""
    now = now or timezone.now()
    seen: list[Node] = []
    names = set()
    before = {name: (state, since) for name, state, since in Node.objects.values_list("name", "state", "not_ready_since")}
    for cn in cluster_nodes:
        names.add(cn.name)
        state = NodeState.NOT_READY if not cn.ready else NodeState.READY if cn.schedulable else NodeState.CORDONED
        defaults: dict[str, object] = {
            "gpus_total": cn.gpus_total,
            "rack": cn.rack,
            "block": cn.block,
            "rdma_devices": cn.rdma_devices,
            "sharing": cn.sharing,
            "slices_per_gpu": cn.slices_per_gpu,
            "slice_gpus": cn.slice_gpus,
            "slice_memory_gb": cn.slice_memory_gb,
            "slice_resource": cn.slice_resource,
            "gpu_model": cn.gpu_model,
            "gpus_foreign": cn.gpus_foreign,
            "slices_foreign": cn.slices_foreign,
            "state": state,
            # A backend that does not say why (the simulated cluster) is cordoned; a taint's words fit the column.
            "closed_by": (cn.closed_by or "cordoned")[:400] if state == NodeState.CORDONED else "",
        }
        was, unready_since = before.get(cn.name, (None, None))
        if state == NodeState.NOT_READY:
            defaults["ready_since"] = None
            if was != NodeState.NOT_READY:
                defaults["not_ready_since"] = now  # its gangs get MUSTER_NODE_NOT_READY_GRACE_SECONDS from here
        else:
            defaults["not_ready_since"] = None
            if was == NodeState.GONE or (was == NodeState.NOT_READY and not _blip(unready_since, now)):
                # Back after its gangs were given up, or re-registered after leaving the cluster (a node whose kubelet was
                # restarted with its Node object deleted, a machine replaced under the same name): it settles before
                # it takes new work.
                defaults["ready_since"] = now
        node, _ = Node.objects.update_or_create(name=cn.name, defaults=defaults)
        seen.append(node)
    Node.objects.exclude(name__in=names).exclude(state=NodeState.GONE).update(state=NodeState.GONE)
    return seen


def _blip(unready_since: datetime | None, now: datetime) -> bool:
    """NotReady for less than MUSTER_NODE_NOT_READY_GRACE_SECONDS: its gangs ran on, so new work may go there at once
    too. (After an API server outage of 90 s, kube-controller-manager read every node's lease as stale and marked
    them all NotReady for seconds: every node then settled, and nothing started anywhere for two minutes.)"""
    return unready_since is not None and now - unready_since < timedelta(seconds=settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS)


@transaction.atomic
def node_gang_failed(name: str, *, job_id: int, attempt: int) -> Node | None:
    """A gang failed on this node and its retry then ran to success elsewhere: blame the node, and hold it once that
    has happened too often in a row. (A job that fails everywhere is its code's fault, and counts against no node.)"""
    node = Node.objects.select_for_update().filter(name=name).first()
    if node is None:
        return None
    node.failures_in_row += 1
    if node.failures_in_row >= settings.MUSTER_NODE_FAILURE_HOLD and not node.held:
        node.held = True
        node.held_reason = (
            f"{node.failures_in_row} gangs in a row failed on it and then succeeded elsewhere (the last: job {job_id}, "
            f"attempt {attempt} here); an admin clears this in Django admin, Nodes, once the node is checked."
        )
        logger.warning("node %s held out of placement: %s", name, node.held_reason)
    node.save(update_fields=["failures_in_row", "held", "held_reason", "updated_at"])
    return node


def nodes_gang_succeeded(names: Iterable[str]) -> None:
    """A gang ran to success on these nodes: their count of failures in a row starts again."""
    Node.objects.filter(name__in=list(names), failures_in_row__gt=0).update(failures_in_row=0)


def nodes_ensure_known(*, backend: ClusterBackend | None = None) -> None:
    """Load the node inventory once, so a submit before the first cycle can be checked against it."""
    if not Node.objects.exists():
        nodes_sync(cluster_nodes=(backend or get_backend()).list_nodes())


def _node_sizes() -> list[tuple[int, int]]:
    """(GPUs, RDMA devices) of every known node whose GPUs are whole (not shared)."""
    return list(Node.objects.exclude(state=NodeState.GONE).filter(sharing="").values_list("gpus_total", "rdma_devices"))


def _known_nodes() -> None:
    if not Node.objects.exists():  # no inventory yet (a submit before the first cycle): load it
        nodes_ensure_known()


@dataclass(frozen=True)
class ResourceAsk:
    """What a job asks of the cluster's nodes, as submit checks it against the inventory."""

    nodes: int
    gpus_per_node: int
    rdma_per_node: int = 0
    gpu_fraction: float | None = None
    gpu_memory_gb: float | None = None
    gpu_isolation: bool = False
    # An elastic job's range; `nodes` is then its most.
    min_nodes: int | None = None
    max_nodes: int | None = None

    @classmethod
    def of(cls, spec: Mapping[str, Any]) -> ResourceAsk:
        """The asks among a submit's fields (the others are left out)."""
        return cls(**{f.name: spec[f.name] for f in fields(cls) if spec.get(f.name) is not None})


def priority_classes_for(owner: User, team_names: Iterable[str]) -> list[str]:
    """The classes `owner` may submit in, with one of their teams or none (job_check_priority_class has the last word,
    for the team a job is submitted for): what the submit form offers."""
    teams = set(team_names)
    access = settings.MUSTER_PRIORITY_CLASS_ACCESS
    return [c for c in settings.MUSTER_PRIORITY_CLASSES if c not in access or owner.is_staff or teams & access[c]]


def job_check_priority_class(owner: User, priority_class: str | None, team: Team | None) -> None:
    """Refuse a class the site keeps for admins and some teams (MUSTER_PRIORITY_CLASS_ACCESS) to anyone else: a job of
    the highest class goes before all others and may preempt them, so it is given, not taken."""
    teams = settings.MUSTER_PRIORITY_CLASS_ACCESS.get(priority_class or "")
    if teams is None or priority_class in priority_classes_for(owner, [team.name] if team is not None else []):
        return
    open_classes = [c for c in settings.MUSTER_PRIORITY_CLASSES if c not in settings.MUSTER_PRIORITY_CLASS_ACCESS]
    given = f"admins and jobs of team{'s' if len(teams) > 1 else ''} {', '.join(sorted(teams))}" if teams else "admins"
    refusal = f"The {priority_class} class is kept for {given}; you may use {', '.join(open_classes)}."
    raise ValidationError({"priority_class": [f"{refusal} (An admin sets who may: MUSTER_PRIORITY_CLASS_ACCESS.)"]})


def _whole_nodes_fitting(gpus_per_node: int, rdma_per_node: int) -> int:
    """How many of the cluster's whole-GPU nodes have at least these GPUs and RDMA devices: the most a gang could hold."""
    return sum(1 for gpus, rdma in _node_sizes() if gpus >= gpus_per_node and rdma >= rdma_per_node)


def job_fit_elastic_range(spec: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The submit's fields, and in words how far an elastic job whose most is beyond the cluster's nodes that fit it
    may grow on today's cluster ("" when it may reach its most). sbatch takes -N 2-40 on a smaller partition when its
    least fits; Muster takes it too and stores the range as asked (2-40): the scheduling cycle caps its growth at the
    nodes there are at each decision (policy.schedule.within_cluster), so it grows onto nodes added later. A range cut
    to its least on today's cluster (16-40 on 16 nodes) stays elastic: it runs on 16 now and grows when nodes join. A
    least that does not fit is left for `job_check_fits_cluster` to refuse."""
    fitted = dict(spec)
    low, high, gpus = spec.get("min_nodes"), spec.get("max_nodes"), spec.get("gpus_per_node")
    if low is None or high is None or gpus is None or any(spec.get(f) for f in ("gpu_fraction", "gpu_memory_gb", "gpu_isolation")):
        return fitted, ""
    _known_nodes()
    rdma = spec.get("rdma_per_node") or 0
    most = _whole_nodes_fitting(gpus, rdma)
    if not low <= most < high:
        return fitted, ""
    devices = f" and {plural(rdma, 'RDMA device')}" if rdma else ""
    such = f"{plural(most, 'node')} with at least {plural(gpus, 'GPU')}{devices} now"
    asked = f"Asked for {low} to {high} nodes; the cluster has {such}"
    if most == low:  # it stays elastic: a fixed size would never grow onto nodes added later
        return fitted, f"{asked}, so it runs on {low} for now, and grows if nodes are added."
    return fitted, f"{asked}, so it may grow to {most} for now, and further if nodes are added."


def job_check_fits_cluster(ask: ResourceAsk) -> None:
    """Reject a job that could never run on this cluster, however empty it became. An elastic job (min_nodes..max_nodes)
    must fit at its least; a most beyond the cluster is taken, and the cycle caps its growth at the nodes there are
    (`job_fit_elastic_range`)."""
    nodes, gpus_per_node, rdma_per_node, min_nodes = ask.nodes, ask.gpus_per_node, ask.rdma_per_node, ask.min_nodes
    gpu_fraction, gpu_memory_gb, gpu_isolation = ask.gpu_fraction, ask.gpu_memory_gb, ask.gpu_isolation
    _known_nodes()
    if min_nodes is not None:
        _check_elastic(nodes, min_nodes, gpu_fraction or gpu_memory_gb or gpu_isolation)
    if gpu_fraction or gpu_memory_gb or gpu_isolation:
        _check_gpu_slice(nodes, gpus_per_node, rdma_per_node, gpu_fraction or 0.0, gpu_memory_gb or 0.0, gpu_isolation)
        return
    inventory = _node_sizes()
    if rdma_per_node:
        if nodes < 2:
            raise ValidationError({"rdma_per_node": ["RDMA devices are for jobs spanning nodes: ask for 2 nodes or more."]})
        most = max((rdma for _, rdma in inventory), default=0)
        if rdma_per_node > most:
            raise ValidationError(
                {"rdma_per_node": [f"No node has {plural(rdma_per_node, 'RDMA device')}; the most any node has is {most}."]}
            )
        inventory = [(gpus, rdma) for gpus, rdma in inventory if rdma >= rdma_per_node]
    known = [gpus for gpus, _ in inventory]
    largest = max(known, default=0)
    if gpus_per_node > largest:
        raise ValidationError({"gpus_per_node": [f"No node has {plural(gpus_per_node, 'GPU')}; the largest node has {largest}."]})
    big_enough = sum(1 for g in known if g >= gpus_per_node)
    # An elastic job runs on its least: a most beyond the cluster is taken, not refused (it grows onto nodes added later).
    least = min_nodes if min_nodes is not None else nodes
    if least > big_enough:
        devices = f" and {plural(rdma_per_node, 'RDMA device')}" if rdma_per_node else ""
        needs = f"at least {plural(least, 'node')}" if min_nodes is not None else plural(least, "node")
        raise ValidationError(
            {
                "min_nodes" if min_nodes is not None else "nodes": [
                    f"The job needs {needs} with at least {plural(gpus_per_node, 'GPU')}{devices} each, "
                    f"but the whole cluster has {plural(big_enough, 'such node')} ({plural(sum(known), 'GPU')} in all)."
                ]
            }
        )


def _check_elastic(nodes: int, min_nodes: int, slice_asked: object) -> None:
    if slice_asked:
        raise ValidationError({"min_nodes": ["A GPU slice is a single-node job; it cannot be elastic."]})
    if settings.MUSTER_CLUSTER == "kubernetes" and settings.MUSTER_K8S_LAUNCH_MODE in ("podgroup", "mpijob"):
        raise ValidationError(
            {
                "min_nodes": [
                    f"Elastic jobs need MUSTER_K8S_LAUNCH_MODE pods or workload; this site launches {settings.MUSTER_K8S_LAUNCH_MODE}, "
                    "whose gangs have a fixed size: ask for a fixed number of nodes."
                ]
            }
        )


def _check_gpu_slice(nodes: int, gpus_per_node: int, rdma: int, fraction: float, memory_gb: float, isolation: bool) -> None:
    """A GPU slice is one slice of one GPU on one node, and some shared node must offer a slice meeting its asks."""
    field = "gpu_fraction" if fraction else "gpu_memory_gb" if memory_gb else "gpu_isolation"
    if nodes != 1:
        raise ValidationError({"nodes": ["A GPU slice is for a single-node job: ask for 1 node, or for whole GPUs."]})
    if gpus_per_node != 1:
        raise ValidationError({"gpus_per_node": ["A GPU slice is a share of one GPU: gpus_per_node must be 1."]})
    if rdma:
        raise ValidationError({"rdma_per_node": ["RDMA devices are for jobs spanning nodes, not for a GPU slice."]})
    ask = PendingJob(
        id=0,
        nodes=1,
        gpus_per_node=1,
        class_rank=0,
        submitted_at=0,
        gpu_fraction=fraction,
        gpu_memory_gb=memory_gb,
        gpu_isolation=isolation,
    )
    pools = shared_pools()
    if any(slice_fits(ask, pool.view()) for pool in pools):
        return
    offered = f"Shared here: {'; '.join(map(str, pools))}." if pools else "No node here shares its GPUs: ask for whole GPUs."
    raise ValidationError({field: [f"No node offers {describe_ask(ask)}. {offered}"]})


def job_submit_check(
    *,
    owner: User,
    nodes: int,
    gpus_per_node: int,
    wall_time_seconds: int,
    team: Team | None = None,
    preemptible: bool = False,
    volumes: Sequence[Mapping[str, object]] = (),
    **spec: Any,
) -> None:
    """Everything a submit checks beyond the fields themselves (the cluster's size, the owner's limits); writes nothing.

    Raises ValidationError({field: [messages]}) with every refusal at once. A dry run (`POST /api/v1/jobs/validate/`) is this alone.
    """
    problems = job_submit_problems(
        owner=owner,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        wall_time_seconds=wall_time_seconds,
        team=team,
        preemptible=preemptible,
        volumes=volumes,
        **spec,
    )
    if problems:
        raise ValidationError(problems)


def job_submit_problems(*, owner: User, **spec: Any) -> dict[str, list[str]]:
    """Every refusal of `job_submit_check` at once, for the asks given; writes nothing.

    A form with mistakes in some fields still gets the checks the others allow: the cluster's size needs `nodes` and
    `gpus_per_node`, the limits also `wall_time_seconds` (the team defaults to none). Missing asks skip those checks.
    """
    problems: dict[str, list[str]] = {}

    def collect(check: Callable[[], None]) -> None:
        try:
            check()
        except ValidationError as exc:
            for key, messages in exc.message_dict.items():
                problems.setdefault(key, []).extend(m for m in messages if m not in problems.get(key, []))

    collect(lambda: job_check_priority_class(owner, spec.get("priority_class"), spec.get("team")))
    if spec.get("nodes") is None and spec.get("gpus_per_node") is not None and spec.get("min_nodes") is None:
        # The nodes are wrong or missing, but GPUs per node beyond every node is a mistake of its own: said now, not
        # one submit later. (Only that one: the rest depends on the nodes.)
        alone: dict[str, list[str]] = {}
        try:
            job_check_fits_cluster(ResourceAsk.of({**spec, "nodes": 1}))
        except ValidationError as exc:
            alone = {k: v for k, v in exc.message_dict.items() if k == "gpus_per_node"}
        for key, messages in alone.items():
            problems.setdefault(key, []).extend(messages)
    if spec.get("nodes") is None or spec.get("gpus_per_node") is None:
        return problems
    ask = ResourceAsk.of(spec)
    collect(lambda: job_check_fits_cluster(ask))
    if spec.get("wall_time_seconds") is None:
        return problems
    for check in job_hooks.submit_checks:
        collect(
            partial(
                check,
                owner=owner,
                team=spec.get("team"),
                # An elastic job starts on its least: that is what its limits must let it run.
                nodes=ask.min_nodes or ask.nodes,
                gpus_per_node=ask.gpus_per_node,
                wall_time_seconds=spec["wall_time_seconds"],
                preemptible=bool(spec.get("preemptible")),
                gpu_fraction=ask.gpu_fraction,
                volumes=spec.get("volumes") or (),
            )
        )
    return problems


def _job_row(*, owner: User, now: datetime, spec: Mapping[str, Any], **extra: Any) -> Job:
    simulate = spec.get("simulate")
    return Job(
        owner=owner,
        team=spec.get("team"),
        name=spec["name"],
        image=spec["image"],
        command=list(spec["command"]),
        env=dict(spec.get("env") or {}),
        nodes=spec["nodes"],
        gpus_per_node=spec["gpus_per_node"],
        wall_time_seconds=spec["wall_time_seconds"],
        priority_class=spec["priority_class"],
        max_restarts=spec.get("max_restarts", 0),
        preemptible=spec.get("preemptible", False),
        simulate=dict(simulate) if simulate else None,
        volumes=[dict(v) for v in spec.get("volumes") or ()],
        rdma_per_node=spec.get("rdma_per_node", 0),
        gpu_fraction=spec.get("gpu_fraction"),
        gpu_memory_gb=spec.get("gpu_memory_gb"),
        gpu_isolation=spec.get("gpu_isolation", False),
        min_nodes=spec.get("min_nodes"),
        max_nodes=spec.get("max_nodes"),
        state=JobState.PENDING,
        pending_reason_code="NEW",
        pending_reason="Waiting for the next scheduling cycle.",
        submitted_at=now,
        **extra,
    )


def _submitted_event(job: Job, owner: User, now: datetime, cut: str = "") -> JobEvent:
    """Its first event; `cut`: how far an elastic range beyond the cluster may grow on it for now, said where the
    submit's answer and the job's page show it."""
    reason = f"Submitted by {owner.get_username()}." + (f" {cut}" if cut else "")
    return JobEvent(job=job, at=now, from_state="", to_state=JobState.PENDING, reason=reason)


@transaction.atomic
def job_submit(
    *,
    owner: User,
    name: str,
    image: str,
    command: Sequence[str],
    nodes: int,
    gpus_per_node: int,
    wall_time_seconds: int,
    priority_class: str,
    max_restarts: int = 0,
    env: Mapping[str, str] | None = None,
    team: Team | None = None,
    simulate: Mapping[str, Any] | None = None,
    preemptible: bool = False,
    volumes: Sequence[Mapping[str, object]] = (),
    rdma_per_node: int = 0,
    gpu_fraction: float | None = None,
    gpu_memory_gb: float | None = None,
    gpu_isolation: bool = False,
    min_nodes: int | None = None,
    max_nodes: int | None = None,
) -> Job:
    """Queue a job. The job row and its first event are written together, or not at all."""
    spec: dict[str, Any] = {
        "name": name,
        "image": image,
        "command": command,
        "nodes": nodes,
        "gpus_per_node": gpus_per_node,
        "wall_time_seconds": wall_time_seconds,
        "priority_class": priority_class,
        "max_restarts": max_restarts,
        "env": env,
        "team": team,
        "simulate": simulate,
        "preemptible": preemptible,
        "volumes": volumes,
        "rdma_per_node": rdma_per_node,
        "gpu_fraction": gpu_fraction,
        "gpu_memory_gb": gpu_memory_gb,
        "gpu_isolation": gpu_isolation,
        "min_nodes": min_nodes,
        "max_nodes": max_nodes,
    }
    spec, cut = job_fit_elastic_range(spec)
    job_submit_check(owner=owner, **spec)
    now = timezone.now()
    job = _job_row(owner=owner, now=now, spec=spec)
    job.save()
    _submitted_event(job, owner, now, cut).save()
    queue_changed()
    return job


@transaction.atomic
def job_submit_array(*, owner: User, indices: Sequence[int], **spec: Any) -> list[Job]:
    """Queue one job per index, all or none, checked once (every element asks for the same).

    The elements share `array_id` (the first element's id) and each has its `array_index`; their pods
    find both in MUSTER_ARRAY_ID and MUSTER_ARRAY_INDEX (`jobs.arrays.array_env`).
    """
    if not indices:
        raise ValidationError({"array": ["An array needs at least one index."]})
    spec, cut = job_fit_elastic_range(spec)
    job_submit_check(owner=owner, **spec)
    now = timezone.now()
    jobs = Job.objects.bulk_create([_job_row(owner=owner, now=now, spec=spec, array_index=index) for index in indices])
    array_id = jobs[0].pk
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(array_id=array_id)
    for job in jobs:
        job.array_id = array_id
    JobEvent.objects.bulk_create([_submitted_event(job, owner, now, cut) for job in jobs])
    queue_changed()
    return jobs


def job_transition(job: Job, to_state: str, *, reason: str, now: datetime | None = None, **fields: Any) -> Job:
    """Move a job to another state, with an event, refusing illegal or concurrent moves.

    The update is conditional on the state the caller saw, so two writers can
    never both move the same job. Leaving SCHEDULED/RUNNING releases its GPUs.
    """
    from_state = job.state
    if not can_transition(from_state, to_state):
        raise IllegalTransition(job.pk, from_state, to_state)
    now = now or timezone.now()
    if to_state in TERMINAL_STATES:
        fields.setdefault("finished_at", now)
    if to_state != JobState.PENDING:
        # Out of the queue: why it waited and the plan the cycle stored for it (position, priority, estimate,
        # reservation) go with it, so a requeued job waits as new until a cycle plans it again.
        fields.setdefault("pending_reason_code", "")
        fields.setdefault("pending_reason", "")
        for name, value in job_plan_cleared().items():
            fields.setdefault(name, value)
    if to_state == JobState.PENDING and job.elastic and job.max_nodes:
        # Back in the queue an elastic job asks for its most again, as it did when submitted (the scheduler reads
        # max_nodes); the size it held stays in its allocations, its resizes and the ledger.
        fields.setdefault("nodes", job.max_nodes)
    fields.setdefault("state_reason", reason)
    with transaction.atomic():
        updated = Job.objects.filter(pk=job.pk, state=from_state).update(state=to_state, updated_at=now, **fields)
        if not updated:
            current = Job.objects.filter(pk=job.pk).values_list("state", flat=True).first()
            raise IllegalTransition(job.pk, current or from_state, to_state)
        JobEvent.objects.create(
            job=job, at=now, from_state=from_state, to_state=to_state, reason=reason, attempt=fields.get("attempt", job.attempt)
        )
        if from_state in ACTIVE_STATES and to_state not in ACTIVE_STATES:
            # The ledger charges up to this instant while the allocations are still live.
            for left_active in job_hooks.left_active:
                left_active(job=job, until=now)
            Allocation.objects.filter(job=job, released_at__isnull=True).update(released_at=now)
        if from_state == JobState.RUNNING:
            # Telemetry stores the run's GPU and network series once this commits.
            for left_running in job_hooks.left_running:
                left_running(job=job, attempt=job.attempt, now=now)
        for state_changed in job_hooks.state_changed:
            state_changed(job=job, from_state=from_state, to_state=to_state, reason=reason, now=now)
    job.state = to_state
    for key, value in fields.items():
        setattr(job, key, value)
    job.updated_at = now
    return job


def job_cancel(
    *, job: Job, by: User | None, reason: str = "", comment: str = "", backend: ClusterBackend | None = None, request: Any = None
) -> Job:
    """Cancel a job in any state that has not ended. Its pods are deleted after the commit.

    Cancelling someone else's job (an admin) goes on the audit trail, from `request`'s address. `by` None is Muster
    itself; `reason` replaces "Cancelled by <user>." as the job's reason (what its owner reads); `comment` is the
    canceller's word on why, added to it ("Cancelled by root: the node is going into maintenance.").
    """
    reason = reason or cancelled_by(by, comment)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state in TERMINAL_STATES:
            raise JobFinished(f"Job {job.pk} has already ended ({job.state}); there is nothing to cancel.")
        job = _cancel_locked(job, by=by, reason=reason, backend=backend, request=request)
        queue_changed()
    return job


def jobs_cancel_unmeetable() -> list[int]:
    """Cancel the pending jobs with a dependency that can never be met (the job it waits for ended the other way), as
    Slurm's kill_invalid_depend does, saying why (`dependencies_unmeetable`). Returns their ids. A job depending on one
    of those is cancelled by the next cycle in turn."""
    broken = dependencies_unmeetable()
    for job in Job.objects.filter(pk__in=broken, state=JobState.PENDING).order_by("pk"):
        job_cancel(job=job, by=None, reason=broken[job.pk])
    return sorted(broken)


# The longest comment a canceller may give (the API refuses more; the page's field takes no more).
CANCEL_COMMENT_MAX = 300


def job_requeue_by(
    *, job: Job, by: User, comment: str = "", hold: bool = False, backend: ClusterBackend | None = None, request: Any = None
) -> Job:
    """`scontrol requeue`: stop a placed or running job's gang and put it back in the queue, keeping its submit time (its
    place). Its pods are deleted after the commit; what it ran is charged up to now. It spends none of its restarts
    (they are for failures) and counts as no preemption. Someone else's job (an admin) is audited. Raises
    JobNotRequeueable if it is not SCHEDULED or RUNNING (a pending job is queued already; an ended one is resubmitted).

    `hold`: `scontrol requeuehold`, held (`job_hold`) in the same transaction, so no cycle can place it in between."""
    who = by.get_username()
    text = comment.strip()
    why = f"Requeued by {who}: {text}{'' if text.endswith(('.', '!', '?')) else '.'}" if text else f"Requeued by {who}."
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if job.state in TERMINAL_STATES:
            raise JobNotRequeueable(
                f"Job {job.pk} has already ended ({job.state}); only a placed or running job can be requeued (resubmit it)."
            )
        if job.state not in ACTIVE_STATES:
            raise JobNotRequeueable(f"Job {job.pk} is {job.state}: only a placed or running job can be requeued; it is queued already.")
        was, attempt, ranks = job.state, job.attempt, job.nodes
        job = job_transition(job, JobState.PENDING, reason=why, pending_reason_code="REQUEUED", pending_reason=why, launch_not_before=None)
        if by.pk != job.owner_id:
            changes = {"state": [was, job.state], "reason": ["", why]}
            audit_record(actor=by, action="job.requeue", target=job, changes=changes, request=request, job=job)
        if hold:
            job = job_hold(job=job, by=by, request=request)
        job_id = job.pk
        transaction.on_commit(lambda: _teardown_quietly(backend or get_backend(), job_id, attempt, ranks))
        queue_changed()
    return job


def cancelled_by(by: User | None, comment: str = "") -> str:
    """A cancelled job's reason: who, and their comment if they gave one."""
    who = by.get_username() if by else "Muster"
    text = comment.strip()
    return f"Cancelled by {who}: {text}{'' if text.endswith(('.', '!', '?')) else '.'}" if text else f"Cancelled by {who}."


def _cancel_locked(job: Job, *, by: User | None, reason: str, backend: ClusterBackend | None, request: Any) -> Job:
    """The cancel of a job its caller has locked and found not ended: one rule for a job and an array's elements."""
    had_pods = job.state in ACTIVE_STATES
    was, was_reason = job.state, job.state_reason
    job = job_transition(job, JobState.CANCELLED, reason=reason or cancelled_by(by))
    if by is not None and by.pk != job.owner_id:
        # With the reason its owner now reads (an admin's "why"), so the audit trail says why as well as who.
        changes = {"state": [was, job.state], "reason": [was_reason, job.state_reason]}
        audit_record(actor=by, action="job.cancel", target=job, changes=changes, request=request, job=job)
    if had_pods:
        job_id, attempt, ranks = job.pk, job.attempt, job.nodes
        transaction.on_commit(lambda: _teardown_quietly(backend or get_backend(), job_id, attempt, ranks))
    return job


# What a held job's plan is while it waits: no estimate and no reservation (the cycle stores the same; written at once
# so the queue says so before the next cycle). Its position and priority stay: it keeps its place.
_HELD_PLAN = ("estimated_start", "estimate_kind", "reserved_nodes", "reserved_start")


def job_hold(*, job: Job, by: User, request: Any = None) -> Job:
    """`scontrol hold`: keep a PENDING job out of placement until it is released (`job_release`). It stays in the
    queue and keeps its submit time (its age, so its place), but the cycle never places it, lets it preempt or promises
    it nodes: it waits with reason HELD and no estimated start.

    Its owner's hold (JobHeldUser) its owner or an admin may release; an admin's hold on someone else's job
    (JobHeldAdmin, audited) only an admin. An admin holding a job its owner holds makes it an admin's hold; holding
    a job held already so changes nothing. Raises JobNotHoldable if the job is not PENDING, or if an admin holds it
    and `by` is not one: the owner's hold would not be theirs to release (it read "Held job 13", then the release was
    refused).
    """
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("held_by").get(pk=job.pk)
        if job.state != JobState.PENDING:
            raise JobNotHoldable(_not_pending(job, "held"))
        kind = JobHold.ADMIN if by.is_staff and by.pk != job.owner_id else JobHold.USER
        if job.hold == JobHold.ADMIN and not by.is_staff:
            admin = f" ({job.held_by.get_username()})" if job.held_by is not None else ""
            raise JobNotHoldable(f"Job {job.pk} is already held by an admin{admin}; only an admin can release it.")
        if job.hold in (kind, JobHold.ADMIN):
            return job
        was, counted_as = job.hold, job.pending_reason_code
        job.hold, job.held_by, job.held_at = kind, by, timezone.now()
        job.pending_reason_code = HELD
        job.pending_reason = hold_reason(job_id=job.pk, hold=kind, held_by=by.get_username(), held_at=job.held_at)
        for name in _HELD_PLAN:
            setattr(job, name, job_plan_cleared()[name])
        job.save(update_fields=["hold", "held_by", "held_at", "pending_reason_code", "pending_reason", *_HELD_PLAN, "updated_at"])
        _recount_planned(job, counted_as, HELD)
        admin_only = "; only an admin can release it" if kind == JobHold.ADMIN else ""
        _note(job, f"Held by {by.get_username()}{admin_only}.", job.held_at)
        if by.pk != job.owner_id:
            audit_record(actor=by, action="job.hold", target=job, changes={"hold": [was, kind]}, request=request, job=job)
        queue_changed()
    return job


def _recount_planned(job: Job, was: str, now: str) -> None:
    """A planned job (one the last cycle counted in the queue's summary, PlannedQueue) whose reason a hold or a release
    changed is counted under its new one at once: the summary said NO_ROOM beside a row that said HELD until the next
    cycle. In the caller's transaction; the next cycle counts again anyway."""
    if job.queue_position is None or was == now:
        return
    planned = PlannedQueue.objects.select_for_update().filter(pk=1).first()
    if planned is None:
        return
    counts = dict(planned.pending_by_reason)
    was = was or "NEW"
    if counts.get(was, 0) > 0:
        counts[was] -= 1
        if not counts[was]:
            del counts[was]
        counts[now] = counts.get(now, 0) + 1
        planned.pending_by_reason = dict(sorted(counts.items()))
        planned.save(update_fields=["pending_by_reason"])


def job_release(*, job: Job, by: User, request: Any = None) -> Job:
    """`scontrol release`: a held job may start again from the next cycle (which `queue_changed` asks for), in the place
    its age gives it. Raises JobNotHoldable if it is not held, HoldNotYours if an admin holds it and `by` is not one.
    Releasing someone else's job (an admin) is audited."""
    with transaction.atomic():
        job = Job.objects.select_for_update(of=("self",)).select_related("held_by").get(pk=job.pk)
        if job.state != JobState.PENDING:
            raise JobNotHoldable(_not_pending(job, "released"))
        if not job.hold:
            raise JobNotHoldable(f"Job {job.pk} is not held; there is nothing to release.")
        if job.hold == JobHold.ADMIN and not by.is_staff:
            admin = f" ({job.held_by.get_username()})" if job.held_by is not None else ""
            raise HoldNotYours(f"Job {job.pk} is held by an admin{admin}; only an admin can release it.")
        was, counted_as = job.hold, job.pending_reason_code
        job.hold, job.held_by, job.held_at = JobHold.NONE, None, None
        job.pending_reason_code = "NEW"
        job.pending_reason = f"Released by {by.get_username()}; waiting for the next scheduling cycle."
        job.save(update_fields=["hold", "held_by", "held_at", "pending_reason_code", "pending_reason", "updated_at"])
        _recount_planned(job, counted_as, "NEW")
        _note(job, f"Released by {by.get_username()}.", timezone.now())
        if by.pk != job.owner_id:
            audit_record(actor=by, action="job.release", target=job, changes={"hold": [was, ""]}, request=request, job=job)
        queue_changed()
    return job


def _note(job: Job, reason: str, at: datetime) -> None:
    """A hold or release in the job's history: an event from and to PENDING, as it changes no state (JobEvent)."""
    JobEvent.objects.create(job=job, at=at, from_state=JobState.PENDING, to_state=JobState.PENDING, reason=reason, attempt=job.attempt)


def _not_pending(job: Job, done: str) -> str:
    if job.state in TERMINAL_STATES:
        return f"Job {job.pk} has already ended ({job.state}); only a pending job can be {done}."
    return f"Job {job.pk} is {job.state}: only a pending job can be {done} (it has been placed; cancel it to stop it)."


@dataclass(frozen=True)
class ArrayCancel:
    """What `job_cancel_array` did: the elements it cancelled and those asked for that had already ended, by index."""

    array_id: int
    name: str
    cancelled: list[Job]
    ended: list[Job]


def job_cancel_array(
    *,
    array_id: int,
    by: User,
    indices: Iterable[int] | None = None,
    comment: str = "",
    backend: ClusterBackend | None = None,
    request: Any = None,
) -> ArrayCancel:
    """`scancel 4` (every element of array 4 not ended) or `scancel 4_[1-3]` (those of `indices`), all or nothing.

    The elements `by` may see (`jobs_visible_to`: their owner, or an admin) are locked in id order, so two cancels of
    one array wait for each other rather than deadlock; each is cancelled as `job_cancel` does it (audited when it is
    someone else's, its pods deleted after the commit), and the scheduler is told once. Raises ArrayNotFound (no such
    array, or not one `by` may see), ArrayIndicesMissing (indices it lacks: nothing is cancelled) or ArrayEnded
    (every element asked for has ended).
    """
    wanted = None if indices is None else set(indices)
    with transaction.atomic():
        elements = list(
            jobs_visible_to(by).select_related(None).prefetch_related(None).filter(array_id=array_id).order_by("pk").select_for_update()
        )
        if not elements:
            raise ArrayNotFound(array_id)
        if wanted is not None and (missing := sorted(wanted - {job.array_index for job in elements})):
            raise ArrayIndicesMissing(array_id, missing)
        asked = sorted((job for job in elements if wanted is None or job.array_index in wanted), key=_by_index)
        ended = [job for job in asked if job.state in TERMINAL_STATES]
        name = elements[0].name
        if len(ended) == len(asked):
            raise ArrayEnded(_nothing_left(array_id, ended, whole=wanted is None), array_id=array_id, name=name, ended=list(ended))
        cancelled = [
            _cancel_locked(job, by=by, reason=cancelled_by(by, comment), backend=backend, request=request)
            for job in asked
            if job.state not in TERMINAL_STATES
        ]
        queue_changed()
    return ArrayCancel(array_id=array_id, name=name, cancelled=cancelled, ended=ended)


@dataclass(frozen=True)
class JobsCancel:
    """What `job_cancel_many` did: the jobs it cancelled, those that had already ended, and the ids asked for that are no
    job the asker may see (as a single cancel reads them: not found)."""

    cancelled: list[Job]
    ended: list[Job]
    not_found: list[int]


def job_cancel_many(
    *, job_ids: Iterable[int], by: User, comment: str = "", backend: ClusterBackend | None = None, request: Any = None
) -> JobsCancel:
    """`scancel 12 13 17`: cancel each of the jobs asked for that `by` may see (`jobs_visible_to`: their owner, or an
    admin) and that has not ended, in one transaction.

    They are locked in id order, so two such cancels wait for each other rather than deadlock; each is cancelled as
    `job_cancel` does it (audited when it is someone else's, its pods deleted after the commit), and the scheduler is
    told once. Unlike an array's cancel it is not all or nothing: an ended job or an id `by` may not see is left out
    and said in the answer (an id of someone else's job reads as one that does not exist). `comment` is why, as a
    single cancel's (its owner reads it).

    One transaction matters: cancelled one by one, the nodes the first cancels freed went to the next job of the list
    in the cycle between, which was placed and cancelled the same second.
    """
    wanted = set(job_ids)
    reason = cancelled_by(by, comment) if comment.strip() else ""
    with transaction.atomic():
        found = list(
            jobs_visible_to(by).select_related(None).prefetch_related(None).filter(pk__in=wanted).order_by("pk").select_for_update()
        )
        ended = [job for job in found if job.state in TERMINAL_STATES]
        cancelled = [
            _cancel_locked(job, by=by, reason=reason, backend=backend, request=request) for job in found if job.state not in TERMINAL_STATES
        ]
        if cancelled:
            queue_changed()
    return JobsCancel(cancelled=cancelled, ended=ended, not_found=sorted(wanted - {job.pk for job in found}))


def _by_index(job: Job) -> int:
    return job.array_index or 0


def _nothing_left(array_id: int, ended: Sequence[Job], *, whole: bool) -> str:
    nothing = "there is nothing to cancel"
    if whole:
        return f"Array {array_id} has ended: its {len(ended)} job{'s' if len(ended) != 1 else ''} had already ended; {nothing}."
    if len(ended) == 1:
        job = ended[0]
        return f"Job {job.pk} ({array_id}_{job.array_index}) has already ended ({job.state}); {nothing}."
    elements = f"{array_id}_[{index_ranges(_by_index(job) for job in ended)}]"
    return f"{len(ended)} elements of array {array_id} ({elements}) had already ended; {nothing} in them."


def _teardown_quietly(backend: ClusterBackend, job_id: int, attempt: int, ranks: int) -> None:
    # The reconcile step of the next cycle deletes whatever this misses (or leaves for a retried capture of its output).
    if ClusterHealth.objects.filter(pk=1).values_list("reachable", flat=True).first() is False:
        # The last cycle could not reach the cluster: each call would wait out its timeout inside the cancel's request
        # (81 s on a walk, the CLI giving up first), and the cycle that reaches it again deletes the gang anyway.
        logger.info("cluster unreachable at the last cycle: job %s attempt %s is torn down by the next cycle", job_id, attempt)
        return
    try:
        gang_teardown(backend, job_id, attempt, range(ranks))
    except Exception:
        logger.exception("teardown of job %s attempt %s failed; the next cycle will retry", job_id, attempt)


# What `job_update` may change of a pending job (`scontrol update`), in the order its history names them; everything
# else a job asks for (its image, command, nodes, GPUs, team, volumes) is cancelled and resubmitted.
UPDATABLE_FIELDS = ("name", "wall_time_seconds", "priority_class", "max_restarts", "preemptible", "dependencies")
# How many of the refusals of one kind an update of an array's elements names (each element would say the same).
_SAID_AT_MOST = 3


def job_update(*, job_ids: Sequence[int], by: User, changes: Mapping[str, Any], request: Any = None) -> list[Job]:
    """`scontrol update JobId=42 TimeLimit=2:00:00 Name=x Dependency=afterok:5`: change what `changes` gives (of
    UPDATABLE_FIELDS, each already valid on its own: the submit serializer's validators; `dependencies` as
    `jobs.dependencies.resolve` found them, an empty list clearing them) of the PENDING jobs of `job_ids` (one job, or
    an array's pending elements), all or none, in one transaction. Returns them, by id.

    Each is checked against its owner's limits as its submit was (`job_submit_problems` with the job as it would be),
    every refusal at once as a ValidationError: a wall time beyond the owner's most, a class the owner may not use
    (an admin may give one, as at submit: a reserved class is given, not taken), dependencies that would make a job
    wait on itself, directly or through the jobs it waits for (none of them could ever start). Unlike Slurm, an owner
    may raise a wall time as well as lower it: their limits are the site's rule, checked here as at submit, and a
    pending job has used nothing yet. Raises JobNotUpdatable if one is not PENDING (a running job's wall time is not
    changed here), JobFinished if one has ended.

    Each changed job gets an event from and to PENDING naming who changed what from what to what; someone else's (an
    admin) is audited (job.update). A change the scheduler plans by (wall time, class, preemptible, dependencies) clears
    the job's stored estimate and reservation, as a hold does, and asks for a cycle: the next one reads the new values.
    """
    unknown = sorted(set(changes) - set(UPDATABLE_FIELDS))
    if unknown:
        raise ValueError(f"job_update changes only {', '.join(UPDATABLE_FIELDS)}; not {', '.join(unknown)}")
    planned_by = {"wall_time_seconds", "priority_class", "preemptible", "dependencies"}
    asked: Sequence[Asked] | None = changes.get("dependencies")
    fields_changed = {k: v for k, v in changes.items() if k != "dependencies"}
    with transaction.atomic():
        if asked is not None:
            dependencies_graph_lock()  # before the rows: see its docstring
        jobs = list(Job.objects.select_for_update(of=("self",)).select_related("owner", "team").filter(pk__in=job_ids).order_by("pk"))
        for job in jobs:
            if job.state in TERMINAL_STATES:
                raise JobFinished(f"Job {job.pk} has already ended ({job.state}); only a pending job can be updated.")
            if job.state != JobState.PENDING:
                raise JobNotUpdatable(
                    f"Job {job.pk} is {job.state}: only a pending job can be updated (a placed or running job's wall time "
                    "and the rest are not changed here; cancel and resubmit it, or requeue it first)."
                )
        problems: dict[str, list[str]] = {}
        for job in jobs:
            if not planned_by & {k for k, v in fields_changed.items() if getattr(job, k) != v}:
                continue  # a name or restarts changes none of the owner's limits
            found = job_submit_problems(owner=job.owner, **_as_submitted(job, fields_changed))
            if found:
                # Refused only for what the update changes: a limit lowered under the job as it stands (its nodes past
                # a lowered node-hours limit, a budget lowered below it) already holds it, and an admin's change of its
                # class alone was refused for its `nodes`, which no update changes. A refusal the job had before is
                # not the update's.
                had = job_submit_problems(owner=job.owner, **_as_submitted(job, {}))
                found = {key: [m for m in messages if m not in had.get(key, [])] for key, messages in found.items()}
            if by.is_staff and "priority_class" in found and changes.get("priority_class") != job.priority_class:
                # An admin gives a reserved class (as they may submit in one); the owner's other limits still hold.
                found["priority_class"] = []
            for key, messages in found.items():
                problems.setdefault(key, []).extend(m for m in messages if m not in problems[key])
        deps = _dependencies_changed(jobs, asked)
        if deps:
            refused = contradictions(asked or ()) + dependencies_cycles({pk: wanted for pk, (_, wanted) in deps.items()})
            if len(refused) > _SAID_AT_MOST:
                more = len(refused) - _SAID_AT_MOST
                refused = [*refused[:_SAID_AT_MOST], f"And {more} more job{'s' if more > 1 else ''} so."]  # not "1 more jobs"
            problems.setdefault("dependencies", []).extend(refused)
        problems = {key: messages for key, messages in problems.items() if messages}
        if problems:
            raise ValidationError(problems)
        now, who, touched = timezone.now(), by.get_username(), False
        for job in jobs:
            changed = {k: [getattr(job, k), v] for k, v in fields_changed.items() if getattr(job, k) != v}
            if job.pk in deps:
                before, wanted = deps[job.pk]
                dependencies_replace(job, wanted)
                changed["dependencies"] = [before, dependencies_said(job.pk, wanted)]
            if not changed:
                continue
            for key, (_, after) in changed.items():
                if key != "dependencies":
                    setattr(job, key, after)
            cleared = list(_HELD_PLAN) if planned_by & set(changed) else []
            for name in cleared:
                setattr(job, name, job_plan_cleared()[name])
            waiting = []
            if "dependencies" in changed and not job.hold:
                # Its reason named what it waited for: the next cycle says what it waits for now.
                counted_as, job.pending_reason_code = job.pending_reason_code, "NEW"
                job.pending_reason = f"Updated by {who}; waiting for the next scheduling cycle."
                _recount_planned(job, counted_as, "NEW")
                waiting = ["pending_reason_code", "pending_reason"]
            job.save(update_fields=[*(k for k in changed if k != "dependencies"), *cleared, *waiting, "updated_at"])
            shown: dict[str, Callable[[Any], str]] = {"wall_time_seconds": duration, "name": repr}
            said = ", ".join(
                f"{key.replace('_seconds', '').replace('_', ' ')} {shown.get(key, str)(was)} -> {shown.get(key, str)(after)}"
                for key, (was, after) in changed.items()
            )
            _note(job, _fit_reason(f"Updated by {who}: {said}."), now)
            if by.pk != job.owner_id:
                audit_record(actor=by, action="job.update", target=job, changes=changed, request=request, job=job)
            touched = True
        if touched:
            queue_changed()
    return jobs


def _as_submitted(job: Job, changes: Mapping[str, Any]) -> dict[str, Any]:
    """The asks of a pending job as its submit gave them, with `changes` made: what its owner's limits are checked on."""
    return {
        "nodes": job.nodes,
        "gpus_per_node": job.gpus_per_node,
        "wall_time_seconds": job.wall_time_seconds,
        "priority_class": job.priority_class,
        "team": job.team,
        "preemptible": job.preemptible,
        "volumes": job.volumes,
        "rdma_per_node": job.rdma_per_node,
        "gpu_fraction": job.gpu_fraction,
        "gpu_memory_gb": job.gpu_memory_gb,
        "gpu_isolation": job.gpu_isolation,
        "min_nodes": job.min_nodes,
        "max_nodes": job.max_nodes,
        **{k: v for k, v in changes.items() if k != "name" and k != "max_restarts"},
    }


def _dependencies_changed(jobs: Sequence[Job], asked: Sequence[Asked] | None) -> dict[int, tuple[str, dict[int, str]]]:
    """The jobs whose dependencies `asked` changes (None: the update does not touch them): each with its dependencies
    before, as `sbatch --dependency` writes them, and the ones it asks now (job waited for -> type)."""
    if asked is None:
        return {}
    wanted = dependencies_wanted(asked)
    had: dict[int, dict[int, str]] = {job.pk: {} for job in jobs}
    for job_id, on, kind in JobDependency.objects.filter(job__in=jobs).values_list("job_id", "on_id", "kind"):
        had[job_id][on] = kind
    return {pk: (dependencies_said(pk, before), wanted) for pk, before in had.items() if before != wanted}


def _fit_reason(text: str) -> str:
    """A history line that fits JobEvent.reason (500 characters): a long one (many dependencies named) keeps its start."""
    return text if len(text) <= 500 else f"{text[:498]}…"
