"""What happens to a job as its gang runs: the decisions the scheduler's cycle takes on what it observes.

Each is one call to `job_transition` (and, for a placement, its allocations) with the reason a
user reads; the cycle (`scheduler.cycle`) only observes the cluster, picks which of these
applies, and tears gangs down. Keeping them here, next to `job_transition`, keeps the rules of a
job's life in one place whoever drives it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from jobs.amounts import duration, plural
from jobs.errors import IllegalTransition
from jobs.hooks import job_hooks
from jobs.models import Allocation, Job, JobEvent, JobResize, Node
from jobs.services import job_transition
from jobs.states import ACTIVE_STATES, JobState

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


@transaction.atomic
def job_place(
    job: Job,
    *,
    node_names: Sequence[str],
    gpus_held: Sequence[float],
    over_quota: bool,
    node_ids: dict[str, int],
    now: datetime,
    gpu_slot: int | None = None,
) -> Job:
    """PENDING -> SCHEDULED as a new attempt, holding `gpus_held[rank]` GPUs on `node_names[rank]` (a GPU slice: its
    share of GPU `gpu_slot`). A job held since the cycle's snapshot (`job_hold`, which takes the same row lock) is not
    placed: IllegalTransition, as for a job cancelled meanwhile."""
    if Job.objects.select_for_update().filter(pk=job.pk).exclude(hold="").exists():
        raise IllegalTransition(job.pk, f"{job.state} (held)", JobState.SCHEDULED)
    attempt = job.attempt + 1
    job = job_transition(
        job,
        JobState.SCHEDULED,
        reason=fit_reason(f"Placed on {', '.join(node_names)}" + (" (borrowing idle GPUs beyond its quota)." if over_quota else ".")),
        now=now,
        attempt=attempt,
        scheduled_at=now,
        over_quota=over_quota,
        charged_until=now,
        # An elastic job's size is what it started on (its most while it waited).
        **({"nodes": len(node_names)} if job.elastic else {}),
    )
    Allocation.objects.bulk_create(
        Allocation(job=job, node_id=node_ids[name], attempt=attempt, rank=rank, gpus=gpus, gpu_slot=gpu_slot, allocated_at=now)
        for rank, (name, gpus) in enumerate(zip(node_names, gpus_held, strict=True))
    )
    return job


@transaction.atomic
def job_resize(
    job: Job,
    *,
    node_names: Sequence[str],
    added: Sequence[str],
    removed: Sequence[str],
    node_ids: dict[str, int],
    reason: str,
    now: datetime,
    grow_not_before: datetime | None = None,
) -> tuple[list[int], list[int]]:
    """An elastic RUNNING job grows onto `added` or shrinks off `removed` (its last ranks): (ranks added, ranks removed).

    Its ranks stay 0..n-1 in the order of `node_names` (rank 0, the rendezvous host, never goes). The ledger charges what
    it held up to now before its allocations change, so each node is charged for the time it was held. The reason is
    the job's state reason from now on ("All 4 pods are running" is no longer true). `grow_not_before` holds its next
    growth back (a growth that did not come up), as a failed launch is held back: the policy reads it as the job's
    launch_not_before.
    """
    locked = Job.objects.select_for_update().get(pk=job.pk)
    if locked.state != JobState.RUNNING or locked.attempt != job.attempt or not locked.elastic:
        raise IllegalTransition(job.pk, locked.state, JobState.RUNNING)
    live = list(Allocation.objects.filter(job=locked, attempt=locked.attempt, released_at__isnull=True).select_related("node"))
    by_rank = sorted(live, key=lambda a: a.rank)
    before = [a.node.name for a in by_rank]
    if [n for n in before if n not in removed] != [n for n in node_names if n not in added] or set(removed) - set(before):
        raise IllegalTransition(job.pk, f"RUNNING on {len(before)} other nodes", JobState.RUNNING)
    for hook in job_hooks.resizing:
        hook(job=locked, until=now)
    gone = [a.rank for a in by_rank if a.node.name in removed]
    if gone and min(gone) < len(before) - len(gone):
        raise ValueError(f"job {job.pk}: only its last ranks may go, not {gone}")
    Allocation.objects.filter(pk__in=[a.pk for a in by_rank if a.rank in gone]).update(released_at=now)
    kept = len(before) - len(gone)
    grown = list(range(kept, kept + len(added)))
    Allocation.objects.bulk_create(
        Allocation(job=locked, node_id=node_ids[name], attempt=locked.attempt, rank=rank, gpus=node_gpus, allocated_at=now)
        for rank, name, node_gpus in zip(grown, added, _node_gpus(added), strict=True)
    )
    size = kept + len(added)
    reason = fit_reason(reason)
    held = {"launch_not_before": grow_not_before} if grow_not_before else {}
    Job.objects.filter(pk=job.pk).update(nodes=size, state_reason=reason, updated_at=now, **held)
    JobResize.objects.create(
        job=locked, at=now, attempt=locked.attempt, from_nodes=len(before), to_nodes=size, added=list(added), removed=list(removed),
        reason=reason,
    )  # fmt: skip
    job.nodes, job.state_reason = size, reason
    if grow_not_before:
        job.launch_not_before = grow_not_before
    return grown, gone


def _node_gpus(names: Sequence[str]) -> list[int]:
    """A node an elastic job grows onto is held whole."""
    sizes = dict(Node.objects.filter(name__in=names).values_list("name", "gpus_total"))
    return [sizes[name] for name in names]


def _all_running(nodes: int) -> str:
    """A gang's pods all up, as a person says it: "Its pod", "Both pods", "All 8 pods"."""
    if nodes == 1:
        return "Its pod is running."
    return "Both pods are running." if nodes == 2 else f"All {nodes} pods are running."


def job_mark_running(job: Job, *, now: datetime) -> Job:
    """SCHEDULED -> RUNNING once every pod runs; a launch that came up clears the failed-launch count."""
    return job_transition(
        job,
        JobState.RUNNING,
        reason=_all_running(job.nodes),
        now=now,
        started_at=now,
        launch_failures=0,
        launch_failures_counted=0,
        launch_not_before=None,
    )


def job_succeed(job: Job, *, now: datetime) -> Job:
    return job_transition(job, JobState.SUCCEEDED, reason="All pods exited with code 0.", now=now, exit_code=0)


def job_time_out(job: Job, *, now: datetime) -> Job:
    return job_transition(job, JobState.TIMED_OUT, reason=f"Stopped: wall time of {duration(job.wall_time_seconds)} reached.", now=now)


def job_wall_time_passed(job: Job, *, now: datetime) -> bool:
    """Wall time counts from placement, when the GPUs were taken: the end the scheduler planned reservations by."""
    placed = job.scheduled_at or job.started_at
    return bool(placed and now >= placed + timedelta(seconds=job.wall_time_seconds))


def job_wall_time_end(job: Job, *, now: datetime) -> datetime:
    """When a job whose wall time passed is taken to have stopped: at its limit (placement + wall time), as Slurm ends a
    job at its TimeLimit, though the cycle that stops it comes up to a cycle interval later (its GPUs are free from
    then); never before what was charged already. So a `-t 1m` job's elapsed time reads 1m, not the cycle's 1m1s."""
    placed = job.scheduled_at or job.started_at
    if placed is None:
        return now
    limit = placed + timedelta(seconds=job.wall_time_seconds)
    return min(now, max(limit, job.charged_until or limit))


def job_launch_note(job: Job, *, note: str) -> None:
    """Say on a launching (SCHEDULED) job's page what keeps its gang from coming up, after where it was placed: no
    transition, no event (it may change every cycle). Before, it read "Placed on gpu-node-00." for the whole launch
    timeout while kube-scheduler said why it could not bind the pod."""
    placed = job.state_reason.split(" Not running yet: ")[0]
    reason = fit_reason(f"{placed} Not running yet: {note}" if note else placed)
    if reason != job.state_reason:
        Job.objects.filter(pk=job.pk, state=JobState.SCHEDULED, attempt=job.attempt).update(state_reason=reason)
        job.state_reason = reason


def job_note(job: Job, *, now: datetime, note: str) -> None:
    """Say in an active job's history what happened to its gang without a change of state (the cluster mended what
    someone broke under it): its owner reads it there with the transitions."""
    JobEvent.objects.create(
        job=job, at=now, from_state=job.state, to_state=job.state, attempt=job.attempt, reason=fit_reason(note)
    )  # fmt: skip


def job_launch_overdue(job: Job, *, now: datetime) -> bool:
    """SCHEDULED for longer than a launch may take to come up."""
    return bool(
        job.state == JobState.SCHEDULED
        and job.scheduled_at
        and now >= job.scheduled_at + timedelta(seconds=settings.MUSTER_LAUNCH_TIMEOUT_SECONDS)
    )


def job_requeue(job: Job, *, now: datetime, why: str, **fields: object) -> Job:
    """Back to PENDING after an attempt ended early. The job keeps its submit time, so its place among jobs of its class."""
    why = fit_reason(why)
    # A running elastic job's hold on growing (launch_not_before) is not a launch's backoff: the requeued job starts clean.
    fields = {"launch_not_before": None, **fields}
    return job_transition(job, JobState.PENDING, reason=why, now=now, pending_reason_code="REQUEUED", pending_reason=why, **fields)


def job_retry_or_fail(job: Job, *, now: datetime, why: str, exit_code: int | None, failed_on: str = "") -> Job:
    """An attempt failed: requeued while the job has restarts left, else FAILED with the exit code.

    `failed_on`, the node the failing rank ran on, is avoided by the retry when it fits elsewhere: a rank that
    died of a bad GPU or a broken link would fail again there. Its launch came up (a pod ran and exited, perhaps
    before the cycle saw them all running), so the failed-launch count is cleared, as job_mark_running clears it:
    a job that ran is not one that never did (selectors.job_never_ran).
    """
    if job.restarts < job.max_restarts:
        return job_requeue(
            job,
            now=now,
            why=f"Attempt {job.attempt} failed: {why} Restarting ({job.restarts + 1} of {job.max_restarts}).",
            restarts=job.restarts + 1,
            avoid_nodes=[failed_on] if failed_on else [],
            launch_failures=0,
            launch_failures_counted=0,
        )
    reason = fit_reason(f"Attempt {job.attempt} failed: {why}")
    return job_transition(job, JobState.FAILED, reason=reason, now=now, exit_code=exit_code, launch_failures=0, launch_failures_counted=0)


def job_launch_failed(job: Job, *, now: datetime, why: str, transient: bool = False, avoid_nodes: Sequence[str] = ()) -> Job:
    """A launch that did not come up: back to the queue after a pause that doubles each time, or FAILED after too many.

    Without the pause a launch that can never succeed (a manifest the API server rejects, an
    admission policy, an image that never pulls) would be placed, fail and be requeued cycle
    after cycle, holding GPUs others could use each time. Restarts are not spent: the job's
    code never ran. A `transient` failure (the API server unreachable, overloaded, or failing
    with a 5xx) backs off the same way but never fails the job, nor counts towards failing it: it is the cluster's
    trouble. `avoid_nodes` are avoided by the next launch where it fits elsewhere (a node that refused the pod).
    """
    failures = job.launch_failures + 1
    # Only the job's own failed launches count towards failing it; the transient ones between them back off alike.
    counted = job.launch_failures_counted + (0 if transient else 1)
    limit = settings.MUSTER_LAUNCH_MAX_FAILURES
    why = why.rstrip()
    if not why.endswith((".", "!", "?")):  # the API server's words end bare: "…gpu=16 Failed launch 1 in a row"
        why += "."
    if counted >= limit and not transient:
        return job_transition(
            job,
            JobState.FAILED,
            reason=fit_reason(f"{plural(counted, 'launch', 'launches')} in a row did not come up; the last: {why}"),
            now=now,
            launch_failures=failures,
            launch_failures_counted=counted,
        )
    delay = min(settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS, settings.MUSTER_LAUNCH_BACKOFF_SECONDS * 2 ** (failures - 1))
    return job_requeue(
        job,
        now=now,
        why=f"{why} Failed launch {failures if transient else f'{counted} of at most {limit}'} in a row; tried again in {delay} s.",
        launch_failures=failures,
        launch_failures_counted=counted,
        launch_not_before=now + timedelta(seconds=delay),
        **({"avoid_nodes": list(avoid_nodes)} if avoid_nodes else {}),
    )


def job_not_launched(job: Job, *, now: datetime, why: str) -> Job:
    """A placed job whose launch the cluster refused for a cause of its own, not the job's (the jobs' namespace gone or
    being deleted, Muster's role cut): back to the queue with nothing spent, no failed launch counted and no backoff,
    so it is placed again in the first cycle after the cluster takes jobs. Before, each such refusal counted as a failed
    launch: a namespace held Terminating for minutes backed jobs off for up to 10 minutes after it was back."""
    why = why.rstrip()
    if not why.endswith((".", "!", "?")):
        why += "."
    return job_requeue(
        job, now=now, why=f"Not launched: {why} It waits, spending no launch, and is placed again once the cluster takes jobs."
    )


def job_within_quota(job: Job, *, now: datetime) -> bool:
    """A job placed borrowing beyond its owners' quotas that the quotas now have room for (the policy's within_quota):
    counted within them from now on, so no longer the first to be taken back. Said in its history, without a change of
    state. False if it is no longer a running borrower (it ended or was stopped since the snapshot)."""
    changed = Job.objects.filter(pk=job.pk, state__in=ACTIVE_STATES, over_quota=True).update(over_quota=False, updated_at=now)
    if changed:
        job.over_quota = False
        JobEvent.objects.create(
            job=job, at=now, from_state=job.state, to_state=job.state, attempt=job.attempt,
            reason="Within its owner's quota now (the quota's GPUs came free): no longer taken back for others' jobs.",
        )  # fmt: skip
    return bool(changed)


def job_preempt(job: Job, *, reason: str, for_job_id: int, now: datetime) -> Job:
    """RUNNING/SCHEDULED -> PREEMPTED -> PENDING at once, keeping its submit time and so its age."""
    job = job_transition(job, JobState.PREEMPTED, reason=fit_reason(reason), now=now)
    why = f"Requeued after preemption by job {for_job_id}."
    return job_transition(
        job, JobState.PENDING, reason=why, now=now, pending_reason_code="PREEMPTED", pending_reason=why, over_quota=False,
        launch_not_before=None,
    )  # fmt: skip
