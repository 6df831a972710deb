"""The fair-share gang scheduler: one pure function from a snapshot to decisions.

In priority order (policy/priority.py), each pending job is:

0. held by its owner or an admin until released (HELD), or held back for a while
   after failed launches (LAUNCH_BACKOFF): either way it takes no GPUs, preempts
   nothing and holds no reservation, so it blocks nobody;
1. held by a per-job limit lowered since it was submitted (JOB_LIMIT), by its
   budget (BUDGET) or, unless it may borrow, by its GPU quota (QUOTA_GPUS);
2. placed all-or-nothing if it fits now without touching a reservation it would
   outlast. Multi-node jobs take whole idle nodes (one rack if any fits),
   single-node jobs the fullest node that fits;
3. otherwise, if it is within quota, it may preempt: the set of running jobs that
   are over quota (borrowing) or of a lower class, older than the minimum run time
   and whose work since their last checkpoint is at most `preemption_max_lost_ratio`
   times what they have left by their wall time, that loses the least work and makes
   it fit (or, stopping work of a lower class shortly after it was queued, it waits for jobs
   that lose much less work to pass the minimum run time, where the work saved outweighs its wait);
4. otherwise, once it has waited past its starvation threshold
   (`starvation_seconds`; for a single-node job at least `starvation_wall_factor` x
   its wall time), it gets a reservation (while fewer than `max_reservations` exist, a bound on work):
   the earliest window, by the running jobs' wall-time ends and the
   reservations already held, in which its whole gang fits. Later jobs may use
   reserved GPUs only if they are gone, by their wall time, before they are needed.

Reservations persist. The previous cycle's (`Snapshot.reservations`) are kept
before the walk (policy/promises.py), whatever the priority of the jobs that
arrived since: each keeps its start, which may only move earlier (work ending
before its wall time; onto other nodes only then); only lost capacity (a node gone
or drained) moves it later, and the job's reason then says so. New reservations go
to the longest-waiting starving jobs first. After the walk, the jobs without a reservation are planned
forward as the work is expected to run (policy/forecast.py) for an estimated start.

Deterministic: the same snapshot always gives the same decisions.
"""

from __future__ import annotations

import gc
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime

from policy.budget import BudgetPlan, budget_beside_need, budget_need, node_hours_words, whole_gpu_node_sizes
from policy.capacity import Allowed, Capacity
from policy.forecast import forecast
from policy.maintenance import close_for_maintenance, maintenance_holds, maintenance_text
from policy.model import (
    BUDGET,
    DEPENDENCY,
    ESTIMATE_PLANNED,
    ESTIMATE_RESERVED,
    FRAGMENTATION,
    HELD,
    JOB_LIMIT,
    LAUNCH_BACKOFF,
    NO_ROOM,
    NOT_EXAMINED,
    QUOTA_GPUS,
    RESERVATION,
    Account,
    BudgetLeft,
    Decisions,
    NodeView,
    PendingJob,
    Placement,
    PolicyConfig,
    Preemption,
    Reservation,
    Resize,
    RunningJob,
    Snapshot,
    Waiting,
    plural,
    team_key,
    user_key,
    when,
)
from policy.priority import prioritize, priority_order, usage_ratios
from policy.promises import hold, keep_promises
from policy.quota_plan import QuotaPlan
from policy.sharing import Slices, describe_ask, slice_fits
from policy.timeline import Timelines, earliest_common_start, earliest_start

# Bounds the cost of a cycle over a huge queue: each search looks at every node.
MAX_PREEMPTION_SEARCHES = 32
# A shorter wall time is offered as the way to start sooner only if it leaves at least this long to run.
SOONER_MIN_WALL_SECONDS = 10 * 60
# Bounds that offer's cost in a cycle over a huge queue: searches for the first waiting jobs in the order only.
MAX_SOONER_SEARCHES = 64
# Bounds the cost of planning a waiting job on the nodes elastic jobs would give up for it: the instants looked at.
MAX_SHRINK_INSTANTS = 64
# Why a running job may not be preempted now (policy/schedule.py _protected).
PROTECTED_NEW, PROTECTED_SPENT, PROTECTED_FAR = "new", "spent", "far"


def _amount(gpus: float) -> str:
    """GPUs as the API and the CLI give them: a share to three decimals (24.393, not 24.3929)."""
    return f"{round(gpus, 3):g}"


def _minutes(seconds: float) -> str:
    """A wall time as a user types it back: '2 h 10 min', '45 min', '3 h'."""
    hours, minutes = divmod(int(seconds // 60), 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def _update_hint(job: PendingJob, wall_seconds: float) -> str | None:
    """`muster update 12 -t 1h30m`: the wall time, in whole minutes no longer than `wall_seconds`, as `muster update`
    takes it (None under a minute, which it cannot say). A pending job's owner shortens it in place, keeping its place in
    the queue, where cancelling and submitting it again would start its wait over. An array's element names the array:
    its id updates every pending element, which wait alike (one command, not one per element)."""
    minutes = int(wall_seconds // 60)
    if minutes < 1:
        return None
    hours, rest = divmod(minutes, 60)
    said = f"{hours}h{rest}m" if hours and rest else f"{hours}h" if hours else f"{rest}m"
    return f"muster update {job.id if job.array_id is None else job.array_id} -t {said}"


def _array_said(job: PendingJob) -> str:
    """What `_update_hint`'s command changes, for an array's element: every pending element of its array."""
    return "" if job.array_id is None else f", for every pending element of array {job.array_id}"


CLOSED_NAMED = 3  # closed nodes a waiting job's reason names; it counts the rest


def _opens_later(node: NodeView, now: float) -> bool:
    """A whole-GPU node closed now that opens at a known time."""
    return not node.schedulable and not node.sharing and node.opens_at is not None and node.opens_at > now


def _closed_text(closed: Sequence[NodeView]) -> str:
    """The nodes that take no new work, named with why: else a node an admin holds, or one settling after being
    unready, reads as a full one on the node list, and a job waiting for room is not told which node to ask about."""
    if not closed:
        return ""
    if not all(n.closed_why for n in closed):  # a snapshot that does not say why (the replay's, a test's)
        one = len(closed) == 1
        return (
            f" {len(closed)} more node{'' if one else 's'} take{'s' if one else ''} no new work now "
            "(held by an admin, cordoned, not ready, or settling after being unready)."
        )
    named = [f"{n.name} ({n.closed_why})" for n in sorted(closed, key=lambda n: n.name)[:CLOSED_NAMED]]
    if rest := len(closed) - len(named):
        named.append(f"{rest} more")
    listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
    return f" {listed} take{'s' if len(closed) == 1 else ''} no new work now."


def schedule(snapshot: Snapshot, config: PolicyConfig | None = None, *, max_jobs: int | None = None) -> Decisions:
    """Decide which pending jobs start now and where, which running jobs are preempted, and why the rest wait."""
    config = config or PolicyConfig()
    with _without_cycle_collection():
        return _Cycle(within_cluster(close_for_maintenance(snapshot)), config, max_jobs if max_jobs is not None else config.max_jobs).run()


def within_cluster(snapshot: Snapshot) -> Snapshot:
    """The snapshot with each elastic job's most cut to the whole-GPU nodes the cluster has now that fit it (open or
    closed), never below its least or the nodes it holds. The job keeps the range it asked for (-N 2-40 on 16 nodes is
    stored as 2-40): cut here, at each decision, it grows onto nodes added to the cluster later, where a most cut at
    submit kept it at 16 for good. Cut to its least, it is a fixed size for this decision only. Jobs not elastic, and
    so every snapshot without an elastic job, are as they were."""
    if not any(p.min_nodes for p in snapshot.pending) and not any(r.min_nodes for r in snapshot.running):
        return snapshot
    counts: dict[tuple[int, int], int] = {}

    def there(gpus_per_node: int, rdma_per_node: int) -> int:
        key = (gpus_per_node, rdma_per_node)
        if key not in counts:
            counts[key] = sum(1 for n in snapshot.nodes if not n.sharing and n.gpus_total >= gpus_per_node and n.rdma >= rdma_per_node)
        return counts[key]

    pending = tuple(
        replace(p, nodes=max(p.min_nodes, there(p.gpus_per_node, p.rdma_per_node)))
        if p.elastic and p.nodes > there(p.gpus_per_node, p.rdma_per_node)
        else p
        for p in snapshot.pending
    )
    running = tuple(
        replace(r, max_nodes=max(r.min_nodes, len(r.node_names), there(r.gpus_per_node, r.rdma_per_node)))
        if r.elastic and r.max_nodes > there(r.gpus_per_node, r.rdma_per_node)
        else r
        for r in snapshot.running
    )
    return replace(snapshot, pending=pending, running=running)


@contextmanager
def _without_cycle_collection() -> Iterator[None]:
    """Python's cycle collector off for one decision. A decision makes hundreds of thousands of short-lived tuples and
    lists, which trigger full collections that walk the whole snapshot again and again (7% of a cycle at 10,000
    pending); what it makes is freed by reference counting, and anything cyclic is collected once it is back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Cycle:
    def __init__(self, snapshot: Snapshot, config: PolicyConfig, max_jobs: int | None) -> None:
        self.snapshot = snapshot
        self.config = config
        self.max_jobs = max_jobs
        self.now = snapshot.now
        self.capacity = Capacity(snapshot.nodes)
        self.fitting: dict[tuple[int, int, bool], list[str]] = {}
        self.plan_fitting: dict[tuple[int, int, bool], list[str]] = {}  # _plan_fitting_nodes' own, with the opening nodes
        # Whether some whole-GPU nodes have RDMA devices and some do not (a preference in placement, _fit_on).
        self.rdma_mixed = len({bool(rdma) for rdma in self.capacity.rdma.values()}) > 1
        self.rdma_wanted = self.rdma_mixed and any(p.rdma_per_node for p in snapshot.pending)
        self.owners: dict[tuple[str, str | None], tuple[tuple[str, str], ...]] = {}
        self.no_limits: dict[str, Account] = {}
        # (GPUs per node, nodes, minimum nodes) -> what a job of that shape holds of its quota (the nodes are fixed).
        self.quota_gpus: dict[tuple[int, int, int], float] = {}
        # (wall time, GPUs per node, nodes, minimum nodes) -> what a job of that shape may charge its budget, and how.
        self.budget_needs: dict[tuple[float, int, int, int], tuple[float, str]] = {}
        self.budget_texts: dict[tuple[str, float, tuple[float, str], int | None], str] = {}
        self.running: dict[int, RunningJob] = {r.id: r for r in sorted(snapshot.running, key=lambda r: r.id)}
        self.on_node: dict[str, dict[int, int]] = defaultdict(dict)  # node -> {job id: GPUs held there}
        # Without any limit or budget in the accounts every limit check passes: what they count is not worked out.
        self.limited = any(a.max_gpus is not None or a.node_hours_left is not None for a in snapshot.accounts.values())
        self.per_job_limited = any(
            a.max_wall_seconds is not None or a.max_node_hours_per_job is not None for a in snapshot.accounts.values()
        )
        self.in_quota: defaultdict[str, float] = defaultdict(float)
        self.slices = Slices(snapshot.nodes, snapshot.running, self.now)
        self.node_gpus = {n.name: n.gpus_total for n in snapshot.nodes}
        for r in self.running.values():
            for name, gpus in zip(r.node_names, r.gpus_held, strict=True):
                if name in self.capacity.total:  # whole GPUs; the slices of shared nodes are self.slices'
                    self.on_node[name][r.id] = self.on_node[name].get(r.id, 0) + int(gpus)
            if not r.over_quota and self.limited:
                self._count_quota(r.user, r.team, r.gpus)
        # Budgets count what running jobs may still use by their wall time, not only what they used:
        # the ledger charges it as they run, so leaving it out would let the budget be overspent.
        self.budget_used: defaultdict[str, float] = defaultdict(float)
        # A promise holds its owners' quota and budget as well as its nodes (see _commit): job id -> (GPUs, node-hours),
        # and per account what its promised jobs hold.
        self.commitments: dict[int, tuple[float, float]] = {}
        self.held_quota: defaultdict[str, float] = defaultdict(float)
        self.held_budget: defaultdict[str, float] = defaultdict(float)
        # Whole-GPU nodes closed until a known time (settling after NotReady): no placement or promise goes to them in
        # this cycle, but the queue's estimates count them from when they open (a job said to start "in 14 min" started
        # when a node it was not counted on finished settling, 2 minutes on).
        self.opening = {n.name: n for n in sorted(snapshot.nodes, key=lambda n: n.name) if _opens_later(n, self.now)}
        self.plan_total = dict(sorted({**self.capacity.total, **{n.name: n.gpus_total for n in self.opening.values()}}.items()))
        self.plan_rdma = {**self.capacity.rdma, **{n.name: n.rdma for n in self.opening.values()}}
        self.on_opening: dict[str, list[tuple[int, int]]] = defaultdict(list)  # node -> [(job id, GPUs held there)]
        for r in self.running.values() if self.opening else ():
            for name, gpus in zip(r.node_names, r.gpus_held, strict=True):
                if name in self.opening:
                    self.on_opening[name].append((r.id, int(gpus)))
        self.node_sizes = whole_gpu_node_sizes(snapshot.nodes)
        self.foreign_gpus = sum(n.gpus_foreign for n in snapshot.nodes if n.schedulable and not n.sharing)
        # Whole-GPU nodes that take no new work now (held by an admin, cordoned, not ready or settling): in no free count.
        self.closed_text = _closed_text([n for n in snapshot.nodes if not n.schedulable and not n.sharing])
        # GPUs of nodes that share them: in no whole-GPU count, as they take GPU-slice jobs only.
        self.shared_gpus = sum(n.gpus_total for n in snapshot.nodes if n.sharing and n.schedulable)
        for r in self.running.values() if self.limited else ():
            share = self._node_share(r.node_names, r.gpus_held)
            left_hours = max(0.0, r.ends_at - self.now) / 3600 * share
            for key, _ in self._owners(r):
                self.budget_used[key] += left_hours
        self.timelines = Timelines(self.capacity.total, self.capacity.free.__getitem__, self._releases, self.now)
        # Maintenance holds its nodes from its start to its end as a reservation would: placement, backfill, promises
        # and estimates all plan around it (policy/maintenance.py).
        for name, held in maintenance_holds(snapshot.maintenance, self.capacity.total):
            self.timelines.hold(name, held)
        self.promised: dict[int, Reservation] = {}  # job id -> its reservation, kept or new
        self.moved: dict[int, str] = {}  # job id -> why the reservation it had could not be kept
        self.quota_plans: dict[str, QuotaPlan] | None = None
        self.budget_plans: dict[str, BudgetPlan] | None = None
        self.next_promised: set[int] = set()  # the starving jobs a new reservation may go to in this cycle
        self.by_start: list[Reservation] | None = None  # the reservations, earliest first, worked out when needed
        self.blocking: dict[tuple[int, int | None, int, int, int], Reservation] = {}  # by job shape and capacity version
        # Whether a running job may be stopped, by what decides it on the asking side (class, owner's usage): the
        # preemption searches of a cycle ask it again of the same jobs, and within a cycle the answer stays.
        self.victim_memo: dict[tuple[int, float | None, float | None], dict[int, bool]] = {}
        # While a search asks who could be stopped at a later instant, once more of them have run the minimum run time
        # (_preempt_later): that instant.
        self.newness_at: float | None = None
        # Waiting jobs that may preempt the jobs in their way once these have run the minimum run time: job id -> when.
        self.preempt_at: dict[int, float] = {}
        # Of those, the ones whose nodes would then come from shrinking elastic jobs alone: job id -> the jobs shrunk.
        # Said so in the reason: it read "may preempt the jobs in its way" when it would only shrink an elastic job.
        self.shrink_at: dict[int, tuple[int, ...]] = {}
        # The nodes of each elastic job those waiting jobs would take by then (job id -> how many): a second job of the
        # same shape is planned on what the first leaves of them, not after the elastic job's end.
        self.shrink_claimed: Counter[int] = Counter()
        # Waiting jobs that could preempt now but wait for jobs that lose less work (_defer_for_cheaper): job id -> why.
        self.deferred: dict[int, str] = {}
        self.placements: list[Placement] = []
        self.started: set[int] = set()  # placed in this cycle: never preempted in it, whatever the minimum run time
        self.waiting: list[Waiting] = []
        self.preemptions: list[Preemption] = []
        self.failed_searches: set[tuple[int, float | None, int, int, int, int, float | None]] = set()
        self.searches = 0
        self.unsearched: set[int] = set()  # within quota, but the cycle's preemption searches were used up before it
        # Shortcuts that change no decision, for the cost of a long queue:
        # - without a running job that is over quota, of a lower class than some pending job or (with preemption
        #   for fair share) a preemptible one of an owner over its share, no search can find a victim (jobs placed
        #   in this cycle are never victims), so none is tried;
        # - a waiting job's reason text depends only on its shape and the capacity: worked out once per state.
        lowest_pending = min((p.class_rank for p in snapshot.pending), default=0)
        self.usage = usage_ratios(snapshot, config) if config.fair_share_preemption else None
        # Who may be stopped for fair share, with its owner's U/S: worked out once, not at every victim search.
        self.fair_share_victims = {r.id: self._usage_of(r) for r in snapshot.running if self._fair_share_victim(r)}
        may_lose = {r.id for r in snapshot.running if r.over_quota or r.class_rank > lowest_pending} | set(self.fair_share_victims)
        self.victims_possible = bool(may_lose)
        self.any_borrower = any(r.over_quota for r in snapshot.running)
        self.lowest_running_class = max((r.class_rank for r in snapshot.running), default=-1)
        self.most_over_share = max(self.fair_share_victims.values(), default=None)
        self.shrink_possible = any(r.elastic and len(r.node_names) > r.min_nodes and r.id in may_lose for r in snapshot.running)
        # Some of them too new to shrink yet (_shrink_later plans the jobs that wait for them): else it is not asked.
        min_runtime = config.preemption_min_runtime_seconds
        self.shrink_later_possible = any(
            r.elastic and len(r.node_names) > r.min_nodes and r.id in may_lose and snapshot.now < r.started_at + min_runtime
            for r in snapshot.running
        )
        self.resizes: list[Resize] = []
        self.room_texts: dict[tuple[int, int, int, int, int], str] = {}
        self.reclaim_texts: dict[tuple[int, object], str] = {}
        self.fits_unreserved: dict[tuple[int, int, int, int, int], bool] = {}
        self.sooner_texts: dict[tuple[int, int, int, int, int, int, float], str] = {}
        self.planned: dict[int, PendingJob] = {}  # the waiting jobs by id, as promises and estimates see them
        # The estimates' timelines (run's), and the waiting jobs planned to start by shrinking elastic jobs
        # (_shrink_start): job id -> (when, the jobs shrunk), with how many nodes of each those plans take.
        self.plan_timelines = self.timelines
        self.shrink_planned: dict[int, tuple[float, tuple[int, ...]]] = {}
        self.plan_shrunk: Counter[int] = Counter()

    # --- the walk --------------------------------------------------------------------------------

    def run(self) -> Decisions:
        priorities = prioritize(self.snapshot, self.config)
        order = priority_order(self.snapshot, self.config, priorities)
        # Promises and estimates are for a start: an elastic job's at its fewest nodes.
        planned = {j.id: j.start_shape() for j in order}
        self.planned = planned
        self.promised, self.moved = keep_promises(
            self.snapshot.reservations, planned, self.timelines, self._node_fits, self._fitting_nodes, self.now, self._need_on
        )
        # The jobs that could not start by borrowing need their quota held most: they are committed first.
        for kept in sorted(self.promised.values(), key=lambda r: (self._may_borrow(planned[r.job_id]), r.start, r.job_id)):
            self._commit(planned[kept.job_id])
        within_quota = self._settle_borrowers() if self.limited and self.any_borrower else ()
        # New reservations go to the jobs that have waited longest (as EASY's head), not by priority: otherwise a
        # heavy tenant's starving job may never get one, and its wait has no bound.
        free_slots = max(0, self.config.max_reservations - len(self.promised))
        starves_after = self.config.starving_after
        # A GPU slice job is never promised nodes: slices go in the queue's order as they free up (policy/sharing.py).
        starving = sorted(
            (
                j
                for j in order
                if self.now - j.submitted_at >= starves_after(j.wall_seconds, j.nodes)
                and j.id not in self.promised
                and not j.shares_gpu
                and not j.held
                and not j.waits_for
            ),
            key=lambda j: (j.submitted_at, j.id),
        )
        self.next_promised = {j.id for j in starving[:free_slots] if j.not_before is None or j.not_before <= self.now}
        examined = 0
        for job in order:
            # A job with a reservation is always examined: its nodes are kept for it.
            if job.id not in self.promised and job.id not in self.moved:
                examined += 1
                if self.max_jobs is not None and examined > self.max_jobs:
                    self._wait(job, NOT_EXAMINED, "Not examined in this cycle: the queue is longer than one cycle examines.")
                    continue
            self._consider(job)
        if not any(w.reason_code == NOT_EXAMINED for w in self.waiting):
            self._grow()
        self.plan_timelines = self._likely_timelines(opening=True)
        # Elastic jobs above their least may give up nodes to a job with priority long before they end: the plan says
        # so (a job waiting for one to shrink read its end at full size, hours after the cycle would shrink it).
        shrinkable = self.config.preemption and any(r.elastic and len(r.node_names) > r.min_nodes for r in self.running.values())
        waiting = forecast(
            self.waiting,
            planned,
            self.plan_timelines,
            self.now,
            self.config.plan_jobs,
            self._need_on,
            self._not_before,
            self._plan_limits,
            self._plan_fitting_nodes,
            self.slices,
            self._shrink_start if shrinkable else None,
        )
        if self.preempt_at:
            waiting = tuple(self._sooner_by_preempting(w) for w in waiting)
        if self.shrink_planned:
            waiting = tuple(self._said_shrink_planned(w) for w in waiting)
        reservations = tuple(sorted(self.promised.values(), key=lambda r: (r.start, r.job_id)))
        return Decisions(
            tuple(self.placements), waiting, tuple(self.preemptions), reservations, priorities, tuple(self.resizes), within_quota
        )

    def _settle_borrowers(self) -> tuple[int, ...]:
        """The borrowers whose owners' quotas have room for them again (the owner's other work ended or was stopped),
        oldest first, counted within quota from now on.

        A borrower stays one until then: a walk saw its owner's job, preempted by a production job, come back within the
        quota and stop the owner's other borrower (0.5 GPU-hours lost for nothing: the owner held the same GPUs after),
        while the owner had held exactly its quota. After the promises, which hold their quota first."""
        settled = []
        for r in sorted((r for r in self.running.values() if r.over_quota), key=lambda r: (r.started_at, r.id)):
            room = self._quota_room(r)
            if room is None or r.gpus <= room:
                self.running[r.id] = replace(r, over_quota=False)
                self._count_quota(r.user, r.team, r.gpus)
                settled.append(r.id)
        return tuple(settled)

    def _sooner_by_preempting(self, wait: Waiting) -> Waiting:
        """A waiting job's estimate, no later than when it may preempt the jobs in its way (not a promise: a job of
        more priority may take them first)."""
        at = self.preempt_at.get(wait.job_id)
        if at is None or wait.estimate == ESTIMATE_RESERVED:
            return wait
        # Said too: its reason named only the nodes it lacks, while its estimate had moved to a preemption. Said also
        # when the plan expects the jobs in its way to end about then: the estimate still rests on it if they do not.
        shrunk = self.shrink_at.get(wait.job_id)
        if shrunk:
            ids = [str(i) for i in shrunk]
            jobs = f"job {ids[0]}" if len(ids) == 1 else "jobs " + ", ".join(ids[:-1]) + f" and {ids[-1]}"
            has = "it has" if len(ids) == 1 else "they have"
            said = f"It may shrink elastic {jobs} from {when(at)}, when {has} run the minimum run time (stopping no job)."
        else:
            said = f"It may preempt the jobs in its way from {when(at)}, when they have run the minimum run time."
        sooner = wait._replace(reason=f"{wait.reason} {said}")
        if wait.estimated_start is not None and wait.estimated_start <= at:
            return sooner
        return sooner.estimated(at, ESTIMATE_PLANNED)

    def _shrink_start(
        self, job: PendingJob, code: str, after: float, plain: float, allowed_at: Callable[[float], bool]
    ) -> tuple[float, list[str]] | None:
        """An estimate sooner than `plain` for a waiting job the walk would shrink elastic jobs for (`_shrink_for`):
        the first instant, from `after`, at which the whole nodes free for its wall time and the last ranks of the
        elastic jobs it outranks (past the minimum run time by then, down to their least, on nodes no reservation or
        job planned before it holds) make up its gang; the nodes too. None where there is none before `plain`.

        The instants looked at are those at which what it could have changes: the plan's nodes freeing or taken, and
        each elastic job coming of age; at most MAX_SHRINK_INSTANTS of them, the first, bound the work. A job whose
        own limits keep it waiting (quota, budget) would not shrink anyone for it, as the walk does not when it borrows."""
        if code not in (NO_ROOM, RESERVATION, FRAGMENTATION):
            return None
        min_runtime = self.config.preemption_min_runtime_seconds
        tl = self.plan_timelines
        # Each elastic job it may shrink: from when, and the nodes it would give up, its last rank first, those the jobs
        # planned before it take left out. In the order _shrink_offers gives them up.
        givers: list[tuple[tuple[int, bool, int], float, int, list[str]]] = []
        for r in self.running.values():
            if not r.elastic or len(r.node_names) <= r.min_nodes or self._bound(job, r) is None:
                continue
            offers = []
            for rank in range(len(r.node_names) - 1, r.min_nodes - 1, -1):
                name = r.node_names[rank]
                if not self._node_fits(job, name) or set(self.on_node.get(name, {})) != {r.id}:
                    break  # its ranks go from the last: one that cannot go keeps those before it
                offers.append(name)
            offers = offers[self.plan_shrunk[r.id] + self.shrink_claimed[r.id] :]
            if offers:
                givers.append(((-r.class_rank, not r.over_quota, r.id), max(self.now, r.started_at + min_runtime), r.id, offers))
        if not givers:
            return None
        givers.sort()
        nodes = self._plan_fitting_nodes(job)
        changes = {at for _, at, _, _ in givers if after <= at < plain}
        for name in nodes:
            changes.update(t for t in tl.profile(name)[0] if after <= t < plain)
        changes.add(after)
        count = job.nodes if job.whole_nodes else 1
        for at in sorted(changes)[:MAX_SHRINK_INSTANTS]:
            end = at + job.wall_seconds
            free = [name for name in nodes if tl.fits(name, self._need_on(job, name), at, end)]
            short = count - len(free)
            if short <= 0 or not allowed_at(at) or (job.preemptible and not self._quota_room_at(job, at)):
                continue  # the plan's own search answers where the free nodes are enough
            taken: list[tuple[int, str]] = []
            for _, since, victim_id, offers in givers:
                if since > at:
                    continue
                for name in offers:
                    if name in free or any(h.start < end and h.end > at for h in tl.holds.get(name, ())):
                        break  # held for a job planned before it, or a reservation: nor those before it go
                    taken.append((victim_id, name))
            if len(taken) < short:
                continue
            taken = taken[:short]
            self.plan_shrunk.update(victim_id for victim_id, _ in taken)
            self.shrink_planned[job.id] = (at, tuple(sorted({victim_id for victim_id, _ in taken})))
            return at, free[: count - short] + [name for _, name in taken]
        return None

    def _quota_room_at(self, job: PendingJob, at: float) -> bool:
        """Whether the job's owners' GPU quotas have room for it at `at`, as the plan expects them to go. A preemptible
        job's limits let it start beyond them (it borrows), but the walk shrinks no one for a borrower."""
        if not self.limited:
            return True
        plans, needs = self._quota_plans(), self._quota_gpus(job)
        return all(
            plan.earliest(needs, at, job.likely_seconds) == at for key, _ in self._owners(job) if (plan := plans.get(key)) is not None
        )

    def _said_shrink_planned(self, wait: Waiting) -> Waiting:
        """A waiting job planned to start by shrinking elastic jobs says so, as one waiting for them to come of age does."""
        planned = self.shrink_planned.get(wait.job_id)
        if planned is None or wait.estimated_start != planned[0] or wait.job_id in self.shrink_at:
            return wait
        ids = [str(i) for i in planned[1]]
        jobs = f"job {ids[0]}" if len(ids) == 1 else "jobs " + ", ".join(ids[:-1]) + f" and {ids[-1]}"
        said = f"It may shrink elastic {jobs} for the nodes it lacks from {when(planned[0])} (stopping no job)."
        return wait._replace(reason=f"{wait.reason} {said}")

    # --- promises kept from the previous cycle -----------------------------------------------------

    def _releases(self, name: str) -> list[tuple[float, int]]:
        return [(self.running[j].ends_at, gpus) for j, gpus in self.on_node.get(name, {}).items()]

    def _node_fits(self, job: PendingJob, name: str) -> bool:
        """Whether the node could ever hold one of the job's ranks: enough GPUs, and the RDMA devices it asks for."""
        total = self.capacity.total.get(name)
        return total is not None and not job.shares_gpu and total >= job.gpus_per_node and self.capacity.rdma[name] >= job.rdma_per_node

    def _fitting_nodes(self, job: PendingJob) -> list[str]:
        """The nodes `_node_fits` says could hold one of the job's ranks, in the capacity's order (the nodes and their
        sizes are fixed for the cycle)."""
        key = (job.gpus_per_node, job.rdma_per_node, job.shares_gpu)
        found = self.fitting.get(key)
        if found is None:
            found = self.fitting[key] = [n for n in self.capacity.total if self._node_fits(job, n)]
        return found

    def _plan_fitting_nodes(self, job: PendingJob) -> list[str]:
        """`_fitting_nodes` for the queue's estimates: also the nodes that open later in the cycle's view (`opening`)."""
        if not self.opening:
            return self._fitting_nodes(job)
        key = (job.gpus_per_node, job.rdma_per_node, job.shares_gpu)
        found = self.plan_fitting.get(key)
        if found is None:
            fits = not job.shares_gpu
            found = self.plan_fitting[key] = [
                n for n, total in self.plan_total.items() if fits and total >= job.gpus_per_node and self.plan_rdma[n] >= job.rdma_per_node
            ]
        return found

    def _need_on(self, job: PendingJob, name: str) -> int:
        """What the job holds on a node: a gang (or an elastic job) the whole node, a single-node job its GPUs."""
        return self.plan_total[name] if job.whole_nodes else job.gpus_per_node

    def _consider(self, job: PendingJob) -> None:
        if job.held:
            # Held until released: out of everything, as a launch's backoff below, and with no estimate (no one knows when).
            self._drop_promise(job)
            self._wait(job, HELD, job.held)
            return
        if job.waits_for:
            # Out of everything as a held job, until the jobs it depends on have ended as it asks.
            self._drop_promise(job)
            self._wait(job, DEPENDENCY, job.waits_for)
            return
        if job.not_before is not None and job.not_before > self.now:
            # Held out of everything (no placement, preemption or reservation), so it blocks nobody meanwhile.
            launches = "launch" if job.launch_failures == 1 else f"{job.launch_failures} launches in a row"
            at = datetime.fromtimestamp(job.not_before, UTC).strftime("%H:%M:%S UTC")
            self._drop_promise(job)
            self._wait(job, LAUNCH_BACKOFF, f"Its last {launches} did not come up (see its history); it is tried again after {at}.")
            return
        beyond = self._job_limit_block(job) if self.per_job_limited else None
        if beyond:
            self._drop_promise(job)
            self._wait(job, JOB_LIMIT, beyond)
            return
        held = self._budget_hold(job) if self.limited else None
        if held:
            # A promise holds nodes only for a job that may start: one held by its own limits gives them back.
            self._drop_promise(job)
            self._wait(job, BUDGET, held)
            return
        quota_block = self._quota_block(job) if self.limited else None
        if job.shares_gpu:
            self._consider_slice(job, quota_block)
            return
        if quota_block and (not job.preemptible or self._reborrow_barred(job)):
            self._drop_promise(job)
            if job.preemptible:
                preempted, again = when(job.preempted_at or 0.0), when(self._reborrow_at(job))
                quota_block += f" It was preempted at {preempted} and may borrow again from {again}."
            self._wait(job, QUOTA_GPUS, quota_block)
            return
        borrowing = quota_block is not None
        allowed = self._allowed(job)
        chosen = self._fit(job, allowed)
        if chosen is None and not borrowing and self.config.preemption and self.shrink_possible:
            chosen = self._shrink_for(job, self._allowed(job, evicting=True))
        if chosen is None and not borrowing and self.config.preemption and self.victims_possible:
            chosen = self._preempt_for(job, self._allowed(job, evicting=True))
        if chosen is not None:
            self._place(job, chosen, over_quota=borrowing)
            return
        if job.id in self.deferred:
            # No reservation: one would keep it from preempting (a promised job waits for its nodes), and it is due soon.
            self._wait(job, NO_ROOM, self._room_text(job) + self.deferred[job.id])
            return
        self._explain(job, reclaiming=not borrowing and self.config.preemption)

    def _consider_slice(self, job: PendingJob, quota_block: str | None) -> None:
        """A GPU slice job: the slice meeting its asks, in the queue's order; it neither borrows, preempts nor reserves.

        Slices are taken only by slice jobs, so the first in the order that fits takes each one as it frees up.
        """
        if quota_block:
            self._wait(job, QUOTA_GPUS, quota_block + (" A GPU slice does not borrow beyond its quota." if job.preemptible else ""))
            return
        found = self.slices.place(job)
        if found is None:
            fitting = self.slices.fitting(job)
            if not fitting:
                # Name the shared nodes that would offer one but take no new work; else the reason blamed closed nodes
                # while the open ones simply offer no such slice (a MIG node's slices are 1/7 of a GPU, not 0.25).
                closed = [n for n in self.snapshot.nodes if not n.schedulable and slice_fits(job, n)]
                why = _closed_text(closed) if closed else " No node offers such slices: a smaller ask may fit."
                text = f"Needs {describe_ask(job)}; no node that shares its GPUs offers one now.{why}"
            else:
                count = sum(n.slices_per_gpu * n.gpus_total for n in fitting)
                text = f"Needs {describe_ask(job)}; all {count} such slices (on {plural(len(fitting), 'node')}) are held."
            self._wait(job, NO_ROOM, text)
            return
        name, gpu = found
        self._place(job, [name], over_quota=False, held=(self.slices.nodes[name].slice_gpus,), gpu_slot=gpu)

    def _node_share(self, names: tuple[str, ...] | list[str], held: tuple[float, ...]) -> float:
        """The share of whole nodes GPUs held are (what the ledger charges in node-hours)."""
        return sum(gpus / self.node_gpus[name] for name, gpus in zip(names, held, strict=True) if self.node_gpus.get(name))

    def _place(
        self, job: PendingJob, chosen: list[str], *, over_quota: bool, held: tuple[float, ...] | None = None, gpu_slot: int | None = None
    ) -> None:
        """Start the job on `chosen`: whole GPUs (a gang the nodes whole), or with `held` the GPU slice at `gpu_slot`."""
        self._drop_promise(job)
        if held is None:
            held = tuple(self._need_on(job, name) for name in chosen)
            for name, gpus in zip(chosen, held, strict=True):
                self.capacity.take(name, int(gpus))
                self.on_node[name][job.id] = int(gpus)
                self.timelines.changed(name)
        # What this cycle starts counts for the reservations made after it, by its wall time.
        self.running[job.id] = RunningJob(
            id=job.id,
            node_names=tuple(chosen),
            gpus_held=held,
            class_rank=job.class_rank,
            started_at=self.now,
            ends_at=self.now + job.wall_seconds,
            expected_end=self.now + job.expected_seconds if job.expected_seconds is not None else None,
            user=job.user,
            team=job.team,
            preemptible=job.preemptible,
            over_quota=over_quota,
            min_nodes=job.min_nodes if job.elastic else 0,
            max_nodes=job.nodes if job.elastic else 0,
            gpus_per_node=job.gpus_per_node,
            rdma_per_node=job.rdma_per_node,
        )
        if not over_quota:
            self._count_quota(job.user, job.team, sum(held))
        # What the ledger will charge: the share of each node it holds, for its wall time.
        charge = self._node_share(chosen, held) * job.wall_seconds / 3600
        for key, _ in self._owners(job):
            self.budget_used[key] += charge
        self.placements.append(Placement(job.id, tuple(chosen), held, over_quota, gpu_slot))
        self.started.add(job.id)

    def _hold(self, job: PendingJob, names: tuple[str, ...], start: float) -> Reservation:
        reservation = self.promised[job.id] = hold(self.timelines, job, names, start, self._need_on)
        self.by_start = None
        self.blocking.clear()
        self._commit(job)
        return reservation

    def _drop_promise(self, job: PendingJob) -> None:
        reservation = self.promised.pop(job.id, None)
        if reservation is not None:
            self.timelines.release(job.id, reservation.node_names)
            self.by_start = None
            self.blocking.clear()
        if job.id in self.commitments:
            gpus, hours = self.commitments.pop(job.id)
            for key, _ in self._owners(job):
                self.held_quota[key] -= gpus
                self.held_budget[key] -= hours

    def _commit(self, job: PendingJob) -> None:
        """Hold what the promised job needs of its owners' quota and budget, where they have room for it now.

        Without it, the owner's later jobs (backfilled ahead of the promised start, within quota) take the room and
        the promise is broken at its start by the owner's own limit. A job promised while it borrows holds no quota:
        it starts by borrowing, which a pending job, once allowed, stays allowed to do.
        """
        if not self.limited or job.id in self.commitments:
            return
        gpus = self._quota_gpus(job) if self._quota_block(job) is None else 0.0
        budgeted = any(self._account(key).node_hours_left is not None for key, _ in self._owners(job))
        hours = self._budget_need(job)[0] if budgeted and self._budget_hold(job) is None else 0.0
        self.commitments[job.id] = (gpus, hours)
        for key, _ in self._owners(job):
            self.held_quota[key] += gpus
            self.held_budget[key] += hours

    def _quota_used(self, key: str, job: PendingJob | RunningJob) -> float:
        """GPUs of the account's quota in use or held for its promised jobs, leaving out what `job` holds itself."""
        return self.in_quota[key] + self.held_quota[key] - self.commitments.get(job.id, (0.0, 0.0))[0]

    def _budget_committed(self, key: str, job: PendingJob | RunningJob) -> float:
        """Node-hours of the account's budget its running jobs may still use and its promised jobs hold, but `job`'s own."""
        return self.budget_used[key] + self.held_budget[key] - self.commitments.get(job.id, (0.0, 0.0))[1]

    def _may_borrow(self, job: PendingJob) -> bool:
        return job.preemptible and not self._reborrow_barred(job)

    def _wait(self, job: PendingJob, code: str, text: str, estimated_start: float | None = None, estimate: str = "") -> None:
        self.waiting.append(Waiting(job.id, len(self.waiting) + 1, code, text, estimated_start, estimate))

    # --- limits ----------------------------------------------------------------------------------

    def _account(self, key: str) -> Account:
        found = self.snapshot.accounts.get(key)
        if found is None:
            found = self.no_limits.get(key)
            if found is None:
                found = self.no_limits[key] = Account(key=key)
        return found

    def _owners(self, job: PendingJob | RunningJob) -> tuple[tuple[str, str], ...]:
        """(account key, how reasons name it) of the job's user and team; asked several times of every job a cycle."""
        found = self.owners.get((job.user, job.team))
        if found is None:
            user = (user_key(job.user), f"user {job.user}")
            found = self.owners[(job.user, job.team)] = (user, (team_key(job.team), f"team {job.team}")) if job.team else (user,)
        return found

    def _count_quota(self, user: str, team: str | None, gpus: float) -> None:
        self.in_quota[user_key(user)] += gpus
        if team:
            self.in_quota[team_key(team)] += gpus

    def _quota_gpus(self, job: PendingJob) -> float:
        """What the job will hold: a gang holds its nodes whole, so at least the smallest nodes it fits on; a slice job its slice."""
        if job.shares_gpu:
            return self.slices.smallest_share(job)
        key = (job.gpus_per_node, job.nodes, job.min_nodes)
        found = self.quota_gpus.get(key)
        if found is None:
            sizes = [size for size in self.capacity.sizes if size >= job.gpus_per_node]
            start = job.start_shape()
            found = self.quota_gpus[key] = start.nodes * sizes[0] if start.whole_nodes and sizes else job.gpus
        return found

    def _quota_block(self, job: PendingJob) -> str | None:
        needs = self._quota_gpus(job)
        for key, who in self._owners(job):
            limit = self._account(key).max_gpus
            used = self._quota_used(key, job)
            if limit is not None and used + needs > limit:
                if needs > limit and not job.preemptible:
                    # Submit refuses such a job, so the quota came down since (or the smaller nodes went): no job ending
                    # makes room, only the quota going up.
                    return (
                        f"This job needs {_amount(needs)} GPUs at once, more than the quota of {who} allows ({limit}): it waits until "
                        f"an admin raises the quota. To run sooner, make it preemptible (muster update {job.id} --preemptible: it "
                        "may then borrow idle GPUs), or cancel it and submit it smaller."
                    )
                if self.in_quota[key] > limit:
                    # The limit was lowered under running work (quotas.services warns the admin): say it as it is.
                    return (
                        f"{who.capitalize()} holds {_amount(self.in_quota[key])} GPUs, above its quota of {limit}: the quota was "
                        f"lowered after they started; this job needs {_amount(needs)}."
                    )
                held = used - self.in_quota[key]
                if held > 0:
                    return (
                        f"{_amount(used - held)} of {limit} GPUs of the quota of {who} are in use and {_amount(held)} held for its jobs "
                        f"promised a start; this job needs {_amount(needs)}."
                    )
                return f"{_amount(used)} of {limit} GPUs of the quota of {who} are in use; this job needs {_amount(needs)}."
        return None

    def _largest_node(self, job: PendingJob) -> float | None:
        """For a gang within its quota: the largest nodes it may hold whole and stay within it (None: any)."""
        room = self._quota_room(job) if self.limited and job.nodes > 1 else None
        if room is None:
            return None
        return room // job.start_shape().nodes if room >= self._quota_gpus(job) else None

    def _quota_room(self, job: PendingJob | RunningJob) -> float | None:
        """GPUs its owners' tightest quota has left (None: no owner has a limit)."""
        rooms = [limit - self._quota_used(key, job) for key, _ in self._owners(job) if (limit := self._account(key).max_gpus) is not None]
        return min(rooms, default=None)

    def _job_limit_block(self, job: PendingJob) -> str | None:
        """A per-job limit lowered since the job was submitted (submit refuses a job beyond one): it waits until an admin
        raises it, as Slurm holds a queued job past its QOS's lowered MaxWall; lowering a limit is how an admin stops such
        jobs, and starting them anyway would make the new limit a lie for days."""
        for key, who in self._owners(job):
            account = self._account(key)
            wall, hours = account.max_wall_seconds, account.max_node_hours_per_job
            if wall is not None and job.wall_seconds > wall:
                # `muster update` shortens it in place (its place in the queue kept); the reason read "Cancel it and submit it
                # with a shorter wall time" after update came, which starts its wait over.
                hint = _update_hint(job, wall)
                sooner = "Cancel it and submit it shorter to run sooner."
                if hint:
                    sooner = f"To run sooner, shorten it: {hint}{_array_said(job)}."
                return (
                    f"Its wall time of {_minutes(job.wall_seconds)} is beyond the {_minutes(wall)} per job {who} allows now "
                    f"(lowered since it was submitted): it waits until an admin raises the limit. {sooner}"
                )
            # Counted as submit counts it: whole nodes (an elastic job's least) for its wall time.
            asked = (job.min_nodes or job.nodes) * job.wall_seconds / 3600
            if hours is not None and asked > hours:
                hint = _update_hint(job, hours * 3600 / (job.min_nodes or job.nodes))
                shorter = f"shorten it ({hint} fits{_array_said(job)}), or " if hint else ""
                return (
                    f"It may use {node_hours_words(asked, '.3g')}, beyond the {hours:.3g} per job {who} allows now (lowered since it "
                    f"was submitted): it waits until an admin raises the limit. To run sooner, {shorter}cancel it and submit "
                    "it on fewer nodes."
                )
        return None

    def _budget_hold(self, job: PendingJob) -> str | None:
        need: tuple[float, str] | None = None
        for key, who in self._owners(job):
            account = self._account(key)
            if account.node_hours_left is None:
                continue
            need = need or self._budget_need(job)
            # The same figure, in the same words, as the usage page: what running jobs (and those placed in this
            # cycle) may still use by their wall time is committed, and a new job must fit in the rest.
            committed = self._budget_committed(key, job)
            if need[0] > account.node_hours_left - committed:
                # Thousands of jobs may wait on one budget: the same words for the same figures. Past a whole budget the
                # words name the job (or array) to update: two jobs alike read the first one's `muster update 12 -t 30m`.
                # An array is keyed by its id negated (its first element's own id is the same number, said otherwise).
                whole = account.node_hours_per_period
                named = (job.id if job.array_id is None else -job.array_id) if whole is not None and need[0] > whole else None
                text = self.budget_texts.get((key, committed, need, named))
                if text is None:
                    budget, uses = budget_beside_need(BudgetLeft(left=account.node_hours_left, committed=committed), need[0])
                    if whole is not None and need[0] > whole:
                        # No renewal gives it room: it read "It renews ..." after the budget was lowered under it. Its need
                        # grows with its wall time, so a wall time of whole / need-per-second fits a whole period.
                        hint = _update_hint(job, job.wall_seconds * whole / need[0]) if need[0] > 0 else None
                        if not job.queued:
                            # A submit's --test-only: nothing to update or cancel (it named the id the job would get).
                            wall = hint.rsplit(" ", 1)[-1] if hint else None
                            sooner = f"submit it shorter (-t {wall} fits a period's budget), or smaller." if wall else "submit it smaller."
                        elif hint:
                            sooner = f"shorten it ({hint} fits a period's budget{_array_said(job)}), or cancel it and submit it smaller."
                        else:
                            sooner = "cancel it and submit it smaller."
                        renews = self._beyond_whole_budget(account, need[0], whole, sooner)
                    else:
                        renews = f" It renews {when(account.budget_resets_at)}." if account.budget_resets_at else ""
                    text = f"The budget of {who} has {budget}; this job may use {uses} ({need[1]}).{renews}"
                    self.budget_texts[(key, committed, need, named)] = text
                return text
        return None

    @staticmethod
    def _beyond_whole_budget(account: Account, need: float, whole: float, sooner: str) -> str:
        """Why a job needing more than a period's budget waits, and for what. Node-hours an admin added to this period
        alone may make room for it this period (the submit took it so): no budget was lowered under it, and it may
        start this period, as the jobs running end, but never once the period renews with the quota's budget (it read
        "more than its whole budget of 3 node-hours a period (lowered since it was submitted)" beside a grant of 1.5)."""
        granted = account.node_hours_granted
        # Said briefly: with the budget's figures before it and the way to run sooner after it, a reason past
        # REASON_MAX_CHARS loses its middle (jobs.lifecycle.fit_reason).
        if not granted or need > whole + granted:
            said = f"{node_hours_words(_amount(whole))} a period"
            if granted:
                said = f"{node_hours_words(_amount(whole + granted))} this period ({_amount(whole)} a period, {_amount(granted)} added)"
            return (
                f" That is more than its whole budget of {said} (lowered since it was submitted): it waits until an admin "
                f"raises the budget. To run sooner, {sooner}"
            )
        renews = f" ({when(account.budget_resets_at)})" if account.budget_resets_at else ""
        only = f" Only the {node_hours_words(_amount(granted))} added for this period fit it"
        if need > (account.node_hours_left or 0.0):
            return (
                f"{only}, and less is left now; the renewal{renews} brings back {_amount(whole)}, too few: it waits until "
                f"an admin adds more or raises the budget. To run sooner, {sooner}"
            )
        return (
            f"{only}: it may start as running jobs end, until the renewal{renews} brings back {_amount(whole)}, too few. "
            f"To be sure it runs, {sooner}"
        )

    def _budget_need(self, job: PendingJob) -> tuple[float, str]:
        if job.shares_gpu:
            return budget_need(job, self.node_sizes, self.slices)
        key = (job.wall_seconds, job.gpus_per_node, job.nodes, job.min_nodes)
        found = self.budget_needs.get(key)
        if found is None:
            found = self.budget_needs[key] = budget_need(job, self.node_sizes, self.slices)
        return found

    # --- placement -------------------------------------------------------------------------------

    def _allowed(self, job: PendingJob, *, evicting: bool = False) -> Allowed:
        """The nodes the job may take now. Backfill: reserved GPUs only for a job that leaves them in time.

        Placing into free GPUs, the node's timeline says whether the GPUs a reservation needs at its start are
        still there with this job on the node. When preempting (`evicting`), what runs there may be stopped,
        so the timeline cannot be read that way: the job may only use a held node if it is gone, by its wall
        time, before the first reservation on the node starts.
        """
        largest = self._largest_node(job)
        timelines = self.timelines
        if not timelines.holds and largest is None:
            return None
        now, end, total = self.now, self.now + job.wall_seconds, self.capacity.total
        gang = job.whole_nodes

        def allowed(name: str) -> bool:
            if largest is not None and total[name] > largest:
                return False
            holds = timelines.holds.get(name)
            if not holds:
                return True
            if evicting:
                return all(end <= h.start for h in holds if h.job_id != job.id)
            return timelines.fits(name, total[name] if gang else job.gpus_per_node, now, end, ignore=job.id)

        return allowed

    def _fit(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        """Where the job fits now: away from the nodes its last attempt failed on when it fits elsewhere too.

        Only a preference when placing: a job is never held back, nor its reservation, for a node it avoids.
        """
        if job.avoid_nodes:
            avoid = frozenset(job.avoid_nodes)
            elsewhere = self._fit_on(job, lambda name: name not in avoid and (allowed is None or allowed(name)))
            if elsewhere is not None:
                return elsewhere
        return self._fit_on(job, allowed)

    def _fit_on(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        if not self.rdma_mixed or job.rdma_per_node:
            return self._fit_where(job, allowed)
        # Nodes with RDMA devices are kept for the gangs that ask for them where the job fits elsewhere, as Slurm's
        # node weights keep special nodes last: else one-GPU jobs filled the RDMA rack while the other stood idle.
        plain = lambda name: not self.capacity.rdma[name] and (allowed is None or allowed(name))  # noqa: E731
        if job.elastic and not self.rdma_wanted:
            # No job that asks for them waits: an elastic job takes the most nodes that fit, those without devices first
            # (starting on fewer only to grow onto the rest a cycle later would cost it a re-rendezvous).
            for count in self._elastic_counts(job):
                found = self.capacity.whole_nodes(count, job.gpus_per_node, plain)
                if found is None:
                    found = self.capacity.whole_nodes(count, job.gpus_per_node, allowed)
                if found is not None:
                    return found
            return None
        found = self._fit_where(job, plain)
        if found is not None:
            return found
        # While such a gang waits, an elastic job that fits only with RDMA nodes takes as few as it can start on.
        return self._fit_where(job.start_shape(), allowed)

    def _fit_where(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        if job.rdma_per_node:
            inner = allowed
            allowed = lambda name: self._node_fits(job, name) and (inner is None or inner(name))  # noqa: E731
        if not job.whole_nodes:
            name = self.capacity.best_fit(job.gpus_per_node, allowed, self._within_node_end(job), self.config.align_look)
            return None if name is None else [name]
        if job.elastic:
            for count in self._elastic_counts(job):
                found = self.capacity.whole_nodes(count, job.gpus_per_node, allowed)
                if found is not None:
                    return found
            return None
        return self.capacity.whole_nodes(job.nodes, job.gpus_per_node, allowed)

    def _within_node_end(self, job: PendingJob) -> Callable[[str], bool]:
        """The test whether the job would end, by wall time, before a node comes free whole anyway (a job there runs as long).

        A job that outlives the others on its node keeps the node in fragments after they end, which an 8-GPU job
        or a gang cannot use: on the replay of the real trace, preferring nodes it does not outlive cut the p99 wait at
        both loads and gangs' p99 at load 1.0 (docs/replay-findings.md, "What it costs").
        """
        end = self.now + job.wall_seconds

        def within(name: str) -> bool:
            return any(ends_at >= end for ends_at, _ in self._releases(name))

        return within

    def _elastic_counts(self, job: PendingJob) -> range:
        """The node counts an elastic job may start on, most first: within its quota, no fewer than min_nodes."""
        return range(min(job.nodes, self._elastic_room(job)), job.min_nodes - 1, -1)

    def _elastic_room(self, job: PendingJob) -> int:
        """The most whole nodes an elastic job may hold within its owners' GPU quotas (of the smallest size it fits).

        One whose quota has no room for its fewest nodes is borrowing (_consider lets only a preemptible one here): as
        a borrower of fixed size borrows its whole shape, it takes the most that fit. (Capped at its quota's room, it
        had room for none: it never started, and its reason kept saying how many nodes were free.)"""
        room = self._quota_room(job) if self.limited else None
        sizes = [size for size in self.capacity.sizes if size >= job.gpus_per_node]
        if room is None or not sizes:
            return job.nodes
        fits = int(room // sizes[0])
        return job.nodes if fits < job.min_nodes and job.preemptible else fits

    # --- preemption ------------------------------------------------------------------------------

    def _may_preempt(self, job: PendingJob, victim: RunningJob) -> bool:
        bound = self._bound(job, victim)
        return bound is not None and self._protected(victim, bound) is None

    def _bound(self, job: PendingJob, victim: RunningJob) -> int | None:
        """How often the victim may have been preempted and still be stopped for the job (None: the job has no claim).

        A job has a claim on the victim's GPUs when the victim borrows, is of a lower class, or (with preemption for
        fair share) its owner is over its fair share while the job's is not. Where two hold (a job of a lower class whose
        owner is over its share), the looser bound applies: either claim alone would stop it.
        """
        claims = []
        # Giving back GPUs lent beyond quotas is between owners: stopping the owner's own borrower for its own job
        # of no higher class gains it nothing, and loses the borrower's work.
        if (victim.over_quota and not self._same_owner(job, victim)) or victim.class_rank > job.class_rank:
            claims.append(self.config.max_preemptions)
        if self._over_share(job, victim):
            claims.append(self.config.max_fair_share_preemptions)
        return max(claims, default=None)

    @staticmethod
    def _same_owner(job: PendingJob, victim: RunningJob) -> bool:
        """Whether the two count against one quota: the same user's, or the same team's."""
        return job.user == victim.user or (job.team is not None and job.team == victim.team)

    def _may_preempt_any(self, job: PendingJob) -> bool:
        """Whether any running job could be a victim for it, before a search (a search is bounded per cycle)."""
        if self.any_borrower or self.lowest_running_class > job.class_rank:
            return True
        return self.most_over_share is not None and self._claims_share_from(job, self.most_over_share)

    def _claims_share_from(self, job: PendingJob, ratio: float) -> bool:
        """Whether the job's owner may stop, for fair share, the work of an owner that has used `ratio` (U/S)."""
        mine = self._usage_of(job)
        return mine <= 1.0 and ratio - mine >= self.config.fair_share_preemption_gap

    def _usage_of(self, job: PendingJob | RunningJob) -> float:
        """U/S of the account fair share is judged by: the team's, or the user's without one."""
        assert self.usage is not None
        return self.usage(team_key(job.team), "team") if job.team else self.usage(user_key(job.user), "user")

    def _fair_share_victim(self, victim: RunningJob) -> bool:
        """May be stopped for fair share by someone: preemptible, its owners without a GPU quota, over its share."""
        if self.usage is None or not victim.preemptible or victim.over_quota:
            return False
        if any(self._account(key).max_gpus is not None for key, _ in self._owners(victim)):
            return False  # a quota is the owner's guarantee; beyond it, borrowing and reclaiming decide
        return self._usage_of(victim) > 1.0

    def _over_share(self, job: PendingJob, victim: RunningJob) -> bool:
        ratio = self.fair_share_victims.get(victim.id)
        if ratio is None or victim.class_rank < job.class_rank:
            return False
        return self._claims_share_from(job, ratio)

    def _protected(self, victim: RunningJob, bound: int) -> str | None:
        """Why a running job may not be stopped now for a claim allowing `bound` preemptions (None: it may)."""
        if self.newness_at is None:
            if victim.id in self.started or self.now - victim.started_at < self.config.preemption_min_runtime_seconds:
                return PROTECTED_NEW
        elif self.newness_at - victim.started_at < self.config.preemption_min_runtime_seconds:
            return PROTECTED_NEW
        if victim.preemptions >= bound:
            return PROTECTED_SPENT
        if self._lost_if_stopped(victim) > self.config.preemption_max_lost_ratio * victim.gpus * (victim.ends_at - self.now):
            # Far enough along since its last checkpoint, for what it has left by its wall time, that waiting for it to
            # end costs less than the work a preemption would throw away (and the victim would run again).
            return PROTECTED_FAR
        return None

    def _reclaim_text(self, job: PendingJob) -> str:
        """For a job that found no room: why the GPUs lent beyond quotas (and, with preemption for fair share, held by
        preemptible jobs of owners over their share) were not taken back for it.

        Without it the reason says only that the cluster is full, while a user sees others run beyond their quota.
        """
        text = self._held_text(
            (self.capacity.version, (job.user, job.team)),
            lambda r: r.over_quota and not self._same_owner(job, r),
            self.config.max_preemptions,
            "Jobs beyond their owners' quotas hold",
            "taken back",
        )
        if self.most_over_share is not None and self._claims_share_from(job, self.most_over_share):
            text += self._held_text(
                (self.capacity.version, (job.class_rank, self._usage_of(job))),
                lambda r: not r.over_quota and self._over_share(job, r),
                self.config.max_fair_share_preemptions,
                "Preemptible jobs of owners over their fair share hold",
                "stopped",
            )
        return text

    def _held_text(self, key: tuple[int, object], victim: Callable[[RunningJob], bool], bound: int, held_by: str, taken: str) -> str:
        if key not in self.reclaim_texts:
            held: dict[str | None, float] = defaultdict(float)
            for r in self.running.values():
                if victim(r):
                    held[self._protected(r, bound)] += r.gpus
            parts = [
                f"{held[code]:g} {words}"
                for code, words in (
                    (PROTECTED_NEW, f"by jobs that started less than {_minutes(self.config.preemption_min_runtime_seconds)} ago"),
                    (PROTECTED_SPENT, f"by jobs already preempted {bound} times"),
                    (
                        PROTECTED_FAR,
                        "by jobs too far along to stop (stopping them loses more work, since their last checkpoint, "
                        "than waiting for them costs)",
                    ),
                    (None, "on nodes where stopping them does not make room for it"),
                )
                if held.get(code)
            ]
            total = sum(held.values())
            said = f" {held_by} {_amount(total)} GPUs; none could be {taken} for it: " + "; ".join(parts) + "."
            self.reclaim_texts[key] = said if total else ""
        return self.reclaim_texts[key]

    def _reborrow_at(self, job: PendingJob) -> float:
        return (job.preempted_at or 0.0) + self.config.reborrow_hysteresis_seconds

    def _reborrow_barred(self, job: PendingJob) -> bool:
        """Just preempted: borrowing again at once would only be reclaimed again (thrash)."""
        return job.preempted_at is not None and self.now < self._reborrow_at(job)

    @staticmethod
    def _lost_since(victim: RunningJob) -> float:
        """Where the work a preemption throws away begins: its last checkpoint if it reported one since it started."""
        return max(victim.started_at, victim.checkpointed_at or victim.started_at)

    def _lost_if_stopped(self, victim: RunningJob, at: float | None = None) -> float:
        """GPU-seconds a preemption (now, or `at`) throws away: since its last checkpoint if it reports them, else since
        its start."""
        return victim.gpus * max(0.0, (self.now if at is None else at) - self._lost_since(victim))

    def _preempt_for(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        # What the search depends on besides capacity: the class and, with preemption for fair share, the owner's usage
        # (who may be stopped), the shape, and the nodes `allowed` lets it use. Those are the largest node its quota
        # lets it hold whole, and which reservations it may backfill: every reservation starting no earlier than the
        # job's wall time ends, so their count says which.
        if not self._may_preempt_any(job):
            return None
        if self.searches >= MAX_PREEMPTION_SEARCHES:
            self.unsearched.add(job.id)
            return None
        end = self.now + job.wall_seconds
        backfills = sum(1 for r in self.promised.values() if end <= r.start)
        mine = self._usage_of(job) if self.usage is not None else None
        key = (job.class_rank, self._largest_node(job), backfills, job.nodes, job.gpus_per_node, job.rdma_per_node, mine)
        if job.id in self.promised:
            return None
        if key in self.failed_searches:
            # The same search failed for a job before it: elastic jobs too new to shrink may still have nodes for this
            # one once they have run the minimum run time, beyond what the jobs before it would take of them.
            self._shrink_later(job, allowed)
            return None
        self.searches += 1
        # The nodes elastic jobs can give up go first (_shrink_for found them too few on their own): only the rest is
        # searched for among jobs stopped whole. (Within a cycle they only grow fewer, as the key's assumption needs.)
        start = job.start_shape()
        offers = self._shrink_offers(job, allowed)[1] if self.shrink_possible and start.nodes > 1 else []
        given = {name for _, name in offers}
        search = allowed if not given else (lambda name: name not in given and (allowed is None or allowed(name)))
        rest = replace(start, nodes=start.nodes - len(given))
        victims = self._smallest_victim_set(rest, search)
        if offers and victims is not None and {victim_id for victim_id, _ in offers} & set(victims):
            # The search counts only the nodes it takes, so a shrinking job's last nodes looked cheap, and it was stopped
            # whole beside the plain job that made up the rest. The rest from jobs not being shrunk, with the shrink,
            # is taken instead wherever that loses less work (a shrink loses only a re-rendezvous).
            shrinking = {victim_id for victim_id, _ in offers}

            def elsewhere(name: str) -> bool:
                return (search is None or search(name)) and not shrinking.intersection(self.on_node.get(name, {}))

            others = self._smallest_victim_set(rest, elsewhere)
            if others is not None and self._lost_by(others) < self._lost_by(victims):
                victims = others
        if victims is None:
            # Within a cycle capacity only shrinks, and victims and allowed nodes with it: the same key fails again.
            self.failed_searches.add(key)
            self._preempt_later(job, rest, search, allowed)
            return None
        if self._defer_for_cheaper(job, rest, search, victims):
            return None
        for victim_id in victims:
            self._evict(self.running[victim_id], job)
        # A job stopped whole gives up all of its nodes, those it could have given by shrinking too. The victims may
        # free more whole nodes than the search counted (a job is stopped whole): the shrinks give only what is still
        # short, or the node left over was grown back onto in the same cycle, a second re-rendezvous for nothing.
        still_short = self._shrink_offers(job, allowed, offering=False)[0]
        self._shrink(job, [(victim_id, name) for victim_id, name in offers if victim_id in self.running][: max(0, still_short)])
        return self._fit(job, allowed)

    def _preempt_later(self, job: PendingJob, shape: PendingJob, allowed: Allowed, whole: Allowed = None) -> None:
        """When the job could preempt the jobs in its way, if only the minimum run time protects them: its estimate.

        The forecast plans a waiting job around the running ones as if they ran to their ends; a job that may preempt
        them starts once they have run the minimum run time (a production job read "in 54 min" and started in 6). The
        earliest instant at which some set of them may be stopped, not when the set the search would pick once all may
        be has run it: a job read "from 05:25", the newest jobs' instant, and stopped older ones at 05:21. Which jobs
        may be stopped only grows with the instant, so it is found by bisection over the instants the new jobs come of
        age: a few searches per failed search (its key is new), taking none of their count: no decision changes."""
        min_runtime = self.config.preemption_min_runtime_seconds
        if min_runtime <= 0:
            return
        instants = sorted({r.started_at + min_runtime for r in self.running.values() if r.started_at + min_runtime > self.now})
        if not instants:
            return

        def found_at(index: int) -> bool:
            self.newness_at = instants[index]
            try:
                return bool(self._smallest_victim_set(shape, allowed))
            finally:
                self.newness_at = None

        low, high = 0, len(instants) - 1
        if not found_at(high):
            return
        while low < high:
            middle = (low + high) // 2
            if found_at(middle):
                high = middle
            else:
                low = middle + 1
        self.preempt_at[job.id] = instants[low]
        # Elastic jobs too new to shrink may give all it lacks by then: the cycle then shrinks them and stops no one.
        self._shrink_later(job, whole, by=instants[low])

    def _shrink_later(self, job: PendingJob, allowed: Allowed, by: float | None = None) -> None:
        """When elastic jobs too new to shrink now could give the job all the whole nodes it lacks (no later than `by`),
        beyond the nodes of theirs the waiting jobs before it would take then: its estimate, and its reason says it
        would shrink them (it read "may preempt the jobs in its way", though none would be stopped)."""
        if not self.shrink_later_possible:
            return
        min_runtime = self.config.preemption_min_runtime_seconds
        instants = sorted(
            {
                r.started_at + min_runtime
                for r in self.running.values()
                if r.elastic
                and len(r.node_names) > r.min_nodes
                and self.now < r.started_at + min_runtime <= (math.inf if by is None else by)
            }
        )
        for at in instants:
            self.newness_at = at
            try:
                short, offers = self._shrink_offers(job, allowed)
            finally:
                self.newness_at = None
            taken = Counter[int]()
            free = []
            for victim_id, _ in offers:  # each job's last ranks first: those before it take the first of them
                taken[victim_id] += 1
                if taken[victim_id] > self.shrink_claimed[victim_id]:
                    free.append(victim_id)
            if short > 0 and len(free) >= short:
                self.preempt_at[job.id] = at
                self.shrink_at[job.id] = tuple(sorted(set(free[:short])))
                self.shrink_claimed.update(free[:short])
                return

    def _defer_for_cheaper(self, job: PendingJob, shape: PendingJob, allowed: Allowed, victims: list[int]) -> bool:
        """Whether the job waits a little to preempt jobs of a lower class that lose less work than `victims`, the
        cheapest now.

        Jobs too new to stop may be the cheap ones: a production job stopped two jobs of a lower class, throwing away
        5.3 GPU-hours of work, one second before a preemptible job in its way passed the minimum run time. So the search
        is asked once more as of `preemption_defer_seconds` ahead (who may be stopped only grows with the instant), and
        the job waits for that set if the work it saves is more than the GPU-seconds the job's own wait costs. The wait
        is bounded from when the job was queued, so a job that keeps finding cheaper victims is not put off twice."""
        horizon = self.config.preemption_defer_seconds
        min_runtime = self.config.preemption_min_runtime_seconds
        latest = self.now + horizon
        if horizon <= 0 or min_runtime <= 0 or self.now - job.submitted_at >= horizon:
            return False
        if any(self.running[v].class_rank <= job.class_rank for v in victims):
            # Taking back GPUs lent beyond its quota (or stopping work for fair share), a job does not wait: the quota is
            # its owner's guarantee. On the quotas-and-borrowing replay waiting there too cut the work lost from 3.6% to
            # 2.5% of GPU-hours, but the tenant worst served over the window fell from 0.72 of its share to 0.46.
            return False
        if not any(self.now < r.started_at + min_runtime <= latest for r in self.running.values()):
            return False
        self.newness_at = latest
        try:
            later = self._smallest_victim_set(shape, allowed)
        finally:
            self.newness_at = None
        if not later:
            return False
        at = max(self.now, *(self.running[v].started_at + min_runtime for v in later))
        lost_now = sum(self._lost_if_stopped(self.running[v]) for v in victims)
        lost_then = sum(self._lost_if_stopped(self.running[v], at) for v in later)
        if lost_now - lost_then <= job.gpus * (at - self.now):
            return False
        self.preempt_at[job.id] = at
        self.deferred[job.id] = (
            f" Stopping the jobs in its way now would throw away {_amount(lost_now / 3600)} GPU-hours of work; it waits "
            f"to stop jobs that lose {_amount(lost_then / 3600)}."
        )
        return True

    def _lost_by(self, victims: Iterable[int]) -> tuple[float, int]:
        """The work stopping these jobs throws away, then how many they are: which of two victim sets to prefer."""
        chosen = list(victims)
        return (sum(self._lost_if_stopped(self.running[v]) for v in chosen), len(chosen))

    def _smallest_victim_set(self, job: PendingJob, allowed: Allowed) -> list[int] | None:
        cap = self.capacity
        usage = self._usage_of(job) if self.usage is not None else None
        memo = self.victim_memo.setdefault((job.class_rank, usage, self.newness_at), {})

        def may_stop(victim_id: int) -> bool:
            found = memo.get(victim_id)
            if found is None:
                found = memo[victim_id] = self._may_preempt(job, self.running[victim_id])
            return found

        candidates: list[tuple[tuple[float, int, float, str], list[int]]] = []
        whole = job.whole_nodes
        for name in self._fitting_nodes(job):
            jobs_here = self.on_node.get(name, {})
            # A whole node is needed and something here may not be stopped: known before reading the node's timeline.
            if whole and not all(may_stop(j) for j in jobs_here):
                continue
            if allowed is not None and not allowed(name):
                continue
            if whole:
                chosen = list(jobs_here)
            else:
                need = job.gpus_per_node - cap.free[name]
                if need <= 0:
                    chosen = []
                else:
                    victims = [self.running[j] for j in jobs_here if may_stop(j)]
                    # Fewest victims first: the ones holding the most GPUs here, lowest class, borrowers first.
                    victims.sort(key=lambda v: (-jobs_here[v.id], not v.over_quota, -v.class_rank, v.id))
                    chosen, freed = [], 0
                    for v in victims:
                        if freed >= need:
                            break
                        chosen.append(v.id)
                        freed += jobs_here[v.id]
                    if freed < need:
                        continue
            # The least work thrown away first, then the fewest jobs and GPUs stopped.
            lost = sum(self._lost_if_stopped(self.running[v]) for v in chosen)
            cost = (lost, len(chosen), sum(self.running[v].gpus for v in chosen), name)
            candidates.append((cost, chosen))
        if len(candidates) < job.nodes:
            return None
        candidates.sort()
        victim_ids: list[int] = []
        for _, chosen in candidates[: job.nodes]:
            victim_ids.extend(v for v in chosen if v not in victim_ids)
        return sorted(victim_ids)

    # --- elastic jobs: shrink for a job with priority, grow onto nodes left idle ------------------

    def _may_shrink(self, job: PendingJob, victim: RunningJob) -> bool:
        """Who may be shrunk: as who may be preempted (one the job outranks, past the minimum run time), but the work
        lost is only a re-rendezvous, so neither the bound on preemptions nor the work since a checkpoint counts."""
        at = self.now if self.newness_at is None else self.newness_at  # _preempt_later asks as of a later instant
        if victim.id in self.started or at - victim.started_at < self.config.preemption_min_runtime_seconds:
            return False
        return self._bound(job, victim) is not None

    def _shrink_for(self, job: PendingJob, allowed: Allowed) -> list[str] | None:
        """Whole nodes for the job taken from elastic jobs above their minimum (their last ranks), before anyone is
        preempted whole; None when shrinking alone cannot free enough (_preempt_for then stops jobs for the rest)."""
        short, offers = self._shrink_offers(job, allowed)
        if short <= 0 or len(offers) < short:
            return None
        self._shrink(job, offers[:short])
        return self._fit(job, allowed)

    def _shrink_offers(self, job: PendingJob, allowed: Allowed, *, offering: bool = True) -> tuple[int, list[tuple[int, str]]]:
        """How many whole nodes the job is short of now, and (`offering`) the nodes elastic jobs above their minimum
        could give up for it, as (job id, node) in the order they would: lowest class first, borrowers first, then by
        job, each job's last rank first (a job gives up a suffix of its ranks)."""
        start = job.start_shape()

        def fits(name: str) -> bool:
            return self._node_fits(job, name) and (allowed is None or allowed(name))

        idle = sum(len(names) for names in self.capacity.idle_nodes(job.gpus_per_node, fits).values())
        short = (start.nodes if start.whole_nodes else 1) - idle
        if short <= 0 or not offering:
            return short, []  # not short of whole nodes: what blocks it is not for a shrink to solve
        offers: list[tuple[tuple[int, bool, int, int], str]] = []
        for r in self.running.values():
            if not r.elastic or len(r.node_names) <= r.min_nodes or not self._may_shrink(job, r):
                continue
            for rank in range(len(r.node_names) - 1, r.min_nodes - 1, -1):
                name = r.node_names[rank]
                if not fits(name) or set(self.on_node.get(name, {})) != {r.id}:
                    break  # its ranks go from the last: one that cannot go keeps those before it
                offers.append(((-r.class_rank, not r.over_quota, r.id, -rank), name))
        return short, [(key[2], name) for key, name in sorted(offers)]

    def _shrink(self, job: PendingJob, taken: Iterable[tuple[int, str]]) -> None:
        by_job: dict[int, list[str]] = defaultdict(list)
        for victim_id, name in taken:
            by_job[victim_id].append(name)
        for victim_id, names in sorted(by_job.items()):
            self._resize(self.running[victim_id], removed=names, reason=f"Shrunk for job {job.id}, which has priority", for_job=job.id)

    def _resize(
        self, r: RunningJob, *, added: Sequence[str] = (), removed: Sequence[str] = (), reason: str, for_job: int | None = None
    ) -> None:
        """Apply a resize to this cycle's view (capacity, timelines, quota) and record it as a decision."""
        for name in removed:
            gpus = self.on_node[name].pop(r.id)
            self.capacity.give(name, gpus)
            self.timelines.changed(name)
        for name in added:
            self.capacity.take(name, self.capacity.total[name])
            self.on_node[name][r.id] = self.capacity.total[name]
            self.timelines.changed(name)
        kept = [(n, g) for n, g in zip(r.node_names, r.gpus_held, strict=True) if n not in removed]
        kept += [(n, self.capacity.total[n]) for n in added]
        after = replace(r, node_names=tuple(n for n, _ in kept), gpus_held=tuple(g for _, g in kept))
        self.running[r.id] = after
        self.victim_memo.clear()
        if not r.over_quota and self.limited:
            self._count_quota(r.user, r.team, after.gpus - r.gpus)
        if self.limited:  # budgets count what it may still use by its wall time
            left_hours = max(0.0, r.ends_at - self.now) / 3600
            for key, _ in self._owners(r):
                self.budget_used[key] += (len(added) - len(removed)) * left_hours
        size = f"from {len(r.node_names)} to {len(after.node_names)} nodes"
        self.resizes.append(Resize(r.id, after.node_names, after.gpus_held, tuple(added), tuple(removed), f"{reason}: {size}.", for_job))

    def _grow(self) -> None:
        """After the walk, elastic jobs below their most grow onto whole nodes no waiting job could take, that no
        reservation needs before their wall time ends (oldest first, within their quotas and budgets; not one whose
        last growth did not come up, until its hold ends)."""
        growable = sorted(
            (
                r
                for r in self.running.values()
                if r.elastic
                and len(r.node_names) < r.max_nodes
                and r.id not in self.started
                and (r.grow_not_before is None or r.grow_not_before <= self.now)
            ),
            key=lambda r: (r.class_rank, r.started_at, r.id),
        )
        for r in growable:
            if self.capacity.idle_count() == 0:
                return
            shape = PendingJob(
                r.id, 1, r.gpus_per_node, r.class_rank, r.started_at, user=r.user, team=r.team, rdma_per_node=r.rdma_per_node
            )
            room = r.max_nodes - len(r.node_names)
            if self.limited:
                room = min(room, self._grow_room(r))
            racks = {self.capacity.rack.get(n) for n in r.node_names}
            idle = [
                n
                for names in self.capacity.idle_nodes(r.gpus_per_node).values()
                for n in names
                if self._node_fits(shape, n)
                and self.timelines.fits(n, self.capacity.total[n], self.now, r.ends_at)
                and not (self.rdma_wanted and self.capacity.rdma[n] and not r.rdma_per_node)
            ]
            # Nodes without RDMA devices first where it asks for none (those are kept for the gangs that do, _fit_on),
            # then its own racks (then by name): the ranks it gains talk to the ones it has.
            idle.sort(key=lambda n: (bool(self.capacity.rdma[n]) and not r.rdma_per_node, self.capacity.rack[n] not in racks, n))
            if room > 0 and idle:
                self._resize(r, added=idle[:room], reason="Grew onto whole nodes left idle")

    def _grow_room(self, r: RunningJob) -> int:
        """How many more nodes its owners' quotas and budgets let it hold until its wall time (borrowers do not grow)."""
        if r.over_quota:
            return 0
        size = self.capacity.total.get(r.node_names[0], 0) or 1
        quota = self._quota_room(r)
        room = r.max_nodes if quota is None else min(r.max_nodes, int(quota // size))
        hours = max(0.0, r.ends_at - self.now) / 3600
        for key, _ in self._owners(r):
            account = self._account(key)
            if account.node_hours_left is not None and hours > 0:
                room = min(room, int((account.node_hours_left - self._budget_committed(key, r)) // hours))
        return room

    def _evict(self, victim: RunningJob, preemptor: PendingJob) -> None:
        for name, gpus in zip(victim.node_names, victim.gpus_held, strict=True):
            self.capacity.give(name, int(gpus))
            self.on_node[name].pop(victim.id, None)
            self.timelines.changed(name)
        if not victim.over_quota:
            self._count_quota(victim.user, victim.team, -victim.gpus)
        del self.running[victim.id]
        if victim.over_quota:
            why = "it runs beyond its owner's quota"
        elif victim.class_rank > preemptor.class_rank:
            why = "it is of a lower priority class"
        else:
            why = "its owner has used more than its fair share of the cluster, and the job's owner less"
        since = "its last checkpoint" if self._lost_since(victim) > victim.started_at else "its start"
        lost = self._lost_if_stopped(victim) / 3600
        self.preemptions.append(
            Preemption(
                victim.id, preemptor.id, f"Preempted for job {preemptor.id}: {why}. The work since {since} is lost ({lost:.1f} GPU-hours)."
            )
        )

    # --- waiting: reservations and reasons -------------------------------------------------------

    def _explain(self, job: PendingJob, *, reclaiming: bool = False) -> None:
        """Reserve for the job if it is owed a start, and say why it waits (`reclaiming`: borrowers could have been
        stopped for it, and the reason says why none was)."""
        kept = self.promised.get(job.id)
        moved = self.moved.pop(job.id, None)
        if kept is None and (moved or (job.id in self.next_promised and len(self.promised) < self.config.max_reservations)):
            kept = self._reserve(job)
        if kept is not None:
            names = kept.node_names
            nodes = ", ".join(names) if len(names) <= 4 else f"{len(names)} nodes ({names[0]} … {names[-1]})"
            text = f"{self._room_text(job)} Reserved {nodes}; starts by {when(kept.start)}."
            if moved:
                text += f" Moved: {moved}."
            if kept.start > self.now and self._fits_unreserved(job):
                text += self._sooner_text(job)
            self._wait(job, NO_ROOM, text, self._expected_start(job, kept), ESTIMATE_RESERVED)
            return
        if self.snapshot.maintenance and self._fits_unreserved(job):
            ends = self.now + job.wall_seconds
            text = maintenance_text(self.snapshot.maintenance, self.now, ends, lambda n: self._node_fits(job, n))
            if text:
                self._wait(job, RESERVATION, text + self._sooner_text(job))
                return
        if self.promised and self._fits_unreserved(job):
            blocking = self._blocking_reservation(job)
            text = f"Behind the reservation for job {blocking.job_id}, expected to start {when(blocking.start)}."
            self._wait(job, RESERVATION, text + self._sooner_text(job))
            return
        free = self.capacity.free_total
        if job.rdma_per_node:  # only the nodes with its devices count: else "fragmented" beside 0 such nodes free
            free = sum(self.capacity.free[n] for n in self._fitting_nodes(job))
        code = FRAGMENTATION if free >= job.gpus else NO_ROOM
        text = self._room_text(job)
        if reclaiming and job.id in self.unsearched:
            searched = f"This cycle had already looked for jobs to preempt for {MAX_PREEMPTION_SEARCHES} others"
            text += f" {searched}, so not for this one; the next cycle looks again."
        elif reclaiming:
            text += self._reclaim_text(job)
        self._wait(job, code, text)

    def _blocking_reservation(self, job: PendingJob) -> Reservation:
        """The earliest reservation on a node with room for one of the job's ranks now: one that keeps it waiting, where
        the earliest of all may hold nodes it does not fit on. The earliest of all if none does (the job's ranks fit only
        together, across nodes no single reservation explains)."""
        key = (job.nodes, job.min_nodes, job.gpus_per_node, job.rdma_per_node, self.capacity.version)
        found = self.blocking.get(key)
        if found is None:
            if self.by_start is None:
                self.by_start = sorted(self.promised.values(), key=lambda r: (r.start, r.job_id))
            found = next(
                (
                    r
                    for r in self.by_start
                    if any(self._node_fits(job, n) and self.capacity.free.get(n, 0) >= self._need_on(job, n) for n in r.node_names)
                ),
                self.by_start[0],
            )
            self.blocking[key] = found
        return found

    def _fits_unreserved(self, job: PendingJob) -> bool:
        key = (job.nodes, job.min_nodes, job.gpus_per_node, job.rdma_per_node, self.capacity.version)
        if key not in self.fits_unreserved:
            self.fits_unreserved[key] = self._fit(job, None) is not None
        return self.fits_unreserved[key]

    def _likely_timelines(self, names: Iterable[str] | None = None, *, leave_out: int | None = None, opening: bool = False) -> Timelines:
        """The nodes' timelines as they are expected to go: each running job gone at its expected end and each
        reservation (but `leave_out`'s) gone its expected run time after its promised start, instead of at their wall
        times. Only `names`' holds are copied (None: every node's). `opening`: also the nodes that open later (for the
        estimates only), with nothing free on them before."""

        def likely_releases(name: str) -> list[tuple[float, int]]:
            node = self.opening.get(name)
            if node is None:
                return [(self.running[j].likely_end(self.now), gpus) for j, gpus in self.on_node.get(name, {}).items()]
            assert node.opens_at is not None
            ends = [(max(self.running[j].likely_end(self.now), node.opens_at), gpus) for j, gpus in self.on_opening.get(name, ())]
            return [(node.opens_at, min(max(node.gpus_free, 0), node.gpus_total)), *ends]

        def free(name: str) -> int:
            return self.capacity.free.get(name, 0)

        total = self.plan_total if opening and self.opening else self.capacity.total
        likely = Timelines(total, free, likely_releases, self.now)
        for name in self.timelines.holds if names is None else names:
            for h in self.timelines.holds.get(name, ()):
                if h.job_id != leave_out:
                    other = self.planned.get(h.job_id)
                    likely.hold(name, h if other is None else h._replace(end=min(h.end, h.start + other.likely_seconds)))
        return likely

    def _expected_start(self, job: PendingJob, kept: Reservation) -> float:
        """When a reserved job is expected to start: the promise worked out again on its nodes as they are expected to
        go (`_likely_timelines`), not by the wall times the promise, kept.start, is held by. Never later than it."""
        names = kept.node_names
        likely = self._likely_timelines(names, leave_out=job.id)
        options = {name: likely.starts(name, self._need_on(job, name), job.wall_seconds, self.now) for name in names}
        found = earliest_common_start(options, len(names))
        return kept.start if found is None else min(found[0], kept.start)

    def _sooner_text(self, job: PendingJob) -> str:
        """What would start it now, for a job the free nodes hold but the reservations on them do not leave time for:
        the longest wall time that would backfill it (Slurm users shorten --time for this), if long enough to be of use.
        """
        shape = (job.nodes, job.min_nodes, job.gpus_per_node, job.rdma_per_node)
        key = (*shape, self.capacity.version, self.timelines.changes, job.wall_seconds)
        if key in self.sooner_texts:
            return self.sooner_texts[key]
        if len(self.sooner_texts) >= MAX_SOONER_SEARCHES:
            return ""
        # Backfill fits a wall time W where every node it takes stays free for W: the candidates are those spans.
        spans = sorted(
            {
                span
                for name in self.timelines.holds
                if SOONER_MIN_WALL_SECONDS <= (span := self.timelines.free_for(name, self._need_on(job, name))) < job.wall_seconds
            }
        )
        best = None
        lo, hi = 0, len(spans) - 1
        while lo <= hi:  # the longer the wall time, the fewer nodes allow it: the largest that still fits
            mid = (lo + hi) // 2
            shorter = replace(job, wall_seconds=math.floor(spans[mid] / 60) * 60)
            if self._fit(shorter, self._allowed(shorter)) is not None:
                best, lo = shorter.wall_seconds, mid + 1
            else:
                hi = mid - 1
        text = f" With a wall time of at most {_minutes(best)} it would start now." if best and best >= SOONER_MIN_WALL_SECONDS else ""
        self.sooner_texts[key] = text
        return text

    def _room_text(self, job: PendingJob) -> str:
        key = (job.nodes, job.min_nodes, job.gpus_per_node, job.rdma_per_node, self.capacity.version)
        if key not in self.room_texts:
            self.room_texts[key] = self._room_text_now(job)
        return self.room_texts[key]

    def _room_text_now(self, job: PendingJob) -> str:
        # GPUs pods Muster did not start hold are in no free count: said, or the cluster's own view would not add up.
        foreign = f" {self.foreign_gpus} more are held by pods Muster did not start." if self.foreign_gpus else ""
        foreign += self.closed_text
        cap = self.capacity
        if not job.whole_nodes:
            if self.shared_gpus:
                # Else `muster nodes` shows them free beside "0 GPUs free in the cluster".
                foreign += f" Nodes that share their GPUs ({plural(self.shared_gpus, 'GPU')}) take GPU-slice jobs only."
            text = f"Needs {plural(job.gpus_per_node, 'GPU')} on one node; the most free on any node is {cap.max_free()}"
            if cap.free_total >= job.gpus:
                return f"{text} ({cap.free_total} GPUs are free, spread over several nodes).{foreign}"
            return f"{text} ({plural(cap.free_total, 'GPU')} free in the cluster).{foreign}"
        whole = sum(len(v) for v in cap.idle_nodes(job.gpus_per_node, lambda name: self._node_fits(job, name)).values())
        partly, partly_free = cap.partly_used()
        devices = f" and {plural(job.rdma_per_node, 'RDMA device')}" if job.rdma_per_node else ""
        count = f"{job.min_nodes} to {job.nodes}" if job.elastic else f"{job.nodes}"
        text = f"Needs {count} whole nodes with {plural(job.gpus_per_node, 'GPU')}{devices}; {whole} {'is' if whole == 1 else 'are'} free"
        if partly:
            text += f", {plural(partly_free, 'GPU')} free on {plural(partly, 'partly used node')}"
        return f"{text}.{foreign}{self._too_few_nodes_text(job)}"

    def _too_few_nodes_text(self, job: PendingJob) -> str:
        """A gang needing more such nodes than the cluster has at all now, open or closed: submit refuses one, so nodes
        left the cluster since (decommissioned, or another cluster behind the same Muster). Waiting for GPUs to free up
        will not start it, which "Needs 14 whole nodes; 7 are free" left its owner to believe."""
        least = job.min_nodes or job.nodes
        there = sum(1 for n in self.snapshot.nodes if not n.sharing and n.gpus_total >= job.gpus_per_node and n.rdma >= job.rdma_per_node)
        if there >= least:
            return ""
        return (
            f" The cluster has only {there} such node{'' if there == 1 else 's'} now (nodes left it since the job was "
            f"submitted): it starts only when more join. To run it now, cancel it and submit it on at most {there}."
        )

    def _reserve(self, job: PendingJob) -> Reservation | None:
        """The earliest window in which the whole gang fits, by wall-time ends and the reservations already held."""
        largest = self._largest_node(job)
        names = [n for n in self._fitting_nodes(job) if largest is None or self.capacity.total[n] <= largest]
        start = job.start_shape()
        found = earliest_start(self.timelines, start, names, self.now, self._need_on)
        if found is None:
            return None
        return self._hold(start, tuple(found[1]), found[0])

    def _not_before(self, job: PendingJob, code: str, after: float) -> float | None:
        """The earliest at or after `after` a waiting job's limits let it start (None: not known), for its estimate.

        Its owners' GPU quotas and node-hour budgets count the jobs planned before it as well as what runs
        (`_plan_limits`). A preemptible job may borrow beyond its quota, but never beyond its budget.
        """
        if code in (JOB_LIMIT, HELD):
            return None  # until an admin raises the limit, or someone releases the hold: nobody knows when
        at: float | None = after
        if code == DEPENDENCY:
            # From when the jobs it waits for are expected to end, if they all run; not known while one of them waits.
            ends = [self.running[d].likely_end(self.now) if d in self.running else None for d in job.after]
            if not ends or None in ends:
                return None
            at = max(after, *(end for end in ends if end is not None))
        if code == LAUNCH_BACKOFF:
            at = max(job.not_before or after, after)
        if at is None or not self.limited:
            return at
        quota = not job.preemptible or code == QUOTA_GPUS
        needs = self._quota_gpus(job) if quota else 0.0
        quotas = self._quota_plans() if quota else {}
        budgets = self._budget_plans()
        hours = self._budget_need(job)[0] if budgets else 0.0
        # Each owner's limits may move the start past another's: until all of them let it start.
        settled = False
        while at is not None and not settled:
            settled = True
            for key, _ in self._owners(job):
                budget, plan = budgets.get(key), quotas.get(key)
                found = budget.earliest(hours, at) if budget is not None else at
                if found == at and plan is not None:
                    found = plan.earliest(needs, at, job.likely_seconds)
                if found != at:
                    at, settled = found, False
                    break
        return at

    def _plan_limits(self, job: PendingJob, start: float) -> None:
        """A job planned to start at `start` uses its owners' quotas until its expected end, and their budgets what it
        may charge, for the jobs planned after it."""
        if not self.limited:
            return
        quotas = {} if job.preemptible else self._quota_plans()
        budgets = self._budget_plans()
        for key, _ in self._owners(job):
            plan = quotas.get(key)
            if plan is not None:
                plan.hold(self._quota_gpus(job), start, start + job.likely_seconds)
            budget = budgets.get(key)
            if budget is not None:
                budget.hold(self._budget_need(job)[0], start, job.wall_seconds)

    def _budget_plans(self) -> dict[str, BudgetPlan]:
        """Each budgeted account's node-hours over time, worked out once after the walk (the forecast's time)."""
        if self.budget_plans is None:
            budgeted = {key: a for key, a in self.snapshot.accounts.items() if a.node_hours_left is not None}
            holding: defaultdict[str, list[tuple[float, float, float]]] = defaultdict(list)
            # What runs (as the walk left it) and what is promised runs into the next period by its wall time.
            for r in self.running.values() if budgeted else ():
                share = self._node_share(r.node_names, r.gpus_held)
                for key, _ in self._owners(r):
                    if key in budgeted:
                        holding[key].append((share, self.now, r.ends_at))
            for job_id, (_, hours) in self.commitments.items():
                promise, job = self.promised.get(job_id), self.planned[job_id]
                if hours and promise is not None and job.wall_seconds > 0:
                    for key, _ in self._owners(job):
                        if key in budgeted:
                            holding[key].append((hours * 3600 / job.wall_seconds, promise.start, promise.start + job.wall_seconds))
            self.budget_plans = {
                key: BudgetPlan(
                    (a.node_hours_left or 0.0) - self.budget_used[key] - self.held_budget[key],
                    a.budget_resets_at,
                    a.node_hours_per_period,
                    holding[key],
                )
                for key, a in budgeted.items()
            }
        return self.budget_plans

    def _quota_plans(self) -> dict[str, QuotaPlan]:
        """Each limited account's quota over time, worked out once after the walk (the forecast's time)."""
        if self.quota_plans is None:
            ends: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
            # What runs within quota frees it at its wall time (`self.running` is as the walk left it: with the jobs it
            # placed, without those it preempted, elastic jobs at their new sizes). A promised job's held quota is used
            # from its start until its wall time after it.
            for r in self.running.values():
                if not r.over_quota:
                    for key, _ in self._owners(r):
                        ends[key].append((r.ends_at, r.gpus))
            for job_id, (gpus, _) in self.commitments.items():
                promise = self.promised.get(job_id)
                if gpus and promise is not None:
                    for key, _ in self._owners(self.planned[job_id]):
                        ends[key].append((promise.start + self.planned[job_id].wall_seconds, gpus))
            self.quota_plans = {
                key: QuotaPlan(limit, self.in_quota[key] + self.held_quota[key], ends[key])
                for key, account in self.snapshot.accounts.items()
                if (limit := account.max_gpus) is not None
            }
        return self.quota_plans
