"""A discrete-event replay of a job trace through a scheduling policy: the real one or a baseline.

Events. Time jumps from event to event: submits, finishes (a job's runtime after its start) and
wake-ups. Everything at one instant is batched: the finishes are applied, then the submits, then the
policy is called once with a `Snapshot` of that instant, and its decisions are applied in the
cycle's order (preemptions, then placements). The policy is called only when something changed: a
submit, a finish, a preemption victim becoming eligible (it has run `preemption_min_runtime_seconds`,
only when the trace has jobs of several classes or preemptible jobs), or, for "muster", a pending
job crossing its starvation threshold (`PolicyConfig.starving_after`; it may get a reservation then). Between events nothing the policy
reads changes in a way that could start a job (capacity only frees at finishes), so the replay
places jobs at the instants the cycle would, less the cycle's tick delay (the policy is taken to run
at the event's instant).

The snapshot is kept incrementally: node views, pending and running jobs are updated as events are
applied, not rebuilt from the records. `max_jobs` is the config's (`PolicyConfig.max_jobs`), which
`scheduler.snapshot.policy_config` fills from MUSTER_CYCLE_MAX_JOBS (5,000 by default): pass the
same config to replay what the cycle does.

Accounts. Each job's tenant is its team. When the trace has users (the history CSV), a job is owned
by its user and its team, and both accounts count, as on the platform. When it has none (Philly),
the tenant is the only account: the job's user is the tenant and it has no team. Giving it the team
too would square the fair-share factor (policy.priority multiplies the user's 2^(-U/S) by the
team's, and a user = team pair has the same usage and share). Every account has weight 1 and no
limits or budget: PolicyConfig carries none.

Decayed usage is kept as the cycle computes it (quotas.selectors._decayed_usage): every allocation
counts its GPUs (and node share, GPUs / node GPUs per node) times the closed-form integral of
2^(-age / half_life) over its held time, live allocations up to now; allocations released more than
ten half-lives ago are dropped. The sums are kept per account in a form that needs no scan
(sum of g * 2^(t / h) terms, rebased when they grow), so each snapshot's accounts cost O(accounts).

Preemption. A victim is released at once and requeued with its submit time. With
Assumptions.resume = "restart" it runs its whole runtime again; with "checkpoint" it keeps its work
up to its last checkpoint (every `checkpoint_seconds` of run time) and runs only the rest. The work
thrown away, times the GPUs it held, is `gpu_seconds_lost`.

Reservations and ETAs. The reservations the policy returns are handed back to it at the next call
(`Snapshot.reservations`), as the cycle stores them between cycles: the policy keeps its promises.
A job's `promised_start` is the start of the first reservation the policy gave it (`promised_at`
when); it slipped if it started later than that. The policy's forecast of
every waiting job's start changes no decision, so it is asked for at most once per
FORECAST_INTERVAL of simulated time. `predicted_at_submit` is
the policy's estimated_start for the job at the call right after its submit (None when it was
placed at once or had no estimate); `predictions` samples the estimate while it waits, at most one
per `PREDICTION_INTERVAL` seconds of simulated time per job.

Self-checks (SimulationError): a placement never takes a node above its GPUs; a gang is placed with
all its nodes at once (distinct, whole nodes); preemptions name running jobs; every job finishes
(a queue that can no longer move is an error, not a silent end).
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice

from policy.baselines import easy, fifo
from policy.model import (
    Account,
    Decisions,
    NodeView,
    PendingJob,
    PolicyConfig,
    Reservation,
    Resize,
    RunningJob,
    Snapshot,
    plural,
    team_key,
    user_key,
)
from policy.runtime import RECENT_JOBS, expected_runtime, runtime_kind
from policy.schedule import schedule
from replay.trace import Assumptions, TraceJob
from replay.usage import DecayedUsage

POLICIES = ("fifo", "easy", "muster")
# At most one ETA sample per job per this many seconds of simulated time.
PREDICTION_INTERVAL = 3600.0
# The policy's forecast of every waiting job's start runs at most once per this many seconds of simulated time.
FORECAST_INTERVAL = 600.0

PolicyFn = Callable[[Snapshot, PolicyConfig], Decisions]


class SimulationError(RuntimeError):
    """A self-check failed: the policy or the simulation broke an invariant."""


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int
    gpus_per_node: int = 8
    racks: int = 1


@dataclass
class JobRecord:
    job: TraceJob
    first_start: float | None = None
    start: float | None = None  # the last start
    end: float | None = None
    preemptions: int = 0
    gpu_seconds_lost: float = 0.0
    promised_start: float | None = None  # the start of its first reservation
    predicted_at_submit: float | None = None
    # (time, predicted start, what the estimate is: policy.model.ESTIMATE_*) while waiting
    predictions: list[tuple[float, float, str]] = field(default_factory=list)
    # Beyond the interface: when the first promise was made, and every run (start, end, GPUs held).
    promised_at: float | None = None
    attempts: list[tuple[float, float, int]] = field(default_factory=list)


@dataclass
class SimResult:
    policy: str
    cluster: ClusterSpec
    # Every run of every job is in its record (`attempts`): utilisation, the queue and each tenant's share over time
    # are read from them exactly (replay/report.py), as the summary's figures are (replay/metrics.py).
    records: list[JobRecord]
    decisions: list[tuple[int, float]]  # (queue length, CPU seconds) per policy call
    cpu_seconds: float  # CPU time of the whole simulation (the policy calls are in `decisions`)
    checks: list[str]


CHECKS = [
    "no node is ever above its GPUs",
    "a gang always gets all its nodes at once (distinct whole nodes)",
    "an elastic job holds min_nodes..nodes whole nodes",
    "preemptions name running jobs; placements name pending jobs",
    "every job finishes",
]


def policy_function(policy: str) -> PolicyFn:
    if policy == "muster":
        return schedule
    if policy == "fifo":
        return fifo
    if policy == "easy":
        return easy
    raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")


def simulate(
    jobs: Sequence[TraceJob],
    *,
    cluster: ClusterSpec,
    policy: str,
    config: PolicyConfig,
    assumptions: Assumptions,
    progress: Callable[[float], None] | None = None,
    policy_fn: PolicyFn | None = None,
    call_always: bool = False,
) -> SimResult:
    """Replay `jobs` on `cluster` under `policy` (or `policy_fn`, for tests). Raises SimulationError.

    `call_always` calls the policy at every instant with a submit or a finish, even when nothing can
    start (slower; the tests check it gives the same schedule).
    """
    fn = policy_fn or policy_function(policy)
    return _Sim(jobs, cluster, policy, config, assumptions, fn, progress, call_always).run()


@dataclass
class _Run:
    running: RunningJob
    start: float
    finish: float  # when it ends (its remaining runtime after start)
    attempt: int
    keys: tuple[str, ...]
    gpus: int
    share: float
    # Since when it holds what it holds now (an elastic job's resize starts a new piece of usage).
    piece_start: float = 0.0
    # Its work left, in seconds on all its nodes, as of `progress_at`, and at its start (an elastic job on fewer
    # nodes progresses at nodes held / nodes asked).
    remaining: float = 0.0
    progress_at: float = 0.0
    remaining_at_start: float = 0.0


class _Sim:
    def __init__(
        self,
        jobs: Sequence[TraceJob],
        cluster: ClusterSpec,
        policy: str,
        config: PolicyConfig,
        assumptions: Assumptions,
        fn: PolicyFn,
        progress: Callable[[float], None] | None,
        call_always: bool = False,
    ) -> None:
        self.jobs = sorted(jobs, key=lambda j: (j.submit, j.id))
        self.cluster = cluster
        self.policy = policy
        self.config = config
        self.a = assumptions
        self.fn = fn
        self.progress = progress
        if len({j.id for j in jobs}) != len(jobs):
            raise SimulationError("job ids are not unique")
        for j in self.jobs:
            if j.nodes > cluster.nodes or j.gpus_per_node > cluster.gpus_per_node:
                raise SimulationError(
                    f"job {j.id} needs {j.nodes} x {j.gpus_per_node} GPUs; the cluster has {cluster.nodes} x {cluster.gpus_per_node}"
                )
        self.names = [f"n{i:04d}" for i in range(cluster.nodes)]
        racks = max(1, min(cluster.racks, cluster.nodes))
        self.rack = {name: f"r{i * racks // cluster.nodes:02d}" for i, name in enumerate(self.names)}
        self.index = {name: i for i, name in enumerate(self.names)}
        self.free = [cluster.gpus_per_node] * cluster.nodes
        self.views = [NodeView(name, cluster.gpus_per_node, cluster.gpus_per_node, self.rack[name]) for name in self.names]
        self.records = {j.id: JobRecord(job=j) for j in self.jobs}
        self.by_id = {j.id: j for j in self.jobs}
        self.remaining = {j.id: j.runtime for j in self.jobs}
        self.pending: dict[int, PendingJob] = {}
        self.running: dict[int, _Run] = {}
        self.finishes: list[tuple[float, int, int]] = []  # (time, job id, version: a start or a resize)
        self.version = dict.fromkeys(self.records, 0)
        self.growable: set[int] = set()  # elastic jobs running below their most nodes
        self.wakes: list[tuple[float, int]] = []  # (time, job id: a starving job; 0: a victim becoming eligible)
        self.attempt = dict.fromkeys(self.records, 0)
        self.last_prediction: dict[int, float] = {}
        # Each user's latest run times by kind of job, newest first: what a job's run time is predicted from (policy/runtime.py).
        self.runtimes: dict[tuple[str, str], list[float]] = {}
        self.just_submitted: set[int] = set()
        self.usage = DecayedUsage(config.half_life_seconds, self.jobs[0].submit if self.jobs else 0.0)
        self.decisions: list[tuple[int, float]] = []
        self.done = 0
        ranks = {j.class_rank for j in self.jobs}
        tenants = sorted({j.tenant for j in self.jobs})
        # Quotas and borrowing (Assumptions.tenant_quotas): an equal share each, at least the largest node.
        self.quota = max(cluster.gpus_per_node, cluster.nodes * cluster.gpus_per_node // max(1, len(tenants)))
        self.preempted_at: dict[int, float] = {}
        borrowing = assumptions.tenant_quotas
        self.preemption_wakes = config.preemption and (len(ranks) > 1 or borrowing or any(j.preemptible for j in self.jobs))
        self.starvation_wakes = policy == "muster"
        # Calls are skipped only for the known policies, and only when they cannot start anything (see _could_start).
        self.call_always = call_always or fn not in (schedule, fifo, easy) or self.preemption_wakes or config.starvation_seconds <= 0
        self.shapes: Counter[tuple[int, int]] = Counter()  # pending jobs by (nodes, GPUs per node)
        self.requeued = False
        self.reservations: tuple[Reservation, ...] = ()
        self.no_forecast = replace(config, plan_jobs=0)
        self.last_forecast = -math.inf

    # --- the loop ----------------------------------------------------------------------------------

    def run(self) -> SimResult:
        began = time.process_time()
        jobs, n = self.jobs, len(self.jobs)
        nxt = 0
        last_progress = 0
        while nxt < n or self.running or self.pending:
            candidates = []
            if nxt < n:
                candidates.append(jobs[nxt].submit)
            if self.finishes:
                candidates.append(self.finishes[0][0])
            if self.wakes:
                candidates.append(self.wakes[0][0])
            if not candidates:
                stuck = sorted(self.pending)[:5]
                raise SimulationError(f"every job finishes: {plural(len(self.pending), 'job')} can never start (first: {stuck})")
            now = min(candidates)
            due = False  # a wake-up the policy must see
            moved = False  # a finish or a submit
            was_empty = not self.pending
            while self.finishes and self.finishes[0][0] <= now:
                _, job_id, version = heapq.heappop(self.finishes)
                if self.version[job_id] == version and job_id in self.running:
                    self._finish(job_id, now)
                    moved = True
            while nxt < n and jobs[nxt].submit <= now:
                self._submit(jobs[nxt])
                nxt += 1
                moved = True
            while self.wakes and self.wakes[0][0] <= now:
                _, job_id = heapq.heappop(self.wakes)
                due = due or job_id == 0 or job_id in self.pending
            if (self.pending or self.growable) and (due or (moved and (self.call_always or was_empty or self._could_start()))):
                self._call(now)
            # A job submitted at a skipped instant had no estimate at submit (it is not the head of the line).
            self.just_submitted.clear()
            if self.progress is not None and n and (self.done - last_progress) * 100 >= n:
                last_progress = self.done
                self.progress(self.done / n)
        for record in self.records.values():
            if record.end is None:
                raise SimulationError(f"every job finishes: job {record.job.id} did not")
        if self.progress is not None:
            self.progress(1.0)
        return SimResult(
            policy=self.policy,
            cluster=self.cluster,
            records=[self.records[j.id] for j in sorted(self.jobs, key=lambda j: j.id)],
            decisions=self.decisions,
            cpu_seconds=time.process_time() - began,
            checks=list(CHECKS),
        )

    def _owner(self, job: TraceJob) -> tuple[str, str | None]:
        return (job.user, job.tenant) if job.user else (job.tenant, None)

    def _pending(self, job: TraceJob) -> PendingJob:
        """The job as the policy sees it waiting; a requeued job keeps its submit time, as on the platform."""
        user, team = self._owner(job)
        return PendingJob(
            id=job.id,
            nodes=job.nodes,
            gpus_per_node=job.gpus_per_node,
            class_rank=job.class_rank,
            submitted_at=job.submit,
            user=user,
            team=team,
            preemptible=job.preemptible or self.a.tenant_quotas,
            wall_seconds=job.wall_seconds,
            expected_seconds=expected_runtime(self.runtimes.get((user, self._kind(job)), ()), job.wall_seconds),
            preempted_at=self.preempted_at.get(job.id),
            min_nodes=job.min_nodes,
        )

    @staticmethod
    def _kind(job: TraceJob) -> str:
        """Which of its owner's run times its prediction reads (the platform's rule; a trace has no GPU slices)."""
        return runtime_kind(nodes=job.nodes, elastic=bool(job.min_nodes))

    @staticmethod
    def _shape(job: PendingJob | TraceJob) -> tuple[int, int]:
        """What must be free for it to start: an elastic job's fewest nodes."""
        return (job.min_nodes or job.nodes, job.gpus_per_node)

    def _submit(self, job: TraceJob) -> None:
        self.pending[job.id] = self._pending(job)
        self.just_submitted.add(job.id)
        self.shapes[self._shape(job)] += 1
        if self.starvation_wakes:
            heapq.heappush(self.wakes, (job.submit + self.config.starving_after(job.wall_seconds, job.nodes), job.id))

    def _release(self, job_id: int, now: float) -> _Run:
        run = self.running.pop(job_id)
        self.growable.discard(job_id)
        r = run.running
        for name, gpus in zip(r.node_names, r.gpus_held, strict=True):
            self._give(name, int(gpus))
        self._end_piece(job_id, run, now)
        self._progress(run, now)
        return run

    def _give(self, name: str, gpus: int) -> None:
        i = self.index[name]
        self.free[i] += gpus
        self.views[i] = NodeView(name, self.cluster.gpus_per_node, self.free[i], self.rack[name])

    def _take(self, name: str, gpus: int) -> None:
        i = self.index[name]
        self.free[i] -= gpus
        self.views[i] = NodeView(name, self.cluster.gpus_per_node, self.free[i], self.rack[name])

    def _end_piece(self, job_id: int, run: _Run, now: float) -> None:
        """What it held since its last start or resize leaves the usage and is recorded as one run."""
        self.usage.release(run.keys, run.piece_start, now, run.gpus, run.share)
        self.records[job_id].attempts.append((run.piece_start, now, run.gpus))

    def _progress(self, run: _Run, now: float) -> None:
        """Its work done up to now at the rate of the nodes it holds (all of them but for an elastic job shrunk)."""
        asked = self.by_id[run.running.id].nodes
        run.remaining = max(0.0, run.remaining - (now - run.progress_at) * len(run.running.node_names) / asked)
        run.progress_at = now

    def _finish(self, job_id: int, now: float) -> None:
        run = self._release(job_id, now)
        key = (run.running.user, self._kind(self.by_id[job_id]))
        self.runtimes[key] = [now - run.start, *self.runtimes.get(key, ())][:RECENT_JOBS]
        self.records[job_id].end = now
        self.remaining[job_id] = 0.0
        self.done += 1

    def _preempt(self, job_id: int, now: float) -> None:
        if job_id not in self.running:
            raise SimulationError(f"preemptions name running jobs: job {job_id} is not running")
        run = self._release(job_id, now)
        # Work in seconds on all its nodes (its run time, unless it is elastic and held fewer).
        done = run.remaining_at_start - run.remaining
        record = self.records[job_id]
        record.preemptions += 1
        self.preempted_at[job_id] = now
        if self.a.resume == "checkpoint":
            kept = math.floor(done / self.a.checkpoint_seconds) * self.a.checkpoint_seconds
            kept = min(kept, self.remaining[job_id])
        else:
            kept = 0.0
        self.remaining[job_id] = self.remaining[job_id] - kept if self.a.resume == "checkpoint" else record.job.runtime
        job = record.job
        record.gpu_seconds_lost += (done - kept) * (job.nodes * job.gpus_per_node if job.nodes > 1 else run.gpus)
        self.attempt[job_id] += 1
        self.version[job_id] += 1
        self.pending[job_id] = self._pending(job)
        self.shapes[self._shape(job)] += 1
        self.requeued = True

    def _place(self, job_id: int, node_names: tuple[str, ...], gpus_held: tuple[int, ...], over_quota: bool, now: float) -> None:
        job = self.pending.get(job_id)
        if job is None:
            raise SimulationError(f"placements name pending jobs: job {job_id} is not pending")
        size = len(node_names)
        if job.elastic and not (job.min_nodes <= size <= job.nodes and len(set(node_names)) == size == len(gpus_held)):
            raise SimulationError(f"an elastic job holds min_nodes..nodes whole nodes: job {job_id} got {node_names}")
        if not job.elastic and (len(node_names) != job.nodes or len(gpus_held) != job.nodes or len(set(node_names)) != job.nodes):
            raise SimulationError(
                f"a gang always gets all its nodes at once: job {job_id} needs {job.nodes} distinct nodes, got {node_names}"
            )
        for name, gpus in zip(node_names, gpus_held, strict=True):
            i = self.index.get(name)
            if i is None:
                raise SimulationError(f"job {job_id} placed on unknown node {name}")
            want = job.gpus_per_node if not job.whole_nodes else self.cluster.gpus_per_node
            if gpus != want:
                raise SimulationError(f"a gang always gets all its nodes at once: job {job_id} holds {gpus} GPUs on {name}, not {want}")
            if gpus > self.free[i]:
                raise SimulationError(f"no node is ever above its GPUs: job {job_id} takes {gpus} GPUs on {name}, {self.free[i]} free")
        for name, gpus in zip(node_names, gpus_held, strict=True):
            self._take(name, gpus)
        del self.pending[job_id]
        self.shapes[self._shape(job)] -= 1
        held = sum(gpus_held)
        share = sum(g / self.cluster.gpus_per_node for g in gpus_held)
        keys = (user_key(job.user),) + ((team_key(job.team),) if job.team else ())
        self.usage.allocate(keys, now, held, share)
        self.attempt[job_id] += 1
        self.version[job_id] += 1
        finish = now + self.remaining[job_id] * job.nodes / size
        running = RunningJob(
            id=job_id,
            node_names=node_names,
            gpus_held=gpus_held,
            class_rank=job.class_rank,
            started_at=now,
            ends_at=now + job.wall_seconds,
            expected_end=now + predicted
            if (predicted := expected_runtime(self.runtimes.get((job.user, self._kind(self.by_id[job_id])), ()), job.wall_seconds))
            else None,
            user=job.user,
            team=job.team,
            preemptible=job.preemptible,
            over_quota=over_quota,
            preemptions=self.records[job_id].preemptions,
            min_nodes=job.min_nodes if job.elastic else 0,
            max_nodes=job.nodes if job.elastic else 0,
            gpus_per_node=job.gpus_per_node,
        )
        remaining = self.remaining[job_id]
        self.running[job_id] = _Run(running, now, finish, self.attempt[job_id], keys, held, share, now, remaining, now, remaining)
        if job.elastic and size < job.nodes:
            self.growable.add(job_id)
        heapq.heappush(self.finishes, (finish, job_id, self.version[job_id]))
        if self.preemption_wakes:
            heapq.heappush(self.wakes, (now + self.config.preemption_min_runtime_seconds, 0))
        record = self.records[job_id]
        if record.first_start is None:
            record.first_start = now
        record.start = now
        self.last_prediction.pop(job_id, None)

    def _resize(self, resize: Resize, now: float) -> None:
        """An elastic job grown or shrunk: its nodes, its usage piece, and its finish at its new rate."""
        run = self.running.get(resize.job_id)
        if run is None or not run.running.elastic:
            raise SimulationError(f"resizes name running elastic jobs: job {resize.job_id} is not one")
        r = run.running
        size = len(resize.node_names)
        if not (r.min_nodes <= size <= r.max_nodes and len(set(resize.node_names)) == size):
            raise SimulationError(f"an elastic job holds min_nodes..nodes whole nodes: job {r.id} resized to {resize.node_names}")
        gpn = self.cluster.gpus_per_node
        for name in resize.removed:
            self._give(name, gpn)
        for name in resize.added:
            if self.free[self.index[name]] != gpn:
                raise SimulationError(f"no node is ever above its GPUs: job {r.id} grew onto {name}, which is not idle")
            self._take(name, gpn)
        self._progress(run, now)
        self._end_piece(r.id, run, now)
        run.running = replace(r, node_names=resize.node_names, gpus_held=tuple(int(g) for g in resize.gpus_held))
        run.gpus = size * gpn
        run.share = float(size)
        run.piece_start = now
        self.usage.allocate(run.keys, now, run.gpus, run.share)
        self.version[r.id] += 1
        run.finish = now + run.remaining * r.max_nodes / size
        heapq.heappush(self.finishes, (run.finish, r.id, self.version[r.id]))
        if size < r.max_nodes:
            self.growable.add(r.id)
        else:
            self.growable.discard(r.id)

    def _in_submit_order(self) -> Iterable[PendingJob]:
        if self.requeued:
            return sorted(self.pending.values(), key=lambda p: (p.submitted_at, p.id))
        return self.pending.values()  # submits arrive in (submit, id) order and nothing was requeued

    def _could_start(self) -> bool:
        """Whether the policy could start a job now: some pending shape fits the free GPUs (for fifo: the head's).

        Every policy places only into free GPUs (preemption, which frees more, makes every call happen:
        call_always), so when no pending job fits by shape (ignoring reservations, which only restrict),
        the call would start nothing and give no new reservation (strict FIFO and EASY reserve only for
        the head, set at the call that made it the head; muster only at the starvation wake-ups, which
        always call). Skipping it changes no placement.
        """
        gpn = self.cluster.gpus_per_node
        most = max(self.free, default=0)
        idle = self.free.count(gpn)

        def fits(nodes: int, per_node: int) -> bool:
            return most >= per_node if nodes == 1 else idle >= nodes

        if self.policy == "fifo":
            head = next(iter(self._in_submit_order()))
            return fits(head.nodes, head.gpus_per_node)
        # An idle node an elastic job below its most may grow onto is a decision too.
        return any(count and fits(*shape) for shape, count in self.shapes.items()) or bool(self.growable and idle)

    # --- one policy call -----------------------------------------------------------------------------

    def _accounts(self, now: float) -> dict[str, Account]:
        self.usage.advance(now)
        keys: set[str] = set()
        for p in self.pending.values():
            keys.add(user_key(p.user))
            if p.team:
                keys.add(team_key(p.team))
        for run in self.running.values():
            keys.update(run.keys)
        accounts = {}
        quota = self.quota if self.a.tenant_quotas else None
        for key in sorted(keys):
            gpu, node = self.usage.usage(key, now)
            accounts[key] = Account(key=key, max_gpus=quota, usage_gpu_seconds=gpu, usage_node_seconds=node)
        return accounts

    def _running_views(self, now: float) -> tuple[RunningJob, ...]:
        """The running jobs as the policy sees them; with checkpoints, each with its last one (what a preemption loses)."""
        if self.a.resume != "checkpoint" or not self.preemption_wakes:
            return tuple(run.running for run in self.running.values())
        every = self.a.checkpoint_seconds
        return tuple(
            replace(run.running, checkpointed_at=run.start + math.floor((now - run.start) / every) * every) for run in self.running.values()
        )

    def _call(self, now: float) -> None:
        limit = self.config.max_jobs
        if self.fn is fifo:
            # Strict FIFO stops at the first job that does not fit, and every job it places takes at least one
            # GPU: it cannot look past the first free-GPUs + 1 jobs; the rest wait HEAD_OF_LINE with no estimate.
            free = sum(self.free) + 1
            limit = free if limit is None else min(limit, free)
        if self.fn in (fifo, easy) and limit is not None:
            # The baselines examine the queue in submit order, at most `limit` of it; the rest wait (NOT_EXAMINED
            # or behind the head) with no estimate: leaving them out of the snapshot changes no decision.
            pending = tuple(islice(self._in_submit_order(), limit))
        else:
            pending = tuple(self.pending.values())
        snapshot = Snapshot(
            nodes=tuple(self.views),
            pending=pending,
            running=self._running_views(now),
            accounts=self._accounts(now) if self.fn not in (fifo, easy) else {},
            now=now,
            reservations=tuple(r for r in self.reservations if r.job_id in self.pending),
        )
        queue = len(self.pending)
        # The forecast (every waiting job's estimated start) changes no decision: worked out at most once per
        # FORECAST_INTERVAL of simulated time, which is also how often estimates are sampled.
        config = self.config
        if self.fn is schedule and now - self.last_forecast < FORECAST_INTERVAL:
            config = self.no_forecast
        elif self.fn is schedule:
            self.last_forecast = now
        began = time.process_time()
        decisions = self.fn(snapshot, config)
        self.decisions.append((queue, time.process_time() - began))
        self.reservations = decisions.reservations
        for job_id in decisions.within_quota:
            run = self.running[job_id]
            run.running = replace(run.running, over_quota=False)
        for p in decisions.preemptions:
            self._preempt(p.job_id, now)
        for resize in decisions.resizes:
            self._resize(resize, now)
        for placement in decisions.placements:
            # Traces hold whole-GPU jobs only: no placement is a GPU slice.
            held = tuple(int(g) for g in placement.gpus_held)
            self._place(placement.job_id, placement.node_names, held, placement.over_quota, now)
        for reservation in decisions.reservations:
            record = self.records.get(reservation.job_id)
            if record is not None and record.promised_start is None and reservation.job_id in self.pending:
                record.promised_start = reservation.start
                record.promised_at = now
        for waiting in decisions.waiting:
            job_id = waiting.job_id
            if job_id in self.just_submitted:
                self.records[job_id].predicted_at_submit = waiting.estimated_start
            if waiting.estimated_start is not None and now - self.last_prediction.get(job_id, -math.inf) >= PREDICTION_INTERVAL:
                self.records[job_id].predictions.append((now, waiting.estimated_start, waiting.estimate))
                self.last_prediction[job_id] = now
        self.just_submitted.clear()
