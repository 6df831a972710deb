"""Jobs, their state history, the node inventory and GPU allocations."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Q

from jobs.hooks import job_hooks
from jobs.states import ACTIVE_STATES, TERMINAL_STATES, JobState


class NodeState(models.TextChoices):
    READY = "READY"
    CORDONED = "CORDONED"
    NOT_READY = "NOT_READY"
    GONE = "GONE"


class Node(models.Model):
    """A cluster node as last seen by the cluster backend."""

    name = models.CharField(max_length=253, unique=True)
    gpus_total = models.PositiveIntegerField()
    rack = models.CharField(max_length=253, blank=True)
    # The topology level above the rack (MUSTER_K8S_BLOCK_LABEL: a leaf or spine switch's domain).
    block = models.CharField(max_length=253, blank=True)
    # RDMA/SR-IOV devices the node has (its allocatable of MUSTER_K8S_RDMA_RESOURCE).
    rdma_devices = models.PositiveIntegerField(default=0)
    # A node whose GPUs its device plugin shares (docs/gpu-sharing.md): the mode, slices per GPU, each slice's share of
    # a GPU and guaranteed memory (0: none), and the extended resource a pod asks for one by. Such a node takes GPU-slice
    # jobs only; gpus_total is still its GPUs.
    sharing = models.CharField(max_length=16, blank=True)
    slices_per_gpu = models.PositiveIntegerField(default=0)
    slice_gpus = models.FloatField(default=0.0)
    slice_memory_gb = models.FloatField(default=0.0)
    slice_resource = models.CharField(max_length=253, blank=True)
    gpu_model = models.CharField(max_length=200, blank=True)
    # Held here by pods Muster did not start (ClusterNode.gpus_foreign): GPUs of a node whose GPUs are whole, slices of a
    # shared one. Muster places nothing on them.
    gpus_foreign = models.PositiveIntegerField(default=0)
    slices_foreign = models.PositiveIntegerField(default=0)
    state = models.CharField(max_length=16, choices=NodeState.choices, default=NodeState.READY)
    # Why a CORDONED node takes no new pods (ClusterNode.closed_by): "cordoned", or "tainted key=value:Effect".
    closed_by = models.CharField(max_length=400, blank=True)
    # When it came back to READY from NOT_READY or GONE: no new work until MUSTER_NODE_SETTLE_SECONDS have passed (a node that
    # flaps would take gangs down with it each time).
    ready_since = models.DateTimeField(null=True, blank=True)
    # When it went NOT_READY (None while it is not): its gangs are requeued only once it has stayed so for
    # MUSTER_NODE_NOT_READY_GRACE_SECONDS (a kubelet's blip of a few seconds requeued multi-day gangs).
    not_ready_since = models.DateTimeField(null=True, blank=True)
    # Gangs in a row that failed here and then succeeded elsewhere (a success here resets it). At MUSTER_NODE_FAILURE_HOLD Muster holds the
    # node out of placement, whatever the cluster says, until an admin clears `held` (Django admin, Nodes).
    failures_in_row = models.PositiveIntegerField(default=0)
    held = models.BooleanField(default=False, help_text="Muster places nothing here until an admin clears it.")
    held_reason = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MaintenanceWindow(models.Model):
    """Planned maintenance of some nodes (Slurm's `scontrol create reservation ... flags=maint`): from `starts_at` to
    `ends_at` nothing new starts on them, before it no job whose wall time would reach it, and after it they take work
    again with no one acting (policy/maintenance.py). A cancelled window is kept, with who cancelled it, for the record."""

    nodes = models.ManyToManyField(Node, related_name="maintenance_windows")
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    reason = models.CharField(max_length=200)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")

    class Meta:
        ordering = ["starts_at", "id"]
        indexes = [models.Index(fields=["ends_at"], name="maint_ends_at")]

    def __str__(self) -> str:
        return f"maintenance {self.pk} from {self.starts_at:%Y-%m-%d %H:%M} to {self.ends_at:%Y-%m-%d %H:%M}"


class EstimateKind(models.TextChoices):
    """What a pending job's `estimated_start` means (the policy's `Waiting.estimate`, policy/model.py)."""

    # A reservation: it starts by then at the latest, on its reserved nodes.
    RESERVED = "reserved", "reserved: starts by then"
    # The queue planned forward as the work is expected to run: moves if higher-priority work arrives.
    PLANNED = "planned", "planned: about then"
    # Past the planned part of the queue: a lower bound.
    AFTER = "after", "after: not before then"
    NONE = "", "nothing known"


def job_plan_cleared() -> dict[str, Any]:
    """The plan fields of a job that is not PENDING: what `job_transition` writes when a job leaves the queue."""
    return {
        "estimated_start": None,
        "estimate_kind": EstimateKind.NONE,
        "queue_position": None,
        "priority": None,
        "priority_factors": None,
        "reserved_nodes": [],
        "reserved_start": None,
        "promised_start": None,
    }


class JobHold(models.TextChoices):
    """Who holds a pending job out of placement (`muster hold`, Slurm's `scontrol hold`): its owner, whom its owner may
    release, or an admin holding someone else's job, whom only an admin may release."""

    NONE = "", "not held"
    USER = "user", "held by its owner"
    ADMIN = "admin", "held by an admin"


class Job(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    team = models.ForeignKey("quotas.Team", on_delete=models.PROTECT, null=True, blank=True, related_name="jobs")
    name = models.CharField(max_length=100)
    image = models.CharField(max_length=512)
    command = models.JSONField()
    env = models.JSONField(default=dict, blank=True)
    nodes = models.PositiveIntegerField()
    gpus_per_node = models.PositiveIntegerField()
    wall_time_seconds = models.PositiveIntegerField()
    priority_class = models.CharField(max_length=50)
    max_restarts = models.PositiveIntegerField(default=0)
    # May run on idle GPUs beyond its owner's quota, and is the first to be preempted.
    preemptible = models.BooleanField(default=False)
    # RDMA/SR-IOV devices each of its pods asks for (multi-node jobs only; MUSTER_K8S_RDMA_RESOURCE).
    rdma_per_node = models.PositiveIntegerField(default=0)
    # A GPU slice instead of whole GPUs (one node, gpus_per_node 1): at least this share of a GPU, this much GPU memory
    # guaranteed, hardware isolation (MIG). Null/False: whole GPUs. See docs/gpu-sharing.md.
    gpu_fraction = models.FloatField(null=True, blank=True)
    gpu_memory_gb = models.FloatField(null=True, blank=True)
    gpu_isolation = models.BooleanField(default=False)
    # An elastic job: it runs on min_nodes..max_nodes whole nodes (null: on `nodes`, fixed). `nodes` is then the size it
    # holds now while it runs, and max_nodes while it waits; docs/elastic-jobs.md.
    min_nodes = models.PositiveIntegerField(null=True, blank=True)
    max_nodes = models.PositiveIntegerField(null=True, blank=True)
    # Read only by the simulated cluster and the test cluster: how long to "run" and how to exit.
    simulate = models.JSONField(null=True, blank=True)
    # Elements of one array (`POST /api/v1/jobs/array/`) share array_id, the first element's id.
    array_id = models.PositiveIntegerField(null=True, blank=True, db_index=True)
    array_index = models.PositiveIntegerField(null=True, blank=True)

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.PENDING)
    # Why the job waits (a stable code plus plain text), or why it ended.
    pending_reason_code = models.CharField(max_length=32, blank=True)
    pending_reason = models.CharField(max_length=500, blank=True)
    state_reason = models.CharField(max_length=500, blank=True)
    # Launch attempts so far; cluster object names derive from (job id, attempt).
    attempt = models.PositiveIntegerField(default=0)
    restarts = models.PositiveIntegerField(default=0)
    # Launches in a row that did not come up (refused by the cluster, or not running within the launch
    # timeout); reset by one that does. Each one holds the job back longer, and too many fail it.
    launch_failures = models.PositiveIntegerField(default=0)
    # Those of them that count towards failing the job (MUSTER_LAUNCH_MAX_FAILURES): not the cluster's own transient
    # refusals (a namespace ResourceQuota full for now, the API server failing), which back off as the others do. One
    # count for both failed a job at its first real failed launch after it had waited out a full quota five times.
    launch_failures_counted = models.PositiveIntegerField(default=0)
    # After a failed launch the job is not placed again before this (the backoff).
    launch_not_before = models.DateTimeField(null=True, blank=True)
    # The node a rank of its last failed attempt failed on: the retry is placed elsewhere when it fits elsewhere then.
    avoid_nodes = models.JSONField(default=list, blank=True)
    # The team's PersistentVolumeClaims it mounts: [{"claim", "mount_path", "read_only"}] (checked at submit).
    volumes = models.JSONField(default=list, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    # A PENDING job held out of placement until released (jobs.services.job_hold): it keeps its place by age, the cycle
    # waits it with reason HELD. Kept after a cancel as the record of it; it means something only while PENDING.
    hold = models.CharField(max_length=8, choices=JobHold.choices, blank=True, default=JobHold.NONE)
    held_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    held_at = models.DateTimeField(null=True, blank=True)
    # Admitted beyond its owner's max_gpus (borrowing idle GPUs): first in line for preemption.
    over_quota = models.BooleanField(default=False)
    # The plan of a pending job as the last cycle stored it (scheduler.plans), so reads never run the policy;
    # cleared when the job leaves PENDING (job_plan_cleared). A job no cycle has seen yet has no position.
    # When it expects to start, and what that means (estimate_kind); null when unknown.
    estimated_start = models.DateTimeField(null=True, blank=True)
    estimate_kind = models.CharField(max_length=16, choices=EstimateKind.choices, blank=True)
    # 1 is next: its place in the order the cycle considered the pending jobs.
    queue_position = models.PositiveIntegerField(null=True, blank=True)
    # The priority the cycle used, and each factor as [value in 0..1, weighted part] by name.
    priority = models.FloatField(null=True, blank=True)
    priority_factors = models.JSONField(null=True, blank=True)
    # Its reservation (a promise the next cycle keeps): the nodes, and the start at the latest.
    reserved_nodes = models.JSONField(default=list, blank=True)
    reserved_start = models.DateTimeField(null=True, blank=True)
    # The first start promised during this wait (a reservation's), kept while it waits: "promised X, now Y".
    promised_start = models.DateTimeField(null=True, blank=True)
    # Usage is charged to the ledger up to this instant.
    charged_until = models.DateTimeField(null=True, blank=True)
    # The last checkpoint the job reported (`POST /api/v1/jobs/{id}/checkpoint/`, jobs.checkpoints) and its training
    # step, if it gave one. Kept across attempts: a restarted job resumes from it. The policy weighs a preemption by the
    # work since then (since the attempt's start when the checkpoint is older, or there is none).
    checkpointed_at = models.DateTimeField(null=True, blank=True)
    checkpoint_step = models.PositiveBigIntegerField(null=True, blank=True)
    checkpoint_attempt = models.PositiveIntegerField(null=True, blank=True)

    submitted_at = models.DateTimeField()
    scheduled_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-submitted_at", "-id"]
        indexes = [
            models.Index(fields=["state", "submitted_at"]),
            models.Index(fields=["owner", "state"]),
            # Job lists, newest first (Meta.ordering): a page of everyone's jobs, or of one owner's, without sorting them all.
            models.Index(fields=["-submitted_at", "-id"], name="job_newest_first"),
            models.Index(fields=["owner", "-submitted_at", "-id"], name="job_owner_newest_first"),
            # The queue in the cycle's order (scheduler.queue.queue_jobs): a page of it without sorting every pending job.
            models.Index(fields=["queue_position", "submitted_at", "id"], condition=Q(state=JobState.PENDING), name="job_queue_order"),
        ]
        constraints = [
            models.CheckConstraint(condition=Q(nodes__gte=1), name="job_nodes_positive"),
            models.CheckConstraint(condition=Q(gpus_per_node__gte=1), name="job_gpus_positive"),
            models.CheckConstraint(condition=Q(wall_time_seconds__gte=1), name="job_wall_time_positive"),
            models.CheckConstraint(
                condition=Q(gpu_fraction__isnull=True) | Q(gpu_fraction__gt=0, gpu_fraction__lt=1), name="job_gpu_fraction_below_one"
            ),
            models.CheckConstraint(
                condition=Q(min_nodes__isnull=True, max_nodes__isnull=True)
                | Q(
                    min_nodes__gte=1,
                    max_nodes__gt=models.F("min_nodes"),
                    nodes__gte=models.F("min_nodes"),
                    nodes__lte=models.F("max_nodes"),
                ),
                name="job_elastic_bounds",
            ),
            # A GPU slice is one slice on one node.
            models.CheckConstraint(
                condition=Q(gpu_fraction__isnull=True, gpu_memory_gb__isnull=True, gpu_isolation=False) | Q(nodes=1, gpus_per_node=1),
                name="job_gpu_slice_one_node",
            ),
        ]

    def __str__(self) -> str:
        return f"job {self.pk} ({self.name})"

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def elastic(self) -> bool:
        return self.min_nodes is not None and self.max_nodes is not None

    @property
    def shares_gpu(self) -> bool:
        """It asks for a GPU slice (a share, a memory slice or isolation) rather than whole GPUs."""
        return bool(self.gpu_fraction or self.gpu_memory_gb or self.gpu_isolation)

    @property
    def attempt_started_at(self) -> datetime | None:
        """When its latest attempt's pods were all running, None until they are. `started_at` keeps the last start of
        any attempt (it says a job ran, after a requeue or a failed launch: jobs.selectors.job_never_ran), so once a new
        attempt is placed it is the earlier attempt's: it read "placed 10:53:52, started 10:53:45" while the new one
        started."""
        if self.started_at is None or (self.scheduled_at is not None and self.started_at < self.scheduled_at):
            return None
        return self.started_at

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_finished(self) -> bool:
        return self.state in TERMINAL_STATES


class JobEvent(models.Model):
    """One state transition, or a hold or release of a pending job (from and to PENDING: it changes no state): the
    job's history, append-only. Readers of transitions skip those (`jobs.selectors.STATE_CHANGES`)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField()
    from_state = models.CharField(max_length=16, choices=JobState.choices, blank=True)
    to_state = models.CharField(max_length=16, choices=JobState.choices)
    reason = models.CharField(max_length=500)
    attempt = models.PositiveIntegerField(default=0)

    class Meta:
        # Insertion order is the true order of a job's history, whatever clocks wrote the timestamps.
        ordering = ["id"]
        # The dashboard replays the last day's or week's events (queue depth over time).
        indexes = [models.Index(fields=["at"], name="job_event_at")]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_state or '-'} -> {self.to_state}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A new event is told to the `event_recorded` hooks in the transaction that writes it (a new one if none is
        # open, no savepoint inside one), whoever writes it: job_transition, a hold, or a history written directly.
        # bulk_create bypasses save(): only submits bulk-create events (their entry into the queue, which no hook counts).
        if not (self._state.adding and job_hooks.event_recorded):
            super().save(*args, **kwargs)
            return
        with transaction.atomic(savepoint=False):
            super().save(*args, **kwargs)
            for event_recorded in job_hooks.event_recorded:
                event_recorded(event=self)


class JobDependency(models.Model):
    """`sbatch --dependency`: the job waits until `on` has ended as `kind` asks (jobs/dependencies.py)."""

    AFTER_OK, AFTER_ANY, AFTER_NOT_OK = "afterok", "afterany", "afternotok"
    KINDS = [(AFTER_OK, "after it succeeds"), (AFTER_ANY, "after it ends"), (AFTER_NOT_OK, "after it fails")]

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependencies")
    on = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="dependents")
    kind = models.CharField(max_length=12, choices=KINDS)

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["job", "on"], name="job_dependency_once")]

    def __str__(self) -> str:
        return f"{self.job_id} {self.kind}:{self.on_id}"


class JobResize(models.Model):
    """An elastic job grown or shrunk while it ran: its history beside its state changes (JobEvent)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="resizes")
    at = models.DateTimeField()
    attempt = models.PositiveIntegerField()
    from_nodes = models.PositiveIntegerField()
    to_nodes = models.PositiveIntegerField()
    added = models.JSONField(default=list)
    removed = models.JSONField(default=list)
    reason = models.CharField(max_length=500)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.from_nodes} -> {self.to_nodes} nodes"


class Allocation(models.Model):
    """GPUs on one node given to one attempt of a job. Released when the attempt ends."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="allocations")
    node = models.ForeignKey(Node, on_delete=models.PROTECT, related_name="allocations")
    attempt = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()
    # GPUs held: whole GPUs, or a GPU slice's share of its GPU (0.25), which the ledger and quotas count as it is.
    gpus = models.FloatField()
    # For a GPU slice: the GPU of the node it is counted on (on Kubernetes the device plugin picks the physical one).
    gpu_slot = models.PositiveIntegerField(null=True, blank=True)
    allocated_at = models.DateTimeField()
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job_id", "attempt", "rank"]
        constraints = [
            # Live ones only: an elastic job shrunk from its last ranks may grow back onto the same rank numbers.
            models.UniqueConstraint(
                fields=["job", "attempt", "rank"], condition=Q(released_at__isnull=True), name="allocation_one_per_rank"
            ),
        ]
        indexes = [models.Index(fields=["node"], condition=Q(released_at__isnull=True), name="allocation_live_by_node")]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} rank {self.rank} on node {self.node_id}"


class JobLog(models.Model):
    """One rank's output of one attempt, kept in the `joblogs` storage before its pods were deleted (jobs.logs)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="logs")
    attempt = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()
    # The storage's name for the file; empty until kept, and when there was nothing to keep.
    name = models.CharField(max_length=255, blank=True)
    size = models.PositiveBigIntegerField(default=0)
    # Only the last MUSTER_LOG_CAPTURE_BYTES were kept.
    truncated = models.BooleanField(default=False)
    captured_at = models.DateTimeField(null=True, blank=True)
    # Failed tries to read it from the cluster, and the last error (or why nothing was kept).
    tries = models.PositiveSmallIntegerField(default=0)
    error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "attempt", "rank"], name="job_log_unique")]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} rank {self.rank}"


class SimulatedPod(models.Model):
    """A pod of the simulated cluster. The database is its API server, so web, worker and beat agree."""

    job_id = models.BigIntegerField()
    attempt = models.PositiveIntegerField()
    rank = models.PositiveIntegerField()
    node_name = models.CharField(max_length=253)
    gpus = models.PositiveIntegerField()
    duration_seconds = models.FloatField()
    exit_code = models.IntegerField(default=0)
    # Rank 0 reports a checkpoint this often while it runs (0: never), as training code would (jobs.checkpoints).
    checkpoint_every_seconds = models.FloatField(default=0.0)
    # The run time (of the job's whole simulated duration) its attempt resumed from: the job's last checkpoint from an
    # earlier attempt, else 0. duration_seconds is what is left after it.
    resumed_seconds = models.FloatField(default=0.0)
    created_at = models.DateTimeField()
    # What a real pod's spec would carry: the command it runs and the environment it gets (secrets left out).
    command = models.JSONField(default=list)
    env = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job_id", "attempt", "rank"], name="simulated_pod_unique"),
        ]

    def __str__(self) -> str:
        return f"job {self.job_id} attempt {self.attempt} rank {self.rank} on {self.node_name}"


class ClusterHealth(models.Model):
    """One row: what the last scheduling cycle found of the cluster, so every page can say when it is unreachable."""

    last_cycle_at = models.DateTimeField(null=True)
    reachable = models.BooleanField(default=True)
    error = models.TextField(blank=True)
    # When the cluster was first found unreachable in the current outage.
    down_since = models.DateTimeField(null=True)
    # Moved by the watch (muster_watch) each time a pod Muster did not start takes or frees devices: a worker's read
    # of those pods made before it is not used again (ClusterBackend.note_foreign_pods_version).
    foreign_pods_version = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return "reachable" if self.reachable else f"unreachable since {self.down_since}: {self.error}"


class PlannedQueue(models.Model):
    """One row: how many jobs the last cycle left waiting, by reason, so the queue's summary reads one row, not the queue.

    Jobs submitted or requeued since have no position yet; reads add them (scheduler.queue.queue_counts).
    """

    pending_by_reason = models.JSONField(default=dict)
    planned_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"{sum(self.pending_by_reason.values())} waiting at {self.planned_at}"


class CycleCounter(models.Model):
    """What only the scheduling cycle knows (its duration, launches, failures), kept as cumulative counters.

    Web, worker and beat are separate processes, so in-process Prometheus counters in the worker would be
    invisible to the web process that serves /metrics (and reset on every worker restart). Instead each
    cycle adds to these rows with one UPDATE (F() expressions, so concurrent writers never lose an
    increment), and /metrics reads them (telemetry/exporter.py). `le` is the upper bound of a cumulative
    histogram bucket (+inf as a very large number); 0 for plain counters.
    """

    name = models.CharField(max_length=64)
    le = models.FloatField(default=0)
    value = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["name", "le"], name="cycle_counter_unique")]

    def __str__(self) -> str:
        return f"{self.name}{{le={self.le}}} = {self.value}"
