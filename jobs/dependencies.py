"""Job dependencies, as `sbatch --dependency` takes them: a job waits until the jobs it names have ended as asked
(afterok: succeeded; afternotok: failed, timed out or was cancelled; afterany: ended whatever way).

A dependency that can never be met any more (afterok on a job that failed) cancels the waiting job at the next cycle,
with the reason, as Slurm does with `kill_invalid_depend`: left pending it would wait for ever, holding its place.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.contrib.auth.models import User

from jobs.models import Job, JobDependency
from jobs.selectors import jobs_visible_to
from jobs.services import job_cancel
from jobs.states import TERMINAL_STATES, JobState

KINDS = tuple(kind for kind, _ in JobDependency.KINDS)
# The most jobs one job may wait for (an array's elements counted one by one).
MAX_DEPENDENCIES = 1000
_FAILED = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT})


def met(kind: str, state: str) -> bool | None:
    """Whether a dependency on a job in `state` is met (True), never will be (False), or not yet (None)."""
    if state not in TERMINAL_STATES:
        return None
    if kind == JobDependency.AFTER_OK:
        return state == JobState.SUCCEEDED
    if kind == JobDependency.AFTER_NOT_OK:
        return state in _FAILED
    return True


def _words(kind: str) -> str:
    return dict(JobDependency.KINDS)[kind]


@dataclass(frozen=True)
class Asked:
    """One dependency of a submit, resolved: the jobs it names (an array's id names all of its elements)."""

    kind: str
    job_ids: tuple[int, ...]


def resolve(owner: User, asked: Sequence[tuple[str, int]]) -> tuple[list[Asked], list[str]]:
    """The submit's (kind, job id) pairs as jobs `owner` may see, and every refusal: no such job, or one already ended
    so that the dependency can never be met. An id that is an array's (its first element's, as `muster submit --array`
    prints it) names every element, as scancel and Slurm's dependencies read it."""
    ids = {job_id for _, job_id in asked}
    visible = jobs_visible_to(owner).select_related(None).prefetch_related(None)
    states = dict(visible.filter(pk__in=ids).values_list("pk", "state"))
    elements: defaultdict[int, list[tuple[int, str]]] = defaultdict(list)
    for pk, array_id, state in visible.filter(array_id__in=ids).values_list("pk", "array_id", "state").order_by("pk"):
        if array_id is not None:
            elements[array_id].append((pk, state))
    found: list[Asked] = []
    problems: list[str] = []
    for kind, job_id in asked:
        jobs = elements.get(job_id) or ([(job_id, states[job_id])] if job_id in states else [])
        if not jobs:
            problems.append(f"No job {job_id} (or none that you may see).")
            continue
        never = [(pk, state) for pk, state in jobs if met(kind, state) is False]
        if never:
            pk, state = never[0]
            problems.append(f"{kind}:{job_id} can never be met: job {pk} has ended {state}.")
            continue
        found.append(Asked(kind, tuple(pk for pk, _ in jobs)))
    if sum(len(a.job_ids) for a in found) > MAX_DEPENDENCIES:
        problems.append(f"A job may wait for at most {MAX_DEPENDENCIES} jobs.")
    return found, problems


def dependencies_save(jobs: Iterable[Job], asked: Sequence[Asked]) -> None:
    """The submit's dependencies for each job it queued, in the submit's transaction. A job named twice keeps its
    strictest ask: afterok or afternotok over afterany (the two strict ones together can never both be met, and submit
    refuses that)."""
    wanted: dict[int, str] = {}
    for a in asked:
        for job_id in a.job_ids:
            if wanted.get(job_id) in (None, JobDependency.AFTER_ANY):
                wanted[job_id] = a.kind
    JobDependency.objects.bulk_create([JobDependency(job=job, on_id=on, kind=kind) for job in jobs for on, kind in sorted(wanted.items())])


def contradictions(asked: Sequence[Asked]) -> list[str]:
    """A job named both afterok and afternotok: no end meets both."""
    kinds: defaultdict[int, set[str]] = defaultdict(set)
    for a in asked:
        for job_id in a.job_ids:
            kinds[job_id].add(a.kind)
    both = sorted(j for j, k in kinds.items() if {JobDependency.AFTER_OK, JobDependency.AFTER_NOT_OK} <= k)
    return [f"Job {both[0]} is named both afterok and afternotok: no end of it meets both."] if both else []


def waits(pending_ids: Iterable[int] | None = None) -> dict[int, tuple[str, tuple[int, ...]]]:
    """For each pending job with a dependency not met yet: why it waits, and the jobs it waits for."""
    rows = JobDependency.objects.filter(job__state=JobState.PENDING)
    if pending_ids is not None:
        rows = rows.filter(job_id__in=list(pending_ids))
    unmet: defaultdict[int, list[tuple[int, str, str]]] = defaultdict(list)
    for job_id, on, kind, state in rows.values_list("job_id", "on_id", "kind", "on__state").order_by("job_id", "on_id"):
        if not met(kind, state):
            unmet[job_id].append((on, kind, state))
    return {job_id: (_waits_text(deps), tuple(on for on, _, _ in deps)) for job_id, deps in unmet.items()}


def _waits_text(deps: list[tuple[int, str, str]]) -> str:
    shown = "; ".join(f"job {on} {_words(kind)} ({kind}; it is {state})" for on, kind, state in deps[:3])
    more = f"; and {len(deps) - 3} more" if len(deps) > 3 else ""
    return f"Waits for its dependencies: {shown}{more}."


def cancel_unmeetable() -> list[int]:
    """Cancel the pending jobs with a dependency that can never be met (the job it waits for ended the other way).
    Returns their ids. A job depending on one of those is cancelled by the next cycle in turn."""
    rows = (
        JobDependency.objects.filter(job__state=JobState.PENDING, on__state__in=TERMINAL_STATES)
        .values_list("job_id", "on_id", "kind", "on__state")
        .order_by("job_id", "on_id")
    )
    broken: dict[int, str] = {}
    for job_id, on, kind, state in rows:
        if job_id not in broken and met(kind, state) is False:
            broken[job_id] = f"Cancelled by Muster: its dependency {kind}:{on} can never be met (job {on} ended {state})."
    for job in Job.objects.filter(pk__in=broken, state=JobState.PENDING).order_by("pk"):
        job_cancel(job=job, by=None, reason=broken[job.pk])
    return sorted(broken)
