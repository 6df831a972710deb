"""The Kubernetes objects of one gang attempt, as plain dicts: pure, so they are unit-tested and dry-run as they are.

One attempt of a job is a headless Service (rendezvous, and the owner of the rest,
so one delete removes the gang) and one pod per node, each pinned to the node the
scheduler chose by required node affinity, so kube-scheduler still validates and
binds it. Names derive from job id and attempt, so a retried launch finds its own
objects instead of doubling the gang.

The optional launch modes (`MUSTER_K8S_LAUNCH_MODE`) add to this: `workload` links the
pods to a native PodGroup (Kubernetes' own gang scheduling, KEP-4671), `podgroup` labels the
pods for a scheduler-plugins PodGroup, `mpijob` replaces Service and pods with a Kubeflow
MPIJob; their objects are built in jobs/cluster/crd_manifests.py from the same
pod parts as here.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from jobs.cluster.base import GangSpec, gang_name, pod_name
from jobs.validators import env_refusal

logger = logging.getLogger(__name__)

LABEL_JOB = "muster.io/job-id"
LABEL_ATTEMPT = "muster.io/attempt"
LABEL_RANK = "muster.io/rank"
LABEL_USER = "muster.io/user"
LABEL_TEAM = "muster.io/team"
# An array element's array and index, so `kubectl get pods -l muster.io/array-id=20` finds a sweep's pods.
LABEL_ARRAY_ID = "muster.io/array-id"
LABEL_ARRAY_INDEX = "muster.io/array-index"
LABEL_MANAGED = "app.kubernetes.io/managed-by"
MANAGED_BY = "muster"
# Read only by the test cluster's KWOK stages: how long a fake pod "runs" and how it exits.
ANNOTATION_SIM_DURATION = "muster.io/sim-duration"
ANNOTATION_SIM_EXIT_CODE = "muster.io/sim-exit-code"
HOSTNAME_LABEL = "kubernetes.io/hostname"
# The coscheduling plugin's label: which PodGroup a pod belongs to (scheduler-plugins >= v0.24.9).
LABEL_POD_GROUP = "scheduling.x-k8s.io/pod-group"

# MUSTER_K8S_LAUNCH_MODE: bare pods (any cluster), pods plus a coscheduling PodGroup, or one Kubeflow MPIJob.
LAUNCH_PODS = "pods"
LAUNCH_PODGROUP = "podgroup"
LAUNCH_MPIJOB = "mpijob"
LAUNCH_WORKLOAD = "workload"
LAUNCH_MODES = (LAUNCH_PODS, LAUNCH_WORKLOAD, LAUNCH_PODGROUP, LAUNCH_MPIJOB)


@dataclass(frozen=True)
class PodOptions:
    """What a site sets about the pods Muster creates (settings MUSTER_K8S_*)."""

    namespace: str = "muster-jobs"
    gpu_resource: str = "nvidia.com/gpu"
    cpu_per_gpu: str = "8"
    memory_per_gpu: str = "64Gi"
    shm_size: str = "32Gi"
    master_port: int = 29500
    termination_grace_seconds: int = 30
    # Extra resources per pod, e.g. {"rdma/hca_shared_devices_a": "1"} or an SR-IOV VF resource.
    extra_resources: dict[str, str] = field(default_factory=dict)
    # The extended resource RDMA/SR-IOV devices are advertised as; a job's rdma_per_node asks for that many per pod.
    rdma_resource: str = ""
    # GPU sharing: the renamed time-slicing/MPS replicas' resource, and the prefix of MIG instances' (docs/gpu-sharing.md).
    shared_gpu_resource: str = "nvidia.com/gpu.shared"
    mig_resource_prefix: str = "nvidia.com/mig-"
    # e.g. {"k8s.v1.cni.cncf.io/networks": "roce-net"} for multus.
    pod_annotations: dict[str, str] = field(default_factory=dict)
    # Muster's priority class -> the Kubernetes PriorityClass its jobs' pods name (MUSTER_K8S_PRIORITY_CLASSES).
    priority_class_names: dict[str, str] = field(default_factory=dict)
    image_pull_secret: str = ""
    service_account: str = ""
    launch_mode: str = LAUNCH_PODS
    # spec.schedulerName of every pod Muster makes; empty means the cluster's default scheduler.
    scheduler_name: str = ""
    # PodGroup spec.scheduleTimeoutSeconds; 0 leaves it to the coscheduling plugin's default.
    podgroup_schedule_timeout_seconds: int = 0
    # What an MPIJob's launcher (mpirun, no GPUs) requests.
    mpi_launcher_cpu: str = "1"
    mpi_launcher_memory: str = "2Gi"
    # The uid (and gid, fsGroup) pods run as unless their team may run as root; the image's USER is not trusted.
    run_as_user: int = 1000

    def __post_init__(self) -> None:
        if self.launch_mode not in LAUNCH_MODES:
            raise ValueError(f"launch mode {self.launch_mode!r}: choose one of {', '.join(LAUNCH_MODES)}")


def label_value(text: str) -> str:
    """A string as a valid label value (<= 63 chars of [A-Za-z0-9._-], alphanumeric at both ends)."""
    value = re.sub(r"[^A-Za-z0-9._-]", "_", text)[:63]
    return value.strip("._-")


def env_secret_name(job_id: int, attempt: int) -> str:
    return f"{gang_name(job_id, attempt)}-env"


def gang_selector(job_id: int, attempt: int | None = None) -> str:
    selector = f"{LABEL_JOB}={job_id}"
    return selector if attempt is None else f"{selector},{LABEL_ATTEMPT}={attempt}"


def gang_labels(spec: GangSpec) -> dict[str, str]:
    labels = {
        LABEL_MANAGED: MANAGED_BY,
        LABEL_JOB: str(spec.job_id),
        LABEL_ATTEMPT: str(spec.attempt),
        LABEL_USER: label_value(spec.owner),
    }
    if spec.team:
        labels[LABEL_TEAM] = label_value(spec.team)
    if spec.array_id is not None:
        labels[LABEL_ARRAY_ID], labels[LABEL_ARRAY_INDEX] = str(spec.array_id), str(spec.array_index or 0)
    return labels


def service_manifest(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """Headless Service: stable DNS names `<pod>.<service>` for rendezvous, and the owner of the gang's pods."""
    return _service(gang_labels(spec), gang_ports(spec, options, "port"), options)


# The labels a gang's Service carries: its pods' but for what differs between ranks (rank, an MPIJob's index...).
_SERVICE_LABELS = (LABEL_MANAGED, LABEL_JOB, LABEL_ATTEMPT, LABEL_USER, LABEL_TEAM, LABEL_ARRAY_ID, LABEL_ARRAY_INDEX)


def service_manifest_of_pod(labels: Mapping[str, str], container_ports: Sequence[tuple[str, int]], options: PodOptions) -> dict[str, Any]:
    """The Service `service_manifest` made for a running gang, made again from one of its pods (its labels, its
    container's (name, port)s): the pods outlived it (`kubectl delete service --cascade=orphan`) and name each other by
    it."""
    ports = [{"name": name, "port": port, "targetPort": port} for name, port in container_ports]
    return _service({key: labels[key] for key in _SERVICE_LABELS if key in labels}, ports, options)


def _service(labels: dict[str, str], ports: list[dict[str, Any]], options: PodOptions) -> dict[str, Any]:
    name = gang_name(int(labels[LABEL_JOB]), int(labels[LABEL_ATTEMPT]))
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": options.namespace, "labels": labels},
        "spec": {
            "clusterIP": "None",
            "selector": {LABEL_JOB: labels[LABEL_JOB], LABEL_ATTEMPT: labels[LABEL_ATTEMPT]},
            "ports": ports,
            # Ranks must resolve each other before they are ready: rendezvous is what makes them ready.
            "publishNotReadyAddresses": True,
        },
    }


def env_secret_manifest(spec: GangSpec, options: PodOptions, owner_reference: dict[str, Any] | None = None) -> dict[str, Any]:
    """The gang's `secret_env` (its telemetry push token): pods reference it, so it is not in their spec for anyone
    who may read pods. Owned by what owns the pods, so it goes with the gang."""
    metadata: dict[str, Any] = {
        "name": env_secret_name(spec.job_id, spec.attempt),
        "namespace": options.namespace,
        "labels": gang_labels(spec),
    }
    if owner_reference:
        metadata["ownerReferences"] = [owner_reference]
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque", "stringData": dict(spec.secret_env)}


def secret_env_refs(spec: GangSpec) -> list[dict[str, Any]]:
    name = env_secret_name(spec.job_id, spec.attempt)
    return [{"name": key, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}} for key in sorted(spec.secret_env)]


def rendezvous_env(spec: GangSpec, rank: int, options: PodOptions) -> dict[str, str]:
    """What torchrun (and most launchers) read; rank 0's pod is the master."""
    service = gang_name(spec.job_id, spec.attempt)
    master = f"{pod_name(spec.job_id, spec.attempt, 0)}.{service}.{options.namespace}.svc"
    nodes = str(len(spec.node_names))
    fixed_size = {
        # One process per pod, as Kubeflow's PyTorchJob counts them: a script started with `python` (not torchrun)
        # and init_process_group("env://") joins as rank NODE_RANK of the pods. torchrun sets both anew for each worker.
        "WORLD_SIZE": nodes,
        "RANK": str(rank),
        # torchrun's static rendezvous (its PET_* variables read as its flags), so `torchrun train.py` joins the
        # gang as it is: without them it runs as a one-node job of its own on every pod.
        "PET_NNODES": nodes,
        "PET_NODE_RANK": str(rank),
        "PET_MASTER_ADDR": master,
        "PET_MASTER_PORT": str(options.master_port),
        # One line per rank's host, for MPI launchers (`mpirun --hostfile`).
        "MUSTER_HOSTS": ",".join(f"{pod_name(spec.job_id, spec.attempt, r)}.{service}" for r in range(len(spec.node_names))),
    }
    return {
        "MASTER_ADDR": master,
        "MASTER_PORT": str(options.master_port),
        "NODE_RANK": str(rank),
        "NPROC_PER_NODE": str(spec.gpus_per_node),
        # torchrun's --nproc-per-node: one worker per GPU the job asked for on the node.
        "PET_NPROC_PER_NODE": str(spec.gpus_per_node),
        "MUSTER_JOB_ID": str(spec.job_id),
        "MUSTER_ATTEMPT": str(spec.attempt),
        # An elastic job's size changes under its running pods, whose environment cannot: it gets its members from
        # torchrun's rendezvous (elastic_env), not from figures that would be wrong after the first resize.
        **({} if spec.min_nodes else fixed_size),
        **spec.muster_env(),
        **elastic_env(spec, options),
    }


# torchrun's c10d rendezvous port (its default), served by rank 0's pod.
RDZV_PORT = 29400


def gang_ports(spec: GangSpec, options: PodOptions, key: str) -> list[dict[str, Any]]:
    """The ports the gang's pods serve each other, as the Service (`key` "port") and the container ("containerPort")
    declare them: the master port, and an elastic job's c10d rendezvous, where its PET_RDZV_ENDPOINT points (it
    declared 29500 alone, "rendezvous", while its ranks meet on 29400: a NetworkPolicy or mesh written from the
    declared ports would keep them apart)."""
    ports: list[dict[str, Any]] = [{"name": "rendezvous", key: options.master_port}]
    if spec.min_nodes:
        ports.append({"name": "c10d-rendezvous", key: RDZV_PORT})
    if key == "port":
        for port in ports:
            port["targetPort"] = port["port"]
    return ports


def elastic_env(spec: GangSpec, options: PodOptions) -> dict[str, str]:
    """torchrun's elastic settings (its PET_* variables: no flags needed): --nnodes=MIN:MAX with a c10d rendezvous on rank 0,
    which never goes when the job shrinks; every membership change restarts the workers from their last checkpoint."""
    if not spec.min_nodes:
        return {}
    service = gang_name(spec.job_id, spec.attempt)
    return {
        # The range the job asked for (2:40 on a cluster of 16 nodes), not the nodes there are now: a c10d rendezvous
        # admits no more than MAX members, so a node the job grows onto once the cluster has more would wait outside
        # it (charged to the job, running no worker) with 2:16. MAX makes no round wait for nodes that do not exist:
        # a round closes once MIN have joined and its last-call timeout passes, and each node that joins later
        # reopens it, up to MAX.
        "PET_NNODES": f"{spec.min_nodes}:{spec.max_nodes}",
        "PET_RDZV_BACKEND": "c10d",
        "PET_RDZV_ENDPOINT": f"{pod_name(spec.job_id, spec.attempt, 0)}.{service}.{options.namespace}.svc:{RDZV_PORT}",
        "PET_RDZV_ID": service,
        "PET_MAX_RESTARTS": "100",
    }


def pod_manifest(spec: GangSpec, rank: int, options: PodOptions, owner_uid: str | None = None) -> dict[str, Any]:
    node = spec.node_names[rank]
    labels = {**gang_labels(spec), LABEL_RANK: str(rank)}
    if options.launch_mode == LAUNCH_PODGROUP:
        labels[LABEL_POD_GROUP] = gang_name(spec.job_id, spec.attempt)
    # A failing job fails on its last rank, the way one bad rank takes a gang down (as in the simulated cluster).
    exit_code = int(spec.simulate.get("exit_code", 0)) if rank == len(spec.node_names) - 1 else 0
    annotations = {**options.pod_annotations, **sim_annotations(spec, exit_code)}
    env = {**job_env(spec), **rendezvous_env(spec, rank, options)}
    metadata: dict[str, Any] = {
        "name": pod_name(spec.job_id, spec.attempt, rank),
        "namespace": options.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if owner_uid:
        metadata["ownerReferences"] = [service_owner_reference(spec, owner_uid)]
    container = gpu_container(spec, options, "main", env, list(spec.command), gpus=spec.gpus_on(rank))
    container["ports"] = gang_ports(spec, options, "containerPort")
    pod_spec = gang_pod_spec(spec, options, container, node_affinity([node]))
    pod_spec["hostname"] = pod_name(spec.job_id, spec.attempt, rank)
    pod_spec["subdomain"] = gang_name(spec.job_id, spec.attempt)
    if options.launch_mode == LAUNCH_WORKLOAD:
        # kube-scheduler binds none of the gang's pods until it can bind all of them (its GangScheduling plugin).
        pod_spec["schedulingGroup"] = {"podGroupName": gang_name(spec.job_id, spec.attempt)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}


# --- the parts every pod Muster makes shares (bare pods here, MPIJob templates in crd_manifests.py) --------------------


def service_owner_reference(spec: GangSpec, owner_uid: str) -> dict[str, Any]:
    """The gang's Service owns its pods (and its PodGroup): one delete removes the gang."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "name": gang_name(spec.job_id, spec.attempt),
        "uid": owner_uid,
        "blockOwnerDeletion": True,
        # A controller, so `kubectl drain` evicts the pods (it refuses pods no controller manages, short of --force);
        # the eviction is then a disruption Muster requeues the gang for, spending no restart.
        "controller": True,
    }


def sim_annotations(spec: GangSpec, exit_code: int) -> dict[str, str]:
    """Read only by the test cluster's KWOK stages: how long the pod "runs" and how it exits."""
    if not spec.simulate:
        return {}
    return {
        ANNOTATION_SIM_DURATION: f"{float(spec.simulate.get('duration_seconds', 30)):g}s",
        ANNOTATION_SIM_EXIT_CODE: str(exit_code),
    }


def node_affinity(nodes: list[str]) -> dict[str, Any]:
    """Required: only these nodes (one for a pinned rank; the planned set for MPIJob workers)."""
    term = {"matchExpressions": [{"key": HOSTNAME_LABEL, "operator": "In", "values": list(nodes)}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def locked_down_container(
    name: str,
    image: str,
    command: list[str] | None,
    env: dict[str, str],
    resources: dict[str, str],
    secret_refs: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """No privilege, no added capabilities; `command` None keeps the image's entrypoint. `secret_refs` win over `env`."""
    container: dict[str, Any] = {"name": name, "image": image}
    if command is not None:
        container["command"] = command
    secret_refs = secret_refs or []
    from_secret = {ref["name"] for ref in secret_refs}
    container.update(
        {
            "env": [{"name": k, "value": v} for k, v in sorted(env.items()) if k not in from_secret] + secret_refs,
            "resources": {"requests": resources, "limits": resources},
            "securityContext": {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}},
            # /tmp stays writable on a read-only root filesystem (base_pod_spec adds the volume).
            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        }
    )
    return container


def job_env(spec: GangSpec) -> dict[str, str]:
    """The job's own environment without what a job may never set (jobs/validators.py REFUSED_ENV).

    Submit refuses those names; this drops them again for jobs stored before the rule existed.
    """
    kept = {}
    for name, value in spec.env.items():
        if env_refusal(name):
            logger.warning("job %s: dropped %s from the pods' environment (a job may not set it)", spec.job_id, name)
        else:
            kept[name] = value
    return kept


def gpu_container(
    spec: GangSpec, options: PodOptions, name: str, env: dict[str, str], command: list[str] | None, *, gpus: int
) -> dict[str, Any]:
    """One node's share of the job: the `gpus` GPUs Muster holds for it there (or its one GPU slice), CPU and memory,
    extra (RDMA) resources, and /dev/shm for NCCL.

    A job that holds its nodes whole asks for every GPU of each (GangSpec.gpus_held), though it uses `gpus_per_node`:
    asking for fewer left the rest to kube-scheduler, which bound pods Muster did not start onto GPUs the job is
    charged for. CPU and memory stay sized by `gpus_per_node`, what the job runs. A slice job gets its slice's share
    of a GPU's CPU and memory: a node sized for its GPUs then has the host room for every slice it offers (a whole
    GPU's each, 32 quarter slices would ask a 96-CPU node for 256 CPUs, and two in three would never start)."""
    if spec.gpu_slice:
        cpu = _share_of(options.cpu_per_gpu, spec.gpu_slice.share, "m", 1e-3)
        memory = _share_of(options.memory_per_gpu, spec.gpu_slice.share, "Mi", 2**20)
    else:
        cpu = _times(options.cpu_per_gpu, spec.gpus_per_node)
        memory = _times(options.memory_per_gpu, spec.gpus_per_node)
    asked = {spec.gpu_slice.resource: "1"} if spec.gpu_slice else {options.gpu_resource: str(gpus)}
    resources = {**asked, "cpu": cpu, "memory": memory, **options.extra_resources}
    if spec.rdma_per_node and options.rdma_resource:
        resources[options.rdma_resource] = str(spec.rdma_per_node)
    container = locked_down_container(name, spec.image, command, env, resources, secret_env_refs(spec))
    container["volumeMounts"].append({"name": "dshm", "mountPath": "/dev/shm"})
    return container


def gang_pod_spec(spec: GangSpec, options: PodOptions, container: dict[str, Any], affinity: dict[str, Any]) -> dict[str, Any]:
    """A GPU pod of the gang: restrictive, deadline-bound, tolerating the GPU taint, with a memory-backed /dev/shm."""
    pod_spec = base_pod_spec(spec, options, container)
    pod_spec["hostNetwork"] = spec.host_network
    pod_spec["affinity"] = affinity
    # The GPU operator taints GPU nodes; Muster's pods are meant for them.
    pod_spec["tolerations"] = [{"key": options.gpu_resource, "operator": "Exists", "effect": "NoSchedule"}]
    # NCCL needs a large /dev/shm; the default 64 MiB makes multi-GPU collectives fail.
    pod_spec["volumes"].append({"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": options.shm_size}})
    return pod_spec


def pod_security_context(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """Non-root (the site's uid, whatever the image's USER says) unless the job's team may run as root."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if not spec.run_as_root:
        uid = options.run_as_user
        context.update({"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid})
    return context


def base_pod_spec(spec: GangSpec, options: PodOptions, container: dict[str, Any]) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": int(spec.wall_time_seconds),
        "terminationGracePeriodSeconds": options.termination_grace_seconds,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "hostNetwork": False,
        "securityContext": pod_security_context(spec, options),
        "containers": [container],
        "volumes": [{"name": "tmp", "emptyDir": {}}],
    }
    container["securityContext"]["readOnlyRootFilesystem"] = not spec.writable_root_filesystem
    # The team's data: claims in the jobs' namespace only (a pod cannot name another's), never host paths.
    for index, (claim, path, read_only) in enumerate(spec.volumes):
        name = f"data-{index}"
        pod_spec["volumes"].append({"name": name, "persistentVolumeClaim": {"claimName": claim, "readOnly": read_only}})
        container["volumeMounts"].append({"name": name, "mountPath": path, "readOnly": read_only})
    if options.scheduler_name:
        pod_spec["schedulerName"] = options.scheduler_name
    if priority_class_name := options.priority_class_names.get(spec.priority_class):
        pod_spec["priorityClassName"] = priority_class_name
    pull_secrets = [*([options.image_pull_secret] if options.image_pull_secret else []), *spec.image_pull_secrets]
    if pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in dict.fromkeys(pull_secrets)]
    if options.service_account:
        pod_spec["serviceAccountName"] = options.service_account
    return pod_spec


_QUANTITY = re.compile(r"^(\d+(?:\.\d+)?)([A-Za-z]*)$")


# What a quantity's suffix multiplies it by (Kubernetes' resource.Quantity: binary and decimal SI, milli).
_SUFFIXES = {
    "": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
    "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40,
}  # fmt: skip


def _share_of(quantity: str, share: float, unit: str, unit_size: float) -> str:
    """A share of a quantity, rounded up to whole `unit`s: '8' x 0.25 -> '2000m'; '64Gi' x 1/7 -> '9363Mi'."""
    match = _QUANTITY.match(quantity.strip())
    if not match or match.group(2) not in _SUFFIXES:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    base = float(match.group(1)) * _SUFFIXES[match.group(2)]
    return f"{math.ceil(base * share / unit_size - 1e-9)}{unit}"


def _times(quantity: str, n: int) -> str:
    """'64Gi' x 8 -> '512Gi'; '8' x 2 -> '16'; '500m' x 3 -> '1500m'."""
    match = _QUANTITY.match(quantity.strip())
    if not match:
        raise ValueError(f"not a Kubernetes quantity: {quantity!r}")
    number, unit = match.groups()
    value = float(number) * n
    return f"{value:g}{unit}" if value != int(value) else f"{int(value)}{unit}"
