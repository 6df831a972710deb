"""Each node's free GPUs over time: what running work frees by its wall time, what reservations hold.

The fair-share policy keeps its reservations from cycle to cycle and plans the rest of the queue
forward, so it must answer, per node, "is there room for g GPUs from t to t + w?" with both the
running jobs' ends and the reservations already promised in view. A node's profile is a step
function: GPUs free now (less the reservations holding it now), rising at each running job's
wall-time end and at each reservation's end, falling at each reservation's start. Profiles are
built lazily and rebuilt only for a node that changed.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NamedTuple

from policy.model import PendingJob

INF = float("inf")
# What a job holds on a node: a gang the whole node, a single-node job its GPUs.
NeedOn = Callable[[PendingJob, str], int]
# Whether a node could ever hold one of the job's ranks (enough GPUs, the RDMA devices it asks for).
NodeFits = Callable[[PendingJob, str], bool]
# The nodes that fit one of the job's ranks, in the timelines' order (policy.schedule works them out once per shape).
FittingNodes = Callable[[PendingJob], Sequence[str]]


class Hold(NamedTuple):
    """GPUs a reservation (or a planned start) holds on one node from `start` to `end`; ordered by start."""

    start: float
    job_id: int
    end: float
    gpus: int


class Timelines:
    """Profiles of every node, over what the caller's `free` and `releases` say now."""

    def __init__(
        self,
        total: Mapping[str, int],
        free: Callable[[str], int],
        releases: Callable[[str], Iterable[tuple[float, int]]],
        now: float,
    ) -> None:
        self.total = total
        self._free = free
        self._releases = releases
        self.now = now
        self.holds: dict[str, list[Hold]] = {}
        self._profiles: dict[str, tuple[list[float], list[int]]] = {}
        # Bumped whenever a node's profile changes, so callers can cache what they derive from it.
        self.version: dict[str, int] = {}
        # Bumped on every change to any node: one key for what is derived from all of them.
        self.changes = 0
        # The node of each change, in order: what changed since change k is changed_nodes[k:].
        self.changed_nodes: list[str] = []

    # --- changes ---------------------------------------------------------------------------------

    def changed(self, name: str) -> None:
        """The node's free GPUs or running work changed: its profile is rebuilt when next read."""
        self._profiles.pop(name, None)
        self.version[name] = self.version.get(name, 0) + 1
        self.changes += 1
        self.changed_nodes.append(name)

    def hold(self, name: str, hold: Hold) -> None:
        insort(self.holds.setdefault(name, []), hold)
        profile = self._profiles.get(name)
        self.changed(name)
        if profile is not None:
            # Planning the queue adds a hold per job: cheaper to lower the built profile than to rebuild it.
            _lower(*profile, max(hold.start, self.now), hold.end, hold.gpus)
            self._profiles[name] = profile

    def release(self, job_id: int, names: Iterable[str]) -> None:
        for name in names:
            kept = [h for h in self.holds.get(name, ()) if h.job_id != job_id]
            if kept:
                self.holds[name] = kept
            else:
                self.holds.pop(name, None)
            self.changed(name)

    # --- reading ---------------------------------------------------------------------------------

    def profile(self, name: str) -> tuple[list[float], list[int]]:
        """(times, free): from times[i] until times[i + 1], `free[i]` GPUs are free; times[0] is now."""
        cached = self._profiles.get(name)
        if cached is not None:
            return cached
        now = self.now
        base = self._free(name)
        deltas: dict[float, int] = {}
        for end, gpus in self._releases(name):
            if end <= now:
                base += gpus
            else:
                deltas[end] = deltas.get(end, 0) + gpus
        for h in self.holds.get(name, ()):
            if h.end <= now:
                continue
            if h.start <= now:
                base -= h.gpus
            else:
                deltas[h.start] = deltas.get(h.start, 0) - h.gpus
            deltas[h.end] = deltas.get(h.end, 0) + h.gpus
        times, frees = [now], [base]
        for t in sorted(deltas):
            if deltas[t]:
                times.append(t)
                frees.append(frees[-1] + deltas[t])
        built = (times, frees)
        self._profiles[name] = built
        return built

    def fits(self, name: str, gpus: int, start: float, end: float, *, ignore: int | None = None) -> bool:
        """Whether `gpus` GPUs are free on the node all the way from `start` to `end`.

        `ignore`: a job whose own holds do not count (it may use what is reserved for it).
        """
        if ignore is not None and any(h.job_id == ignore for h in self.holds.get(name, ())):
            return self._without(name, ignore).fits(name, gpus, start, end)
        times, frees = self.profile(name)
        i = max(0, bisect_right(times, start) - 1)
        n = len(times)
        while i < n and (times[i] < end or times[i] <= start):
            if frees[i] < gpus:
                return False
            i += 1
        return True

    def free_for(self, name: str, gpus: int) -> float:
        """How long from now `gpus` GPUs stay free on the node: 0 if they are not free now, INF if for good."""
        times, frees = self.profile(name)
        for at, free in zip(times, frees, strict=True):
            if free < gpus:
                return at - self.now
        return INF

    def first_free(self, name: str, gpus: int) -> float:
        """The first instant `gpus` GPUs are free on the node (for any length of time), INF if never."""
        if self.total.get(name, 0) < gpus:
            return INF
        times, frees = self.profile(name)
        for at, free in zip(times, frees, strict=True):
            if free >= gpus:
                return at
        return INF

    def held(self, name: str) -> bool:
        return name in self.holds

    def _without(self, name: str, job_id: int) -> Timelines:
        other = Timelines(self.total, self._free, self._releases, self.now)
        other.holds = {name: [h for h in self.holds[name] if h.job_id != job_id]}
        return other

    def starts(self, name: str, gpus: int, wall: float, after: float, *, first_only: bool = False) -> list[tuple[float, float]]:
        """The intervals [a, b] of start times >= `after` at which `gpus` GPUs stay free for `wall` seconds.

        `first_only`: stop at the first (planning the queue asks for only that of many nodes).
        """
        if self.total.get(name, 0) < gpus:
            return []
        times, frees = self.profile(name)
        intervals: list[tuple[float, float]] = []
        cursor = max(after, times[0])
        n = len(times)
        i = 0
        while i < n:
            if frees[i] >= gpus:
                i += 1
                continue
            # A run of too few GPUs, [u, v): no window may overlap it.
            u = times[i]
            while i < n and frees[i] < gpus:
                i += 1
            v = times[i] if i < n else INF
            if v <= cursor:
                continue
            if cursor + wall <= u:
                intervals.append((cursor, u - wall))
                if first_only:
                    return intervals
            cursor = max(cursor, v)
            if cursor == INF:
                return intervals
        intervals.append((cursor, INF))
        return intervals

    def earliest(self, name: str, gpus: int, wall: float, after: float) -> float:
        found = self.starts(name, gpus, wall, after, first_only=True)
        return found[0][0] if found else INF


def _lower(times: list[float], frees: list[int], start: float, end: float, gpus: int) -> None:
    """Take `gpus` off the profile from `start` to `end`, splitting segments at both ends."""
    if end <= start:
        return
    i = bisect_right(times, start) - 1
    if times[i] != start:
        times.insert(i + 1, start)
        frees.insert(i + 1, frees[i])
        i += 1
    j = bisect_left(times, end, i)
    if j == len(times) or times[j] != end:
        times.insert(j, end)
        frees.insert(j, frees[j - 1])
    for k in range(i, j):
        frees[k] -= gpus


def earliest_common_start(
    options: Mapping[str, list[tuple[float, float]]],
    count: int,
    firsts: list[tuple[float, str]] | None = None,
    *,
    latest_open: bool = False,
) -> tuple[float, list[str]] | None:
    """The earliest time at which `count` nodes can all start, and those nodes (by name), or None.

    `options`: per node, the intervals of start times it allows (Timelines.starts). `firsts`: each node's first
    start with its name, sorted (`first_starts`), when the caller keeps them up to date from one call to the next.
    `latest_open`: as at_count_th_first_start takes it.
    """
    if firsts is None:
        firsts = first_starts(options)
    if len(firsts) < count:
        return None
    found = at_count_th_first_start(options, count, firsts, latest_open=latest_open)
    if found is not None:
        return found
    return _sweep(options, count)


def first_starts(options: Mapping[str, list[tuple[float, float]]]) -> list[tuple[float, str]]:
    return sorted((intervals[0][0], name) for name, intervals in options.items() if intervals)


def at_count_th_first_start(
    options: Mapping[str, list[tuple[float, float]]], count: int, firsts: list[tuple[float, str]], *, latest_open: bool = False
) -> tuple[float, list[str]] | None:
    """The answer when it is the count-th earliest of the nodes' first starts, else None.

    No instant before that one has `count` nodes open, so when `count` are open at it, it is the earliest; when
    planning the queue it nearly always is, and only the nodes that open by then are read, not every interval.
    The nodes are the sweep's: those already open, then those opening at that instant by name, the first by name.
    `latest_open`: those opening at that instant first, then the already open that opened last, so the nodes open
    sooner are left to what can use them before it (the plan of the queue: an 8-node job planned for when a 12-node
    job ends took the 4 nodes free half an hour sooner, and an elastic job of higher priority than the short jobs
    planned there was planned 56 minutes late).
    """
    t = firsts[count - 1][0]
    already: list[tuple[float, str]] = []
    opening: list[str] = []
    for first, name in firsts:
        if first > t:
            break
        for a, b in options[name]:
            if a > t:
                break
            if b >= t:
                if a == t:
                    opening.append(name)
                else:
                    already.append((a, name))
                break
    if len(already) >= count or len(already) + len(opening) < count:
        return None
    if latest_open:
        latest = sorted(opening) + [name for _, name in sorted(already, key=lambda found: (-found[0], found[1]))]
        return t, sorted(latest[:count])
    return t, sorted([name for _, name in already] + sorted(opening)[: count - len(already)])


def _sweep(options: Mapping[str, list[tuple[float, float]]], count: int) -> tuple[float, list[str]] | None:
    events: list[tuple[float, int, str]] = []
    for name, intervals in options.items():
        for a, b in intervals:
            events.append((a, 0, name))  # opens before anything closes at the same instant
            if b != INF:
                events.append((b, 1, name))
    events.sort()
    open_now: dict[str, None] = {}
    for t, kind, name in events:
        if kind == 0:
            open_now[name] = None
            if len(open_now) >= count:
                return t, sorted(open_now)[:count]
        else:
            open_now.pop(name, None)
    return None


def earliest_start(
    timelines: Timelines, job: PendingJob, names: Sequence[str], after: float, need_on: NeedOn, *, latest_open: bool = False
) -> tuple[float, list[str]] | None:
    """The earliest start >= `after` for the job on `names`, and the nodes: a single-node job the node that frees
    soonest (the fullest on a tie, as best fit), a gang the first instant enough nodes are whole and free together."""
    if job.nodes == 1:
        best: tuple[float, int, str] | None = None
        for name in names:
            t = timelines.earliest(name, need_on(job, name), job.wall_seconds, after)
            if t < INF and (best is None or (t, timelines.total[name], name) < best):
                best = (t, timelines.total[name], name)
        return None if best is None else (best[0], [best[2]])
    options = {name: timelines.starts(name, need_on(job, name), job.wall_seconds, after) for name in names}
    return earliest_common_start(options, job.nodes, latest_open=latest_open)
