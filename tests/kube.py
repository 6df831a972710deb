"""Helpers for the tests that run against the real test cluster (platform/testcluster: a real API server, KWOK nodes)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client, config

from jobs.cluster.kubernetes import KubernetesCluster
from jobs.cluster.manifests import PodOptions
from jobs.cycle import CycleReport, run_cycle
from jobs.services import nodes_sync

# The label platform/testcluster/up.sh puts the fake nodes' racks in.
TESTCLUSTER_RACK_LABEL = "muster.io/rack"


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
    cluster = KubernetesCluster(
        api=api, options=PodOptions(namespace=namespace, termination_grace_seconds=0, **options), rack_label=TESTCLUSTER_RACK_LABEL
    )
    nodes_sync(cluster_nodes=cluster.list_nodes())
    try:
        yield KubeHarness(api=api, cluster=cluster, namespace=namespace)
    finally:
        core.delete_namespace(namespace, grace_period_seconds=0)
