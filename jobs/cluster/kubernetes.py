"""The Kubernetes backend: each job attempt is a headless Service and one pod per node (jobs/cluster/manifests.py).

MUSTER_K8S_LAUNCH_MODE picks how a gang is made (jobs/cluster/crd_manifests.py):
`pods` (the default; any cluster), `workload` (the same plus Kubernetes' own gang
PodGroup, KEP-4671, created before the pods), `podgroup` (the same plus a scheduler-plugins
coscheduling PodGroup) or `mpijob` (one Kubeflow MPIJob whose
operator makes the pods; its status and launcher decide the gang's outcome).

Talks to the API server with the official client. Every call that fails because
the server cannot be reached (connection errors, 5xx, 429) raises
`ClusterUnavailable`, so the cycle keeps jobs queued and tries again.
"""

from __future__ import annotations

import codecs
import json
import logging
import math
import re
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from django import db
from django.conf import settings
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils import parse_quantity
from urllib3.exceptions import HTTPError
from urllib3.util.retry import Retry

from jobs.cluster.base import (
    DEADLINE_EXCEEDED,
    LAUNCH_ERRORS,
    MIG_COMPUTE_SLICES,
    MISSING_VOLUME_CLAIM,
    UNSCHEDULABLE,
    CapturedLog,
    ClusterDeletingGangs,
    ClusterNode,
    ClusterRefuses,
    ClusterUnavailable,
    GangSpec,
    LaunchRefused,
    PodPhase,
    PodStatus,
    gang_name,
    pod_name,
    refused_by_node,
    stopped_by_cluster,
)
from jobs.cluster.crd_manifests import (
    LABEL_ROLE,
    MPI_REPLICA_INDEX_LABEL,
    MPIJOB,
    NATIVE_PODGROUP,
    PODGROUP,
    ROLE_LAUNCHER,
    CustomResource,
    mpijob_manifest,
    native_podgroup_manifest,
    podgroup_manifest,
)
from jobs.cluster.manifests import (
    LABEL_ATTEMPT,
    LABEL_JOB,
    LABEL_MANAGED,
    LABEL_POD_GROUP,
    LABEL_RANK,
    LAUNCH_MPIJOB,
    LAUNCH_PODGROUP,
    LAUNCH_PODS,
    LAUNCH_WORKLOAD,
    MANAGED_BY,
    PodOptions,
    env_secret_manifest,
    env_secret_name,
    gang_selector,
    pod_manifest,
    service_manifest,
    service_manifest_of_pod,
    service_owner_reference,
)

logger = logging.getLogger(__name__)
# What Muster does on the cluster (verb, API group, resource, scope), as platform/kubernetes/rbac.yaml grants it.
NEEDED_ACCESS: tuple[tuple[str, str, str, str], ...] = (
    ("create", "", "pods", "namespace"),
    ("list", "", "pods", "namespace"),
    ("watch", "", "pods", "namespace"),
    ("deletecollection", "", "pods", "namespace"),
    ("get", "", "pods/log", "namespace"),
    ("create", "", "services", "namespace"),
    ("get", "", "services", "namespace"),
    ("delete", "", "services", "namespace"),
    ("create", "", "secrets", "namespace"),
    ("list", "", "nodes", "cluster"),
    ("watch", "", "nodes", "cluster"),
)
# The identity platform/kubernetes/rbac.yaml binds its roles to: Muster's own ServiceAccount in the cluster, in the
# namespace muster or the one a site renamed it to.
RBAC_SERVICE_ACCOUNT = re.compile(r"system:serviceaccount:[^:]+:muster")
# Pods bound to a node and not ended: those kube-scheduler counts against the node's allocatable resources.
BOUND_PODS_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
MODE_ACCESS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    LAUNCH_PODGROUP: (("create", PODGROUP.group, PODGROUP.plural, "namespace"), ("delete", PODGROUP.group, PODGROUP.plural, "namespace")),
    LAUNCH_WORKLOAD: tuple((verb, NATIVE_PODGROUP.group, NATIVE_PODGROUP.plural, "namespace") for verb in ("create", "delete")),
    LAUNCH_MPIJOB: tuple((verb, MPIJOB.group, MPIJOB.plural, "namespace") for verb in ("create", "get", "list", "delete")),
}
# The launch modes whose gang is pods plus a group object the gang scheduler reads, created before the pods.
GROUP_OF_MODE: dict[str, tuple[CustomResource, Callable[..., dict[str, Any]]]] = {
    LAUNCH_WORKLOAD: (NATIVE_PODGROUP, native_podgroup_manifest),
    LAUNCH_PODGROUP: (PODGROUP, podgroup_manifest),
}
# Namespaces this process has found or made, and when: `prepare` checks them in full (namespace, every verb) every few
# minutes; between those, one dry-run create per cycle (`_refusal`) sees a namespace deleted, being deleted or a role
# cut before the cycle places anything, so jobs wait instead of spending launches the cluster would refuse.
_NAMESPACES_SEEN: dict[str, float] = {}
_NAMESPACE_RECHECK_SECONDS = 300.0
# What the per-cycle check creates with dryRun=All (nothing is stored): a headless Service, which the shipped Role lets
# Muster create, so the API server's RBAC and its NamespaceLifecycle admission both answer as they would a launch.
_CHECK_SERVICE = {"metadata": {"name": "muster-namespace-check"}, "spec": {"clusterIP": "None"}}
# Why the cluster refuses new objects in the jobs' namespace for causes of its own, as `_cluster_refusal` reads them.
NAMESPACE_GONE = "gone"
NAMESPACE_TERMINATING = "terminating"
ACCESS_DENIED = "forbidden"
# The API server's words: NamespaceLifecycle's for a namespace that is not there or is being deleted, RBAC's for a verb
# its roles do not grant (`pods "x" is forbidden: User "..." cannot create resource "pods" in API group "" ...`).
_NAMESPACE_NOT_FOUND = re.compile(r'namespaces "[^"]+" not found')
_NAMESPACE_BEING_DELETED = "because it is being terminated"
_RBAC_REFUSAL = re.compile(r'cannot \S+ resource "')
# Muster's hold of a node (jobs/node_holds.py) as the Node shows it, so an operator sees it with kubectl (`kubectl get
# nodes -L muster.io/held`, the reason in `kubectl describe node`): a label and an annotation, which only Muster writes
# (a node held in Muster is marked, one not held is unmarked, whoever set them). Not a taint: a hold keeps Muster's
# own placements off the node, and a taint would keep every other tenant's pods off too (docs/admin.md).
HELD_LABEL = "muster.io/held"
HELD_REASON_ANNOTATION = "muster.io/held-reason"
# API server -> when marking a hold was last refused (Muster's role lacks `patch nodes`: platform/kubernetes/node-holds.yaml
# grants it): said once in the log, then tried again every few minutes, quietly, until it is allowed.
_HOLD_MARKS_REFUSED: dict[str, float] = {}
_HOLD_MARKS_RETRY_SECONDS = 300.0
# (API server, jobs' namespace) -> (when read, the watch's version of them then, per node what other pods hold there):
# every pod in the cluster is read once per `foreign_pods_seconds`, not every cycle (benchmarks/bench_node_inventory.py:
# ~0.45 s per 2,000 pods here), or sooner when the watch has seen one come or go (`note_foreign_pods_version`).
_FOREIGN_READ: dict[tuple[str, str], tuple[float, int | None, dict[str, Counter[str]]]] = {}


def namespace_missing(namespace: str) -> str:
    return (
        f"The namespace {namespace!r} for jobs does not exist and Muster may not create it: run "
        f"`kubectl create namespace {namespace}` (or set MUSTER_K8S_NAMESPACE to an existing namespace)."
    )


def namespace_terminating(namespace: str) -> ClusterDeletingGangs:
    """The refusal of a jobs' namespace being deleted: its controller deletes every pod in it, so the cycle follows the
    running gangs (their jobs requeued as their pods go) while it places nothing."""
    return ClusterDeletingGangs(_namespace_terminating_text(namespace), cause=f"the namespace {namespace!r} for jobs is being deleted")


def _namespace_terminating_text(namespace: str) -> str:
    return (
        f"The namespace {namespace!r} for jobs is being deleted (Terminating until its objects and finalizers are gone): "
        "the running jobs whose pods it deletes are requeued, spending no restart, and jobs wait, none launched or "
        "spending a launch, until it is gone and made again (by Muster where it may "
        f"create namespaces; else `kubectl create namespace {namespace}`, then apply platform/kubernetes/rbac.yaml there)."
    )


def _cluster_refusal(exc: ApiException) -> str:
    """Whether the API server refused a create for a cause of the cluster's, not the object's: the jobs' namespace gone
    (NAMESPACE_GONE) or being deleted (NAMESPACE_TERMINATING), or a verb Muster's roles do not grant (ACCESS_DENIED);
    "" for anything else (a ResourceQuota, an admission webhook, an invalid manifest)."""
    said = _api_message(exc)
    if exc.status == 404 and _NAMESPACE_NOT_FOUND.search(said):
        return NAMESPACE_GONE
    if exc.status == 403 and _NAMESPACE_BEING_DELETED in said:
        return NAMESPACE_TERMINATING
    if exc.status == 403 and _RBAC_REFUSAL.search(said):
        return ACCESS_DENIED
    return ""


T = TypeVar("T")
# Logs are read in pieces this size: a capture keeps only the end, a follow passes each piece on as it comes.
LOG_CHUNK_BYTES = 64 * 1024

# Pod creates in flight at once per launch; within urllib3's default pool of 10 connections per host.
LAUNCH_CONCURRENCY = 8
# Taints that keep Muster's pods off a node; the GPU operator's own taint is tolerated (see manifests).
_BLOCKING_TAINT_EFFECTS = {"NoSchedule", "NoExecute"}


def options_from_settings() -> PodOptions:
    return PodOptions(
        namespace=settings.MUSTER_K8S_NAMESPACE,
        gpu_resource=settings.MUSTER_K8S_GPU_RESOURCE,
        cpu_per_gpu=settings.MUSTER_K8S_CPU_PER_GPU,
        memory_per_gpu=settings.MUSTER_K8S_MEMORY_PER_GPU,
        shm_size=settings.MUSTER_K8S_SHM_SIZE,
        master_port=settings.MUSTER_K8S_MASTER_PORT,
        termination_grace_seconds=settings.MUSTER_K8S_TERMINATION_GRACE_SECONDS,
        extra_resources=dict(settings.MUSTER_K8S_EXTRA_RESOURCES),
        rdma_resource=settings.MUSTER_K8S_RDMA_RESOURCE,
        shared_gpu_resource=settings.MUSTER_K8S_SHARED_GPU_RESOURCE,
        mig_resource_prefix=settings.MUSTER_K8S_MIG_RESOURCE_PREFIX,
        pod_annotations=dict(settings.MUSTER_K8S_POD_ANNOTATIONS),
        priority_class_names=dict(settings.MUSTER_K8S_PRIORITY_CLASSES),
        image_pull_secret=settings.MUSTER_K8S_IMAGE_PULL_SECRET,
        service_account=settings.MUSTER_K8S_SERVICE_ACCOUNT,
        launch_mode=settings.MUSTER_K8S_LAUNCH_MODE,
        scheduler_name=settings.MUSTER_K8S_SCHEDULER_NAME,
        podgroup_schedule_timeout_seconds=settings.MUSTER_K8S_PODGROUP_SCHEDULE_TIMEOUT_SECONDS,
        mpi_launcher_cpu=settings.MUSTER_K8S_MPI_LAUNCHER_CPU,
        mpi_launcher_memory=settings.MUSTER_K8S_MPI_LAUNCHER_MEMORY,
        run_as_user=settings.MUSTER_K8S_RUN_AS_USER,
    )


def api_client_from_settings() -> client.ApiClient:
    """From KUBECONFIG (or MUSTER_K8S_KUBECONFIG), else the in-cluster service account."""
    path = settings.MUSTER_K8S_KUBECONFIG
    configuration = client.Configuration()
    try:
        if path:
            config.load_kube_config(config_file=path, client_configuration=configuration)
        else:
            config.load_incluster_config(client_configuration=configuration)
    except (config.ConfigException, OSError) as exc:
        raise ClusterUnavailable(f"no Kubernetes configuration: {exc}") from exc
    # One more try for a connection that failed (a pooled one the server closed), none for a request that got no
    # answer in MUSTER_K8S_REQUEST_TIMEOUT_SECONDS: urllib3's default 3 retries made each call to a stalled API server
    # wait four timeouts, and the cycle (or a cancel) with it. The next cycle tries again anyway.
    configuration.retries = Retry(total=1, read=0, status=0)
    # The cycle, the watch threads and a launch's concurrent creates share the pool.
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, LAUNCH_CONCURRENCY + 4)
    return client.ApiClient(configuration)


def _unavailable(exc: Exception) -> bool:
    if isinstance(exc, ApiException):
        return exc.status is None or exc.status == 0 or exc.status == 429 or exc.status >= 500
    return isinstance(exc, HTTPError | OSError)


@dataclass
class KubernetesCluster:
    api: client.ApiClient
    options: PodOptions = field(default_factory=PodOptions)
    rack_label: str = "topology.kubernetes.io/zone"
    block_label: str = ""
    gpu_model_label: str = "nvidia.com/gpu.product"
    request_timeout: float = 10.0
    simulated: bool = False
    # Count the GPUs held on the nodes by pods Muster did not start (another scheduler's, a notebook's): they are not
    # free to Muster. Off only where the GPU nodes are Muster's alone; on, it needs cluster-wide read of pods.
    count_foreign_pods: bool = True
    # How long a read of them serves later cycles of this process (0: read every cycle).
    foreign_pods_seconds: float = 0.0
    # The watch's count of their changes, as the cycle last told it (`note_foreign_pods_version`); None: not told.
    _foreign_version: int | None = field(default=None, init=False, repr=False, compare=False)
    # What the last observe_gangs mended of a gang on its own (gang_notes), by (job id, attempt).
    _notes: dict[tuple[int, int], list[str]] = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def from_settings(cls) -> KubernetesCluster:
        return cls(
            api=api_client_from_settings(),
            options=options_from_settings(),
            rack_label=settings.MUSTER_K8S_RACK_LABEL,
            block_label=settings.MUSTER_K8S_BLOCK_LABEL,
            gpu_model_label=settings.MUSTER_K8S_GPU_MODEL_LABEL,
            request_timeout=settings.MUSTER_K8S_REQUEST_TIMEOUT_SECONDS,
            count_foreign_pods=settings.MUSTER_K8S_COUNT_FOREIGN_PODS,
            foreign_pods_seconds=settings.MUSTER_K8S_FOREIGN_PODS_SECONDS,
        )

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def custom(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, _request_timeout=self.request_timeout, **kwargs)
        except Exception as exc:
            if _unavailable(exc):
                raise ClusterUnavailable(f"Kubernetes API server unreachable ({what}): {exc}") from exc
            raise

    # --- the namespace ---------------------------------------------------------------------------

    def prepare(self) -> None:
        """Create the jobs' namespace if it is missing and Muster may, and check Muster may create pods there; else
        say exactly what to do (ClusterRefuses: jobs wait, spending no launch, and the pages show the message).

        Every cycle: a namespace deleted under a running Muster is made again by the next cycle, not by the next
        launch (which the cluster refused, spending it), and one being deleted keeps jobs waiting until it is gone."""
        namespace = self.options.namespace
        if time.monotonic() - _NAMESPACES_SEEN.get(namespace, -math.inf) < _NAMESPACE_RECHECK_SECONDS:
            if not self._refusal(namespace):
                return
            _NAMESPACES_SEEN.pop(namespace, None)  # checked in full below: made again, or what is missing said
        try:
            found = self._call("read namespace", self.core.read_namespace, namespace)
        except ApiException as exc:
            # 403: a role in the namespace cannot read Namespace objects (the shipped RBAC); the review below says
            # whether it may start pods there, which it cannot where the namespace is missing.
            if exc.status == 404:
                self._create_namespace(namespace)
            elif exc.status != 403:
                raise
        else:
            if found.status is not None and found.status.phase == "Terminating":
                raise namespace_terminating(namespace)
        self._check_may_launch(namespace)
        # Also where Muster may not read namespaces: one being deleted refuses new objects, whatever the roles say.
        if self._refusal(namespace) == NAMESPACE_TERMINATING:
            raise namespace_terminating(namespace)
        _NAMESPACES_SEEN[namespace] = time.monotonic()

    def _refusal(self, namespace: str) -> str:
        """Whether the jobs' namespace takes new objects now, by a dry-run create (one request, nothing stored): "" when
        it does, else `_cluster_refusal`'s answer. Anything else the API server says (a webhook that takes no dry runs)
        is left to the launches."""
        try:
            self._call("check namespace", self.core.create_namespaced_service, namespace, _CHECK_SERVICE, dry_run="All")
        except ApiException as exc:
            return "" if exc.status == 409 else _cluster_refusal(exc)
        return ""

    def _check_may_launch(self, namespace: str) -> None:
        # Any signed-in identity may ask what it may do (SelfSubjectAccessReview): one question per call Muster makes.
        needed = [*NEEDED_ACCESS, *MODE_ACCESS.get(self.options.launch_mode, ())]
        missing = [
            (f"{verb} {resource}", scope)
            for verb, group, resource, scope in needed
            if not self._may(verb, group, resource, scope, namespace)
        ]
        in_namespace = [what for what, scope in missing if scope == "namespace"]
        # Nodes are the cluster's, not the namespace's.
        in_cluster = [what for what, scope in missing if scope == "cluster"]
        refused = [f"{', '.join(in_namespace)} in the namespace {namespace!r}"] if in_namespace else []
        refused += [f"{', '.join(in_cluster)} (cluster-wide)"] if in_cluster else []
        if self.count_foreign_pods and not self._may("list", "", "pods", "cluster", namespace):
            refused.append(
                "list pods in every namespace (to count the GPUs pods it did not start hold on its nodes; where the GPU "
                "nodes are Muster's alone, MUSTER_K8S_COUNT_FOREIGN_PODS=0 turns that off)"
            )
        if refused:
            # rbac.yaml names the default namespace: another one is written in as it is applied.
            apply = (
                "`kubectl apply -f platform/kubernetes/rbac.yaml`"
                if namespace == "muster-jobs"
                else f"`sed 's/namespace: muster-jobs$/namespace: {namespace}/' platform/kubernetes/rbac.yaml | kubectl apply -f -`"
            )
            raise ClusterRefuses(
                f"Muster may not {'; nor '.join(refused)}: {apply} (after `kubectl create namespace {namespace}` if it does not exist)."
                + self._who_is_bound(namespace)
            )

    def _who_is_bound(self, namespace: str) -> str:
        """Who Muster runs as, where rbac.yaml's bindings (to the in-cluster ServiceAccount muster/muster) do not name
        it: how to bind its roles to that identity instead. A new admin running Muster with their own kubeconfig applied
        rbac.yaml and got the same refusal again."""
        try:
            review = self._call("self subject review", client.AuthenticationV1Api(self.api).create_self_subject_review, {})
            username = review.status.user_info.username or ""
        except (ApiException, ClusterUnavailable, AttributeError):
            return ""  # a cluster before Kubernetes 1.28, or one that will not say: the advice above stands
        if not username or RBAC_SERVICE_ACCOUNT.fullmatch(username):
            return ""
        if match := re.fullmatch(r"system:serviceaccount:([^:]+):([^:]+)", username):
            subject, short = f"--serviceaccount={match.group(1)}:{match.group(2)}", match.group(2)
        else:
            subject, short = f"--user={username}", re.sub(r"[^a-z0-9-]", "-", username.lower())[:40].strip("-")
        return (
            f" Muster runs as {username}, and rbac.yaml binds its roles to the ServiceAccount muster/muster (Muster "
            "deployed in the cluster); to bind them to this identity, apply it (its ServiceAccount and bindings need the "
            "namespace muster: `kubectl create namespace muster` first), then "
            f"`kubectl create rolebinding muster-gangs-{short} --role=muster-gangs -n {namespace} {subject}` and "
            f"`kubectl create clusterrolebinding muster-cluster-reader-{short} --clusterrole=muster-cluster-reader {subject}`."
        )

    def _may(self, verb: str, group: str, resource: str, scope: str, namespace: str) -> bool:
        kind, _, subresource = resource.partition("/")
        attributes = {"verb": verb, "group": group, "resource": kind, "subresource": subresource}
        if scope == "namespace":
            attributes["namespace"] = namespace
        review = {"spec": {"resourceAttributes": attributes}}
        answer = self._call("access review", client.AuthorizationV1Api(self.api).create_self_subject_access_review, review)
        return bool(answer.status.allowed)

    def _create_namespace(self, namespace: str) -> None:
        try:
            body = {"metadata": {"name": namespace, "labels": {LABEL_MANAGED: MANAGED_BY}}}
            self._call("create namespace", self.core.create_namespace, body)
            logger.info("created the namespace %s for jobs", namespace)
        except ApiException as exc:
            if exc.status == 409:
                return  # made meanwhile
            if exc.status == 403:
                raise ClusterRefuses(namespace_missing(namespace)) from exc
            raise

    # --- nodes -----------------------------------------------------------------------------------

    def list_nodes(self) -> list[ClusterNode]:
        try:
            nodes = self._call("list nodes", self.core.list_node).items
            foreign = self._foreign_requests() if self.count_foreign_pods else {}
        except ApiException as exc:
            if exc.status == 403:  # as in observe_gangs: read while the cluster refuses new gangs for a role cut
                raise ClusterRefuses(f"Muster may not read the nodes or the pods on them: {_api_message(exc)}") from exc
            raise
        found = (self._node(n, foreign.get(n.metadata.name, Counter())) for n in nodes)
        return sorted((n for n in found if n.gpus_total > 0), key=lambda n: n.name)

    def mark_holds(self, marks: Mapping[str, str | None]) -> None:
        """Label and annotate the nodes Muster holds, and take both off the nodes it released (node name -> reason, None:
        released): one merge patch of the node's metadata each, which touches no other label or annotation.

        Where the cluster refuses (Muster's role without `patch nodes`, or a policy refusing the change) the hold still
        works in Muster; the log says so once, not every cycle, and marking is tried again every few minutes until it
        is allowed. A node gone meanwhile is skipped."""
        host = self.api.configuration.host
        refused_at = _HOLD_MARKS_REFUSED.get(host)
        if refused_at is not None and time.monotonic() - refused_at < _HOLD_MARKS_RETRY_SECONDS:
            return
        for name, reason in sorted(marks.items()):
            held = reason is not None
            body = {"metadata": {"labels": {HELD_LABEL: "true" if held else None}, "annotations": {HELD_REASON_ANNOTATION: reason}}}
            try:
                self._call("mark node hold", self.core.patch_node, name, body, _content_type="application/merge-patch+json")
            except ApiException as exc:
                if exc.status == 404:
                    continue
                _HOLD_MARKS_REFUSED[host] = time.monotonic()
                if refused_at is None:
                    logger.warning(
                        "Muster's node holds are not shown on the Kubernetes nodes (label %s): the cluster refused to %s node "
                        "%s (%s). Holds work in Muster all the same; to show them to kubectl, apply "
                        "platform/kubernetes/node-holds.yaml. Said once; tried again every %d s.",
                        HELD_LABEL, "mark" if held else "unmark", name, _api_message(exc), _HOLD_MARKS_RETRY_SECONDS,
                    )  # fmt: skip
                return
        if refused_at is not None:
            _HOLD_MARKS_REFUSED.pop(host, None)
            logger.info("Muster's node holds are shown on the Kubernetes nodes again (label %s)", HELD_LABEL)

    def note_foreign_pods_version(self, version: int) -> None:
        """The watch (jobs/cluster/watch.py) counts each pod Muster did not start that is bound to a node or ends; a
        read of them made at another count is not used again, so what such a pod takes or frees counts at once."""
        self._foreign_version = version

    def _foreign_requests(self) -> dict[str, Counter[str]]:
        """Per node: the whole-number resources (GPUs, slices, RDMA devices) held there by pods Muster did not start."""
        key = (self.api.configuration.host, self.options.namespace)
        read = _FOREIGN_READ.get(key)
        told = self._foreign_version
        if read is not None and time.monotonic() - read[0] < self.foreign_pods_seconds and told in (None, read[1]):
            return read[2]
        # Read as plain JSON: the client's models cost far more than the list itself on a cluster of thousands of pods.
        response = self._call(
            "list pods on nodes", self.core.list_pod_for_all_namespaces, field_selector=BOUND_PODS_SELECTOR, _preload_content=False
        )
        held: dict[str, Counter[str]] = defaultdict(Counter)
        for pod in json.loads(response.data).get("items") or []:
            if not self.is_own_pod(pod.get("metadata") or {}) and (node := (pod.get("spec") or {}).get("nodeName")):
                held[node].update(pod_requests(pod["spec"]))
        _FOREIGN_READ[key] = (time.monotonic(), told, held)
        return held

    def is_own_pod(self, metadata: Mapping[str, Any]) -> bool:
        """Whether a pod (its metadata as JSON) is one of Muster's gang pods: in the jobs' namespace, with a gang's labels."""
        return metadata.get("namespace") == self.options.namespace and _gang_key(metadata.get("labels")) is not None

    def may_watch_other_pods(self) -> bool:
        """Whether Muster may watch pods in every namespace, as the watch of pods it did not start needs."""
        return self._may("watch", "", "pods", "cluster", self.options.namespace)

    def _gpus_starved(self, node: client.V1Node, gpus: int, foreign: Mapping[str, int]) -> int:
        """GPUs of the node that Muster's pods cannot use for the CPU or memory pods it did not start hold there: beyond
        what the node has to spare over its GPUs' share (MUSTER_K8S_CPU_PER_GPU, _MEMORY_PER_GPU), each GPU's worth.

        Uncounted, a node where a notebook held 60 CPUs read as 8 free GPUs: gangs were placed there again and again
        and sat unbound ("Insufficient cpu") until the launch timeout."""
        starved = 0
        for resource, per_gpu in (("cpu", self.options.cpu_per_gpu), ("memory", self.options.memory_per_gpu)):
            taken = foreign.get(resource, 0)
            if not taken:
                continue
            need = parse_quantity(per_gpu) * COMPUTE[resource]
            offered = parse_quantity(((node.status and node.status.allocatable) or {}).get(resource, "0")) * COMPUTE[resource]
            short = taken - max(0, offered - gpus * need)
            if short > 0 and need > 0:
                starved = max(starved, math.ceil(short / need))
        return starved

    def _node(self, node: client.V1Node, foreign: Mapping[str, int]) -> ClusterNode:
        labels = node.metadata.labels or {}
        shared = shared_gpus(node, self.options)
        gpus = shared.gpus if shared else _allocatable(node, self.options.gpu_resource)
        ready, closed = _ready(node), _closed_by(node, self.options.gpu_resource)
        if not gpus and (capacity := _allocatable(node, self.options.gpu_resource, field="capacity")):
            # A device plugin that restarts (or finds every GPU unhealthy) takes the node's allocatable to 0: read as a
            # node gone, its running gangs were requeued, while Kubernetes leaves their pods running. Closed instead.
            gpus, closed = capacity, closed or NO_ALLOCATABLE_GPUS
        # Other pods' CPU or memory makes GPUs as unusable to Muster as their GPUs do: one count, said the same way.
        starved = 0 if shared else self._gpus_starved(node, gpus, foreign)
        # Any value of the label is Muster's mark (only Muster writes it); its reason reads "" if the annotation went.
        marked = HELD_LABEL in labels
        return ClusterNode(
            hold_mark=(node.metadata.annotations or {}).get(HELD_REASON_ANNOTATION, "") if marked else None,
            name=node.metadata.name,
            gpus_total=gpus,
            gpus_foreign=0 if shared else min(max(foreign.get(self.options.gpu_resource, 0), starved), gpus),
            slices_foreign=min(foreign.get(shared.resource, 0), shared.gpus * shared.slices_per_gpu) if shared else 0,
            sharing=shared.sharing if shared else "",
            slices_per_gpu=shared.slices_per_gpu if shared else 0,
            slice_gpus=shared.slice_gpus if shared else 0.0,
            slice_memory_gb=shared.memory_gb if shared else 0.0,
            slice_resource=shared.resource if shared else "",
            rack=labels.get(self.rack_label, ""),
            block=labels.get(self.block_label, "") if self.block_label else "",
            rdma_devices=_allocatable(node, self.options.rdma_resource) if self.options.rdma_resource else 0,
            gpu_model=labels.get(self.gpu_model_label, ""),
            schedulable=ready and not closed,
            ready=ready,
            closed_by=closed,
        )

    # --- gangs -----------------------------------------------------------------------------------

    def launch_gang(self, spec: GangSpec) -> None:
        """Create the gang's objects. What already exists is kept: a retry never doubles a gang.

        `pods`/`podgroup`: the Service, then the Secret of its `secret_env`, (podgroup) the PodGroup, then every pod,
        all owned by the Service. `mpijob`: the MPIJob, then the Secret it owns; the MPI operator makes the pods."""
        try:
            self._launch_gang(spec)
        except NamespaceMadeAgain:
            # The namespace was deleted under the launch and Muster made it again: the gang starts over there, once (a
            # second time is a ClusterRefuses like any other: the job waits for the next cycle, spending nothing).
            self._launch_gang(spec)

    def _launch_gang(self, spec: GangSpec) -> None:
        name = gang_name(spec.job_id, spec.attempt)
        if self.options.launch_mode == LAUNCH_MPIJOB:
            mpijob = self._create_custom(MPIJOB, mpijob_manifest(spec, self.options)) or self._call(
                "read MPIJob",
                self.custom.get_namespaced_custom_object,
                MPIJOB.group,
                MPIJOB.version,
                self.options.namespace,
                MPIJOB.plural,
                name,
            )
            # Its pods wait for the Secret (the kubelet retries a missing one), so it may come second.
            owner = {"apiVersion": MPIJOB.api_version, "kind": MPIJOB.kind, "name": name, "uid": mpijob["metadata"]["uid"]}
            self._create_env_secret(spec, owner)
            return
        service = self._create("service", self.core.create_namespaced_service, service_manifest(spec, self.options))
        if service is None:
            service = self._call("read service", self.core.read_namespaced_service, name, self.options.namespace)
        uid = service.metadata.uid
        self._create_env_secret(spec, service_owner_reference(spec, uid))
        if self.options.launch_mode in GROUP_OF_MODE:
            # Before the pods, so the gang scheduler knows the gang's size when the first pod arrives.
            resource, manifest = GROUP_OF_MODE[self.options.launch_mode]
            self._create_custom(resource, manifest(spec, self.options, owner_uid=uid))
        self._create_pods(spec, list(range(len(spec.node_names))), uid)

    def launch_ranks(self, spec: GangSpec, ranks: list[int]) -> None:
        """An elastic job grown: the pods of its new ranks, owned by its gang's Service like the others, and made the
        way its others were (MUSTER_K8S_LAUNCH_MODE may have changed since it launched)."""
        name = gang_name(spec.job_id, spec.attempt)
        service = self._call("read service", self.core.read_namespaced_service, name, self.options.namespace)
        response = self._call(
            "read pods", self.core.list_namespaced_pod, self.options.namespace,
            label_selector=gang_selector(spec.job_id, spec.attempt), _preload_content=False,
        )  # fmt: skip
        # Read as plain JSON: the client's models predate spec.schedulingGroup.
        pods = json.loads(response.data).get("items") or []
        # A rank's pod of the same name still there (terminating on a node deleted under it, until the pod GC takes it):
        # its create would be an AlreadyExists, read as our own retried launch, and the old pod, gone next cycle, was
        # shrunk away again, every cycle, for a minute. The growth waits for it instead.
        ranks_there = {(pod.get("metadata") or {}).get("labels", {}).get(LABEL_RANK, "") for pod in pods}
        lingering = sorted(rank for rank in ranks if str(rank) in ranks_there)
        if lingering:
            raise LaunchRefused(
                f"the pod of rank {lingering[0]} from before is still there, terminating or on a node gone and not yet "
                "collected; the job grows once it is gone",
                transient=True,
            )
        self._create_pods(spec, ranks, service.metadata.uid, self._options_of_gang(pods))

    def _options_of_gang(self, pods: list[dict[str, Any]]) -> PodOptions:
        """The pod options the gang's running pods (`pods`, as plain JSON) were made with, as far as a new rank must
        match them: a rank that names a gang group its others are not in (or none, where they are in one) is never bound
        beside them."""
        if not pods:
            return self.options
        pod_spec, labels = pods[0].get("spec") or {}, (pods[0].get("metadata") or {}).get("labels") or {}
        if pod_spec.get("schedulingGroup"):
            mode = LAUNCH_WORKLOAD
        elif LABEL_POD_GROUP in labels:
            mode = LAUNCH_PODGROUP
        else:
            mode = LAUNCH_PODS
        scheduler = pod_spec.get("schedulerName") or ""
        return replace(self.options, launch_mode=mode, scheduler_name="" if scheduler == "default-scheduler" else scheduler)

    def teardown_ranks(self, job_id: int, attempt: int, ranks: list[int], grace_seconds: int | None = None) -> None:
        """An elastic job shrunk: its last ranks' pods go (SIGTERM, then the grace period); the others keep running.

        One delete of the collection its labels select, the verb the gang's teardown uses: the least-privilege Role
        (platform/kubernetes/rbac.yaml) grants `deletecollection` on pods, not `delete`, and a single delete was refused
        with 403 there (a pod already gone is no error: nothing matches)."""
        if not ranks:
            return
        grace = self.options.termination_grace_seconds if grace_seconds is None else grace_seconds
        self._call(
            "delete pods",
            self.core.delete_collection_namespaced_pod,
            self.options.namespace,
            label_selector=f"{gang_selector(job_id, attempt)},{LABEL_RANK} in ({','.join(str(rank) for rank in sorted(ranks))})",
            grace_period_seconds=grace,
        )

    def _create_pods(self, spec: GangSpec, ranks: list[int], uid: str, options: PodOptions | None = None) -> None:
        bodies = [pod_manifest(spec, rank, options or self.options, owner_uid=uid) for rank in ranks]
        # Concurrent creates: a 64-node gang's pods reach the API server in a fraction of the sequential time.
        with ThreadPoolExecutor(max_workers=min(LAUNCH_CONCURRENCY, len(bodies))) as pool:
            for future in [pool.submit(self._create, "pod", self.core.create_namespaced_pod, body) for body in bodies]:
                try:
                    future.result()  # the first failure propagates; the cycle tears the partial gang down
                except LaunchRefused as exc:
                    said = str(exc)
                    if exc.transient and len(bodies) > 1 and (beyond := _gang_beyond_quota(said, bodies)):
                        # Each pod fits the quota, the gang never does: its ranks admitted first use up the rest.
                        raise LaunchRefused(
                            f"{said.rstrip('.')}. Its {len(bodies)} pods together ask {beyond}: no launch fits until the quota is raised.",
                            transient=False,
                        ) from exc
                    raise

    def _create_env_secret(self, spec: GangSpec, owner: dict[str, Any]) -> None:
        if spec.secret_env:
            self._create("secret", self.core.create_namespaced_secret, env_secret_manifest(spec, self.options, owner))

    def _create(self, what: str, fn: Callable[..., T], body: dict[str, Any]) -> T | None:
        try:
            return self._call(f"create {what}", fn, self.options.namespace, body)
        except ApiException as exc:
            if exc.status == 409:  # AlreadyExists: a retried launch found its own object
                return None
            self._refused_by_cluster(what, exc)
            if exc.status is not None and 400 <= exc.status < 500:
                # Else the job's reason was the client's whole dump (headers, then the body cut short before its cause).
                said = _api_message(exc)
                # The site's limits, not the job: tried again, never failing it.
                passing = exc.status == 403 and "exceeded quota" in said
                if exc.status == 403 and (missing := _MISSING_PRIORITY_CLASS.search(said)):
                    # The site's setting names a PriorityClass the cluster lacks: its fault, not the job's, which waits
                    # (no launch counted towards failing) until the class is made or the setting changed.
                    passing = True
                    said = (
                        f"{said.rstrip('.')}. MUSTER_K8S_PRIORITY_CLASSES gives this job's class the PriorityClass "
                        f"{missing.group(1)}, which the cluster does not have: an admin creates it (`kubectl create "
                        f"priorityclass {missing.group(1)} --value=...`) or changes the setting; the job waits meanwhile."
                    )
                if passing and (beyond := _beyond_quota(said)):
                    # No pod ending makes room for it: only the quota going up does, so its launches count to failing.
                    passing, said = False, f"{said.rstrip('.')}. It asks {beyond}: no launch fits until the quota is raised."
                raise LaunchRefused(said, transient=passing) from exc
            raise

    def _refused_by_cluster(self, what: str, exc: ApiException) -> None:
        """Raise ClusterRefuses where a create was refused for the cluster's cause, not the gang's (`_cluster_refusal`):
        the job goes back to the queue spending no launch, and every page says why until the cycle's check passes.
        Between two per-cycle checks only a launch meets these; before, each spent a failed launch and a backoff that
        doubled up to 10 minutes, and the nodes stayed idle that long after the namespace was back."""
        refusal = _cluster_refusal(exc)
        if not refusal:
            return
        namespace = self.options.namespace
        _NAMESPACES_SEEN.pop(namespace, None)  # the next cycle checks in full before it places anything
        if refusal == NAMESPACE_TERMINATING:
            raise namespace_terminating(namespace) from exc
        # Gone, or Muster's role went (with a deleted namespace, its Role and RoleBinding go too) or was cut: checked
        # again now, which makes the namespace again where Muster may, or says what is missing and what to apply.
        self.prepare()
        if refusal == NAMESPACE_GONE:
            raise NamespaceMadeAgain(
                f"The namespace {namespace!r} for jobs was gone; Muster made it again, and its launches start over."
            ) from exc
        # The check passes yet the API server refused (a role changed between the two): the refusal's own words.
        raise ClusterRefuses(f"The cluster refused Muster's create of a {what.removeprefix('create ')}: {_api_message(exc)}") from exc

    def _create_custom(self, resource: CustomResource, body: dict[str, Any]) -> dict[str, Any] | None:
        """The created object; None when it existed already."""
        try:
            return self._call(
                f"create {resource.kind}",
                self.custom.create_namespaced_custom_object,
                resource.group,
                resource.version,
                self.options.namespace,
                resource.plural,
                body,
            )
        except ApiException as exc:
            if exc.status == 409:  # AlreadyExists: a retried launch found its own object
                return None
            self._refused_by_cluster(f"create {resource.kind}", exc)
            if exc.status == 404:
                raise MissingCustomResource(
                    f"{resource.kind} {resource.api_version} is not served here (MUSTER_K8S_LAUNCH_MODE="
                    f"{self.options.launch_mode} needs the {resource.plural}.{resource.group} CRD), "
                    f"or namespace {self.options.namespace} is missing: {exc.reason}"
                ) from exc
            raise

    def teardown_gang(self, job_id: int, attempt: int, grace_seconds: int | None = None) -> None:
        """Delete the gang's pods (with the grace period, so training code can checkpoint on SIGTERM) and what owns them.

        A delete Muster's role does not grant (a role cut: the cycle follows gangs while the cluster refuses new ones) is a
        ClusterRefuses, so the gang is left to reconciliation once the role is back, not a traceback every cycle."""
        try:
            self._teardown_gang(job_id, attempt, grace_seconds)
        except ApiException as exc:
            if exc.status == 403 and _cluster_refusal(exc) == ACCESS_DENIED:
                raise ClusterRefuses(f"The cluster refused Muster's delete of a gang: {_api_message(exc)}") from exc
            raise

    def _teardown_gang(self, job_id: int, attempt: int, grace_seconds: int | None) -> None:
        grace = self.options.termination_grace_seconds if grace_seconds is None else grace_seconds
        namespace = self.options.namespace
        name = gang_name(job_id, attempt)
        if self.options.launch_mode == LAUNCH_MPIJOB:
            # First the MPIJob, so its operator makes no new pods; its pods then go with the grace period below.
            self._delete_custom(MPIJOB, name, grace)
        self._call(
            "delete pods",
            self.core.delete_collection_namespaced_pod,
            namespace,
            label_selector=gang_selector(job_id, attempt),
            grace_period_seconds=grace,
        )
        if self.options.launch_mode in GROUP_OF_MODE:
            # The Service owns it too, so garbage collection would delete it, later.
            self._delete_custom(GROUP_OF_MODE[self.options.launch_mode][0], name, grace)
        # Also in mpijob mode, where there is none unless the mode changed under a live gang: a 404 costs nothing.
        try:
            self._call(
                "delete service",
                self.core.delete_namespaced_service,
                name,
                namespace,
                body=client.V1DeleteOptions(propagation_policy="Background", grace_period_seconds=grace),
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
        # The Secret goes with its owner by garbage collection, but not when the owner was deleted with orphaned
        # dependents (`kubectl delete service --cascade=orphan`): then the pods were deleted above by label and the
        # Secret, holding the gang's telemetry token, outlived the gang for good. Deleted by name here too; a Role from
        # before rbac.yaml granted this (403) leaves it to garbage collection, as before, rather than stop the teardown.
        try:
            self._call("delete secret", self.core.delete_namespaced_secret, env_secret_name(job_id, attempt), namespace)
        except ApiException as exc:
            if exc.status not in (403, 404):
                raise

    def _delete_custom(self, resource: CustomResource, name: str, grace: int) -> None:
        try:
            self._call(
                f"delete {resource.kind}",
                self.custom.delete_namespaced_custom_object,
                resource.group,
                resource.version,
                self.options.namespace,
                resource.plural,
                name,
                grace_period_seconds=grace,
                propagation_policy="Background",
            )
        except ApiException as exc:
            if exc.status != 404:  # gone already (or the CRD is not installed: then there is nothing to delete)
                raise

    def observe_gangs(self) -> dict[tuple[int, int], list[PodStatus]]:
        try:
            pods = self._call(
                "list pods", self.core.list_namespaced_pod, self.options.namespace, label_selector=f"{LABEL_MANAGED}={MANAGED_BY}"
            ).items
        except ApiException as exc:
            if exc.status == 403:
                # A cycle follows gangs also while the cluster refuses new ones (prepare's ClusterRefuses, which says what
                # to apply): a role cut so far that Muster cannot see its pods either stops the cycle the same way.
                raise ClusterRefuses(f"Muster may not list the pods of its gangs: {_api_message(exc)}") from exc
            raise
        self._notes = {}
        gangs: dict[tuple[int, int], list[PodStatus]] = {}
        launchers: dict[tuple[int, int], PodStatus] = {}
        orphans: dict[tuple[int, int], client.V1Pod] = {}
        owned: set[tuple[int, int]] = set()
        for pod in pods:
            key = _gang_key(pod.metadata.labels)
            if key is None or not _counts_for_gang(pod):
                continue
            if (pod.metadata.labels or {}).get(LABEL_ROLE) == ROLE_LAUNCHER:
                launchers[key] = _pod_status(pod)  # an MPIJob's launcher is no rank: it decides the outcome below
                continue
            gangs.setdefault(key, []).append(_pod_status(pod))
            if pod.metadata.owner_references:
                owned.add(key)
            else:
                orphans.setdefault(key, pod)
        if self.options.launch_mode != LAUNCH_MPIJOB:
            for key in sorted(orphans.keys() - owned):
                if made := self._restore_service(orphans[key]):
                    self._notes.setdefault(key, []).append(made)
        if self.options.launch_mode == LAUNCH_MPIJOB:
            for job in self._list_mpijobs():
                key = _gang_key(job["metadata"].get("labels"))
                if key is None or job["metadata"].get("deletionTimestamp"):
                    continue
                gangs[key] = mpijob_statuses(job, gangs.get(key, []), launchers.get(key))
        for statuses in gangs.values():
            statuses.sort(key=lambda s: s.rank)
        return gangs

    def pods_gone_how(self, job_id: int, attempt: int, ranks: Sequence[int]) -> str:
        """How pods of a gang that Muster did not delete went, where the cluster still says ("" when it does not).

        The gang's headless Service owns its pods (ownerReferences), so a plain `kubectl delete service muster-12-1`
        has the garbage collector delete them all: the pods are gone by the time a cycle looks, but the Service's
        absence says why (a gang whose Service was deleted with `--cascade=orphan` keeps its pods, and
        `_restore_service` makes it again). An MPIJob's pods belong to the MPIJob, no Service of Muster's.

        kube-scheduler preempting a pod for one of a higher priority sets its DisruptionTarget condition
        (PreemptionByScheduler), records a `Preempted` event on it ("Preempted by pod <uid> on node <node>") and deletes
        it: a cycle that looks only after it was gone (a node's kubelet that ends it at once) finds no condition, so the
        event, kept an hour by the API server, says it, and names the pod it was preempted for."""
        for rank in ranks:
            if preempted := self._preempted_how(pod_name(job_id, attempt, rank)):
                return preempted
        if self.options.launch_mode == LAUNCH_MPIJOB:
            return ""
        name = gang_name(job_id, attempt)
        try:
            self._call("read service", self.core.read_namespaced_service, name, self.options.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return f"deleted with the gang's Service {name}, which was deleted outside Muster (the pods it owns go with it)"
            # Any other refusal leaves the cause unknown: the job is requeued all the same, in the usual words.
            logger.info("could not read the Service %s to say why its pods went: %s", name, _api_message(exc))
        return ""

    def _preempted_how(self, name: str) -> str:
        """'preempted by the Kubernetes scheduler for pod team-a/notebook-0 (priority 1000000)' when kube-scheduler's
        `Preempted` event on the pod says so ("" when there is none, or Muster may not list events)."""
        try:
            events = self._call(
                "list events",
                self.core.list_namespaced_event,
                self.options.namespace,
                field_selector=f"involvedObject.kind=Pod,involvedObject.name={name},reason=Preempted",
            ).items
        except ApiException as exc:
            logger.info("could not read the events of pod %s to say why it went: %s", name, _api_message(exc))
            return ""
        if not events:
            return ""
        said = events[-1].message or ""
        # Since Kubernetes 1.28 the preemptor's uid; before, its namespace/name.
        by_uid = re.match(r"Preempted by pod ([0-9a-f-]+) on node", said)
        by_name = re.match(r"Preempted by (\S+/\S+) on node", said)
        preemptor = self._pod_by_uid(by_uid.group(1)) if by_uid else None
        if preemptor is not None:
            meta, spec = preemptor.get("metadata") or {}, preemptor.get("spec") or {}
            priority = spec.get("priority")
            klass = f", PriorityClass {spec['priorityClassName']}" if spec.get("priorityClassName") else ""
            of = f" (priority {priority}{klass})" if priority is not None else ""
            return f"preempted by the Kubernetes scheduler for pod {meta.get('namespace')}/{meta.get('name')}{of}"
        if by_name:
            return f"preempted by the Kubernetes scheduler for pod {by_name.group(1)} (of a higher priority)"
        # The preemptor is gone already, or Muster may not read pods beyond its namespace: its uid is what is known.
        of = f" (uid {by_uid.group(1)})" if by_uid else ""
        return f"preempted by the Kubernetes scheduler for a pod of a higher priority{of}"

    def _pod_by_uid(self, uid: str) -> dict[str, Any] | None:
        """A pod of any namespace by its uid (no field selector takes one), as plain JSON; None when it is not there or
        Muster may not list pods in every namespace."""
        try:
            response = self._call("list pods", self.core.list_pod_for_all_namespaces, _preload_content=False)
        except ApiException as exc:
            logger.info("could not list pods to name the one a gang's pod was preempted for: %s", _api_message(exc))
            return None
        items = json.loads(response.data).get("items") or []
        return next((pod for pod in items if (pod.get("metadata") or {}).get("uid") == uid), None)

    def gang_notes(self) -> Mapping[tuple[int, int], list[str]]:
        return self._notes

    def _restore_service(self, pod: client.V1Pod) -> str:
        """Make again the headless Service of a gang whose pods run on without it: every pod Muster makes is owned by
        it, so a gang none of whose pods has an owner lost it to `kubectl delete service --cascade=orphan` (a plain
        delete takes the pods with it, and the gang is requeued as pods deleted outside Muster). Without it the ranks'
        names (MASTER_ADDR, MUSTER_HOSTS, an elastic job's rendezvous) no longer resolve, and an elastic job could not
        grow, while the job read RUNNING. Its pods stay unowned (Muster may not patch pods), so this is a create that
        finds it there (409) every cycle after; the teardown deletes pods by label and the Service by name regardless.
        Returns what to say in the job's history when it was made ("" when not): the owner learns their ranks' names
        did not resolve for a while, which a log line alone told only the operator."""
        container = pod.spec.containers[0]
        ports = [(port.name or "", port.container_port) for port in container.ports or []]
        body = service_manifest_of_pod(pod.metadata.labels or {}, ports, self.options)
        name = body["metadata"]["name"]
        try:
            self._call("create service", self.core.create_namespaced_service, self.options.namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                logger.warning("the Service %s of a running gang is gone and could not be made again: %s", name, _api_message(exc))
            return ""
        logger.warning(
            "the Service %s was deleted while its gang's pods ran on (kubectl delete service --cascade=orphan?): made "
            "again, so its ranks' names resolve",
            name,
        )
        return (
            f"Its Service {name} was deleted outside Muster (kubectl delete service --cascade=orphan?) while its pods ran "
            "on: until now the ranks' names (MASTER_ADDR, MUSTER_HOSTS, an elastic job's rendezvous) did not resolve. "
            "Made again as it was; the pods were not restarted."
        )

    def _list_mpijobs(self) -> list[dict[str, Any]]:
        listed = self._call(
            "list MPIJobs",
            self.custom.list_namespaced_custom_object,
            MPIJOB.group,
            MPIJOB.version,
            self.options.namespace,
            MPIJOB.plural,
            label_selector=f"{LABEL_MANAGED}={MANAGED_BY}",
        )
        return list(listed.get("items") or [])

    def _log_pod(self, job_id: int, attempt: int, rank: int) -> str | None:
        """The pod whose log is the rank's output: its own, or for an MPIJob the launcher's (mpirun gathers every rank's there)."""
        if self.options.launch_mode != LAUNCH_MPIJOB:
            return pod_name(job_id, attempt, rank)
        launchers = self._call(
            "list launcher pods",
            self.core.list_namespaced_pod,
            self.options.namespace,
            label_selector=f"{gang_selector(job_id, attempt)},{LABEL_ROLE}={ROLE_LAUNCHER}",
        ).items
        if not launchers:
            return None
        return str(max(launchers, key=lambda p: p.metadata.creation_timestamp).metadata.name)

    def read_logs(self, job_id: int, attempt: int, rank: int, tail: int | None = None) -> str:
        name = self._log_pod(job_id, attempt, rank)
        if name is None:
            return ""
        try:
            return self._call("read logs", self.core.read_namespaced_pod_log, name, self.options.namespace, tail_lines=tail)
        except ApiException as exc:
            if exc.status in (400, 404):  # 400: the container has not started; 404: the pod is gone
                return ""
            raise

    def read_log_tail(self, job_id: int, attempt: int, rank: int, max_bytes: int) -> CapturedLog | None:
        """Streams the log and keeps only its end, so a long log never sits whole in memory."""
        name = self._log_pod(job_id, attempt, rank)
        if name is None:
            return None
        try:
            response = self._call("read logs", self.core.read_namespaced_pod_log, name, self.options.namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            if exc.status == 400:
                return CapturedLog(b"", False)
            raise
        kept = bytearray()
        cut = False
        try:
            for chunk in response.stream(LOG_CHUNK_BYTES):
                kept += chunk
                if len(kept) > 2 * max_bytes + LOG_CHUNK_BYTES:
                    del kept[: len(kept) - max_bytes]
                    cut = True
        except HTTPError as exc:
            raise ClusterUnavailable(f"Kubernetes API server dropped a log read of {name}: {exc}") from exc
        finally:
            response.release_conn()
        captured = CapturedLog.of(bytes(kept), max_bytes)
        return CapturedLog(captured.data, captured.truncated or cut)

    def follow_logs(
        self, job_id: int, attempt: int, rank: int, tail: int | None = None, *, still_live: Callable[[], bool] | None = None
    ) -> Iterator[str]:
        name = self._log_pod(job_id, attempt, rank)
        if name is None:
            return
        try:
            # No read timeout of a request: a quiet training loop is not a dead connection. The stream ends with the pod.
            response = self.core.read_namespaced_pod_log(
                name,
                self.options.namespace,
                follow=True,
                tail_lines=tail,
                _preload_content=False,
                _request_timeout=(self.request_timeout, settings.MUSTER_LOG_FOLLOW_SECONDS),
            )
        except ApiException as exc:
            if exc.status in (400, 404):
                return
            raise
        except Exception as exc:
            if _unavailable(exc):
                raise ClusterUnavailable(f"Kubernetes API server unreachable (follow logs): {exc}") from exc
            raise
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        # A kubelet ends the stream when the container exits, but not every one does (KWOK's fake kubelets never), nor a
        # stream through a node that went away: a watch ends it once Muster knows the attempt is over.
        watch = _StreamWatch(response, still_live) if still_live is not None else None
        try:
            for chunk in response.stream(LOG_CHUNK_BYTES):
                text = decoder.decode(chunk)
                if text:
                    yield text
        except (HTTPError, OSError):
            return  # timed out, closed by the server or shut by the watch: the client reconnects if the job still runs
        finally:
            if watch is not None:
                watch.stop()
            response.release_conn()


# How often a followed log's watch asks whether its attempt still runs.
FOLLOW_WATCH_SECONDS = 5.0


class _StreamWatch:
    """Shuts a log stream from another thread once `still_live` says no: the reading thread is blocked in the read, and
    urllib3's `shutdown` is what unblocks it."""

    def __init__(self, response: Any, still_live: Callable[[], bool]) -> None:
        self._done = threading.Event()
        self._response = response
        self._still_live = still_live
        threading.Thread(target=self._run, name="log-follow-watch", daemon=True).start()

    def _run(self) -> None:
        try:
            while not self._done.wait(FOLLOW_WATCH_SECONDS):
                if not self._still_live():
                    self._response.shutdown()
                    return
        except Exception:
            logger.exception("log follow watch failed; the stream ends with its pod or its timeout")
        finally:
            # `still_live` reads the database: this thread's connection goes with it.
            db.connections.close_all()

    def stop(self) -> None:
        self._done.set()


class NamespaceMadeAgain(ClusterRefuses):
    """A launch found the jobs' namespace gone and Muster made it again: `launch_gang` starts the gang over there."""


class MissingCustomResource(RuntimeError):
    """The launch mode needs a custom resource this cluster does not serve (its CRD is not installed)."""


def mpijob_statuses(job: dict[str, Any], workers: list[PodStatus], launcher: PodStatus | None) -> list[PodStatus]:
    """One status per worker rank of an MPIJob, from its worker pods, its launcher pod and its conditions.

    The launcher's end is the job's end: workers (sshd) never finish on their own, and the
    operator deletes them once the launcher is done (cleanPodPolicy Running). Ranks whose pod
    the operator has not made yet are Pending, so the launch timeout covers a cluster
    without the operator. A failure is reported on rank 0, with the launcher's exit code."""
    worker_spec = ((job.get("spec") or {}).get("mpiReplicaSpecs") or {}).get("Worker") or {}
    replicas = int(worker_spec.get("replicas") or 1)
    conditions = {c.get("type"): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}
    by_rank = {s.rank: s for s in workers}

    def node(rank: int) -> str:
        return by_rank[rank].node_name if rank in by_rank else ""

    if "Succeeded" in conditions or (launcher is not None and launcher.phase == PodPhase.SUCCEEDED):
        return [PodStatus(rank=r, node_name=node(r), phase=PodPhase.SUCCEEDED, exit_code=0) for r in range(replicas)]
    statuses = [
        by_rank.get(r) or PodStatus(rank=r, node_name="", phase=PodPhase.PENDING, message="not created yet by the MPI operator.")
        for r in range(replicas)
    ]
    failed = conditions.get("Failed")
    if failed is not None or (launcher is not None and launcher.phase == PodPhase.FAILED):
        reason = (launcher.reason if launcher else "") or (failed or {}).get("reason", "")
        detail = (launcher.message if launcher else "") or (failed or {}).get("message", "") or "it failed."
        # The launcher's node where that node or the cluster stopped it (the retry avoids it, a drain names it); else
        # rank 0's, the likeliest to have failed the run.
        cluster_stopped = launcher is not None and (refused_by_node(launcher.reason) or stopped_by_cluster(launcher))
        statuses[0] = PodStatus(
            rank=0,
            node_name=launcher.node_name if launcher is not None and cluster_stopped else node(0),
            phase=PodPhase.FAILED,
            exit_code=launcher.exit_code if launcher else None,
            message=f"the MPI launcher failed: {detail}",
            reason=DEADLINE_EXCEEDED if DEADLINE_EXCEEDED in reason else reason,
            disruption=launcher.disruption if launcher else "",
        )
    return statuses


# CPU and memory as counted in `pod_requests`: millicores and bytes.
COMPUTE = {"cpu": 1000, "memory": 1}


def pod_requests(spec: Mapping[str, Any]) -> Counter[str]:
    """The resources a pod (its spec as JSON) holds on its node, as kube-scheduler counts them: its containers and
    sidecars together, or its largest init container if that asks more. Whole-number ones (GPUs, slices, RDMA devices)
    as counts; CPU in millicores and memory in bytes (COMPUTE)."""

    def asked(container: Mapping[str, Any]) -> Counter[str]:
        resources = container.get("resources") or {}
        # An extended resource's request defaults to its limit, and may not differ from it.
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        counts: Counter[str] = Counter()
        for name, quantity in merged.items():
            if name in COMPUTE:
                # CPU in millicores and memory in bytes (a request defaults to its limit), whatever unit it was given in.
                try:
                    counts[name] = math.ceil(parse_quantity(quantity) * COMPUTE[name])
                except (TypeError, ValueError):
                    pass
                continue
            try:
                counts[name] = int(quantity)
            except (TypeError, ValueError):
                continue
        return counts

    running: Counter[str] = Counter()
    for container in spec.get("containers") or []:
        running.update(asked(container))
    first: Counter[str] = Counter()
    for container in spec.get("initContainers") or []:
        if container.get("restartPolicy") == "Always":
            running.update(asked(container))  # a sidecar runs alongside the containers
        else:
            first |= asked(container)  # init containers run one at a time
    return (running | first) + Counter()  # `|` keeps the larger of each; `+` drops zeros


def _gang_key(labels: dict[str, str] | None) -> tuple[int, int] | None:
    labels = labels or {}
    try:
        return int(labels[LABEL_JOB]), int(labels[LABEL_ATTEMPT])
    except (KeyError, ValueError):
        return None


def _pod_status(pod: client.V1Pod) -> PodStatus:
    labels = pod.metadata.labels or {}
    status = pod.status or client.V1PodStatus()
    phase = {p.value: p for p in PodPhase}.get(status.phase or "Pending", PodPhase.PENDING)
    exit_code = None
    message = status.message or ""
    reason = status.reason or ""
    ends = []
    for container in status.container_statuses or []:
        terminated = container.state and container.state.terminated
        if terminated is not None:
            ends.append(terminated.finished_at)
            exit_code = terminated.exit_code
            if terminated.exit_code:
                message = message or f"container {container.name} exited with code {terminated.exit_code} ({terminated.reason or 'Error'})."
    if phase == PodPhase.PENDING and not reason and (not_started := _not_started(status)):
        reason, message = not_started
    disruption = next((c.reason or c.type for c in status.conditions or [] if c.type == "DisruptionTarget" and c.status == "True"), "")
    return PodStatus(
        # An MPIJob's workers carry the operator's index instead of Muster's rank (one template for all of them).
        rank=int(labels.get(LABEL_RANK, labels.get(MPI_REPLICA_INDEX_LABEL, 0))),
        node_name=pod.spec.node_name or "",
        phase=phase,
        exit_code=exit_code,
        message=message,
        reason=reason,
        disruption=disruption,
        # Known once every container has ended (a pod whose last container still runs has not).
        finished_at=max(ends) if ends and None not in ends and len(ends) == len(status.container_statuses) else None,
    )


def _not_started(status: client.V1PodStatus) -> tuple[str, str] | None:
    """Why a Pending pod has not started, where the cluster says so: (reason, message)."""
    # A container that cannot start: the kubelet says so only in its waiting state (e.g. ImagePullBackOff, the image).
    for container in [*(status.init_container_statuses or []), *(status.container_statuses or [])]:
        waiting = container.state and container.state.waiting
        if waiting is not None and waiting.reason in LAUNCH_ERRORS:
            return waiting.reason, f"container {container.name}: {waiting.reason}: {waiting.message or 'no message'}"
    # Not placed by kube-scheduler (e.g. "0/10 nodes are available: 1 Insufficient nvidia.com/gpu"): it may yet be, so
    # only the launch timeout ends the wait, but its reason then says why.
    unscheduled = next((c for c in status.conditions or [] if c.type == "PodScheduled" and c.status == "False"), None)
    if unscheduled is not None:
        # Except a volume claim that does not exist: no node will do until an admin makes it, so the launch fails at once,
        # as an image that cannot be pulled does (it held the gang's GPUs, charged, for the launch timeout five times over).
        if missing := _MISSING_CLAIM.search(unscheduled.message or ""):
            return MISSING_VOLUME_CLAIM, (
                f"its volume claim {missing.group(1)} does not exist in the namespace (kube-scheduler: "
                f"{unscheduled.message.rstrip('.')}); an admin makes the PersistentVolumeClaim, or takes it from the team"
            )
        return unscheduled.reason or UNSCHEDULABLE, unscheduled.message or ""
    return None


# The Priority admission plugin, of a pod naming a PriorityClass that does not exist.
_MISSING_PRIORITY_CLASS = re.compile(r"no PriorityClass with name (\S+) was found")
# kube-scheduler's VolumeBinding plugin, of a pod's claim that is not there: `persistentvolumeclaim "data" not found`.
_MISSING_CLAIM = re.compile(r'persistentvolumeclaim "([^"]+)" not found')


# The labels NVIDIA's GPU feature discovery puts on a node (docs/gpu-sharing.md).
SHARING_STRATEGY_LABEL = "nvidia.com/gpu.sharing-strategy"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"  # MiB per GPU
_MIG_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb$")


@dataclass(frozen=True)
class SharedGpus:
    """What a node's device plugin makes of its GPUs when it shares them: `slices_per_gpu` slices of `gpus` GPUs."""

    sharing: str
    gpus: int
    slices_per_gpu: int
    slice_gpus: float
    memory_gb: float
    resource: str


def shared_gpus(node: client.V1Node, options: PodOptions) -> SharedGpus | None:
    """The node's GPU slices, read from its allocatable resources and GPU feature discovery's labels; None if unshared.

    Time-slicing and MPS: `replicas` slices per GPU, offered as the renamed resource (nvidia.com/gpu.shared) or, not
    renamed, as nvidia.com/gpu with the sharing-strategy label saying so. MIG: the instances of one profile
    (nvidia.com/mig-1g.10gb); a node with several profiles is read by its smallest, whose instances are the most.
    """
    labels = node.metadata.labels or {}
    strategy = labels.get(SHARING_STRATEGY_LABEL, "")
    renamed = _allocatable(node, options.shared_gpu_resource) if options.shared_gpu_resource else 0
    if renamed or strategy in ("time-slicing", "mps"):
        resource = options.shared_gpu_resource if renamed else options.gpu_resource
        count = renamed or _allocatable(node, resource)
        replicas = _label_int(labels, REPLICAS_LABEL)
        gpus = _label_int(labels, GPU_COUNT_LABEL) or (count // replicas if replicas else count)
        replicas = replicas or (count // gpus if gpus else 1)
        if not (count and gpus and replicas):
            return None
        sharing = "mps" if strategy == "mps" else "time-slicing"
        # MPS enforces each replica's share of the memory; time-slicing enforces none.
        memory = _label_int(labels, GPU_MEMORY_LABEL) / 1024 / replicas if sharing == "mps" else 0.0
        return SharedGpus(sharing, gpus, replicas, 1 / replicas, round(memory, 1), resource)
    allocatable = (node.status and node.status.allocatable) or {}
    profiles = []
    for name in allocatable:
        match = _MIG_PROFILE.match(name[len(options.mig_resource_prefix) :]) if name.startswith(options.mig_resource_prefix) else None
        if match and (count := _allocatable(node, name)):
            profiles.append((int(match[1]), int(match[2]), count, name))
    if not profiles:
        return None
    compute, memory_gb, count, resource = min(profiles)
    gpus = _label_int(labels, GPU_COUNT_LABEL) or -(-count // (MIG_COMPUTE_SLICES // compute))
    return SharedGpus("mig", gpus, max(1, count // gpus), compute / MIG_COMPUTE_SLICES, float(memory_gb), resource)


def _label_int(labels: dict[str, str], key: str) -> int:
    try:
        return int(labels.get(key, "0"))
    except ValueError:
        return 0


def _ready(node: client.V1Node) -> bool:
    # Unknown (the kubelet stopped posting status: unreachable) counts as not ready, as the node controller has it.
    return any(c.type == "Ready" and c.status == "True" for c in ((node.status and node.status.conditions) or []))


def _counts_for_gang(pod: client.V1Pod) -> bool:
    """A pod being deleted no longer counts for its gang, unless the cluster says why it goes (its DisruptionTarget
    condition: kube-scheduler's preemption, an eviction, the taint manager): else a gang kube-scheduler preempted read
    as pods "deleted outside Muster (an eviction or by hand)"."""
    if pod.metadata.deletion_timestamp is None:
        return True
    conditions = (pod.status and pod.status.conditions) or []
    return any(c.type == "DisruptionTarget" and c.status == "True" for c in conditions)


def _allocatable(node: client.V1Node, resource: str, *, field: str = "allocatable") -> int:
    """A whole-number extended resource the node offers (GPUs, RDMA devices); 0 when absent or not a count."""
    offered = (node.status and getattr(node.status, field)) or {}
    try:
        return int(offered.get(resource, 0))
    except ValueError:
        return 0


# Why a GPU node with none allocatable (its device plugin restarting, or every GPU unhealthy) takes no new work; its
# pods run on.
NO_ALLOCATABLE_GPUS = "offering no allocatable GPUs"


def _closed_by(node: client.V1Node, gpu_resource: str) -> str:
    """Why the node takes no new pods ("cordoned", "tainted key=value:Effect"), or "" (the GPU operator's own taint on
    the GPU resource is tolerated by every gang pod)."""
    if node.spec and node.spec.unschedulable:
        return "cordoned"
    for taint in (node.spec.taints if node.spec else None) or []:
        if taint.effect in _BLOCKING_TAINT_EFFECTS and taint.key != gpu_resource:
            value = f"={taint.value}" if taint.value else ""
            return f"tainted {taint.key}{value}:{taint.effect}"
    return ""


# The API server's words for a ResourceQuota refusal: "exceeded quota: gpu-cap, requested: requests.nvidia.com/gpu=8,
# used: requests.nvidia.com/gpu=0, limited: requests.nvidia.com/gpu=4" (several resources joined by commas).
_QUOTA_REFUSAL = re.compile(
    r"exceeded quota: (?P<name>[^,]+), requested: (?P<asked>\S+), used: \S+, limited: (?P<hard>[^\s,]+(?:,[^\s,]+)*)"
)


def _quota_amounts(text: str) -> dict[str, str]:
    return {name: value for name, _, value in (item.partition("=") for item in text.split(",")) if value}


def _gang_beyond_quota(said: str, bodies: list[dict[str, Any]]) -> str:
    """What a gang's pods (`bodies`, the manifests) ask together beyond the hard limit of the ResourceQuota that refused
    one of them ("" if they fit it): each pod fits, so the refusal read as a quota full for now, waited on forever with
    a launch every 10 minutes (a 2 x 8-GPU gang under a quota of 8 GPUs); the gang never fits while the quota stands."""
    found = _QUOTA_REFUSAL.search(said)
    if found is None:
        return ""
    total: Counter[str] = Counter()
    for body in bodies:
        total.update(pod_requests(body.get("spec") or {}))
    beyond = []
    for key, limit in sorted(_quota_amounts(found["hard"].rstrip(".")).items()):
        name = key.removeprefix("requests.").removeprefix("limits.")
        try:
            hard = parse_quantity(limit) * COMPUTE.get(name, 1)
        except ValueError:
            continue
        asked = len(bodies) if name == "pods" else total[name]
        if asked > hard:
            amount = asked / COMPUTE[name] if name in COMPUTE else asked
            beyond.append(f"{key}: {amount:g}, at most {limit}")
    return f"more than ResourceQuota {found['name']} allows at all ({'; '.join(beyond)})" if beyond else ""


def _beyond_quota(said: str) -> str:
    """What an object a ResourceQuota refused asks beyond the quota's hard limit itself ("" if it only asks beyond what
    is left now): such a launch never fits while the quota stands, however many pods end."""
    found = _QUOTA_REFUSAL.search(said)
    if found is None:
        return ""
    amounts = _quota_amounts
    asked, hard = amounts(found["asked"]), amounts(found["hard"].rstrip("."))
    try:
        beyond = [
            f"{name}: {asked[name]}, at most {hard[name]}"
            for name in sorted(asked)
            if name in hard and parse_quantity(asked[name]) > parse_quantity(hard[name])
        ]
    except ValueError:
        return ""
    return f"more than ResourceQuota {found['name']} allows at all ({'; '.join(beyond)})" if beyond else ""


def _api_message(exc: ApiException) -> str:
    """The API server's own sentence for a refusal (its Status object's message), else its HTTP reason."""
    try:
        message = json.loads(exc.body or "{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return str(message or f"{exc.status} {exc.reason}")
