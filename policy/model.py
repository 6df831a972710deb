"""Plain data the policy reads and returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import NamedTuple

# Stable codes for why a job waits; the text beside each says it in numbers.
NO_ROOM = "NO_ROOM"
FRAGMENTATION = "FRAGMENTATION"
RESERVATION = "RESERVATION"
QUOTA_GPUS = "QUOTA_GPUS"
BUDGET = "BUDGET"
NOT_EXAMINED = "NOT_EXAMINED"
LAUNCH_BACKOFF = "LAUNCH_BACKOFF"
# Beyond a per-job limit (wall time, node-hours) lowered since it was submitted: it waits until the limit is raised.
JOB_LIMIT = "JOB_LIMIT"
# Held by its owner or an admin (`muster hold`, Slurm's JobHeldUser/JobHeldAdmin): never placed until released.
HELD = "HELD"
# Waits for jobs it depends on to end as asked (`sbatch --dependency`): never placed until they have.
DEPENDENCY = "DEPENDENCY"


def plural(count: float, noun: str, many: str = "") -> str:
    """`1 node`, `17 nodes`, `0 nodes`: the count with its noun, singular only for exactly one (`many` for an irregular
    plural). Reasons and refusals say "1 GPU", never "1 GPUs". (Here, for the policy's reasons; jobs.amounts says it on.)"""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


@lru_cache(maxsize=4096)
def when(ts: float) -> str:
    """A time in reasons: minutes, UTC. (Cached: thousands of waiting jobs name the same few instants each cycle.)"""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M UTC")


@dataclass(frozen=True)
class BudgetLeft:
    """An account's node-hour budget as every page, the API and the BUDGET reason state it.

    `left` is the budget less this period's ledger; `committed` is the part of it the account's running jobs
    may still use by their wall time, which the scheduler counts as spent already, so a new job must fit in
    `uncommitted`. quotas.selectors works both out from the database; the policy from its snapshot.
    """

    left: float
    committed: float

    @property
    def uncommitted(self) -> float:
        """What a new job may still use."""
        return max(0.0, self.left - self.committed)

    def __str__(self) -> str:
        """The one wording, in node-hours to one decimal, under one to two or three (the parts add up as written):
        '47.4 node-hours left, 44.3 of it committed to running jobs, 3.1 for new jobs'."""
        return self.words(self.decimals)[0]

    @property
    def decimals(self) -> int:
        """Enough places that what is left is not rounded away: 0.118 left with 0.075 committed read '0.1 left, all of
        it committed'."""
        left = max(self.left, 0.0)
        return 1 if left >= 1 or left == 0 else 2 if left >= 0.1 else 3

    def words(self, decimals: int) -> tuple[str, float]:
        """The wording to `decimals` places, and what it says is left for new jobs (the parts add up as written)."""
        left, committed = round(max(self.left, 0.0), decimals), round(max(self.committed, 0.0), decimals)
        text = f"{left:.{decimals}f} node-hours left"
        if left <= 0 or committed <= 0:
            return text, left
        if committed >= left:
            return f"{text}, all of it committed to running jobs", 0.0
        free = round(left - committed, decimals)
        return f"{text}, {committed:.{decimals}f} of it committed to running jobs, {free:.{decimals}f} for new jobs", free


def user_key(username: str) -> str:
    return f"user:{username}"


def team_key(team: str) -> str:
    return f"team:{team}"


@dataclass(frozen=True)
class NodeView:
    """A node's capacity at the instant of the snapshot."""

    name: str
    gpus_total: int
    gpus_free: int
    rack: str = ""
    schedulable: bool = True
    # The topology level above the rack (a leaf switch's block, or a spine): gangs that cannot have one rack keep to one.
    block: str = ""
    # RDMA/SR-IOV devices the node has (its allocatable of the site's RDMA resource): a gang holds them with the node.
    rdma: int = 0
    # A node whose GPUs its device plugin shares ("time-slicing", "mps") or partitions ("mig") takes only GPU-slice
    # jobs (policy/sharing.py), `slices_per_gpu` on each GPU, each `slice_gpus` of a GPU with `slice_memory_gb` of its
    # memory guaranteed (0: none, as with time-slicing). `slices_used` is per GPU (empty: none used).
    sharing: str = ""
    slices_per_gpu: int = 0
    slice_gpus: float = 0.0
    slice_memory_gb: float = 0.0
    slices_used: tuple[int, ...] = ()
    # GPUs held here by pods Muster did not start (already out of gpus_free): said when a job waits for room.
    gpus_foreign: int = 0
    # Why a node that is not schedulable takes no new work, as a waiting job's reason names it ("cordoned", "held by an
    # admin", "settling until 14:05 UTC"); empty where the snapshot does not know (the replay).
    closed_why: str = ""
    # When a node closed only for a while (settling after NotReady) takes work again: no job is placed or promised
    # on it before, but the queue's estimates count it from then (policy/forecast.py). None: open, or closed until
    # someone acts.
    opens_at: float | None = None


@dataclass(frozen=True)
class Account:
    """A user's or team's limits and recent usage, keyed `user:<name>` / `team:<name>`.

    None means unlimited. Usage is decayed with the fair-share half-life: each
    GPU-second (node-second) counts 2^(-age / half-life).
    """

    key: str
    max_gpus: int | None = None
    node_hours_left: float | None = None
    # Seconds since the epoch when the budget period ends (shown in BUDGET reasons).
    budget_resets_at: float | None = None
    # The whole budget of a period, back at `budget_resets_at` (None: not known; the forecast then plans no job past it).
    node_hours_per_period: float | None = None
    # Node-hours admins added to this period's budget only (quotas.BudgetGrant): counted in `node_hours_left`, gone at
    # `budget_resets_at`.
    node_hours_granted: float = 0.0
    # Per-job limits: submit refuses a job beyond one; a queued job beyond one lowered since waits (JOB_LIMIT).
    max_wall_seconds: float | None = None
    max_node_hours_per_job: float | None = None
    weight: float = 1.0
    usage_gpu_seconds: float = 0.0
    usage_node_seconds: float = 0.0


@dataclass(frozen=True)
class PendingJob:
    id: int
    nodes: int
    gpus_per_node: int
    # 0 is the highest priority class.
    class_rank: int
    # Seconds since the epoch; the job keeps it across requeues.
    submitted_at: float
    user: str = ""
    team: str | None = None
    # May borrow idle GPUs beyond its owner's max_gpus (and is then preempted first).
    preemptible: bool = False
    wall_seconds: float = 3600.0
    # Its last launches failed (how many in a row): it is not placed before `not_before` (seconds since the epoch).
    launch_failures: int = 0
    not_before: float | None = None
    # When it was last preempted (seconds since the epoch): it may not borrow again for a while (anti-thrash).
    preempted_at: float | None = None
    # Nodes its last attempt failed on (a rank's failure): placed elsewhere when it fits elsewhere then.
    avoid_nodes: tuple[str, ...] = ()
    # RDMA devices each of its nodes must have (multi-node jobs only: a gang holds its nodes whole, devices included).
    rdma_per_node: int = 0
    # A GPU slice instead of whole GPUs (single-node jobs only): at least this share of a GPU, at least this much GPU
    # memory guaranteed, and hardware isolation (MIG) if asked. Either ask makes it a slice job (`shares_gpu`).
    gpu_fraction: float = 0.0
    gpu_memory_gb: float = 0.0
    gpu_isolation: bool = False
    # An elastic job (0 < min_nodes < nodes): it starts on as many whole nodes as fit, at least min_nodes and at most
    # `nodes`, grows while nodes stay idle and shrinks rather than be preempted. 0: it runs on `nodes`, no fewer.
    min_nodes: int = 0
    # Its predicted run time (policy/runtime.py: its owner's recent run times); None: its wall time. Estimates only.
    expected_seconds: float | None = None
    # Held out of placement until released (`muster hold`): why, in words (who held it, when, who may release it);
    # empty: not held. It keeps its place by age; the walk waits it (HELD) before anything else.
    held: str = ""
    # Its dependencies not met yet (`sbatch --dependency`): why, in words, and the jobs it waits for; empty: none. It
    # waits (DEPENDENCY) as a held job does, its estimate from when those jobs are expected to end if they all run.
    waits_for: str = ""
    after: tuple[int, ...] = ()
    # The array it is an element of (None: none): a reason's `muster update` names the array, whose id updates every
    # pending element at once, where an element's own id needed one command per element.
    array_id: int | None = None
    # False for a submit's --test-only (scheduler/estimate.py): not queued, so a reason says what to submit, not what
    # to update or cancel.
    queued: bool = True

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def likely_seconds(self) -> float:
        """How long it is expected to run once started: its prediction where it has one (never above its wall time)."""
        return self.wall_seconds if self.expected_seconds is None else min(self.wall_seconds, self.expected_seconds)

    @property
    def elastic(self) -> bool:
        return 0 < self.min_nodes < self.nodes

    def start_shape(self) -> PendingJob:
        """The job as it must be able to start: an elastic job on its fewest nodes (still holding them whole)."""
        return replace(self, nodes=self.min_nodes) if self.elastic else self

    @property
    def whole_nodes(self) -> bool:
        """It holds its nodes whole: a job of several nodes, or an elastic one of any size."""
        return self.nodes > 1 or self.min_nodes > 0

    @property
    def shares_gpu(self) -> bool:
        return self.gpu_fraction > 0 or self.gpu_memory_gb > 0 or self.gpu_isolation


@dataclass(frozen=True)
class RunningJob:
    """A job holding GPUs (SCHEDULED or RUNNING)."""

    id: int
    node_names: tuple[str, ...]
    # GPUs held per rank: a fraction for a GPU slice (the slice's share of its GPU).
    gpus_held: tuple[float, ...]
    class_rank: int
    started_at: float
    # started_at + wall time: when its GPUs are free at the latest.
    ends_at: float
    user: str = ""
    team: str | None = None
    preemptible: bool = False
    over_quota: bool = False
    # How often it was preempted before (a job is not stopped more than PolicyConfig.max_preemptions times).
    preemptions: int = 0
    # Its last checkpoint (seconds since the epoch), when it reports them: what a preemption throws away starts there.
    checkpointed_at: float | None = None
    # An elastic job's bounds (0: not elastic), and what each of its nodes must have to grow onto it.
    min_nodes: int = 0
    max_nodes: int = 0
    gpus_per_node: int = 0
    rdma_per_node: int = 0
    # When it is expected to end (policy/runtime.py: its owner's recent run times); None: at its wall-time end.
    expected_end: float | None = None
    # An elastic job whose last growth did not come up grows again no sooner than this (seconds since the epoch).
    grow_not_before: float | None = None

    @property
    def elastic(self) -> bool:
        return 0 < self.min_nodes < self.max_nodes

    @property
    def gpus(self) -> float:
        return sum(self.gpus_held)

    def likely_end(self, now: float) -> float:
        """When it is expected to end: the prediction while it still lies ahead; once it ran past it, half-way from now
        to its wall-time end (nothing then says where in what is left it ends, and half-way is the middle of it)."""
        if self.expected_end is None or self.ends_at <= now:
            return self.ends_at
        if self.expected_end <= now:
            return now + (self.ends_at - now) / 2
        return min(self.expected_end, self.ends_at)


@dataclass(frozen=True)
class PolicyConfig:
    """The knobs of the policy, from settings (see docs/scheduling.md)."""

    weight_fair_share: float = 1000.0
    weight_age: float = 500.0
    weight_class: float = 10000.0
    weight_size: float = 100.0
    weight_short: float = 2000.0
    # The short-wall-time factor is 1 for a wall time of an hour or less and 0 at this wall time or more (log scale).
    short_max_seconds: float = 7 * 24 * 3600.0
    # Age factor reaches 1 after this long in the queue.
    age_max_seconds: float = 7 * 24 * 3600.0
    half_life_seconds: float = 7 * 24 * 3600.0
    class_count: int = 3
    # A job starves, and gets a reservation it keeps until it starts, once it has waited this long and, for a
    # single-node job, at least `starvation_wall_factor` times its wall time (see starving_after). The bound on reservations is on work,
    # not a budget of promises: every starving job gets one while fewer than this many are held.
    starvation_seconds: float = 3600.0
    starvation_wall_factor: float = 2.0
    max_reservations: int = 256
    # How many waiting jobs without a reservation the cycle plans forward for an ETA (a bound on its work);
    # the jobs past it are told "after" the last planned start.
    plan_jobs: int = 500
    # Running jobs younger than this are never preempted (anti-thrash).
    preemption_min_runtime_seconds: float = 600.0
    preemption: bool = True
    # A job is preempted at most this many times; after that it runs to its end (or its wall time).
    max_preemptions: int = 3
    # The bound for preemption for fair share, which only stops work submitted preemptible: a site whose jobs checkpoint
    # may allow more here while a job reclaimed from borrowing (or stopped for a higher class) keeps the bound above.
    # Counted over the job's life whatever stopped it.
    max_fair_share_preemptions: int = 3
    # A job is preempted only while what it would lose (GPU-seconds since its last checkpoint, or its start) is at most
    # this times the GPU-seconds it has left by its wall time; further along, it is waited for instead.
    preemption_max_lost_ratio: float = 0.5
    # A job that could preempt work of a lower class now waits, up to this long after it was queued, for jobs in its way
    # that would lose less work once they have run the minimum run time, if the work saved is more than its own GPUs'
    # wait costs (0: never). A job taking back GPUs lent beyond its quota never waits.
    preemption_defer_seconds: float = 600.0
    # A preempted job may not borrow beyond its quota again until this long after its preemption.
    reborrow_hysteresis_seconds: float = 3600.0
    # Preemption for fair share: a job whose owner has used at most its share may stop a preemptible job, of its class
    # and of an owner without a GPU quota, whose owner has used at least `fair_share_preemption_gap` shares more (U/S,
    # see policy/priority.py).
    fair_share_preemption: bool = False
    fair_share_preemption_gap: float = 1.0
    max_jobs: int | None = None
    # A job of part of a node goes, among the nodes it fits best, to one where a job at least as long (by wall time)
    # already runs, so it does not outlive the node's jobs (looking at most this many; 1: the first that fits).
    align_look: int = 32

    def starving_after(self, wall_seconds: float, nodes: int = 1) -> float:
        """How long a job of this wall time and node count waits before it is owed a reservation.

        A promise drains its nodes ahead of its start, and every job promised a start goes ahead of the
        queue's priority order. A single-node job waits because of that order (GPUs free up on some node all
        the time): scaled with its wall time, promises go to the ones kept waiting long for their length, so
        short jobs stay in priority order and long ones still get a bounded wait (the threshold plus the
        reserved wait). A gang waits because whole nodes must be free at once, which only a reservation
        brings about: it is owed one after `starvation_seconds`, whatever its length.
        """
        if nodes > 1:
            return self.starvation_seconds
        return max(self.starvation_seconds, self.starvation_wall_factor * wall_seconds)


@dataclass(frozen=True)
class MaintenanceWindow:
    """Nodes an admin takes out of service from `start` to `end` (seconds since the epoch), as Slurm's
    `scontrol create reservation flags=maint`: no job is started there whose wall time would reach `start`, none from
    `start` to `end`, and the nodes come back at `end` on their own."""

    id: int
    node_names: tuple[str, ...]
    start: float
    end: float
    reason: str = ""


@dataclass(frozen=True)
class Snapshot:
    nodes: tuple[NodeView, ...]
    pending: tuple[PendingJob, ...]
    running: tuple[RunningJob, ...] = ()
    accounts: Mapping[str, Account] = field(default_factory=dict)
    # Seconds since the epoch.
    now: float = 0.0
    # The reservations the previous cycle held (its Decisions.reservations): promises this cycle keeps.
    reservations: tuple[Reservation, ...] = ()
    # Planned maintenance not over yet (`POST /api/v1/nodes/maintenance/`): the policy holds the nodes from start to end and plans
    # around that ahead of time (policy/maintenance.py).
    maintenance: tuple[MaintenanceWindow, ...] = ()


@dataclass(frozen=True)
class Priority:
    """A job's priority and each factor: (factor in [0, 1], weighted contribution)."""

    total: float
    factors: Mapping[str, tuple[float, float]]


@dataclass(frozen=True)
class Placement:
    job_id: int
    # One entry per rank: rank i runs on node_names[i] and holds gpus_held[i] GPUs there.
    # A multi-node job holds its nodes whole, whatever it asked per node.
    node_names: tuple[str, ...]
    gpus_held: tuple[float, ...]
    over_quota: bool = False
    # A GPU slice: the index of the GPU on its node whose slice it holds (gpus_held is the slice's share).
    gpu_slot: int | None = None


@dataclass(frozen=True)
class Preemption:
    job_id: int
    for_job_id: int
    reason: str


@dataclass(frozen=True)
class Resize:
    """An elastic job grown onto idle nodes or shrunk to free nodes for a job with priority; its ranks are its nodes'
    order, so it is shrunk from its last ranks (rank 0, the rendezvous host, stays)."""

    job_id: int
    node_names: tuple[str, ...]  # all of its nodes after the resize
    gpus_held: tuple[float, ...]
    added: tuple[str, ...]
    removed: tuple[str, ...]
    reason: str
    # The job with priority it was shrunk for (None: grown, or shrunk back for its own sake).
    for_job_id: int | None = None


@dataclass(frozen=True)
class Reservation:
    """A promise: the job starts on these nodes at `start` at the latest (earlier if they free up sooner)."""

    job_id: int
    node_names: tuple[str, ...]
    # Seconds since the epoch when the reserved nodes are free for the gang.
    start: float


# What a waiting job's estimated_start means.
ESTIMATE_RESERVED = "reserved"  # a reservation: the start at the latest, unless capacity is lost
ESTIMATE_PLANNED = "planned"  # the plan of the queue forward as the work is expected to run: moves as higher-priority work arrives
ESTIMATE_AFTER = "after"  # past the planned part of the queue: not before this time
ESTIMATE_NONE = ""  # no estimate can be known (the reason says why)


class Waiting(NamedTuple):
    """A waiting job's place, reason and estimated start. A tuple, not a frozen dataclass: a cycle makes one for every
    waiting job and again with its estimate, and a frozen dataclass costs several times as much to make."""

    job_id: int
    position: int
    reason_code: str
    reason: str
    estimated_start: float | None = None
    estimate: str = ESTIMATE_NONE

    def estimated(self, start: float | None, estimate: str) -> Waiting:
        return Waiting(self.job_id, self.position, self.reason_code, self.reason, start, estimate)


@dataclass(frozen=True)
class Decisions:
    placements: tuple[Placement, ...]
    waiting: tuple[Waiting, ...]
    preemptions: tuple[Preemption, ...] = ()
    # Every reservation held after this cycle, kept and new: the next cycle's Snapshot.reservations.
    reservations: tuple[Reservation, ...] = ()
    # Every pending job's priority, so reads show what the cycle used without running the policy again.
    priorities: Mapping[int, Priority] = field(default_factory=dict)
    # Elastic jobs grown or shrunk in this cycle (shrinks happen before the placements that needed their nodes).
    resizes: tuple[Resize, ...] = ()
    # Running jobs placed borrowing beyond their owners' quotas, which the quotas now have room for: within quota from
    # this cycle on, so no longer taken back for other owners' jobs.
    within_quota: tuple[int, ...] = ()
