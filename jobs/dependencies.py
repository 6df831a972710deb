"""Job dependencies, as `sbatch --dependency` takes them: a job waits until the jobs it names have ended as asked
(afterok: succeeded; afternotok: failed, timed out or was cancelled; afterany: ended whatever way).

A dependency that can never be met any more (afterok on a job that failed) cancels the waiting job at the next cycle,
with the reason, as Slurm does with `kill_invalid_depend`: left pending it would wait for ever, holding its place.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import Exists, OuterRef

from jobs.models import Job, JobDependency
from jobs.selectors import jobs_visible_to
from jobs.services import job_cancel
from jobs.states import TERMINAL_STATES, JobState

KINDS = tuple(kind for kind, _ in JobDependency.KINDS)
# The most jobs one job may wait for (an array's elements counted one by one).
MAX_DEPENDENCIES = 1000
# The largest id a job may have (PostgreSQL's bigint): a larger one asked for is refused, not a database error.
JOB_ID_MAX = 2**63 - 1
_FAILED = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.TIMED_OUT})


class DependencyTextInvalid(ValueError):
    """`sbatch --dependency` text that cannot be read: every mistake in it, one sentence each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(" ".join(problems))
        self.problems = problems


_IDS = re.compile(r"[0-9]+")


def dependencies_parse(text: str) -> list[tuple[str, int]]:
    """`sbatch --dependency` as `muster submit -d` reads it (`_dependency` in client/muster_client/cli.py, which the server
    may not import): `afterok:12:13,afterany:14`, each TYPE:ID[:ID...] a (type, job id) pair per id, in order; empty
    text asks nothing. Slurm's `?` (any one of them), `after`, `aftercorr` and `singleton` are refused, naming what
    Muster takes. Raises DependencyTextInvalid with every mistake at once, for a form to show together."""
    if not text.strip():
        return []
    if "?" in text:
        raise DependencyTextInvalid(["Muster waits for every job named (separate them with ','), not for any one of them ('?')."])
    found: list[tuple[str, int]] = []
    problems: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        kind, _, ids = part.partition(":")
        if not part:
            problems.append("An empty entry (a comma too many): write TYPE:ID[:ID...], e.g. afterok:12,afterany:14.")
        elif kind not in KINDS:
            problems.append(
                f"'{part}': the types are {', '.join(KINDS)}, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after, "
                "aftercorr and singleton are not supported."
            )
        elif not ids or not all(_IDS.fullmatch(w) for w in ids.split(":")):
            problems.append(f"'{part}': give job ids after the type, as {kind}:12 or {kind}:12:13.")
        elif any(int(w) == 0 for w in ids.split(":")):
            problems.append(f"'{part}': job ids start at 1.")
        elif any(int(w) > JOB_ID_MAX for w in ids.split(":")):
            problems.append(f"'{part}': no job has an id that large.")
        else:
            found += [(kind, int(w)) for w in ids.split(":")]
    if problems:
        raise DependencyTextInvalid(problems)
    return found


def dependencies_text(job: Job) -> str:
    """A job's dependencies as `sbatch --dependency` and the submit form write them (`afterok:12:13,afterany:14`): what
    a clone of it asks. An array it waits for is written by the array's id, its first element's, which names every
    element again (the elements' own ids too would name the array twice)."""
    rows = job.dependencies.values_list("kind", "on_id", "on__array_id").order_by("on_id")
    listed = {(kind, on) for kind, on, _ in rows}
    ids: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for kind, on, array_id in rows:
        if array_id is None or on == array_id or (kind, array_id) not in listed:
            ids[kind].append(on)
    return ",".join(f"{kind}:{':'.join(map(str, found))}" for kind, found in ids.items() if found)


def waits_of(asked: Sequence[Asked]) -> tuple[str, tuple[int, ...]]:
    """A submit's dependencies as the cycle would see them once it is queued (`waits`): why it would wait, and the jobs
    it would wait for; ("", ()) when each is met already. For its estimate, before it exists."""
    ids = {job_id for a in asked for job_id in a.job_ids}
    states = dict(Job.objects.filter(pk__in=ids).values_list("pk", "state")) if ids else {}
    unmet = sorted(
        {(job_id, a.kind, states[job_id]) for a in asked for job_id in a.job_ids if job_id in states and not met(a.kind, states[job_id])}
    )
    return (_waits_text(unmet), tuple(on for on, _, _ in unmet)) if unmet else ("", ())


def met(kind: str, state: str) -> bool | None:
    """Whether a dependency on a job in `state` is met (True), never will be (False), or not yet (None)."""
    if state not in TERMINAL_STATES:
        return None
    if kind == JobDependency.AFTER_OK:
        return state == JobState.SUCCEEDED
    if kind == JobDependency.AFTER_NOT_OK:
        return state in _FAILED
    return True


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


# What each type waits for a job to do, in a waiting job's reason.
_TO = {JobDependency.AFTER_OK: "to succeed", JobDependency.AFTER_ANY: "to end", JobDependency.AFTER_NOT_OK: "to fail"}


def _waits_text(deps: list[tuple[int, str, str]]) -> str:
    """'Waits for job 12 to succeed (afterok; it is RUNNING), job 14 to end (afterany; it is PENDING) and 3 more.': it
    read "Waits for its dependencies: job 12 after it succeeds (...)", the words of the type after the job's id."""
    said = [f"job {on} {_TO[kind]} ({kind}; it is {state})" for on, kind, state in deps[:3]]
    if len(deps) > 3:
        said.append(f"{len(deps) - 3} more")
    shown = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
    return f"Waits for {shown}."


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


# A dependency's type as a job's page says it: the jobs' ends that meet it (afternotok is met by a timeout or a cancel
# too, which JobDependency's short label, "after it fails", leaves out).
KIND_WORDS = {
    JobDependency.AFTER_OK: "once it has succeeded",
    JobDependency.AFTER_ANY: "once it has ended, whatever way",
    JobDependency.AFTER_NOT_OK: "once it has failed, timed out or been cancelled",
}


@dataclass(frozen=True)
class Dependency:
    """One job a job waits for (or waited for), as its page shows it: `name` None for a job the viewer may not see."""

    kind: str
    job_id: int
    name: str | None
    state: str
    met: bool | None

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind]

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class Dependent:
    """A job waiting for this one (or that did), as its page links it."""

    kind: str
    job_id: int
    name: str
    state: str


@dataclass(frozen=True)
class DependenciesShown:
    """A job's dependencies both ways, for its page: what it waits for, and the jobs that wait for it that the viewer
    may see (`unseen`: how many others do, someone else's)."""

    on: list[Dependency]
    waiting: list[Dependent]
    unseen: int

    @property
    def met(self) -> int:
        return sum(1 for d in self.on if d.met is True)

    @property
    def never(self) -> int:
        return sum(1 for d in self.on if d.met is False)

    @property
    def not_yet(self) -> int:
        return sum(1 for d in self.on if d.met is None)


def job_dependencies_shown(job: Job, viewer: User | AnonymousUser) -> DependenciesShown:
    """What `job` waits for, each with its state now and whether the ask is met, and the jobs waiting for it that
    `viewer` may see (`jobs_visible_to`'s rule); a job waited for that the viewer may not see (an admin's job may wait
    for anyone's) is named by its id alone. Two queries."""
    visible = jobs_visible_to(viewer).select_related(None).prefetch_related(None).values("pk")
    asked = (
        job.dependencies.annotate(seen=Exists(visible.filter(pk=OuterRef("on_id"))))
        .values_list("kind", "on_id", "on__name", "on__state", "seen")
        .order_by("on_id")
    )
    on = [Dependency(kind, pk, name if seen else None, state, met(kind, state)) for kind, pk, name, state, seen in asked]
    waits = list(
        job.dependents.annotate(seen=Exists(visible.filter(pk=OuterRef("job_id"))))
        .values_list("kind", "job_id", "job__name", "job__state", "seen")
        .order_by("job_id")
    )
    waiting = [Dependent(kind, pk, name, state) for kind, pk, name, state, seen in waits if seen]
    return DependenciesShown(on=on, waiting=waiting, unseen=len(waits) - len(waiting))
