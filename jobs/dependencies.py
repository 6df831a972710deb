"""Job dependencies, as `sbatch --dependency` takes them: a job waits until the jobs it names have ended as asked
(afterok: succeeded; afternotok: failed, timed out or was cancelled; afterany: ended whatever way).

A dependency that can never be met any more (afterok on a job that failed) cancels the waiting job at the next cycle,
with the reason, as Slurm does with `kill_invalid_depend`: left pending it would wait for ever, holding its place.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from django.contrib.auth.models import AnonymousUser, User
from django.db import connection
from django.db.models import Count, Exists, OuterRef, Q

from jobs.arrays import index_ranges
from jobs.models import Job, JobDependency
from jobs.selectors import jobs_visible_to
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


# One job named: its id (`12`), or an array's element as Slurm writes it (`12_1`: array 12, index 1).
_NAMED = re.compile(r"(?P<job>[0-9]+)(?:_(?P<index>[0-9]+))?")
# The longest run of an array's indices a list of jobs spells out (`12_[1,3,5,...]`); more reads as the first ones, a
# "..." and how many. A job's reason is 500 characters: an array's scattered elements must not fill it.
RANGES_MAX_CHARS = 60


class Named(NamedTuple):
    """One entry of a dependency as it was asked: its type and the job (`12`), or an array's element (`12_1`)."""

    kind: str
    job_id: int
    element: int | None = None  # the array's index of the element named (`index` is a tuple's method)

    @property
    def said(self) -> str:
        """As `sbatch --dependency` writes it: `afterok:12` or `afterok:12_1`."""
        return f"{self.kind}:{self.job_id}" + (f"_{self.element}" if self.element is not None else "")


def dependencies_parse(text: str) -> list[Named]:
    """`sbatch --dependency` as `muster submit -d` reads it (`_dependency` in client/muster_client/cli.py, which the server
    may not import): `afterok:12:13,afterany:14_2`, each TYPE:ID[:ID...] one entry per id, in order, where an id is a
    job's or an array's element as Slurm writes it (ARRAYID_INDEX); empty text asks nothing. Slurm's `?` (any one of
    them), `after`, `aftercorr` and `singleton` are refused, naming what Muster takes. Raises DependencyTextInvalid
    with every mistake at once, for a form to show together."""
    if not text.strip():
        return []
    if "?" in text:
        raise DependencyTextInvalid(["Muster waits for every job named (separate them with ','), not for any one of them ('?')."])
    found: list[Named] = []
    problems: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        kind, _, ids = part.partition(":")
        named = [_NAMED.fullmatch(w) for w in ids.split(":")] if ids else []
        if not part:
            problems.append("An empty entry (a comma too many): write TYPE:ID[:ID...], e.g. afterok:12,afterany:14.")
        elif kind not in KINDS:
            problems.append(
                f"'{part}': the types are {', '.join(KINDS)}, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after, "
                "aftercorr and singleton are not supported."
            )
        elif not named or not all(named):
            problems.append(f"'{part}': give job ids after the type, as {kind}:12, {kind}:12:13 or {kind}:12_1 (an array's element).")
        elif any(int(m["job"]) == 0 for m in named if m):
            problems.append(f"'{part}': job ids start at 1.")
        elif any(int(m["job"]) > JOB_ID_MAX for m in named if m):  # an index no array has is said once its array is read
            problems.append(f"'{part}': no job has an id that large.")
        else:
            found += [Named(kind, int(m["job"]), None if m["index"] is None else int(m["index"])) for m in named if m]
    if problems:
        raise DependencyTextInvalid(problems)
    return found


def dependencies_text(job: Job) -> str:
    """A job's dependencies as `sbatch --dependency` and the submit form write them (`afterok:12:13,afterany:14_2`):
    what a clone of it asks. An array it waits for whole, each element of the same type, is written by the array's id
    (which names every element again); some of its elements, each as ARRAYID_INDEX: the first element's own id would
    read as the whole array."""
    rows = list(job.dependencies.values_list("kind", "on_id", "on__array_id", "on__array_index").order_by("on_id"))
    arrays = {array_id for _, _, array_id, _ in rows if array_id is not None}
    sizes = dict(Job.objects.filter(array_id__in=arrays).values("array_id").annotate(n=Count("pk")).values_list("array_id", "n"))
    asked: defaultdict[tuple[str, int], int] = defaultdict(int)
    for kind, _, array_id, _ in rows:
        if array_id is not None:
            asked[(kind, array_id)] += 1
    ids: dict[str, list[str]] = {kind: [] for kind in KINDS}
    for kind, on, array_id, index in rows:
        if array_id is None:
            ids[kind].append(str(on))
        elif asked[(kind, array_id)] == sizes.get(array_id):
            if on == array_id:
                ids[kind].append(str(array_id))
        else:
            ids[kind].append(f"{array_id}_{index}")
    return ",".join(f"{kind}:{':'.join(found)}" for kind, found in ids.items() if found)


def array_ref(array_id: int, indices: Iterable[int]) -> str:
    """Elements of one array as Slurm names them: `12_3` for one, `12_[1-3,7]` for several; a long scattered run is cut
    (`12_[1,3,5,...] (40 elements)`) so a list of them fits a reason."""
    indices = sorted(set(indices))
    if len(indices) == 1:
        return f"{array_id}_{indices[0]}"
    ranges = index_ranges(indices)
    if len(ranges) > RANGES_MAX_CHARS:
        cut = ranges[: ranges.rindex(",", 0, RANGES_MAX_CHARS)]
        return f"{array_id}_[{cut},...] ({len(indices)} elements)"
    return f"{array_id}_[{ranges}]"


def job_label(job_id: int, array_id: int | None, index: int | None) -> str:
    """A job in a sentence: `job 13`, or an array's element `job 13 (12_1)`."""
    return f"job {job_id} ({array_id}_{index})" if array_id is not None and index is not None else f"job {job_id}"


class _On(NamedTuple):
    """A job waited for, as the lists read it: its id, its array and index (None for a job of no array), its state."""

    job_id: int
    array_id: int | None
    element: int | None  # its index in its array (`index` is a tuple's method)
    state: str


def _grouped(jobs: Iterable[_On]) -> list[list[_On]]:
    """Jobs in id order, the elements of one array together (in the place of the first of them): each group one job,
    or elements of one array."""
    groups: dict[int | tuple[str, int], list[_On]] = {}
    for on in sorted(jobs):
        key: int | tuple[str, int] = ("array", on.array_id) if on.array_id is not None else on.job_id
        groups.setdefault(key, []).append(on)
    return list(groups.values())


def _group_ref(group: Sequence[_On]) -> str:
    """A group of `_grouped` in a sentence: `job 13`, `job 14 (12_2)` or `12_[0-99]`."""
    first = group[0]
    if len(group) == 1:
        return job_label(first.job_id, first.array_id, first.element)
    return array_ref(first.array_id or 0, (on.element or 0 for on in group))


def _states(group: Sequence[_On]) -> str:
    """`it is RUNNING`, or for several `3 are RUNNING, 97 PENDING` (the most first)."""
    return f"it is {group[0].state}" if len(group) == 1 else _are([on.state for on in group])


def _are(states: Sequence[str]) -> str:
    """`3 are RUNNING, 97 PENDING`, `1 is RUNNING`: how many jobs are in each state, the most first."""
    counts = sorted(Counter(states).items(), key=lambda c: (-c[1], c[0]))
    (first, n), rest = counts[0], counts[1:]
    return f"{n} {'is' if n == 1 else 'are'} {first}" + "".join(f", {m} {state}" for state, m in rest)


def waits_of(asked: Sequence[Asked]) -> tuple[str, tuple[int, ...]]:
    """A submit's dependencies as the cycle would see them once it is queued (`waits`): why it would wait, and the jobs
    it would wait for; ("", ()) when each is met already. For its estimate, before it exists."""
    ids = {job_id for a in asked for job_id in a.job_ids}
    rows = Job.objects.filter(pk__in=ids).values_list("pk", "array_id", "array_index", "state") if ids else []
    jobs = {pk: _On(pk, array_id, index, state) for pk, array_id, index, state in rows}
    unmet = {(a.kind, jobs[job_id]) for a in asked for job_id in a.job_ids if job_id in jobs and not met(a.kind, jobs[job_id].state)}
    return (_waits_text(sorted(unmet, key=lambda u: u[1])), tuple(sorted({on.job_id for _, on in unmet}))) if unmet else ("", ())


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
    """One dependency of a submit, resolved: the jobs it names (an array's id names all of its elements), and how it was
    asked (`afterok:12_1`), for a job's history."""

    kind: str
    job_ids: tuple[int, ...]
    said: str = ""


def resolve(owner: User, asked: Sequence[Named | tuple[str, int]]) -> tuple[list[Asked], list[str]]:
    """The submit's dependencies as jobs `owner` may see, and every refusal: no such job (or array element), or one
    already ended so that the dependency can never be met. An id that is an array's (its first element's, as `muster
    submit --array` prints it) names every element, as scancel and Slurm's dependencies read it; ARRAYID_INDEX (`12_1`)
    one element, as its own id does."""
    named = [Named(*a) for a in asked]
    ids = {n.job_id for n in named}
    visible = jobs_visible_to(owner).select_related(None).prefetch_related(None)
    rows = visible.filter(Q(pk__in=ids) | Q(array_id__in=ids)).values_list("pk", "array_id", "array_index", "state").order_by("pk")
    jobs = {pk: _On(pk, array_id, index, state) for pk, array_id, index, state in rows}
    elements: defaultdict[int, list[_On]] = defaultdict(list)
    for on in jobs.values():
        if on.array_id is not None and on.array_id in ids:
            elements[on.array_id].append(on)
    found: list[Asked] = []
    problems: list[str] = []
    for n in named:
        ons, refusal = _named_jobs(n, jobs, elements)
        if refusal:
            problems.append(refusal)
            continue
        never = [on for on in ons if met(n.kind, on.state) is False]
        if never:
            problems.append(f"{n.said} can never be met: {_ended(never)}.")
            continue
        found.append(Asked(n.kind, tuple(on.job_id for on in ons), n.said))
    if sum(len(a.job_ids) for a in found) > MAX_DEPENDENCIES:
        problems.append(f"A job may wait for at most {MAX_DEPENDENCIES} jobs.")
    return found, problems


def _named_jobs(n: Named, jobs: dict[int, _On], elements: dict[int, list[_On]]) -> tuple[list[_On], str]:
    """The jobs one entry names, or why none: (jobs, "") or ([], the refusal)."""
    if n.element is None:
        ons = elements.get(n.job_id) or ([jobs[n.job_id]] if n.job_id in jobs else [])
        return ons, "" if ons else f"No job {n.job_id} (or none that you may see)."
    if n.job_id in elements:
        ons = [on for on in elements[n.job_id] if on.element == n.element]
        if ons:
            return ons, ""
        have = array_ref(n.job_id, (on.element or 0 for on in elements[n.job_id]))
        return [], f"Array {n.job_id} has no element {n.element} (its elements: {have})."
    job = jobs.get(n.job_id)
    if job is not None and job.array_id is not None:
        its = f"{job.array_id}_{job.element}, an element of array {job.array_id}"
        return [], f"{n.job_id}_{n.element}: job {n.job_id} is {its}, not an array's id."
    if job is not None:
        return [], f"{n.job_id}_{n.element}: job {n.job_id} is not an array; name it as {n.job_id}."
    return [], f"No job {n.job_id}_{n.element} (or none that you may see)."


def _ended(never: Sequence[_On]) -> str:
    """`job 13 has ended FAILED`, or for an array's elements `12_[1,3] have ended FAILED; 12_4 has ended CANCELLED`."""
    by_state: defaultdict[str, list[_On]] = defaultdict(list)
    for on in never:
        by_state[on.state].append(on)
    said = []
    for state, ons in by_state.items():
        for group in _grouped(ons):
            said.append(f"{_group_ref(group)} {'has' if len(group) == 1 else 'have'} ended {state}")
    return "; ".join(said)


def dependencies_wanted(asked: Sequence[Asked]) -> dict[int, str]:
    """Each job named, with its strictest ask: afterok or afternotok over afterany (the two strict ones together can
    never both be met, and submit refuses that)."""
    wanted: dict[int, str] = {}
    for a in asked:
        for job_id in a.job_ids:
            if wanted.get(job_id) in (None, JobDependency.AFTER_ANY):
                wanted[job_id] = a.kind
    return wanted


def dependencies_save(jobs: Iterable[Job], asked: Sequence[Asked]) -> None:
    """The submit's dependencies for each job it queued, in the submit's transaction (`dependencies_wanted`)."""
    wanted = dependencies_wanted(asked)
    JobDependency.objects.bulk_create([JobDependency(job=job, on_id=on, kind=kind) for job in jobs for on, kind in sorted(wanted.items())])


def contradictions(asked: Sequence[Asked]) -> list[str]:
    """A job named both afterok and afternotok: no end meets both."""
    kinds: defaultdict[int, set[str]] = defaultdict(set)
    for a in asked:
        for job_id in a.job_ids:
            kinds[job_id].add(a.kind)
    both = sorted(j for j, k in kinds.items() if {JobDependency.AFTER_OK, JobDependency.AFTER_NOT_OK} <= k)
    return [f"Job {both[0]} is named both afterok and afternotok: no end of it meets both."] if both else []


# Taken, for its transaction, by every change of a queued job's dependencies: two updates at once (5 to wait for 6, 6
# for 5) would each find no cycle in what the other had not committed yet.
GRAPH_LOCK_KEY = 0x6D75_7374_6465_70  # "mustdep"


def dependencies_graph_lock() -> None:
    """Wait for, and hold until the transaction ends, the right to change queued jobs' dependencies (GRAPH_LOCK_KEY;
    SQLite runs one writing transaction at a time anyway). Taken before the jobs' rows are locked: a holder checks its
    new dependencies' foreign keys at commit (Django's are deferred), which waits for a row another update locked, so
    an update holding a row while waiting for this lock would deadlock with it."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [GRAPH_LOCK_KEY])


def dependencies_cycles(changed: dict[int, dict[int, str]]) -> list[str]:
    """The cycles the new dependencies of `changed` (job id -> {job it waits for: type}) would make: a job that would
    wait, itself or through the jobs it waits for, on itself, so none of them could ever start. One sentence per job
    caught, with the way round. Only pending jobs still wait (the others' dependencies were met, or never will be).
    Call it holding `dependencies_graph_lock`, in the transaction that saves them."""
    problems: list[str] = []
    edges: dict[int, list[int]] = {job_id: sorted(on) for job_id, on in changed.items()}
    for start in sorted(changed):
        if start in changed[start]:
            problems.append(f"Job {start} cannot wait for itself.")
            continue
        # Breadth first from the jobs it would wait for, remembering how each was reached, until it comes back to itself.
        came_from: dict[int, int] = {on: start for on in edges[start]}
        frontier = list(edges[start])
        while frontier and start not in came_from:
            _load_edges([j for j in frontier if j not in edges], edges)
            reached = []
            for j in frontier:
                for on in edges[j]:
                    if on not in came_from:
                        came_from[on] = j
                        reached.append(on)
            frontier = reached
        if start in came_from:
            way = [came_from[start]]
            while way[-1] != start:
                way.append(came_from[way[-1]])
            said = ", which waits for ".join(f"job {j}" for j in [*reversed(way[:-1]), start])
            problems.append(f"Job {start} would wait for itself: it would wait for {said}; none of them could ever start.")
    return problems


def _load_edges(job_ids: list[int], edges: dict[int, list[int]]) -> None:
    """The jobs each of `job_ids` waits for, into `edges`: one query for a step of the search."""
    for job_id in job_ids:
        edges[job_id] = []
    if job_ids:
        rows = JobDependency.objects.filter(job_id__in=job_ids, job__state=JobState.PENDING).values_list("job_id", "on_id")
        for job_id, on in rows.order_by("job_id", "on_id"):
            edges[job_id].append(on)


def dependencies_replace(job: Job, wanted: dict[int, str]) -> None:
    """A queued job's dependencies from now on (`job_update`), in the caller's transaction."""
    JobDependency.objects.filter(job=job).delete()
    JobDependency.objects.bulk_create([JobDependency(job=job, on_id=on, kind=kind) for on, kind in sorted(wanted.items())])


def dependencies_said(job_id: int, wanted: dict[int, str]) -> str:
    """A job's dependencies (job waited for -> type) as `sbatch --dependency` writes them, an array's elements together
    (`afterok:5,afterany:12_[0-3]`); "none" without any. For its history and the audit trail."""
    if not wanted:
        return "none"
    rows = Job.objects.filter(pk__in=wanted).values_list("pk", "array_id", "array_index", "state")
    ons = {pk: _On(pk, array_id, index, state) for pk, array_id, index, state in rows}
    said = []
    for kind in KINDS:
        mine = [ons[on] for on, k in wanted.items() if k == kind and on in ons]
        if mine:
            said.append(f"{kind}:{':'.join(_bare_ref(g) for g in _grouped(mine))}")
    return ",".join(said)


def _bare_ref(group: Sequence[_On]) -> str:
    """A group of `_grouped` as an id list writes it: `13`, `12_1` or `12_[0-99]`."""
    first = group[0]
    if first.array_id is None:
        return str(first.job_id)
    return array_ref(first.array_id, (on.element or 0 for on in group))


def _element(group: Sequence[_On]) -> str:
    """A group's elements as Slurm names them (`12_1`, `12_[0-99]`); empty for a job of no array."""
    return _bare_ref(group) if group[0].array_id is not None else ""


def waits(pending_ids: Iterable[int] | None = None) -> dict[int, tuple[str, tuple[int, ...]]]:
    """For each pending job with a dependency not met yet: why it waits, and the jobs it waits for."""
    rows = JobDependency.objects.filter(job__state=JobState.PENDING)
    if pending_ids is not None:
        rows = rows.filter(job_id__in=list(pending_ids))
    unmet: defaultdict[int, list[tuple[str, _On]]] = defaultdict(list)
    columns = ("job_id", "on_id", "kind", "on__array_id", "on__array_index", "on__state")
    for job_id, on, kind, array_id, index, state in rows.values_list(*columns).order_by("job_id", "on_id"):
        if not met(kind, state):
            unmet[job_id].append((kind, _On(on, array_id, index, state)))
    return {job_id: (_waits_text(deps), tuple(on.job_id for _, on in deps)) for job_id, deps in unmet.items()}


# What each type waits for a job to do, in a waiting job's reason.
_TO = {JobDependency.AFTER_OK: "to succeed", JobDependency.AFTER_ANY: "to end", JobDependency.AFTER_NOT_OK: "to fail"}


def _waits_text(deps: Sequence[tuple[str, _On]]) -> str:
    """'Waits for job 12 to succeed (afterok; it is RUNNING), 14_[0-99] to end (afterany; 3 are RUNNING, 97 PENDING)
    and 3 more.': an array's elements of one type together, as Slurm names them, not one by one."""
    groups = [(kind, group) for kind in KINDS for group in _grouped(on for k, on in deps if k == kind)]
    groups.sort(key=lambda g: g[1][0].job_id)
    said = [f"{_group_ref(group)} {_TO[kind]} ({kind}; {_states(group)})" for kind, group in groups[:3]]
    if len(groups) > 3:
        said.append(f"{len(groups) - 3} more")
    shown = said[0] if len(said) == 1 else f"{', '.join(said[:-1])} and {said[-1]}"
    return f"Waits for {shown}."


def dependencies_unmeetable() -> dict[int, str]:
    """The pending jobs with a dependency that can never be met (the job it waits for ended the other way), each with
    the reason it is cancelled for (`jobs.services.jobs_cancel_unmeetable`): the dependency as it names the jobs of
    that type, an array's elements together, and the job that ended."""
    rows = (
        JobDependency.objects.filter(job__state=JobState.PENDING, on__state__in=TERMINAL_STATES)
        .values_list("job_id", "on_id", "kind", "on__state", "on__array_id", "on__array_index")
        .order_by("job_id", "on_id")
    )
    broken: dict[int, tuple[str, _On]] = {}
    for job_id, on_id, kind, state, array_id, index in rows:
        if job_id not in broken and met(kind, state) is False:
            broken[job_id] = (kind, _On(on_id, array_id, index, state))
    arrays = {on.array_id for _, on in broken.values() if on.array_id is not None}
    # The other elements of the same array each job waits for with the same type: the dependency as it was asked.
    same: defaultdict[tuple[int, str, int | None], list[int]] = defaultdict(list)
    if arrays:
        asked = JobDependency.objects.filter(job_id__in=broken, on__array_id__in=arrays)
        for job_id, kind, array_id, index in asked.values_list("job_id", "kind", "on__array_id", "on__array_index"):
            same[(job_id, kind, array_id)].append(index or 0)
    reasons = {}
    for job_id, (kind, on) in broken.items():
        if on.array_id is None:
            ref, who = str(on.job_id), f"job {on.job_id}"
        else:
            ref = array_ref(on.array_id, same.get((job_id, kind, on.array_id)) or [on.element or 0])
            who = f"{on.array_id}_{on.element}, job {on.job_id},"
        reasons[job_id] = f"Cancelled by Muster: its dependency {kind}:{ref} can never be met ({who} ended {on.state})."
    return reasons


# A dependency's type as a job's page says it: the jobs' ends that meet it (afternotok is met by a timeout or a cancel
# too, which JobDependency's short label, "after it fails", leaves out); for an array's elements, of each.
KIND_WORDS = {
    JobDependency.AFTER_OK: "once it has succeeded",
    JobDependency.AFTER_ANY: "once it has ended, whatever way",
    JobDependency.AFTER_NOT_OK: "once it has failed, timed out or been cancelled",
}


def _counted(states: Sequence[str]) -> str:
    """`2 RUNNING, 1 PENDING`: the states of an array's elements, the most first."""
    return ", ".join(f"{n} {state}" for state, n in sorted(Counter(states).items(), key=lambda c: (-c[1], c[0])))


class _Linked:
    """One job, or the elements of one array together, as a job page links them: `job 13`, or `12_[0-99]`."""

    job_id: int
    element: str
    states: tuple[str, ...]  # of each job, in id order

    @property
    def count(self) -> int:
        return len(self.states)

    @property
    def link(self) -> str:
        return f"job {self.job_id}" if self.count == 1 else self.element


@dataclass(frozen=True)
class Dependency(_Linked):
    """What a job waits for (or waited for), as its page shows it: one job, or the elements of one array it waits for
    with one type, together (`12_[0-99]`, as Slurm names them). `name` None for a job the viewer may not see."""

    kind: str
    job_id: int  # the job, or the array's first element named
    name: str | None
    array_id: int | None
    element: str  # as Slurm names an array's elements: `12_2`, `12_[0-99]`; empty for a job of no array
    states: tuple[str, ...]  # of each job, in id order

    @property
    def about(self) -> str:
        """What is said of it after its link: `12_2, sweep` (an element and its name), `sweep`."""
        return ", ".join(part for part in (self.element if self.count == 1 else "", self.name or "") if part)

    @property
    def state(self) -> str:
        return self.states[0]

    @property
    def met(self) -> bool | None:
        """Met when every job's end meets it; never when one's cannot; else not yet."""
        each = [met(self.kind, state) for state in self.states]
        return False if False in each else None if None in each else True

    @property
    def met_count(self) -> int:
        return sum(1 for state in self.states if met(self.kind, state) is True)

    @property
    def never_count(self) -> int:
        return sum(1 for state in self.states if met(self.kind, state) is False)

    @property
    def not_yet(self) -> tuple[str, ...]:
        return tuple(state for state in self.states if met(self.kind, state) is None)

    @property
    def not_yet_said(self) -> str:
        """Of an array's elements: `0 of 10 met; 9 are PENDING, 1 RUNNING`."""
        return f"{self.met_count} of {self.count} met; {_are(self.not_yet)}"

    @property
    def never_said(self) -> str:
        """Of an array's elements: `1 of 10 ended CANCELLED`, `2 of 10 ended (1 CANCELLED, 1 FAILED)`."""
        never = [state for state in self.states if met(self.kind, state) is False]
        states = set(never)
        how = next(iter(states)) if len(states) == 1 else f"({_counted(never)})"
        return f"{len(never)} of {self.count} ended {how}"

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind] if self.count == 1 else KIND_WORDS[self.kind].replace("once it has", "once each has")

    @property
    def ended(self) -> bool:
        return all(state in TERMINAL_STATES for state in self.states)


@dataclass(frozen=True)
class Dependent(_Linked):
    """A job waiting for this one (or that did), as its page links it; an array's elements waiting with one type
    together (`20_[0-99]`)."""

    kind: str
    job_id: int
    name: str
    array_id: int | None
    element: str
    states: tuple[str, ...]

    @property
    def about(self) -> str:
        """`train, afterok, PENDING`; `20_1, sweep, afterok, PENDING`; `sweep, afterok, 97 PENDING, 3 CANCELLED`."""
        element = self.element if self.count == 1 else ""
        state = self.states[0] if self.count == 1 else _counted(self.states)
        return ", ".join(part for part in (element, self.name, self.kind, state) if part)


@dataclass(frozen=True)
class DependenciesShown:
    """A job's dependencies both ways, for its page: what it waits for, and the jobs that wait for it that the viewer
    may see (`unseen`: how many others do, someone else's). Counts are of jobs, an array's elements one by one."""

    on: list[Dependency]
    waiting: list[Dependent]
    unseen: int

    @property
    def jobs(self) -> int:
        return sum(d.count for d in self.on)

    @property
    def met(self) -> int:
        return sum(d.met_count for d in self.on)

    @property
    def never(self) -> int:
        return sum(d.never_count for d in self.on)

    @property
    def not_yet(self) -> int:
        return sum(len(d.not_yet) for d in self.on)


def job_dependencies_shown(job: Job, viewer: User | AnonymousUser) -> DependenciesShown:
    """What `job` waits for, each with its state now and whether the ask is met, and the jobs waiting for it that
    `viewer` may see (`jobs_visible_to`'s rule); a job waited for that the viewer may not see (an admin's job may wait
    for anyone's) is named by its id alone. An array's elements of one type read as one entry (`12_[0-99]`), not one
    line each. Two queries."""
    visible = jobs_visible_to(viewer).select_related(None).prefetch_related(None).values("pk")
    asked = (
        job.dependencies.annotate(seen=Exists(visible.filter(pk=OuterRef("on_id"))))
        .values_list("kind", "on_id", "on__name", "on__state", "on__array_id", "on__array_index", "seen")
        .order_by("on_id")
    )
    names: dict[int, str | None] = {}
    ons: defaultdict[str, list[_On]] = defaultdict(list)
    for kind, pk, name, state, array_id, index, seen in asked:
        names[pk] = name if seen else None
        ons[kind].append(_On(pk, array_id, index, state))
    on = sorted(
        (
            Dependency(kind, g[0].job_id, names[g[0].job_id], g[0].array_id, _element(g), tuple(o.state for o in g))
            for kind, found in ons.items()
            for g in _grouped(found)
        ),
        key=lambda d: d.job_id,
    )
    waits = list(
        job.dependents.annotate(seen=Exists(visible.filter(pk=OuterRef("job_id"))))
        .values_list("kind", "job_id", "job__name", "job__state", "job__array_id", "job__array_index", "seen")
        .order_by("job_id")
    )
    by_kind: defaultdict[str, list[_On]] = defaultdict(list)
    waiting_names: dict[int, str] = {}
    for kind, pk, name, state, array_id, index, seen in waits:
        if seen:
            by_kind[kind].append(_On(pk, array_id, index, state))
            waiting_names[pk] = name
    waiting = sorted(
        (
            Dependent(kind, g[0].job_id, waiting_names[g[0].job_id], g[0].array_id, _element(g), tuple(o.state for o in g))
            for kind, found in by_kind.items()
            for g in _grouped(found)
        ),
        key=lambda d: d.job_id,
    )
    return DependenciesShown(on=on, waiting=waiting, unseen=len(waits) - sum(w.count for w in waiting))
