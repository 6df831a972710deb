"""Helpers for the tests that run against the real test cluster (platform/testcluster: a real API server, KWOK nodes)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from jobs.cluster import gang_name
from jobs.cluster.base import GangSpec
from jobs.cluster.crd_manifests import MPI_REPLICA_INDEX_LABEL, mpi_launcher_template, mpi_worker_template
from jobs.cluster.kubernetes import HELD_LABEL, HELD_REASON_ANNOTATION, KubernetesCluster
from jobs.cluster.manifests import PodOptions
from jobs.services import nodes_sync
from scheduler.cycle import CycleReport, run_cycle

# The label platform/testcluster/up.sh puts the fake nodes' racks in.
TESTCLUSTER_RACK_LABEL = "muster.io/rack"
# The first rack's nodes advertise this many RDMA devices (platform/testcluster/up.sh); every node is in one block.
TESTCLUSTER_BLOCK_LABEL = "muster.io/block"
TESTCLUSTER_RDMA_RESOURCE = "rdma/rdma_shared_device_a"
# CRDs of the optional launch modes (PodGroup, MPIJob); see the comment at the top of each file.
CRD_DIR = Path(__file__).parent / "crds"


def kubeconfig_path() -> str:
    """The test cluster's kubeconfig: MUSTER_TEST_KUBECONFIG, else what `make testcluster-up` writes."""
    default = os.path.join(os.environ.get("MUSTER_TESTCLUSTER_DIR", "/tmp/muster-testcluster"), "kubeconfig")
    return os.environ.get("MUSTER_TEST_KUBECONFIG") or default


def reachable_api() -> client.ApiClient | None:
    path = kubeconfig_path()
    if not os.path.exists(path):
        return None
    try:
        api = config.new_client_from_config(config_file=path)
        client.VersionApi(api).get_code(_request_timeout=3)
    except Exception:
        return None
    return api


@dataclass
class KubeHarness:
    """Muster's Kubernetes backend on its own namespace of the test cluster, with cycles driven by the test."""

    api: client.ApiClient
    cluster: KubernetesCluster
    namespace: str

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    def cycle(self) -> CycleReport:
        report = run_cycle(backend=self.cluster)
        assert report.ran and not report.cluster_error, report.cluster_error
        return report

    def cycle_until(self, done: Callable[[], bool], timeout: float = 60.0, every: float = 0.5) -> None:
        """Cycle (as beat would) until `done()`; the KWOK stages move pods on the wall clock."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.cycle()
            if done():
                return
            time.sleep(every)
        raise AssertionError(f"not done after {timeout} s of cycles")

    def pods(self, selector: str = "") -> list[client.V1Pod]:
        return self.core.list_namespaced_pod(self.namespace, label_selector=selector).items

    def services(self, selector: str = "") -> list[client.V1Service]:
        return self.core.list_namespaced_service(self.namespace, label_selector=selector).items


def kube_harness(api: client.ApiClient, **options: Any) -> Iterator[KubeHarness]:
    namespace = f"muster-test-{uuid.uuid4().hex[:8]}"
    core = client.CoreV1Api(api)
    core.create_namespace({"metadata": {"name": namespace}})
    options = {"rdma_resource": TESTCLUSTER_RDMA_RESOURCE, **options}
    cluster = KubernetesCluster(
        api=api,
        options=PodOptions(namespace=namespace, termination_grace_seconds=0, **options),
        rack_label=TESTCLUSTER_RACK_LABEL,
        block_label=TESTCLUSTER_BLOCK_LABEL,
    )
    nodes_sync(cluster_nodes=cluster.list_nodes())
    try:
        yield KubeHarness(api=api, cluster=cluster, namespace=namespace)
    finally:
        delete_namespace_and_pods(core, namespace)
        unmark_held_nodes(core)


def unmark_held_nodes(core: client.CoreV1Api) -> None:
    """Take Muster's hold marks off the test cluster's nodes: a test's holds go with its database, not from the nodes
    its cycles marked (the next test's first cycle would take them off, but not after the last)."""
    for node in core.list_node(label_selector=HELD_LABEL).items:
        core.patch_node(node.metadata.name, {"metadata": {"labels": {HELD_LABEL: None}, "annotations": {HELD_REASON_ANNOTATION: None}}})


def delete_namespace_and_pods(core: client.CoreV1Api, namespace: str, timeout: float = 30.0) -> None:
    """Delete a namespace once its pods are gone: until then they hold GPUs, and the next test's Muster counts them
    as held by pods it did not start."""
    core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
    deadline = time.monotonic() + timeout
    while core.list_namespaced_pod(namespace).items:
        if time.monotonic() > deadline:
            raise AssertionError(f"pods of {namespace} not gone after {timeout} s")
        time.sleep(0.2)
    core.delete_namespace(namespace, grace_period_seconds=0)


def install_crds(api: client.ApiClient, timeout: float = 30.0) -> list[str]:
    """Install (or update) tests/crds/*.yaml and wait until the API server serves them. Cluster-scoped: left installed."""
    extensions = client.ApiextensionsV1Api(api)
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        name = body["metadata"]["name"]
        names.append(name)
        try:
            extensions.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            # Already there (an earlier run): bring it to this file's version.
            body["metadata"]["resourceVersion"] = extensions.read_custom_resource_definition(name).metadata.resource_version
            extensions.replace_custom_resource_definition(name, body)
    deadline = time.monotonic() + timeout
    custom = client.CustomObjectsApi(api)
    for name in names:
        while True:
            crd = extensions.read_custom_resource_definition(name)
            established = any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))
            if established:
                try:  # established is not yet served: wait for the REST endpoint too
                    custom.list_namespaced_custom_object(
                        crd.spec.group, crd.spec.versions[0].name, "default", crd.spec.names.plural, limit=1
                    )
                    break
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            if time.monotonic() > deadline:
                raise AssertionError(f"CRD {name} not served after {timeout} s")
            time.sleep(0.2)
    return names


def mpi_worker_pod(spec: GangSpec, options: PodOptions, index: int) -> dict[str, Any]:
    """The pod the operator makes from the worker template (name, index label): to dry-run the template as a real Pod."""
    return _as_pod(mpi_worker_template(spec, options), f"{gang_name(spec.job_id, spec.attempt)}-worker-{index}", options, index)


def mpi_launcher_pod(spec: GangSpec, options: PodOptions) -> dict[str, Any]:
    """The launcher pod the operator makes from the launcher template."""
    return _as_pod(mpi_launcher_template(spec, options), f"{gang_name(spec.job_id, spec.attempt)}-launcher", options, None)


def _as_pod(template: dict[str, Any], name: str, options: PodOptions, index: int | None) -> dict[str, Any]:
    metadata = {**template["metadata"], "name": name, "namespace": options.namespace}
    if index is not None:
        metadata["labels"] = {**metadata["labels"], MPI_REPLICA_INDEX_LABEL: str(index)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
