"""The interface between the scheduler and a cluster: list nodes, launch, observe and tear down gangs."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from jobs.arrays import array_env


def gang_name(job_id: int, attempt: int) -> str:
    """The name of one attempt's gang on every backend; its pods are `<gang>-<rank>` (`pod_name`).

    Part of the interface: the telemetry source finds a run's pods by these names (the DCGM
    exporter labels each GPU's series with its pod).
    """
    return f"muster-{job_id}-{attempt}"


def pod_name(job_id: int, attempt: int, rank: int) -> str:
    return f"{gang_name(job_id, attempt)}-{rank}"


# Compute slices of a MIG-capable GPU (A100, H100, B200): a profile "3g.40gb" is 3/7 of one.
MIG_COMPUTE_SLICES = 7


class ClusterUnavailable(Exception):
    """The cluster cannot be reached; jobs stay queued and nothing is lost."""


class ClusterRefuses(ClusterUnavailable):
    """The cluster answers but will not let Muster start jobs (the jobs' namespace missing or being deleted, its role
    not granted or revoked) until that passes or an operator acts: every page says so until then, not only the cycle
    that met it, and a launch that meets it spends nothing (no failed launch, no backoff)."""


class ClusterDeletingGangs(ClusterRefuses):
    """The cluster refuses new gangs and is deleting the ones it has, not for anything a job did (Kubernetes: the jobs'
    namespace being deleted, whose controller deletes every pod in it). The cycle places nothing, yet still follows the
    running gangs: a job whose pods are going is requeued at once, spending no restart and charged no further, with
    `cause` in its reason ("the namespace 'muster-jobs' for jobs is being deleted"), not when the cluster takes jobs
    again."""

    def __init__(self, message: str, *, cause: str) -> None:
        super().__init__(message)
        self.cause = cause


class LaunchRefused(Exception):
    """The API server refused an object of the gang, in its own words (a ResourceQuota of the jobs' namespace
    exceeded, an admission webhook's no, a manifest it finds invalid). `transient` when the cluster's limits are the
    cause, not the job: it is tried again after the backoff and the refusal does not count towards failing it."""

    def __init__(self, message: str, *, transient: bool) -> None:
        super().__init__(message)
        self.transient = transient


@dataclass(frozen=True)
class ClusterNode:
    name: str
    gpus_total: int
    rack: str = ""
    gpu_model: str = ""
    schedulable: bool = True
    block: str = ""
    rdma_devices: int = 0
    # GPUs its device plugin shares ("time-slicing", "mps") or partitions ("mig"): it then offers `slices_per_gpu`
    # slices of each GPU as the extended resource `slice_resource`, each `slice_gpus` of a GPU with `slice_memory_gb`
    # of its memory guaranteed (0: none), and takes GPU-slice jobs only (policy/sharing.py).
    sharing: str = ""
    slices_per_gpu: int = 0
    slice_gpus: float = 0.0
    slice_memory_gb: float = 0.0
    slice_resource: str = ""
    # Ready and reachable (Kubernetes: the Ready condition is True). A node that is not has gangs on it requeued.
    ready: bool = True
    # Why a Ready node takes no new pods, for people: "cordoned", or the taint ("tainted maintenance=true:NoExecute"),
    # so an admin knows whether `kubectl uncordon` or `kubectl taint ... -` opens it again. "" when it takes pods.
    closed_by: str = ""
    # What pods Muster did not start hold here (another scheduler's jobs, notebooks): GPUs of a node whose GPUs are
    # whole, slices of a shared one. Not free to Muster.
    gpus_foreign: int = 0
    slices_foreign: int = 0
    # Muster's own hold of the node as the cluster shows it to its operators (`mark_holds`: on Kubernetes the label
    # muster.io/held and the reason in an annotation): the reason, None where it shows no hold. The simulated cluster
    # shows none.
    hold_mark: str | None = None


@dataclass(frozen=True)
class GangSpec:
    """Everything a backend needs to start one attempt of a job: one pod per node."""

    job_id: int
    attempt: int
    name: str
    image: str
    command: tuple[str, ...]
    env: dict[str, str]
    node_names: tuple[str, ...]
    gpus_per_node: int
    wall_time_seconds: int
    owner: str
    team: str = ""
    # An admin allowed the job's team the host network (quotas.Team.allow_host_network).
    host_network: bool = False
    # Admin allowances of the job's team (quotas.Team): otherwise pods run as a non-root user on a read-only root.
    run_as_root: bool = False
    writable_root_filesystem: bool = False
    # Environment the pods get that must not be readable in their spec (the telemetry push token):
    # the Kubernetes backend keeps it in a Secret of the gang and references it.
    secret_env: dict[str, str] = field(default_factory=dict)
    simulate: dict[str, float | int] = field(default_factory=dict)
    # The team's PersistentVolumeClaims the job mounts: (claim, mount path, read-only), and the team's pull secrets.
    volumes: tuple[tuple[str, str, bool], ...] = ()
    # RDMA devices each pod asks for (PodOptions.rdma_resource).
    rdma_per_node: int = 0
    image_pull_secrets: tuple[str, ...] = ()
    # A GPU-slice job's one pod asks for one of these instead of whole GPUs.
    gpu_slice: GpuSlice | None = None
    # An elastic job's bounds (0: a gang of fixed size); `node_names` is its size now.
    min_nodes: int = 0
    max_nodes: int = 0
    # The whole GPUs Muster holds for the job on each node, by rank (its allocations): every GPU of the node for a job
    # that holds its nodes whole (a gang, an elastic job), so its pod asks for all of them and the cluster binds no pod
    # Muster did not start onto GPUs the job is charged for. Empty: `gpus_per_node` on every node.
    gpus_held: tuple[int, ...] = ()
    # An array's element: its array and index, which its pods find in MUSTER_ARRAY_ID and MUSTER_ARRAY_INDEX (Muster's
    # names, which the job's own env may not set: in `env` they were dropped on Kubernetes with the job's refused names).
    array_id: int | None = None
    array_index: int | None = None
    # The job's priority class (production, normal, ...): its pods' PriorityClass where the site maps one.
    priority_class: str = ""

    def gpus_on(self, rank: int) -> int:
        """The GPUs rank `rank`'s pod asks for: what Muster holds for it on its node, never fewer than it uses."""
        return max(self.gpus_held[rank], self.gpus_per_node) if rank < len(self.gpus_held) else self.gpus_per_node

    def muster_env(self) -> dict[str, str]:
        """What Muster itself tells every pod beyond the job's env (which may not set these names): an array element's
        index, its GPU slice, and an elastic job's bounds."""
        env = {**array_env(self.array_id, self.array_index), **(self.gpu_slice.env() if self.gpu_slice else {})}
        if self.min_nodes:
            env.update({"MUSTER_MIN_NODES": str(self.min_nodes), "MUSTER_MAX_NODES": str(self.max_nodes)})
        return env


@dataclass(frozen=True)
class GpuSlice:
    """The slice of a shared GPU a job's pod holds: what it asks the cluster for, and what its environment says."""

    # The extended resource the node's device plugin offers slices as (one is asked for), e.g. nvidia.com/gpu.shared.
    resource: str
    sharing: str
    # Its share of the GPU, its guaranteed GPU memory (0: none), and which GPU of the node Muster counts it on.
    share: float
    memory_gb: float = 0.0
    gpu: int = 0

    def env(self) -> dict[str, str]:
        """What the pod is told, so it can size itself (e.g. torch.cuda.set_per_process_memory_fraction)."""
        env = {"MUSTER_GPU_SHARING": self.sharing, "MUSTER_GPU_SHARE": f"{self.share:.4g}"}
        if self.memory_gb:
            env["MUSTER_GPU_MEMORY_GB"] = f"{self.memory_gb:g}"
        return env


class PodPhase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True)
class PodStatus:
    rank: int
    node_name: str
    phase: PodPhase
    exit_code: int | None = None
    message: str = ""
    # The cluster's short reason, e.g. "DeadlineExceeded" when the pod outlived activeDeadlineSeconds.
    reason: str = ""
    # Why the cluster is stopping the pod, when it is (the reason of its DisruptionTarget condition), e.g.
    # "EvictionByEvictionAPI", "PreemptionByScheduler", "DeletionByTaintManager", "TerminationByKubelet".
    disruption: str = ""
    # When its last container ended (the kubelet's clock, to the second), once it has: a gang that ended while no cycle
    # looked (Muster stopped, the API server unreachable) ended then, not when a cycle saw it. None: not known.
    finished_at: datetime | None = None
    # When its containers were all up (running), once they were: a gang the cycle sees running began running then, not
    # when a cycle saw it. None: not known (the cycle's instant stands).
    started_at: datetime | None = None


DEADLINE_EXCEEDED = "DeadlineExceeded"
# kube-scheduler's reason for a pod it could not bind to a node (its PodScheduled condition): it tries again as
# pods come and go.
UNSCHEDULABLE = "Unschedulable"
# A container's waiting reasons that mean the pod will not start as it was asked for (a wrong image name or tag,
# a registry refusing it, a missing secret or config map). The kubelet retries some of them, but meanwhile the gang
# holds its GPUs, so the launch counts as failed at once (with the backoff that covers a transient registry error).
# A pod that names a PersistentVolumeClaim its namespace does not have: kube-scheduler will never bind it (Muster's
# reason for it, read from kube-scheduler's words; Kubernetes gives it none of its own).
MISSING_VOLUME_CLAIM = "MissingVolumeClaim"
LAUNCH_ERRORS = frozenset(
    {
        "ErrImagePull",
        "ImagePullBackOff",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
        MISSING_VOLUME_CLAIM,
    }
)


# A failed pod's reason when the node's kubelet refused to admit it after kube-scheduler had bound it there:
# "OutOf<resource>" (e.g. OutOfnvidia.com/gpu: the node had less than kube-scheduler counted, as when a GPU went
# unhealthy or a pod was bound past kube-scheduler), UnexpectedAdmissionError (the device plugin could not allocate,
# or a node that restarted could not admit its pods again) or NodeShutdown (the node is shutting down). The node's
# trouble, not the job's code; the kubelet's other refusals (AppArmor, sysctls, the pod's OS) are the pod's own.
def refused_by_node(reason: str) -> bool:
    return reason.startswith("OutOf") or reason in ("UnexpectedAdmissionError", "NodeShutdown")


# The kubelet stopping a pod: for the node's memory or disk pressure (the pod's reason "Evicted"), which most often
# stops the pod that used too much, so that, unlike the other disruptions, it spends a restart as a failure does;
# or for the node's graceful shutdown ("Terminated") or to admit a critical pod ("Preempting"), which are not the
# job's doing.
TERMINATION_BY_KUBELET = "TerminationByKubelet"
EVICTED_FOR_PRESSURE = "Evicted"


def stopped_by_cluster(pod: PodStatus) -> bool:
    """Whether the cluster is stopping the pod for reasons of its own (its DisruptionTarget condition), not for what
    the pod did: every disruption but the kubelet's eviction for the node's pressure."""
    return bool(pod.disruption) and not (pod.disruption == TERMINATION_BY_KUBELET and pod.reason == EVICTED_FOR_PRESSURE)


@dataclass(frozen=True)
class CapturedLog:
    """The end of a rank's output: at most the bytes asked for, and whether earlier output was left out."""

    data: bytes
    truncated: bool

    @classmethod
    def of(cls, data: bytes, max_bytes: int) -> CapturedLog:
        return cls(data[-max_bytes:], len(data) > max_bytes) if max_bytes > 0 else cls(b"", bool(data))


class ClusterBackend(Protocol):
    #: True for the built-in simulated cluster; the UI says so plainly.
    simulated: bool

    def prepare(self) -> None:
        """Make sure the cluster can take gangs (its namespace exists), once per process; raises ClusterUnavailable
        saying what to do when it cannot, so jobs wait and the pages show why."""

    def list_nodes(self) -> list[ClusterNode]: ...

    def mark_holds(self, marks: Mapping[str, str | None]) -> None:
        """Show Muster's holds of nodes to the cluster's operators where the backend can (node name -> the hold's reason,
        None: the hold released). Never refuses: a cluster that does not let Muster is said once, in the log."""

    def note_foreign_pods_version(self, version: int) -> None:
        """How often the watch has seen pods Muster did not start come or go (ClusterHealth.foreign_pods_version): a
        backend that keeps a read of those pods past this cycle reads them again once the number moves."""

    def launch_gang(self, spec: GangSpec) -> None:
        """Create the gang's pods. Creating what already exists is success, so a retry never doubles a gang."""

    def teardown_gang(self, job_id: int, attempt: int, grace_seconds: int | None = None) -> None:
        """Delete every pod of one attempt, giving them `grace_seconds` after SIGTERM. Deleting what is gone is success."""

    def launch_ranks(self, spec: GangSpec, ranks: list[int]) -> None:
        """Create the pods of these ranks of a running gang (an elastic job grown onto spec.node_names[rank])."""

    def teardown_ranks(self, job_id: int, attempt: int, ranks: list[int], grace_seconds: int | None = None) -> None:
        """Delete the pods of these ranks of a running gang (an elastic job shrunk), the rest left running."""

    def observe_gangs(self) -> dict[tuple[int, int], list[PodStatus]]:
        """Every gang with pods on the cluster, by (job id, attempt), its pods by rank: one read per cycle.

        A gang missing from the result has no pods left."""

    def pods_gone_how(self, job_id: int, attempt: int, ranks: Sequence[int]) -> str:
        """How pods of a gang that Muster did not delete went, where the cluster still says, as words that follow "1 of 2
        pods (rank 1) was": "" when it does not, and the cycle says they were deleted outside Muster."""
        return ""

    def gang_notes(self) -> Mapping[tuple[int, int], list[str]]:
        """What the last observe_gangs mended of a gang on its own, by (job id, attempt), to say in its job's history:
        the owner learns what their gang went without for a while (Kubernetes: its Service made again)."""
        return {}

    def read_logs(self, job_id: int, attempt: int, rank: int, tail: int | None = None) -> str:
        """The last `tail` lines a rank's pod wrote (all when None); empty when the pod is gone."""

    def read_log_tail(self, job_id: int, attempt: int, rank: int, max_bytes: int) -> CapturedLog | None:
        """The last `max_bytes` of a rank's output, to keep before its pod is deleted; None when the pod is gone."""

    def follow_logs(
        self, job_id: int, attempt: int, rank: int, tail: int | None = None, *, still_live: Callable[[], bool] | None = None
    ) -> Iterator[str]:
        """A rank's output from its last `tail` lines on (all when None), as it is written, until its pod ends, or until
        `still_live` (asked every few seconds) says the attempt has ended, whatever the stream does."""
