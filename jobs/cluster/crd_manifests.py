"""The custom objects of the optional launch modes, as plain dicts: pure, unit-tested and dry-run like manifests.py.

`workload` (MUSTER_K8S_LAUNCH_MODE): the gang is today's Service and pinned pods plus a
native PodGroup (scheduling.k8s.io/v1alpha2, Kubernetes 1.36+ with the GenericWorkload and
GangScheduling feature gates) whose gang policy has `minCount` = nodes, owned by the Service.
Each pod names it in `spec.schedulingGroup.podGroupName`, so the default kube-scheduler holds
every pod of the gang until all of them can be bound: no second scheduler, no CRD.

`podgroup`: the gang is today's Service and pinned pods plus a
scheduler-plugins coscheduling PodGroup (scheduling.x-k8s.io/v1alpha1) with
`minMember` = nodes, owned by the Service like the pods. The pods carry the
`scheduling.x-k8s.io/pod-group` label and the coscheduling scheduler's name
(manifests.pod_manifest), so that scheduler binds all of them or none.

`mpijob`: one Kubeflow MPIJob (kubeflow.org/v2beta1) per attempt instead of Service and
pods. The MPI operator makes the pods: a launcher (a batch Job running the job's command,
typically `mpirun`, with the hostfile at /etc/mpi/hostfile) and `nodes` workers (sshd,
the operator's default command) named `<gang>-worker-<i>`. One worker template cannot pin
each worker to its own node, so every worker may go to any planned node (required node
affinity `In` over the plan) and never next to another worker of the gang (required pod
anti-affinity on the hostname): the gang covers exactly the planned nodes, though which
rank lands on which of them is kube-scheduler's choice. Both templates carry Muster's
labels plus `muster.io/role` (launcher | worker); a worker's rank is the operator's
`training.kubeflow.org/replica-index` label, since one template cannot give each worker
its own `muster.io/rank`.

Field names follow mpi-operator's pkg/apis/kubeflow/v2beta1 (MPIJobSpec: slotsPerWorker,
runPolicy, mpiReplicaSpecs; ReplicaSpec: replicas, restartPolicy, template) and
scheduler-plugins' apis/scheduling/v1alpha1 (PodGroupSpec: minMember, scheduleTimeoutSeconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from jobs.cluster.base import GangSpec, gang_name
from jobs.cluster.manifests import (
    HOSTNAME_LABEL,
    LABEL_ATTEMPT,
    LABEL_JOB,
    PodOptions,
    base_pod_spec,
    gang_labels,
    gang_pod_spec,
    gpu_container,
    job_env,
    locked_down_container,
    node_affinity,
    secret_env_refs,
    service_owner_reference,
    sim_annotations,
)


@dataclass(frozen=True)
class CustomResource:
    """Where a custom resource lives on the API server (CustomObjectsApi's group, version, plural)."""

    group: str
    version: str
    plural: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


PODGROUP = CustomResource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
# Kubernetes' own PodGroup (KEP-4671): a built-in API, reached through the same generic client calls.
NATIVE_PODGROUP = CustomResource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")
MPIJOB = CustomResource("kubeflow.org", "v2beta1", "mpijobs", "MPIJob")

# Muster's label on MPIJob pod templates: which replica a pod is.
LABEL_ROLE = "muster.io/role"
ROLE_LAUNCHER = "launcher"
ROLE_WORKER = "worker"
# Set by the MPI operator on each worker pod: its index, 0 .. replicas-1 (Muster reads it as the rank).
MPI_REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"


def native_podgroup_manifest(spec: GangSpec, options: PodOptions, owner_uid: str | None = None) -> dict[str, Any]:
    """Kubernetes' PodGroup with a gang policy: kube-scheduler binds all `nodes` pods of the gang or none of them."""
    metadata: dict[str, Any] = {"name": gang_name(spec.job_id, spec.attempt), "namespace": options.namespace, "labels": gang_labels(spec)}
    if owner_uid:
        metadata["ownerReferences"] = [service_owner_reference(spec, owner_uid)]
    # An elastic job's gang is its least: the pods it grows by join a group already scheduled.
    group_spec = {"schedulingPolicy": {"gang": {"minCount": spec.min_nodes or len(spec.node_names)}}}
    return {"apiVersion": NATIVE_PODGROUP.api_version, "kind": NATIVE_PODGROUP.kind, "metadata": metadata, "spec": group_spec}


def podgroup_manifest(spec: GangSpec, options: PodOptions, owner_uid: str | None = None) -> dict[str, Any]:
    """The coscheduling PodGroup: schedule all `nodes` pods of the gang together or none of them."""
    metadata: dict[str, Any] = {"name": gang_name(spec.job_id, spec.attempt), "namespace": options.namespace, "labels": gang_labels(spec)}
    if owner_uid:
        metadata["ownerReferences"] = [service_owner_reference(spec, owner_uid)]
    group_spec: dict[str, Any] = {"minMember": len(spec.node_names)}
    if options.podgroup_schedule_timeout_seconds > 0:
        group_spec["scheduleTimeoutSeconds"] = int(options.podgroup_schedule_timeout_seconds)
    return {"apiVersion": PODGROUP.api_version, "kind": PODGROUP.kind, "metadata": metadata, "spec": group_spec}


def mpi_env(spec: GangSpec) -> dict[str, str]:
    """What Muster tells both MPI replicas; the operator adds the hostfile and its own variables."""
    return {
        **job_env(spec),
        "WORLD_SIZE": str(len(spec.node_names)),
        "NPROC_PER_NODE": str(spec.gpus_per_node),
        "MUSTER_JOB_ID": str(spec.job_id),
        "MUSTER_ATTEMPT": str(spec.attempt),
        **spec.muster_env(),
    }


def mpijob_manifest(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """One MPIJob per attempt: a launcher running the job's command and one worker per planned node."""
    nodes = len(spec.node_names)
    labels = gang_labels(spec)
    return {
        "apiVersion": MPIJOB.api_version,
        "kind": MPIJOB.kind,
        "metadata": {"name": gang_name(spec.job_id, spec.attempt), "namespace": options.namespace, "labels": labels},
        "spec": {
            # mpirun starts this many ranks per worker: one per GPU.
            "slotsPerWorker": spec.gpus_per_node,
            "runPolicy": {
                # Workers still running when the launcher ends are deleted by the operator.
                "cleanPodPolicy": "Running",
                # Muster retries a failed attempt itself (max_restarts), so the launcher Job never does.
                "backoffLimit": 0,
                "activeDeadlineSeconds": int(spec.wall_time_seconds),
            },
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "restartPolicy": "Never", "template": mpi_launcher_template(spec, options)},
                "Worker": {"replicas": nodes, "restartPolicy": "Never", "template": mpi_worker_template(spec, options)},
            },
        },
    }


def mpi_launcher_template(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """The launcher runs the job's command (e.g. `mpirun ... python train.py`); it holds no GPU."""
    labels = {**gang_labels(spec), LABEL_ROLE: ROLE_LAUNCHER}
    # The launcher's exit is the job's exit: the simulated exit code goes here.
    annotations = sim_annotations(spec, int(spec.simulate.get("exit_code", 0)) if spec.simulate else 0)
    resources = {"cpu": options.mpi_launcher_cpu, "memory": options.mpi_launcher_memory}
    container = locked_down_container("launcher", spec.image, list(spec.command), mpi_env(spec), resources, secret_env_refs(spec))
    pod_spec = base_pod_spec(spec, options, container)
    # Where every node is a tainted GPU node, the launcher must be allowed on one (it takes no GPU there).
    pod_spec["tolerations"] = [{"key": options.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}]
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": pod_spec}


def mpi_worker_template(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """Every worker: one node's GPUs, on one of the planned nodes, never two on one node.

    A worker asks for every GPU Muster holds for the gang on a node, as a pinned pod does (manifests.gpu_container).
    One template serves every worker, and which worker lands on which planned node is kube-scheduler's choice: of
    nodes of different sizes it asks the fewest held on any of them, so that every worker still fits on every one."""
    labels = {**gang_labels(spec), LABEL_ROLE: ROLE_WORKER}
    annotations = {**options.pod_annotations, **sim_annotations(spec, 0)}
    gpus = min(spec.gpus_on(rank) for rank in range(len(spec.node_names))) if spec.node_names else spec.gpus_per_node
    # No command: the operator starts sshd (`/usr/sbin/sshd -De`) in a worker whose template sets none.
    container = gpu_container(spec, options, "worker", mpi_env(spec), None, gpus=gpus)
    affinity = node_affinity(list(spec.node_names))
    worker_selector = {LABEL_JOB: labels[LABEL_JOB], LABEL_ATTEMPT: labels[LABEL_ATTEMPT], LABEL_ROLE: ROLE_WORKER}
    affinity["podAntiAffinity"] = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": worker_selector}, "topologyKey": HOSTNAME_LABEL}
        ]
    }
    return {"metadata": {"labels": labels, "annotations": annotations}, "spec": gang_pod_spec(spec, options, container, affinity)}
