"""Jobs as gangs of pods on a real Kubernetes API server (the test cluster: `make testcluster-up`).

Pods are bound by the real kube-scheduler and run by KWOK on fake GPU nodes, which
completes them after the job's `simulate.duration_seconds` with its `exit_code`.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.db import connections
from django.utils import timezone
from django.utils.dateparse import parse_datetime as parse_time
from kubernetes import client, utils, watch
from kubernetes.client.exceptions import ApiException
from rest_framework.test import APIClient

from jobs.cluster import kubernetes as kubernetes_backend
from jobs.cluster.base import ClusterRefuses, ClusterUnavailable, GangSpec, LaunchRefused, PodPhase
from jobs.cluster.crd_manifests import (
    MPIJOB,
    NATIVE_PODGROUP,
    PODGROUP,
    CustomResource,
    mpijob_manifest,
    native_podgroup_manifest,
    podgroup_manifest,
)
from jobs.cluster.kubernetes import KubernetesCluster
from jobs.cluster.manifests import (
    LABEL_RANK,
    PodOptions,
    env_secret_manifest,
    gang_name,
    gang_selector,
    pod_manifest,
    service_manifest,
    service_owner_reference,
)
from jobs.cluster.watch import watches_for
from jobs.logs import job_logs_follow
from jobs.models import Allocation, ClusterHealth, Job, JobEvent, JobResize, Node, NodeState
from jobs.node_holds import nodes_hold, nodes_release
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState
from quotas.models import Team, UsageCharge
from scheduler.cycle import CycleReport, foreign_pods_changed, run_cycle
from scheduler.management.commands import muster_watch
from scheduler.tasks import scheduling_cycle
from telemetry.tokens import telemetry_token_for_job
from tests.conftest import job_payload, need_service, session_for
from tests.kube import (
    KubeHarness,
    delete_namespace_and_pods,
    install_crds,
    kube_harness,
    kubeconfig_path,
    mpi_launcher_pod,
    mpi_worker_pod,
    reachable_api,
)

pytestmark = pytest.mark.kubernetes

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def kube_api() -> client.ApiClient:
    api = reachable_api()
    need_service(api is not None, f"the Kubernetes test cluster (make testcluster-up; kubeconfig {kubeconfig_path()})")
    return api


@pytest.fixture
def kube(kube_api: client.ApiClient, db: None) -> Iterator[KubeHarness]:
    yield from kube_harness(kube_api)


@dataclasses.dataclass
class OtherPods:
    """Pods Muster did not start (another scheduler's jobs, notebooks), bound to nodes, in a namespace of their own."""

    core: client.CoreV1Api
    namespace: str

    def start(self, node: str, limits: dict[str, str], **spec: Any) -> str:
        container = {"name": "c", "image": "busybox:1.36", "resources": {"limits": limits}}
        body = {"metadata": {"generateName": "other-"}, "spec": {"nodeName": node, "containers": [container], **spec}}
        return self.core.create_namespaced_pod(self.namespace, body).metadata.name

    def ask(self, limits: dict[str, str], node: str = "") -> str:
        """One that kube-scheduler binds (only to `node`, when given), as a notebook's pod is bound."""
        container = {"name": "c", "image": "busybox:1.36", "resources": {"limits": limits}}
        spec: dict[str, Any] = {"containers": [container], "tolerations": [{"operator": "Exists"}]}
        if node:
            spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        return self.core.create_namespaced_pod(self.namespace, {"metadata": {"generateName": "other-"}, "spec": spec}).metadata.name

    def stop(self, name: str) -> None:
        self.core.delete_namespaced_pod(name, self.namespace, grace_period_seconds=0)


@pytest.fixture
def other_pods(kube: KubeHarness) -> Iterator[OtherPods]:
    """Their namespace goes, pods first, with the test: the next test would count their GPUs as held."""
    namespace = f"{kube.namespace}-other"
    kube.core.create_namespace({"metadata": {"name": namespace}})
    try:
        yield OtherPods(kube.core, namespace)
    finally:
        delete_namespace_and_pods(kube.core, namespace)


@pytest.fixture(scope="session")
def crds(kube_api: client.ApiClient) -> list[str]:
    """The PodGroup and MPIJob CRDs (tests/crds/), installed once and left installed (cluster-scoped; idempotent)."""
    return install_crds(kube_api)


@pytest.fixture
def kube_mode(request: pytest.FixtureRequest, kube_api: client.ApiClient, db: None, crds: list[str]) -> Iterator[KubeHarness]:
    """Like `kube`, with the PodOptions (launch mode...) the test is parametrized with (indirect=True)."""
    yield from kube_harness(kube_api, **request.param)


def submit(api: APIClient, **overrides: Any) -> dict[str, Any]:
    response = api.post("/api/v1/jobs/", job_payload(**overrides), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def state(job_id: int) -> str:
    return Job.objects.get(pk=job_id).state


def test_a_two_node_job_runs_as_a_gang_bound_to_its_planned_nodes(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 3})
    kube.cycle()
    detail = api.get(f"/api/v1/jobs/{job['id']}/").json()
    assert detail["state"] == "SCHEDULED"
    planned = detail["assigned_nodes"]
    assert len(set(planned)) == 2

    kube.cycle_until(lambda: state(job["id"]) != JobState.SCHEDULED)
    pods = sorted(kube.pods(gang_selector(job["id"], 1)), key=lambda p: p.metadata.name)
    # kube-scheduler bound each rank to the node Muster planned for it.
    assert [p.spec.node_name for p in pods] == planned
    assert state(job["id"]) == JobState.RUNNING
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    # The finished gang is cleaned up: its Service goes, and its pods with it.
    assert kube.services(gang_selector(job["id"])) == []
    kube.cycle_until(lambda: kube.pods(gang_selector(job["id"])) == [], timeout=30)


def test_only_a_team_an_admin_allowed_gets_the_host_network(api: APIClient, user: Any, kube: KubeHarness) -> None:
    for name, allowed in (("rdma", True), ("nlp", False)):
        Team.objects.create(name=name, allow_host_network=allowed).members.add(user)
    allowed = submit(api, nodes=1, gpus_per_node=1, team="rdma", simulate={"duration_seconds": 60})
    plain = submit(api, nodes=1, gpus_per_node=1, team="nlp", simulate={"duration_seconds": 60})
    kube.cycle()
    # What the API server stored, not only what Muster meant to send.
    assert [p.spec.host_network for p in kube.pods(gang_selector(allowed["id"], 1))] == [True]
    assert [bool(p.spec.host_network) for p in kube.pods(gang_selector(plain["id"], 1))] == [False]


def test_pods_run_as_non_root_on_a_read_only_root_unless_the_team_is_allowed(api: APIClient, user: Any, kube: KubeHarness) -> None:
    Team.objects.create(name="legacy", allow_run_as_root=True, allow_writable_root_filesystem=True).members.add(user)
    Team.objects.create(name="vision").members.add(user)
    plain = submit(api, nodes=1, gpus_per_node=1, team="vision", env={"NCCL_DEBUG": "INFO"}, simulate={"duration_seconds": 60})
    legacy = submit(api, nodes=1, gpus_per_node=1, team="legacy", simulate={"duration_seconds": 60})
    kube.cycle()
    # What the API server stored and kube-scheduler bound, not only what Muster meant to send.
    [pod] = kube.pods(gang_selector(plain["id"], 1))
    assert pod.spec.security_context.run_as_non_root is True and pod.spec.security_context.run_as_user == 1000
    container = pod.spec.containers[0]
    assert container.security_context.read_only_root_filesystem is True
    assert container.security_context.allow_privilege_escalation is False
    assert {m.mount_path for m in container.volume_mounts} >= {"/tmp", "/dev/shm"}
    names = {e.name for e in container.env}
    assert "NCCL_DEBUG" in names and not any(n.startswith(("NVIDIA_", "LD_", "KUBERNETES_")) for n in names)
    [root] = kube.pods(gang_selector(legacy["id"], 1))
    assert not root.spec.security_context.run_as_non_root and root.spec.security_context.run_as_user is None
    assert root.spec.containers[0].security_context.read_only_root_filesystem is False


def test_a_failing_rank_tears_the_gang_down_retries_then_fails(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, max_restarts=1, simulate={"duration_seconds": 1, "exit_code": 3})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2)
    first = kube.pods(gang_selector(job["id"], 1))
    assert all(p.metadata.deletion_timestamp for p in first)  # the failed gang is gone or going
    kube.cycle_until(lambda: state(job["id"]) == JobState.FAILED)
    failed = Job.objects.get(pk=job["id"])
    assert failed.exit_code == 3 and failed.restarts == 1
    assert "exited with code 3" in failed.state_reason


def test_cancel_deletes_every_object_of_the_gang(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    assert len(kube.pods(gang_selector(job["id"]))) == 2 and len(kube.services(gang_selector(job["id"]))) == 1
    assert api.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"])) and not kube.services(gang_selector(job["id"])), timeout=30)
    assert state(job["id"]) == JobState.CANCELLED


def test_a_gang_whose_service_was_deleted_orphaning_its_pods_gets_it_back_and_leaves_no_object_behind(
    api: APIClient, kube: KubeHarness
) -> None:
    """An operator deleted the gang's Service with `kubectl delete service --cascade=orphan`: the pods ran on, RUNNING,
    but their names (MASTER_ADDR, MUSTER_HOSTS) no longer resolved, and the pods and the Secret had lost their owner.
    The next cycle makes the Service again, as it was, and the job's end leaves nothing in the namespace: its Secret (the
    job's telemetry token) stayed there for good."""
    job = submit(api, nodes=None, min_nodes=2, max_nodes=3, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    name = gang_name(job["id"], 1)
    (before,) = kube.services(gang_selector(job["id"]))
    pods = sorted(p.metadata.uid for p in kube.pods(gang_selector(job["id"])))
    kube.core.delete_namespaced_service(name, kube.namespace, propagation_policy="Orphan")

    def secret_owners() -> list[Any] | None:
        return kube.core.read_namespaced_secret(f"{name}-env", kube.namespace).metadata.owner_references

    def service_again() -> bool:
        return [s.metadata.uid for s in kube.services(gang_selector(job["id"]))] not in ([], [before.metadata.uid])

    kube.cycle_until(lambda: not secret_owners() and service_again(), timeout=30)
    (after,) = kube.services(gang_selector(job["id"]))
    assert after.metadata.name == name and after.metadata.labels == before.metadata.labels
    assert after.spec.selector == before.spec.selector and after.spec.publish_not_ready_addresses
    assert [(p.name, p.port, p.target_port) for p in after.spec.ports] == [(p.name, p.port, p.target_port) for p in before.spec.ports]
    assert {p.port for p in after.spec.ports} == {29500, 29400}  # the master's port and the elastic rendezvous
    kube.cycle()
    assert state(job["id"]) == JobState.RUNNING
    assert sorted(p.metadata.uid for p in kube.pods(gang_selector(job["id"]))) == pods  # the same pods, never restarted
    # Said once on the job (the page's history), not only in the log: its owner learns the names were gone a while.
    notes = [e["reason"] for e in api.get(f"/api/v1/jobs/{job['id']}/").json()["events"] if e["from_state"] == e["to_state"]]
    assert notes == [
        f"Its Service {name} was deleted outside Muster (kubectl delete service --cascade=orphan?) while its pods ran on: "
        "until now the ranks' names (MASTER_ADDR, MUSTER_HOSTS, an elastic job's rendezvous) did not resolve. Made again "
        "as it was; the pods were not restarted."
    ]
    assert api.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200

    def gone() -> bool:
        secrets = kube.core.list_namespaced_secret(kube.namespace, label_selector=gang_selector(job["id"])).items
        return not kube.pods(gang_selector(job["id"])) and not kube.services(gang_selector(job["id"])) and not secrets

    kube.cycle_until(gone, timeout=30)
    assert state(job["id"]) == JobState.CANCELLED


def test_a_gangs_service_deleted_outside_muster_takes_its_pods_and_the_job_names_the_service(api: APIClient, kube: KubeHarness) -> None:
    """A plain `kubectl delete service muster-<job>-1` has the garbage collector delete the pods the Service owns: the
    job is requeued at no restart, as for pods deleted by hand, and its page names the Service, where it said only
    that its pods were "deleted outside Muster (an eviction or by hand)"."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    name = gang_name(job["id"], 1)
    kube.core.delete_namespaced_service(name, kube.namespace)  # as kubectl does: background propagation
    _wait(lambda: not [p for p in kube.pods(gang_selector(job["id"], 1)) if p.metadata.deletion_timestamp is None])
    kube.cycle()
    moved = Job.objects.get(pk=job["id"])
    assert (moved.restarts, moved.attempt) == (0, 2)  # requeued (and placed again in the same cycle)
    assert JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason == (
        f"2 of 2 pods (ranks 0, 1) were deleted with the gang's Service {name}, which was deleted outside Muster (the "
        "pods it owns go with it) under attempt 1; requeued."
    )
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    assert len(kube.services(gang_selector(job["id"], 2))) == 1  # the next attempt has its own


def test_a_job_past_its_wall_time_is_timed_out_and_its_pods_are_gone(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=1, wall_time_seconds=3, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.TIMED_OUT, timeout=60)
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"])), timeout=30)


def test_a_gang_that_ended_while_no_cycle_looked_ends_when_its_pods_did(api: APIClient, kube: KubeHarness) -> None:
    """Muster stopped while a 3 s job ran, within its 5 s wall time: the next cycle reads when the kubelet's containers
    ended, so the job ends then (not timed out, not timed or charged to the restart)."""
    job = submit(api, nodes=2, wall_time_seconds=5, simulate={"duration_seconds": 3})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    charged = Job.objects.get(pk=job["id"]).charged_until
    deadline = time.monotonic() + 30
    while not all(p.status.phase == "Succeeded" for p in kube.pods(gang_selector(job["id"]))):
        assert time.monotonic() < deadline, "the gang's pods did not end"
        time.sleep(0.2)
    ends = [c.state.terminated.finished_at for p in kube.pods(gang_selector(job["id"])) for c in p.status.container_statuses]
    time.sleep(6)  # past its wall time
    kube.cycle()
    ended = Job.objects.get(pk=job["id"])
    assert ended.state == JobState.SUCCEEDED, ended.state_reason
    assert ended.finished_at == max(*ends, charged) < timezone.now() - timedelta(seconds=5)


def test_a_relaunch_after_a_crash_mid_launch_leaves_exactly_one_gang(api: APIClient, kube: KubeHarness) -> None:
    """A worker killed half-way through a launch left the Service and one pod; the retried launch completes it once."""
    nodes = [n.metadata.name for n in kube.core.list_node().items][:3]
    spec = GangSpec(
        job_id=990001, attempt=1, name="x", image="busybox:1.36", command=("true",), env={},
        node_names=tuple(nodes), gpus_per_node=8, wall_time_seconds=600, owner="alice",
    )  # fmt: skip
    service = kube.core.create_namespaced_service(kube.namespace, service_manifest(spec, kube.cluster.options))
    kube.core.create_namespaced_pod(kube.namespace, pod_manifest(spec, 0, kube.cluster.options, owner_uid=service.metadata.uid))
    kube.cluster.launch_gang(spec)
    kube.cluster.launch_gang(spec)
    pods = kube.pods(gang_selector(990001, 1))
    assert sorted(p.metadata.name for p in pods) == [f"{gang_name(990001, 1)}-{r}" for r in range(3)]
    assert {p.metadata.owner_references[0].uid for p in pods} == {service.metadata.uid}
    assert all(p.metadata.owner_references[0].controller for p in pods)  # so `kubectl drain` evicts them
    assert len(kube.services(gang_selector(990001))) == 1


def test_a_node_deleted_under_a_running_job_requeues_it(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=1, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    node_name = api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][0]
    node = kube.core.read_node(node_name)
    kube.core.delete_node(node_name)
    # As the pod GC does with a deleted node's pods, before any cycle has seen the node go.
    for pod in kube.pods(gang_selector(job["id"])):
        kube.core.delete_namespaced_pod(pod.metadata.name, kube.namespace, grace_period_seconds=0)
    try:
        kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt >= 2 or state(job["id"]) == JobState.PENDING, timeout=90)
        requeued = Job.objects.get(pk=job["id"])
        # A vanished node is the cluster's fault, not the job's: it goes back to the queue, spends no restart (it has
        # none) and runs elsewhere, whether the cycle saw its pod on the missing node or the pod GC had deleted it.
        assert requeued.restarts == 0
        assert JobEvent.objects.filter(job_id=job["id"], reason__startswith=f"Node {node_name} left the cluster").exists()
        kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
        assert api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][0] != node_name
    finally:
        node.metadata.resource_version = None
        node.metadata.uid = None
        kube.core.create_node(node)


KWOK_ANNOTATION = "kwok.x-k8s.io/node"  # platform/testcluster/up.sh: KWOK keeps the nodes annotated `fake` Ready


def _ready(kube: KubeHarness, name: str) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in kube.core.read_node_status(name).status.conditions)


def test_a_node_that_stops_being_ready_requeues_its_gang_without_spending_a_restart(
    api: APIClient, kube: KubeHarness, settings: Any
) -> None:
    settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS = 5
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    victim = api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][1]
    # As when its kubelet stops answering: KWOK no longer posts the node's status, and the node reads NotReady.
    kube.core.patch_node(victim, {"metadata": {"annotations": {KWOK_ANNOTATION: "paused-by-test"}}})
    now = datetime.now(UTC).isoformat()
    condition = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "lastHeartbeatTime": now, "lastTransitionTime": now}
    kube.core.patch_node_status(victim, {"status": {"conditions": [condition]}})
    try:
        kube.cycle()  # within the grace: its pods may run on, as Kubernetes lets them
        assert (state(job["id"]), Job.objects.get(pk=job["id"]).attempt) == (JobState.RUNNING, 1)
        assert Node.objects.get(name=victim).state == NodeState.NOT_READY
        kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2 and state(job["id"]) == JobState.RUNNING)
        moved = api.get(f"/api/v1/jobs/{job['id']}/").json()
        assert moved["restarts"] == 0, "the node failed, not the job: no restart spent (max_restarts=0 would have failed it)"
        assert victim not in moved["assigned_nodes"]
        assert any(f"Node {victim} left the cluster or stopped being Ready" in e["reason"] for e in moved["events"])
        assert Node.objects.get(name=victim).state == NodeState.NOT_READY
    finally:
        kube.core.patch_node(victim, {"metadata": {"annotations": {KWOK_ANNOTATION: "fake"}}})
        deadline = time.monotonic() + 30
        while not _ready(kube, victim) and time.monotonic() < deadline:
            time.sleep(0.5)


def test_a_node_whose_gpus_are_no_longer_allocatable_keeps_its_gang_and_takes_no_new_work(api: APIClient, kube: KubeHarness) -> None:
    """What a device plugin's restart (or every GPU unhealthy) looks like: allocatable nvidia.com/gpu 0, the pods run
    on. Read as a node gone, its running gang was requeued within seconds."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    node = api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][1]
    before = kube.core.read_node_status(node).status.allocatable["nvidia.com/gpu"]
    kube.core.patch_node_status(node, {"status": {"allocatable": {"nvidia.com/gpu": "0"}}})
    try:
        for _ in range(3):
            kube.cycle()
        assert state(job["id"]) == JobState.RUNNING and Job.objects.get(pk=job["id"]).attempt == 1
        closed = Node.objects.get(name=node)
        assert (closed.state, closed.closed_by, closed.gpus_total) == (NodeState.CORDONED, "offering no allocatable GPUs", int(before))
        waiting = submit(api, nodes=1, simulate={"duration_seconds": 600})
        kube.cycle()
        assert node not in Allocation.objects.filter(job_id=waiting["id"]).values_list("node__name", flat=True)
    finally:
        kube.core.patch_node_status(node, {"status": {"allocatable": {"nvidia.com/gpu": before}}})
    kube.cycle()
    assert Node.objects.get(name=node).state == NodeState.READY


def test_a_drained_node_requeues_its_gang_without_spending_a_restart(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    drained = api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][0]
    kubectl = shutil.which("kubectl")
    need_service(kubectl is not None, "kubectl (Debian's kubernetes-client)")
    try:
        # As an operator runs it: cordon, then evict the node's pods through the Eviction API. Without --force, it
        # evicts only pods a controller manages (the gang's Service is theirs).
        drain = [
            kubectl,
            "--kubeconfig",
            kubeconfig_path(),
            "drain",
            drained,
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--grace-period=0",
        ]
        drain.append("--timeout=60s")
        done = subprocess.run(drain, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr
        kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2 and state(job["id"]) == JobState.RUNNING)
        moved = api.get(f"/api/v1/jobs/{job['id']}/").json()
        assert moved["restarts"] == 0 and drained not in moved["assigned_nodes"]
        assert any(f"Node {drained} was drained (cordoned, its pods evicted)" in e["reason"] for e in moved["events"])
    finally:
        kube.core.patch_node(drained, {"spec": {"unschedulable": False}})


def test_a_noexecute_taint_under_a_gang_is_said_as_a_taint_not_a_drain(api: APIClient, kube: KubeHarness) -> None:
    """The taint manager evicts the gang's pod: the job's history and the node list name the taint, which `kubectl
    uncordon` would not undo (both said "drained" and "CORDONED", and the admin ran kubectl uncordon)."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    tainted = api.get(f"/api/v1/jobs/{job['id']}/").json()["assigned_nodes"][0]
    taint = {"key": "maintenance", "value": "true", "effect": "NoExecute"}
    kube.core.patch_node(tainted, {"spec": {"taints": [taint]}})
    try:
        kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2, timeout=90)
        moved = api.get(f"/api/v1/jobs/{job['id']}/").json()
        assert moved["restarts"] == 0
        said = [e["reason"] for e in moved["events"] if e["to_state"] == "PENDING" and e["attempt"] == 1][-1]
        # As the cycle saw it: the pod marked by the taint manager, or already gone from the tainted node.
        assert said in (
            f"Rank 0 on {tainted} was evicted for a NoExecute taint on the node under attempt 1; requeued.",
            f"Node {tainted} was tainted maintenance=true:NoExecute, and the gang's pods there were evicted under attempt 1; requeued.",
        ), said
        node = next(n for n in api.get("/api/v1/nodes/", {"limit": 100}).json()["results"] if n["name"] == tainted)
        assert (node["state"], node["closed_by"]) == ("CORDONED", "tainted maintenance=true:NoExecute")
    finally:
        kube.core.patch_node(tainted, {"spec": {"taints": None}})


def test_a_pod_the_cluster_marks_for_disruption_requeues_its_gang_without_spending_a_restart(api: APIClient, kube: KubeHarness) -> None:
    """kube-scheduler's preemption (like an eviction or a NoExecute taint) first sets the pod's DisruptionTarget
    condition, then deletes it: the gang goes back to the queue as Kubernetes' own Jobs would, at no restart."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    pod = next(p for p in kube.pods(gang_selector(job["id"])) if p.metadata.labels.get("muster.io/rank") == "1")
    now = datetime.now(UTC).isoformat()
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler", "lastTransitionTime": now}
    kube.core.patch_namespaced_pod_status(pod.metadata.name, kube.namespace, {"status": {"conditions": [condition]}})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2 and state(job["id"]) == JobState.RUNNING)
    moved = api.get(f"/api/v1/jobs/{job['id']}/").json()
    assert moved["restarts"] == 0
    # No Preempted event names the pod it was for (the condition was set by hand): the page says what it can.
    expected = (
        f"Rank 1 on {pod.spec.node_name} was preempted by the Kubernetes scheduler for a pod of a higher priority under "
        "attempt 1; requeued."
    )
    assert any(e["reason"] == expected for e in moved["events"])
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"], 1)))


def test_a_pod_kube_scheduler_preempted_for_another_names_that_pod_on_the_job(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """kube-scheduler preempts a gang's pod for a pod of a higher priority that needs its node's GPUs (its own
    preemption, not Muster's): the pod is gone before the cycle looks (the kubelet ends it at once), so no
    DisruptionTarget condition is left to read, and the page said it was "deleted outside Muster (an eviction or by
    hand)". The scheduler's Preempted event on it names the pod it made room for, and the page says so."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    [victim] = [p for p in kube.pods(gang_selector(job["id"], 1)) if p.metadata.labels[LABEL_RANK] == "1"]
    node = victim.spec.node_name
    klass = f"{kube.namespace}-urgent"
    scheduling = client.SchedulingV1Api(kube.api)
    scheduling.create_priority_class({"metadata": {"name": klass}, "value": 1000})
    try:
        container = {"name": "c", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "8"}}}
        spec = {
            "containers": [container],
            "priorityClassName": klass,
            "nodeSelector": {"kubernetes.io/hostname": node},
            "tolerations": [{"operator": "Exists"}],
        }
        urgent = kube.core.create_namespaced_pod(other_pods.namespace, {"metadata": {"name": "urgent"}, "spec": spec})
        assert urgent.spec.priority == 1000
        _wait(lambda: victim.metadata.uid not in [p.metadata.uid for p in kube.pods(gang_selector(job["id"], 1))], timeout=60)
        kube.cycle()
        moved = Job.objects.get(pk=job["id"])
        assert (moved.restarts, moved.attempt) == (0, 2)
        assert JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason == (
            f"1 of 2 pods (rank 1) was preempted by the Kubernetes scheduler for pod {other_pods.namespace}/urgent "
            f"(priority 1000, PriorityClass {klass}) under attempt 1; requeued."
        )
    finally:
        scheduling.delete_priority_class(klass)


def test_a_pod_deleted_while_its_gang_starts_requeues_the_whole_gang_without_spending_a_restart(api: APIClient, kube: KubeHarness) -> None:
    """It was made again under the same attempt and the history said nothing (Placed, then Running), where the same
    pod deleted from a running gang requeued it: a gang is all or nothing before it runs too, as Kueue and Volcano
    hold one."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    assert kube.cycle().launched == [job["id"]]  # placed and launched; no cycle has seen its pods run yet
    assert state(job["id"]) == JobState.SCHEDULED
    [victim] = [p for p in kube.pods(gang_selector(job["id"], 1)) if p.metadata.labels[LABEL_RANK] == "1"]
    kube.core.delete_namespaced_pod(victim.metadata.name, kube.namespace, grace_period_seconds=0)
    _wait(lambda: len(kube.pods(gang_selector(job["id"], 1))) == 1)
    kube.cycle()
    moved = Job.objects.get(pk=job["id"])
    assert (moved.restarts, moved.launch_failures, moved.attempt) == (0, 0, 2)
    assert JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason == (
        "1 of 2 pods (rank 1) was deleted outside Muster (an eviction or by hand) under attempt 1, before it was running; requeued."
    )
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING and not kube.pods(gang_selector(job["id"], 1)))
    assert len(kube.pods(gang_selector(job["id"], 2))) == 2


def test_a_pod_its_nodes_kubelet_refuses_requeues_the_gang_elsewhere_without_spending_a_restart(api: APIClient, kube: KubeHarness) -> None:
    """What a kubelet writes when it cannot admit a pod again after the node restarted (or its device plugin cannot
    allocate a GPU gone bad): the pod Failed with UnexpectedAdmissionError. The node's trouble, not the job's code."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    pod = next(p for p in kube.pods(gang_selector(job["id"])) if p.metadata.labels.get("muster.io/rank") == "0")
    message = "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 8, Available: 7"
    status = {"phase": "Failed", "reason": "UnexpectedAdmissionError", "message": message}
    kube.core.patch_namespaced_pod_status(pod.metadata.name, kube.namespace, {"status": status})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2 and state(job["id"]) == JobState.RUNNING)
    moved = Job.objects.get(pk=job["id"])
    assert (moved.restarts, moved.avoid_nodes) == (0, [pod.spec.node_name])
    assert pod.spec.node_name not in job_assigned_nodes(moved)
    expected = (
        f"Rank 0 was refused by the kubelet of {pod.spec.node_name} (UnexpectedAdmissionError: {message.rstrip('.')}) under attempt 1"
    )
    assert JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason.startswith(expected)
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"], 1)))


def test_a_pod_stopped_for_its_nodes_shutdown_requeues_the_gang_without_spending_a_restart(api: APIClient, kube: KubeHarness) -> None:
    """What the kubelet's graceful node shutdown writes (a maintenance reboot): the same disruption as for the node's
    pressure, which spends a restart, but with the reason Terminated, which does not."""
    job = submit(api, nodes=2, max_restarts=0, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    pod = next(p for p in kube.pods(gang_selector(job["id"])) if p.metadata.labels.get("muster.io/rank") == "1")
    now = datetime.now(UTC).isoformat()
    message = "Pod was terminated in response to imminent node shutdown."
    condition = {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "TerminationByKubelet",
        "message": message,
        "lastTransitionTime": now,
    }
    status = {"phase": "Failed", "reason": "Terminated", "message": message, "conditions": [condition]}
    kube.core.patch_namespaced_pod_status(pod.metadata.name, kube.namespace, {"status": status})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).attempt == 2 and state(job["id"]) == JobState.RUNNING)
    moved = Job.objects.get(pk=job["id"])
    assert moved.restarts == 0
    expected = f"Rank 1 on {pod.spec.node_name} was stopped by the cluster (TerminationByKubelet: {message.rstrip('.')}) under attempt 1"
    assert JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason.startswith(expected)
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"], 1)))


def test_a_gang_kube_scheduler_cannot_place_is_requeued_after_the_launch_timeout_saying_why(
    api: APIClient, kube: KubeHarness, settings: Any, other_pods: OtherPods
) -> None:
    """GPUs held by pods Muster does not count (here, one on every GPU node, at a site that turned counting them off)
    leave its pods Pending: kube-scheduler says why, and the failed launch's reason carries it."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 2
    kube.cluster.count_foreign_pods = False
    for node in kube.core.list_node().items:
        if node.metadata.name.startswith("gpu-node-"):
            other_pods.start(node.metadata.name, {"nvidia.com/gpu": "8"}, tolerations=[{"operator": "Exists"}])
    job = submit(api, nodes=1, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert reason.startswith("Its pod was not running 2 s after launch; rank 0: 0/"), reason
    assert "Insufficient nvidia.com/gpu" in reason
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()


def test_a_gang_whose_gpus_other_pods_took_as_it_launched_goes_back_to_the_queue_at_once(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """Pods Muster did not start, bound after the count its placement read (here: a read an hour old, as a worker's
    between two recounts): the gang's pods stay Pending. The cycle that counts those pods requeues the gang then, not
    after the launch timeout, as no failed launch: its nodes go back, and it waits for GPUs no other pod holds."""
    kube.cluster.foreign_pods_seconds = 3600
    kube.cycle()  # the read every later cycle of this backend reuses: no other pods
    notebooks = {
        node.metadata.name: other_pods.start(node.metadata.name, {"nvidia.com/gpu": "8"}, tolerations=[{"operator": "Exists"}])
        for node in kube.core.list_node().items
        if node.metadata.name.startswith("gpu-node-")
    }
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.SCHEDULED)
    placed = job_assigned_nodes(Job.objects.get(pk=job["id"]))

    def unbound() -> bool:
        pods = kube.pods(gang_selector(job["id"]))
        unscheduled = [c for p in pods for c in p.status.conditions or [] if c.type == "PodScheduled" and c.status == "False"]
        return len(unscheduled) == 2

    deadline = time.monotonic() + 20
    while not unbound():
        assert time.monotonic() < deadline, "kube-scheduler did not say the gang's pods cannot be bound"
        time.sleep(0.2)
    kube.cycle()
    assert state(job["id"]) == JobState.SCHEDULED  # counting with the old read, the cycle waits for the launch timeout

    foreign_pods_changed()  # what the watch does when a pod Muster did not start is bound
    kube.cycle()
    moved = Job.objects.get(pk=job["id"])
    assert moved.state == JobState.PENDING
    assert (moved.launch_failures, moved.restarts, moved.launch_not_before) == (0, 0, None)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    expected = f"Pods Muster did not start hold GPUs on {', '.join(sorted(placed))} that attempt 1 was placed on (rank "
    assert reason.startswith(expected), reason
    assert "Insufficient nvidia.com/gpu" in reason and reason.endswith("; requeued to be placed again."), reason
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"], 1)))
    assert state(job["id"]) == JobState.PENDING  # no node has 8 GPUs no other pod holds

    for node in placed:
        other_pods.stop(notebooks[node])
    foreign_pods_changed()
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    assert sorted(job_assigned_nodes(Job.objects.get(pk=job["id"]))) == sorted(placed)


def test_a_gang_whose_node_is_cordoned_before_its_pods_are_bound_goes_back_to_the_queue_at_once(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """A node of the placement cordoned while the gang's pods wait to be bound (here they wait for GPUs other pods
    hold, at a site that does not count those): kube-scheduler will not bind them there, so the cycle requeues the
    gang at once, not after the launch timeout, and not as a failed launch."""
    kube.cluster.count_foreign_pods = False
    for node in kube.core.list_node().items:
        if node.metadata.name.startswith("gpu-node-"):
            other_pods.start(node.metadata.name, {"nvidia.com/gpu": "8"}, tolerations=[{"operator": "Exists"}])
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.SCHEDULED)
    cordoned = sorted(job_assigned_nodes(Job.objects.get(pk=job["id"])))[0]
    kube.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    try:
        kube.cycle_until(lambda: JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).count() == 2, timeout=20)
        reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
        assert reason.startswith(f"{cordoned} is cordoned, so attempt 1's pods cannot all be bound (rank "), reason
        assert reason.endswith("; requeued to be placed again."), reason
        assert Job.objects.get(pk=job["id"]).launch_failures == 0
    finally:
        kube.core.patch_node(cordoned, {"spec": {"unschedulable": False}})


def test_an_image_that_cannot_be_pulled_fails_the_launch_at_once_and_frees_the_nodes(api: APIClient, kube: KubeHarness) -> None:
    """The kubelet's ImagePullBackOff (KWOK plays it for images of the registry muster.invalid) ends the launch within
    a cycle, not after the launch timeout: the nodes go back to the queue, and the reason quotes the kubelet."""
    image = "muster.invalid/team/train:1"
    job = submit(api, nodes=2, image=image, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert "could not start: container main: ImagePullBackOff: Back-off pulling image" in reason, reason
    assert image in reason
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()
    assert Job.objects.get(pk=job["id"]).restarts == 0  # a launch that failed spends no restart
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"])))


def _quota_half_used(kube: KubeHarness, gpus: int) -> None:
    """A ResourceQuota gpu-cap of `gpus` GPUs on the jobs' namespace, half of it taken by a pod that is never bound
    (admission counts it all the same): a 2 x 8-GPU gang fits the quota, but not what it has left now."""
    quota = {"metadata": {"name": "gpu-cap"}, "spec": {"hard": {"requests.nvidia.com/gpu": str(gpus)}}}
    kube.core.create_namespaced_resource_quota(kube.namespace, quota)
    _wait(lambda: kube.core.read_namespaced_resource_quota("gpu-cap", kube.namespace).status.hard)  # admission reads it
    container = {"name": "c", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": str(gpus // 2)}}}
    spec = {"containers": [container], "nodeSelector": {"muster.io/no-such-node": "true"}}
    kube.core.create_namespaced_pod(kube.namespace, {"metadata": {"name": "half-the-quota"}, "spec": spec})


def test_a_launch_a_resourcequota_refuses_says_the_api_servers_words_and_does_not_count_towards_failing(
    api: APIClient, kube: KubeHarness
) -> None:
    """The reason was the client's whole dump ("(403) Reason: Forbidden HTTP response headers: HTTPHeaderDict(...") cut
    before its cause, and five such launches failed the job: the site's quota on the jobs' namespace, not the job."""
    _quota_half_used(kube, gpus=16)  # admission reads it
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert reason.startswith("The cluster refused the launch: pods ") and "exceeded quota: gpu-cap" in reason, reason
    assert "HTTPHeaderDict" not in reason and reason.endswith("Failed launch 1 in a row; tried again in 15 s."), reason
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()
    assert ClusterHealth.objects.get(pk=1).error == ""  # one namespace quota, not the site's cluster down


def test_a_gang_beyond_what_a_resourcequota_allows_at_all_counts_towards_failing_though_each_pod_fits(
    api: APIClient, kube: KubeHarness
) -> None:
    """A 2 x 8-GPU gang under a quota of 8 GPUs: rank 0 is admitted and uses it all, rank 1 is refused as if the quota
    were full for now, so the job was launched again every 10 minutes forever, never told it can never fit."""
    quota = {"metadata": {"name": "gpu-cap"}, "spec": {"hard": {"requests.nvidia.com/gpu": "8", "pods": "10"}}}
    kube.core.create_namespaced_resource_quota(kube.namespace, quota)
    _wait(lambda: kube.core.read_namespaced_resource_quota("gpu-cap", kube.namespace).status.hard)
    job = submit(api, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert "exceeded quota: gpu-cap" in reason, reason
    assert (
        "Its 2 pods together ask more than ResourceQuota gpu-cap allows at all (requests.nvidia.com/gpu: 16, at most 8): "
        "no launch fits until the quota is raised. Failed launch 1 of at most 5 in a row" in reason
    ), reason
    assert Job.objects.get(pk=job["id"]).launch_failures_counted == 1
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"])), timeout=20)  # rank 0, admitted, went with the launch


def test_launches_a_full_quota_refused_do_not_count_towards_failing_the_job_at_its_next_real_failure(
    api: APIClient, kube: KubeHarness
) -> None:
    """A job waited out a full ResourceQuota on the jobs' namespace five times (each "Failed launch N in a row", never
    to fail it); then a LimitRange refused its pod once, and it FAILED at once, "6 launches in a row did not come up",
    its first failed launch of its own counted as its sixth."""
    _quota_half_used(kube, gpus=16)
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    limits = {"metadata": {"name": "cpu-cap"}, "spec": {"limits": [{"type": "Container", "max": {"cpu": "4"}}]}}
    kube.core.create_namespaced_limit_range(kube.namespace, limits)
    kube.core.delete_namespaced_resource_quota("gpu-cap", kube.namespace)
    time.sleep(2)  # the API server's admission reads both from its informers
    # As if its backoff had been waited out four more times (15 s, 30 s, 60 s, 120 s), the quota still full.
    Job.objects.filter(pk=job["id"]).update(launch_failures=5, launch_not_before=None)

    def refused_by_the_limit_range() -> bool:
        return "maximum cpu usage per Container is 4" in (Job.objects.get(pk=job["id"]).state_reason or "")

    kube.cycle_until(refused_by_the_limit_range, timeout=30)
    waiting = Job.objects.get(pk=job["id"])
    assert waiting.state == JobState.PENDING, waiting.state_reason
    assert "Failed launch 1 of at most 5 in a row; tried again in 480 s." in waiting.state_reason, waiting.state_reason
    assert (waiting.launch_failures, waiting.launch_failures_counted) == (6, 1)


def test_a_priority_class_the_cluster_lacks_keeps_the_job_waiting_without_failing_it(api: APIClient, kube: KubeHarness) -> None:
    """MUSTER_K8S_PRIORITY_CLASSES named a class nobody created: each launch was refused, and five failed the job."""
    absent = f"{kube.namespace}-absent"
    kube.cluster.options = dataclasses.replace(kube.cluster.options, priority_class_names={"normal": absent})
    job = submit(api, nodes=1, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert f"gives this job's class the PriorityClass {absent}, which the cluster does not have" in reason, reason
    assert reason.endswith("Failed launch 1 in a row; tried again in 15 s."), reason  # not "of at most 5": it never fails the job


def test_a_launch_beyond_what_a_resourcequota_allows_at_all_counts_towards_failing(api: APIClient, kube: KubeHarness) -> None:
    """A quota whose hard limit is below what one pod asks never admits it: it was launched again and again, forever."""
    quota = {"metadata": {"name": "gpu-cap"}, "spec": {"hard": {"requests.nvidia.com/gpu": "4"}}}
    kube.core.create_namespaced_resource_quota(kube.namespace, quota)
    _wait(lambda: kube.core.read_namespaced_resource_quota("gpu-cap", kube.namespace).status.hard)
    job = submit(api, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=20)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert "It asks more than ResourceQuota gpu-cap allows at all (requests.nvidia.com/gpu: 8, at most 4)" in reason, reason
    assert "Failed launch 1 of at most" in reason, reason


def test_gpus_held_by_pods_muster_did_not_start_are_not_free_to_it(api: APIClient, kube: KubeHarness, other_pods: OtherPods) -> None:
    """Another scheduler's job or a notebook on a GPU node: Muster counts its GPUs as held, places around them, says
    so while a job waits, and uses them once that pod is gone."""
    other_pods.start("gpu-node-00", {"nvidia.com/gpu": "6"})
    # The largest of its init containers counts when it asks more than the containers do.
    init = [{"name": "fetch", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]
    notebook = other_pods.start("gpu-node-01", {"nvidia.com/gpu": "2"}, initContainers=init)
    other_pods.start("gpu-shared-mig-00", {"nvidia.com/mig-1g.10gb": "3"})
    kube.cycle()
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/").json()["results"]}
    assert (nodes["gpu-node-00"]["gpus_free"], nodes["gpu-node-00"]["gpus_foreign"]) == (2, 6)
    assert (nodes["gpu-node-01"]["gpus_free"], nodes["gpu-node-01"]["gpus_foreign"]) == (0, 8)
    assert (nodes["gpu-shared-mig-00"]["slices_free"], nodes["gpu-shared-mig-00"]["slices_foreign"]) == (53, 3)
    assert nodes["gpu-node-02"]["gpus_foreign"] == 0

    gang = submit(api, nodes=6, gpus_per_node=8, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(gang["id"]) == JobState.RUNNING)
    placed = set(api.get(f"/api/v1/jobs/{gang['id']}/").json()["assigned_nodes"])
    assert placed == {f"gpu-node-0{i}" for i in range(2, 8)}
    small = submit(api, nodes=1, gpus_per_node=4, simulate={"duration_seconds": 600})
    kube.cycle()
    waiting = api.get(f"/api/v1/jobs/{small['id']}/").json()
    assert waiting["state"] == JobState.PENDING and waiting["pending_reason"]["code"] == "NO_ROOM"
    # 6 + 8 whole GPUs; the MIG node's slices are not GPUs a whole-GPU job could have used.
    assert "14 more are held by pods Muster did not start" in waiting["pending_reason"]["message"], waiting["pending_reason"]

    other_pods.stop(notebook)
    kube.cycle_until(lambda: state(small["id"]) == JobState.RUNNING)
    assert api.get(f"/api/v1/jobs/{small['id']}/").json()["assigned_nodes"] == ["gpu-node-01"]


def test_a_gangs_pods_hold_every_gpu_of_their_nodes_so_no_pod_muster_did_not_start_is_bound_there(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """A 2-node x 1-GPU gang holds its 8-GPU nodes whole and is charged 16 GPUs: its pods asked for 1 each, and
    kube-scheduler bound another tenant's 4-GPU notebook onto GPUs the gang's owner paid for. They ask for 8 now."""
    gang = submit(api, nodes=2, gpus_per_node=1, simulate={"duration_seconds": 600})
    single = submit(api, nodes=1, gpus_per_node=1, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(gang["id"]) == state(single["id"]) == JobState.RUNNING)
    planned = api.get(f"/api/v1/jobs/{gang['id']}/").json()["assigned_nodes"]
    pods = sorted(kube.pods(gang_selector(gang["id"], 1)), key=lambda p: p.metadata.name)
    assert [p.spec.node_name for p in pods] == planned
    for pod in pods:
        (container,) = pod.spec.containers
        assert container.resources.requests["nvidia.com/gpu"] == container.resources.limits["nvidia.com/gpu"] == "8"
        # What it runs stays sized by the GPUs it uses: 1 process, 1 GPU's CPU and memory.
        env = {e.name: e.value for e in container.env}
        assert env["NPROC_PER_NODE"] == "1" and container.resources.requests["cpu"] == "8"
    assert sorted(Allocation.objects.filter(job_id=gang["id"]).values_list("gpus", flat=True)) == [8, 8]
    (single_pod,) = kube.pods(gang_selector(single["id"], 1))
    assert single_pod.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"  # part of a node: its own GPUs

    def scheduled(name: str) -> tuple[str, str]:
        pod = other_pods.core.read_namespaced_pod(name, other_pods.namespace)
        condition = next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)
        return pod.spec.node_name or "", (condition.reason or condition.status) if condition else ""

    pinned = other_pods.ask({"nvidia.com/gpu": "4"}, node=planned[0])
    anywhere = other_pods.ask({"nvidia.com/gpu": "4"})
    _wait(lambda: all(scheduled(name)[0] or scheduled(name)[1] == "Unschedulable" for name in (pinned, anywhere)))
    assert scheduled(pinned) == ("", "Unschedulable")  # stays Pending: the gang's node has no GPU left to give
    assert scheduled(anywhere)[0] not in planned
    kube.cycle()
    assert state(gang["id"]) == JobState.RUNNING
    for job in (gang, single):
        api.post(f"/api/v1/jobs/{job['id']}/cancel/")


def test_cpu_a_pod_muster_did_not_start_holds_keeps_gangs_off_the_gpus_it_starves(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """A notebook holding 60 of a node's 96 CPUs: the node read 8 free GPUs, and an 8-GPU job placed there sat
    unbound ("1 Insufficient cpu") until the launch timeout, then was placed there again."""
    other_pods.start("gpu-node-00", {"cpu": "60"})
    kube.cycle()
    node = api.get("/api/v1/nodes/gpu-node-00/").json()
    assert (node["gpus_free"], node["gpus_foreign"]) == (4, 4)  # 28 CPUs beyond the 32 it spares: 4 GPUs' worth
    jobs = [submit(api, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 600}) for _ in range(8)]
    kube.cycle_until(lambda: sum(state(j["id"]) == JobState.RUNNING for j in jobs) == 7)
    placed = {api.get(f"/api/v1/jobs/{j['id']}/").json()["assigned_nodes"][0] for j in jobs if state(j["id"]) == JobState.RUNNING}
    assert "gpu-node-00" not in placed


def test_one_read_of_other_pods_serves_the_cycles_of_its_ttl(kube: KubeHarness, other_pods: OtherPods) -> None:
    reusing = dataclasses.replace(kube.cluster, foreign_pods_seconds=3600)
    fresh = dataclasses.replace(kube.cluster, foreign_pods_seconds=0)

    def held(cluster: KubernetesCluster) -> int:
        return next(n.gpus_foreign for n in cluster.list_nodes() if n.name == "gpu-node-03")

    before = held(reusing)
    other_pods.start("gpu-node-03", {"nvidia.com/gpu": "2"})
    assert held(reusing) == before  # within its MUSTER_K8S_FOREIGN_PODS_SECONDS: the last read
    assert held(fresh) == before + 2


def test_a_pod_muster_did_not_start_taking_or_freeing_gpus_has_the_next_cycle_count_them_again(
    kube: KubeHarness, other_pods: OtherPods, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The watch of other pods asks for a recount when one asking for a device is bound or goes, and for nothing
    else; after it, a worker's cycle reads them again though its last read would still serve (a TTL of an hour)."""
    reusing = dataclasses.replace(kube.cluster, foreign_pods_seconds=3600)
    monkeypatch.setattr("scheduler.cycle.get_backend", lambda: dataclasses.replace(reusing))  # a worker's, per cycle

    def held() -> int:
        return Node.objects.get(name="gpu-node-03").gpus_foreign

    recounts = threading.Event()
    stop = threading.Event()
    others = next(w for w in watches_for(reusing, lambda: None, recounts.set) if w.name == "other pods")
    others.resync_seconds = 2
    threading.Thread(target=others.run, args=(stop,), daemon=True).start()
    try:
        assert recounts.wait(10)  # the initial list
        scheduling_cycle()
        before = held()
        recounts.clear()
        other_pods.start("gpu-node-03", {"cpu": "1"})  # asks for no device
        spec = GangSpec(
            job_id=990003, attempt=1, name="x", image="busybox:1.36", command=("true",), env={},
            node_names=("gpu-node-04",), gpus_per_node=1, wall_time_seconds=600, owner="alice",
        )  # fmt: skip
        reusing.launch_gang(spec)  # Muster's own
        assert not recounts.wait(3), "a recount was asked for a pod that changes nothing Muster counts"

        notebook = other_pods.start("gpu-node-03", {"nvidia.com/gpu": "4"})
        assert recounts.wait(10), "no recount when another pod took 4 GPUs"
        scheduling_cycle()
        assert held() == before  # the read of an hour ago still serves a cycle the watch has not told
        foreign_pods_changed()  # what muster_watch does on the recount (then it enqueues a cycle)
        scheduling_cycle()
        assert held() == before + 4

        recounts.clear()
        other_pods.stop(notebook)
        assert recounts.wait(10), "no recount when the other pod gave its GPUs back"
        foreign_pods_changed()
        scheduling_cycle()
        assert held() == before
    finally:
        stop.set()


def test_a_teams_volume_is_mounted_in_its_jobs_pods(api: APIClient, user: Any, kube: KubeHarness) -> None:
    # A claim bound to a volume, as a site's storage would provide (NFS here: KWOK mounts nothing, the API checks all).
    pv = f"{kube.namespace}-imagenet"
    kube.core.create_persistent_volume(
        {
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteMany"], "storageClassName": "",
                "persistentVolumeReclaimPolicy": "Retain", "nfs": {"server": "10.0.0.1", "path": "/exports/imagenet"},
            },
        }
    )  # fmt: skip
    try:
        claim = {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv, "resources": {"requests": {"storage": "1Gi"}}}
        kube.core.create_namespaced_persistent_volume_claim(kube.namespace, {"metadata": {"name": "imagenet"}, "spec": claim})
        _wait(lambda: kube.core.read_namespaced_persistent_volume_claim("imagenet", kube.namespace).status.phase == "Bound")
        team = Team.objects.create(name="vision")
        team.members.add(user)
        team.volumes.create(claim="imagenet", read_only=True)
        job = submit(api, nodes=2, team="vision", volumes=[{"claim": "imagenet", "mount_path": "/data"}], simulate={"duration_seconds": 3})
        kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
        for pod in kube.pods(gang_selector(job["id"])):
            volumes = {v.name: v for v in pod.spec.volumes}
            assert volumes["data-0"].persistent_volume_claim.claim_name == "imagenet"
            assert volumes["data-0"].persistent_volume_claim.read_only is True
            mounts = {m.name: m for m in pod.spec.containers[0].volume_mounts}
            assert mounts["data-0"].mount_path == "/data" and mounts["data-0"].read_only is True
        kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    finally:
        kube.core.delete_persistent_volume(pv)


def test_a_volume_claim_missing_from_the_namespace_fails_the_launch_at_once(api: APIClient, user: Any, kube: KubeHarness) -> None:
    """The team was given a claim nobody made: kube-scheduler says so at once, and the launch fails then, as an image
    that cannot be pulled does, instead of holding (and charging) the gang's nodes for the launch timeout every time."""
    team = Team.objects.create(name="vision")
    team.members.add(user)
    team.volumes.create(claim="datasets", read_only=True)
    job = submit(api, nodes=2, team="vision", volumes=[{"claim": "datasets", "mount_path": "/data"}], simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: Job.objects.get(pk=job["id"]).launch_failures == 1, timeout=30)
    reason = JobEvent.objects.filter(job_id=job["id"], to_state=JobState.PENDING).last().reason
    assert "could not start: its volume claim datasets does not exist in the namespace" in reason, reason
    assert not Allocation.objects.filter(job_id=job["id"], released_at__isnull=True).exists()


def test_kubectl_shows_exactly_the_objects_muster_created(api: APIClient, kube: KubeHarness) -> None:
    kubectl = shutil.which("kubectl")
    need_service(kubectl is not None, "kubectl (Debian's kubernetes-client)")
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    out = subprocess.run(
        [kubectl, "--kubeconfig", kubeconfig_path(), "-n", kube.namespace, "get", "pods,services,secrets", "-o", "json"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    names = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in json.loads(out)["items"])
    prefix = gang_name(job["id"], 1)
    assert names == [f"Pod/{prefix}-0", f"Pod/{prefix}-1", f"Secret/{prefix}-env", f"Service/{prefix}"]


def test_the_telemetry_token_reaches_the_pods_through_a_secret_that_goes_with_the_gang(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle()
    token = telemetry_token_for_job(job["id"])
    name = gang_name(job["id"], 1)
    secret = kube.core.read_namespaced_secret(f"{name}-env", kube.namespace)
    assert base64.b64decode(secret.data["MUSTER_TELEMETRY_TOKEN"]).decode() == token
    (service,) = kube.services(gang_selector(job["id"]))
    assert [o.uid for o in secret.metadata.owner_references] == [service.metadata.uid]
    for pod in kube.pods(gang_selector(job["id"], 1)):
        # Anyone who may read pods sees a reference, not the token.
        assert token not in json.dumps(kube.api.sanitize_for_serialization(pod))
        (ref,) = [e for e in pod.spec.containers[0].env if e.name == "MUSTER_TELEMETRY_TOKEN"]
        assert ref.value is None and (ref.value_from.secret_key_ref.name, ref.value_from.secret_key_ref.key) == (
            secret.metadata.name,
            ref.name,
        )
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)  # the kubelet (KWOK) found the Secret
    assert api.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200
    # Garbage collection removes it with the Service that owns it.
    kube.cycle_until(
        lambda: not kube.core.list_namespaced_secret(kube.namespace, label_selector=gang_selector(job["id"])).items, timeout=30
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"extra_resources": {"example.com/rdma": "1"}, "pod_annotations": {"k8s.v1.cni.cncf.io/networks": "roce"}},
        {"image_pull_secret": "registry", "service_account": "trainer", "host_network": True},
    ],
)
def test_every_manifest_passes_a_server_side_dry_run(kube: KubeHarness, options: dict[str, Any]) -> None:
    options = dict(options)
    host_network = options.pop("host_network", False)
    pod_options = PodOptions(namespace=kube.namespace, **options)
    if pod_options.service_account:
        kube.core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": pod_options.service_account}})
    spec = GangSpec(
        job_id=7, attempt=1, name="x", image="nvcr.io/nvidia/pytorch:24.05-py3", command=("torchrun", "t.py"),
        env={"A": "1"}, node_names=("n1", "n2"), gpus_per_node=4, wall_time_seconds=3600, owner="alice", team="vision",
        host_network=host_network, secret_env={"MUSTER_TELEMETRY_TOKEN": "mtt.7.x"},
        simulate={"duration_seconds": 5, "exit_code": 1},
    )  # fmt: skip
    kube.core.create_namespaced_service(kube.namespace, service_manifest(spec, pod_options), dry_run="All")
    owner = service_owner_reference(spec, "0" * 8)
    kube.core.create_namespaced_secret(
        kube.namespace, env_secret_manifest(spec, pod_options, owner), dry_run="All", field_validation="Strict"
    )
    for rank in range(2):
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest(spec, rank, pod_options, owner_uid="0" * 8), dry_run="All")
    assert kube.pods() == []  # a dry run creates nothing


def test_a_jobs_pods_take_the_priority_class_the_site_maps_its_class_to(kube: KubeHarness) -> None:
    """Muster's pods ran at priority 0 whatever their class, so kube-scheduler preempted a production gang for any
    pod of a PriorityClass above 0 (MUSTER_K8S_PRIORITY_CLASSES maps Muster's classes to the cluster's)."""
    scheduling = client.SchedulingV1Api(kube.api)
    name = f"{kube.namespace}-production"
    scheduling.create_priority_class({"metadata": {"name": name}, "value": 100000})
    try:
        options = PodOptions(namespace=kube.namespace, priority_class_names={"production": name})
        spec = _mode_spec(8, ("n1",), priority_class="production")
        created = kube.core.create_namespaced_pod(kube.namespace, pod_manifest(spec, 0, options), dry_run="All")
        assert (created.spec.priority_class_name, created.spec.priority) == (name, 100000)
        normal = kube.core.create_namespaced_pod(
            kube.namespace, pod_manifest(dataclasses.replace(spec, priority_class="normal"), 0, options), dry_run="All"
        )
        assert normal.spec.priority_class_name is None and not normal.spec.priority
    finally:
        scheduling.delete_priority_class(name)


# --- the optional launch modes: PodGroup (scheduler-plugins coscheduling) and MPIJob (Kubeflow) ----------------------


def _custom(kube: KubeHarness, resource: CustomResource, name: str) -> dict[str, Any] | None:
    try:
        return client.CustomObjectsApi(kube.api).get_namespaced_custom_object(
            resource.group, resource.version, kube.namespace, resource.plural, name
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _wait(done: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout} s"
        time.sleep(0.2)


def _mode_spec(job_id: int, nodes: tuple[str, ...], **overrides: Any) -> GangSpec:
    values: dict[str, Any] = {
        "job_id": job_id, "attempt": 1, "name": "x", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": ("mpirun", "python", "t.py"),
        "env": {"A": "1"}, "node_names": nodes, "gpus_per_node": 1, "wall_time_seconds": 600, "owner": "alice", "team": "vision",
    }  # fmt: skip
    return GangSpec(**{**values, **overrides})


@pytest.mark.parametrize("mode", ["podgroup", "mpijob"])
def test_every_manifest_of_the_optional_launch_modes_passes_a_server_side_dry_run(kube: KubeHarness, crds: list[str], mode: str) -> None:
    """The custom objects go through the CRDs' schemas with strict field validation (a misspelt field is an error, not
    silently pruned); the pods, and the MPIJob's pod templates as the pods the operator would make of them, through the
    core API's full Pod validation."""
    options = PodOptions(
        namespace=kube.namespace, launch_mode=mode, scheduler_name="scheduler-plugins-scheduler" if mode == "podgroup" else "",
        podgroup_schedule_timeout_seconds=60, extra_resources={"example.com/rdma": "1"},
        pod_annotations={"k8s.v1.cni.cncf.io/networks": "roce"}, image_pull_secret="registry",
    )  # fmt: skip
    spec = _mode_spec(7, ("n1", "n2"), gpus_per_node=4, simulate={"duration_seconds": 5, "exit_code": 1}, host_network=True)
    custom = client.CustomObjectsApi(kube.api)

    def dry_run(resource: CustomResource, body: dict[str, Any]) -> None:
        custom.create_namespaced_custom_object(
            resource.group, resource.version, kube.namespace, resource.plural, body, dry_run="All", field_validation="Strict"
        )

    if mode == "podgroup":
        kube.core.create_namespaced_service(kube.namespace, service_manifest(spec, options), dry_run="All")
        dry_run(PODGROUP, podgroup_manifest(spec, options, owner_uid="0" * 8))
        pods = [pod_manifest(spec, rank, options, owner_uid="0" * 8) for rank in range(2)]
    else:
        dry_run(MPIJOB, mpijob_manifest(spec, options))
        pods = [mpi_launcher_pod(spec, options)] + [mpi_worker_pod(spec, options, i) for i in range(2)]
    for pod in pods:
        kube.core.create_namespaced_pod(kube.namespace, pod, dry_run="All", field_validation="Strict")
    # A misspelt field is refused, so the checks above mean something.
    with pytest.raises(ApiException) as refused:
        dry_run(PODGROUP, {**podgroup_manifest(spec, options), "spec": {"minMembers": 2}})
    assert refused.value.status == 400
    assert kube.pods() == []  # a dry run creates nothing


@pytest.mark.parametrize("kube_mode", [{"launch_mode": "podgroup", "scheduler_name": "scheduler-plugins-scheduler"}], indirect=True)
def test_podgroup_mode_creates_the_podgroup_then_labelled_pods_and_teardown_removes_all(kube_mode: KubeHarness) -> None:
    """No scheduler-plugins scheduler runs in the test cluster, so these pods (schedulerName scheduler-plugins-scheduler)
    stay Pending: the test checks what Muster creates and deletes, not coscheduling itself."""
    kube, cluster = kube_mode, kube_mode.cluster
    nodes = tuple(sorted(n.metadata.name for n in kube.core.list_node().items)[:2])
    spec = _mode_spec(990101, nodes)
    cluster.launch_gang(spec)
    cluster.launch_gang(spec)  # a retried launch finds its own PodGroup and pods (409 is success)
    name = gang_name(990101, 1)
    (service,) = kube.services(gang_selector(990101))
    group = _custom(kube, PODGROUP, name)
    assert group is not None and group["spec"] == {"minMember": 2}
    assert [o["uid"] for o in group["metadata"]["ownerReferences"]] == [service.metadata.uid]
    pods = sorted(kube.pods(gang_selector(990101, 1)), key=lambda p: p.metadata.name)
    assert [p.metadata.name for p in pods] == [f"{name}-0", f"{name}-1"]
    for pod in pods:
        assert pod.metadata.labels["scheduling.x-k8s.io/pod-group"] == name
        assert pod.spec.scheduler_name == "scheduler-plugins-scheduler" and pod.spec.node_name is None
        assert pod.metadata.creation_timestamp >= parse_time(group["metadata"]["creationTimestamp"])
    assert [s.phase for s in cluster.observe_gangs()[(990101, 1)]] == [PodPhase.PENDING, PodPhase.PENDING]

    cluster.teardown_gang(990101, 1)
    _wait(lambda: not kube.pods(gang_selector(990101)) and not kube.services(gang_selector(990101)) and not _custom(kube, PODGROUP, name))
    assert (990101, 1) not in cluster.observe_gangs()
    cluster.teardown_gang(990101, 1)  # deleting what is gone is success


@pytest.mark.parametrize("kube_mode", [{"launch_mode": "podgroup"}], indirect=True)
def test_a_podgroup_job_with_the_default_scheduler_runs_to_success(api: APIClient, kube_mode: KubeHarness) -> None:
    """With MUSTER_K8S_SCHEDULER_NAME empty (coscheduling as a profile of the default scheduler, or none), the gang runs."""
    kube = kube_mode
    job = submit(api, nodes=2, gpus_per_node=1, simulate={"duration_seconds": 2})
    kube.cycle()
    assert _custom(kube, PODGROUP, gang_name(job["id"], 1))["spec"]["minMember"] == 2
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    _wait(lambda: _custom(kube, PODGROUP, gang_name(job["id"], 1)) is None and not kube.pods(gang_selector(job["id"])))


@pytest.mark.parametrize("kube_mode", [{"launch_mode": "workload"}], indirect=True)
def test_a_workload_mode_gang_is_held_by_kube_schedulers_own_gang_policy_and_runs_to_success_or_failure(
    api: APIClient, kube_mode: KubeHarness
) -> None:
    """Kubernetes' native gang scheduling (KEP-4671, the test cluster's GenericWorkload and GangScheduling gates)."""
    kube = kube_mode
    # The PodGroup's schema is the API server's own: a misspelt field is refused, the gang's passes.
    spec = _mode_spec(990301, ("n1", "n2"))
    options = PodOptions(namespace=kube.namespace, launch_mode="workload")
    custom = client.CustomObjectsApi(kube.api)
    group = NATIVE_PODGROUP
    body = native_podgroup_manifest(spec, options)
    custom.create_namespaced_custom_object(
        group.group, group.version, kube.namespace, group.plural, body, dry_run="All", field_validation="Strict"
    )
    with pytest.raises(ApiException) as refused:
        bad = {**body, "spec": {"schedulingPolicy": {"gang": {"minMembers": 2}}}}
        custom.create_namespaced_custom_object(
            group.group, group.version, kube.namespace, group.plural, bad, dry_run="All", field_validation="Strict"
        )
    assert refused.value.status in (400, 422)

    # A gang of three whose third pod is never made stays unbound: all or nothing.
    partial = _mode_spec(990302, tuple(sorted(n.metadata.name for n in kube.core.list_node().items)[:3]), gpus_per_node=1)
    custom.create_namespaced_custom_object(
        group.group, group.version, kube.namespace, group.plural, native_podgroup_manifest(partial, options)
    )
    for rank in range(2):
        kube.core.create_namespaced_pod(kube.namespace, pod_manifest(partial, rank, options))
    time.sleep(3)
    assert [p.spec.node_name for p in kube.pods(gang_selector(990302))] == [None, None]
    kube_mode.cluster.teardown_gang(990302, 1)

    ok = submit(api, nodes=2, gpus_per_node=1, simulate={"duration_seconds": 2})
    kube.cycle()
    made = _custom(kube, NATIVE_PODGROUP, gang_name(ok["id"], 1))
    assert made is not None and made["spec"]["schedulingPolicy"]["gang"]["minCount"] == 2
    # The client's models predate the field: read the pods as the API server returns them.
    raw = json.loads(kube.core.list_namespaced_pod(kube.namespace, label_selector=gang_selector(ok["id"]), _preload_content=False).data)
    assert [p["spec"]["schedulingGroup"] for p in raw["items"]] == [{"podGroupName": gang_name(ok["id"], 1)}] * 2
    kube.cycle_until(lambda: state(ok["id"]) == JobState.SUCCEEDED)
    _wait(lambda: _custom(kube, NATIVE_PODGROUP, gang_name(ok["id"], 1)) is None and not kube.pods(gang_selector(ok["id"])))

    failing = submit(api, nodes=2, gpus_per_node=1, simulate={"duration_seconds": 1, "exit_code": 3})
    kube.cycle_until(lambda: state(failing["id"]) == JobState.FAILED)


@pytest.mark.parametrize("kube_mode", [{"launch_mode": "workload"}], indirect=True)
def test_an_elastic_gang_grows_the_way_it_was_launched_after_the_launch_mode_changes(kube_mode: KubeHarness) -> None:
    """A gang launched as plain pods, grown by a Muster since restarted with MUSTER_K8S_LAUNCH_MODE=workload: its new
    ranks named a PodGroup that does not exist, so kube-scheduler never bound them, and the growth was undone."""
    kube, workload = kube_mode, kube_mode.cluster
    nodes = tuple(sorted(n.name for n in workload.list_nodes() if not n.sharing)[:3])
    pods_mode = KubernetesCluster(api=kube.api, options=dataclasses.replace(workload.options, launch_mode="pods"))
    spec = _mode_spec(990401, nodes[:2], min_nodes=2, max_nodes=3, simulate={"duration_seconds": 600})
    pods_mode.launch_gang(spec)
    workload.launch_ranks(dataclasses.replace(spec, node_names=nodes), [2])

    def raw_pods() -> dict[str, dict[str, Any]]:
        listed = kube.core.list_namespaced_pod(kube.namespace, label_selector=gang_selector(990401), _preload_content=False)
        return {p["metadata"]["labels"]["muster.io/rank"]: p for p in json.loads(listed.data)["items"]}

    assert "schedulingGroup" not in raw_pods()["2"]["spec"]
    _wait(lambda: all(p["spec"].get("nodeName") for p in raw_pods().values()) and len(raw_pods()) == 3)
    assert raw_pods()["2"]["spec"]["nodeName"] == nodes[2]
    workload.teardown_gang(990401, 1)


def test_a_growth_onto_a_rank_whose_old_pod_is_still_there_waits_for_it(kube: KubeHarness) -> None:
    """A node deleted under an elastic job: its rank's pod stayed Terminating until the pod GC took it, and a growth onto
    another node made a pod of the same name. The create's AlreadyExists read as Muster's own retried launch, the old
    pod went, and the job was shrunk and grown again every cycle for a minute."""
    cluster = kube.cluster
    nodes = tuple(sorted(n.name for n in cluster.list_nodes() if not n.sharing)[:3])
    spec = _mode_spec(990501, nodes, min_nodes=2, max_nodes=3, simulate={"duration_seconds": 600})
    cluster.launch_gang(spec)
    # KWOK takes a deleted pod's finalizers away at once: a rank's pod simply still there stands in for one terminating.
    with pytest.raises(LaunchRefused) as refused:
        cluster.launch_ranks(spec, [2])
    assert refused.value.transient
    assert str(refused.value) == (
        "the pod of rank 2 from before is still there, terminating or on a node gone and not yet collected; the job grows once it is gone"
    )
    cluster.teardown_ranks(990501, 1, [2])
    _wait(lambda: len(kube.pods(gang_selector(990501))) == 2)
    cluster.launch_ranks(spec, [2])  # gone: the growth goes ahead
    assert sorted(p.metadata.labels[LABEL_RANK] for p in kube.pods(gang_selector(990501))) == ["0", "1", "2"]
    cluster.teardown_gang(990501, 1)


@pytest.mark.parametrize("kube_mode", [{"launch_mode": "mpijob"}], indirect=True)
def test_mpijob_mode_creates_one_mpijob_whose_pods_decide_the_gang_and_teardown_deletes_it(kube_mode: KubeHarness) -> None:
    """No MPI operator runs in the test cluster, so the MPIJob never gets pods of its own: until it does, its ranks are
    Pending (the launch timeout then requeues it). The test then stands in for the operator, making the pods it would make
    from the templates (owned by the MPIJob), so kube-scheduler places the workers and KWOK runs them."""
    kube, cluster = kube_mode, kube_mode.cluster
    planned = tuple(sorted(n.metadata.name for n in kube.core.list_node().items)[2:4])
    spec = _mode_spec(990102, planned, simulate={"duration_seconds": 2}, secret_env={"MUSTER_TELEMETRY_TOKEN": "mtt.990102.x"})
    cluster.launch_gang(spec)
    cluster.launch_gang(spec)  # a retried launch finds its own MPIJob
    name = gang_name(990102, 1)
    job = _custom(kube, MPIJOB, name)
    assert job is not None and job["metadata"]["labels"]["muster.io/job-id"] == "990102"
    secret = kube.core.read_namespaced_secret(f"{name}-env", kube.namespace)
    assert [(o.kind, o.uid) for o in secret.metadata.owner_references] == [("MPIJob", job["metadata"]["uid"])]
    assert kube.pods() == [] and kube.services() == []  # the operator's to make
    assert [(s.rank, s.phase) for s in cluster.observe_gangs()[(990102, 1)]] == [(0, PodPhase.PENDING), (1, PodPhase.PENDING)]

    owner = {"apiVersion": MPIJOB.api_version, "kind": MPIJOB.kind, "name": name, "uid": job["metadata"]["uid"], "controller": True}
    for body in [mpi_worker_pod(spec, cluster.options, i) for i in range(2)] + [mpi_launcher_pod(spec, cluster.options)]:
        body["metadata"]["ownerReferences"] = [owner]
        kube.core.create_namespaced_pod(kube.namespace, body)
    # Node affinity over the plan plus anti-affinity among the workers: one worker on each planned node.
    _wait(lambda: all(p.spec.node_name for p in kube.pods("muster.io/role=worker")))
    assert sorted(p.spec.node_name for p in kube.pods("muster.io/role=worker")) == sorted(planned)
    # The launcher's end (KWOK ends it after simulate.duration_seconds) is the gang's end; ranks are the workers' indexes.
    _wait(lambda: {s.phase for s in cluster.observe_gangs()[(990102, 1)]} == {PodPhase.SUCCEEDED})
    assert [s.rank for s in cluster.observe_gangs()[(990102, 1)]] == [0, 1]

    cluster.teardown_gang(990102, 1)
    _wait(lambda: _custom(kube, MPIJOB, name) is None and not kube.pods(gang_selector(990102)))
    assert (990102, 1) not in cluster.observe_gangs()
    cluster.teardown_gang(990102, 1)  # deleting what is gone is success


def test_an_unreachable_api_server_keeps_jobs_queued(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=1)
    down = client.Configuration()
    down.host = "https://127.0.0.1:9"  # nothing listens there
    cluster = KubernetesCluster(api=client.ApiClient(down), request_timeout=2)
    with pytest.raises(ClusterUnavailable):
        cluster.list_nodes()
    report = run_cycle(backend=cluster)
    assert "unreachable" in report.cluster_error and report.placed == []
    assert state(job["id"]) == JobState.PENDING
    kube.cycle_until(lambda: state(job["id"]) != JobState.PENDING)


def test_a_server_error_mid_launch_is_cleaned_up_and_retried(
    api: APIClient, kube: KubeHarness, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    """The API server will not fail on demand, so a 500 on the second pod's create is injected in front of the client."""
    real = client.CoreV1Api.create_namespaced_pod
    calls = {"n": 0}

    def flaky(self: client.CoreV1Api, namespace: str, body: dict[str, Any], **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 2:
            raise ApiException(status=500, reason="injected")
        return real(self, namespace, body, **kwargs)

    monkeypatch.setattr(client.CoreV1Api, "create_namespaced_pod", flaky)
    settings.MUSTER_LAUNCH_BACKOFF_SECONDS = 10
    job = submit(api, nodes=2, simulate={"duration_seconds": 2})
    report = kube.cycle()
    # Refused half-way: the job goes back to the queue and the half gang is deleted.
    assert report.requeued == [job["id"]] and state(job["id"]) == JobState.PENDING
    assert kube.pods(f"muster.io/job-id={job['id']}") == []
    # It is retried after a backoff, not in the very next cycle.
    kube.cycle()
    assert Job.objects.get(pk=job["id"]).pending_reason_code == "LAUNCH_BACKOFF"
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    assert Job.objects.get(pk=job["id"]).attempt == 2


# --- the watch -----------------------------------------------------------------------------------


def test_the_watch_triggers_a_cycle_when_a_gang_pod_changes(kube: KubeHarness) -> None:
    fired = threading.Event()
    stop = threading.Event()
    pods = next(w for w in watches_for(kube.cluster, fired.set) if w.name == "pods")
    pods.resync_seconds = 2  # so the thread notices `stop` soon after the test
    thread = threading.Thread(target=pods.run, args=(stop,), daemon=True)
    thread.start()
    try:
        assert fired.wait(10)  # the initial list
        fired.clear()
        spec = GangSpec(
            job_id=990002, attempt=1, name="x", image="busybox:1.36", command=("true",), env={},
            node_names=("gpu-node-00",), gpus_per_node=1, wall_time_seconds=600, owner="alice",
        )  # fmt: skip
        kube.cluster.launch_gang(spec)
        assert fired.wait(10), "no cycle was triggered by the new pod"
    finally:
        stop.set()


def test_a_watch_whose_resource_version_is_gone_relists_and_goes_on(kube: KubeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API server answers 410 Gone when a watch's version was compacted away; injected here, it will not on demand."""
    events: list[str] = []
    stop = threading.Event()
    real_stream = watch.Watch.stream
    calls = {"n": 0}

    def stream(self: watch.Watch, fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ApiException(status=410, reason="Gone: too old resource version")
        if calls["n"] > 2:
            stop.set()
        return real_stream(self, fn, *args, **{**kwargs, "timeout_seconds": 1})

    monkeypatch.setattr(watch.Watch, "stream", stream)
    pods = next(w for w in watches_for(kube.cluster, lambda: None) if w.name == "pods")
    pods.on_event = lambda kind, obj: events.append(kind)
    pods.run(stop, retry_seconds=0.1)
    # Listed, was told its version is gone, listed again, and watched from the new version.
    assert events[:2] == ["RELISTED", "RELISTED"] and pods.relists == 2 and calls["n"] >= 2


# --- nodes and logs ------------------------------------------------------------------------------


def test_a_gang_asking_for_rdma_devices_runs_on_the_nodes_that_advertise_them(api: APIClient, kube: KubeHarness) -> None:
    by_name = {n.name: n for n in kube.cluster.list_nodes()}
    fabric = {name for name, n in by_name.items() if n.rdma_devices == 8}
    assert fabric and len(fabric) < len(by_name)  # the test cluster's first rack
    assert {n.block for n in by_name.values()} == {"block-a"}
    job = submit(api, nodes=2, gpus_per_node=1, rdma_per_node=8, simulate={"duration_seconds": 2})
    kube.cycle()
    pods = kube.pods(gang_selector(job["id"]))
    assert len(pods) == 2
    for pod in pods:
        assert pod.spec.containers[0].resources.requests["rdma/rdma_shared_device_a"] == "8"
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    ran_on = set(Allocation.objects.filter(job_id=job["id"]).values_list("node__name", flat=True))
    assert len(ran_on) == 2 and ran_on <= fabric


def test_gpu_slices_run_on_the_shared_nodes_the_device_plugin_advertises(api: APIClient, kube: KubeHarness) -> None:
    """The test cluster's gpu-shared-ts-00 offers nvidia.com/gpu.shared (4 replicas per GPU, GFD's labels) and
    gpu-shared-mig-00 nvidia.com/mig-1g.10gb; each slice job's one pod asks for one of those, and runs to its end."""
    by_name = {n.name: n for n in kube.cluster.list_nodes()}
    ts, mig = by_name["gpu-shared-ts-00"], by_name["gpu-shared-mig-00"]
    assert (ts.sharing, ts.gpus_total, ts.slices_per_gpu, ts.slice_gpus, ts.slice_resource) == (
        "time-slicing",
        8,
        4,
        0.25,
        "nvidia.com/gpu.shared",
    )
    assert (mig.sharing, mig.gpus_total, mig.slices_per_gpu, mig.slice_memory_gb, mig.slice_resource) == (
        "mig",
        8,
        7,
        10.0,
        "nvidia.com/mig-1g.10gb",
    )
    quarter = submit(api, nodes=1, gpus_per_node=1, gpu_fraction=0.25, simulate={"duration_seconds": 2})
    isolated = submit(api, nodes=1, gpus_per_node=1, gpu_memory_gb=8, gpu_isolation=True, simulate={"duration_seconds": 2})
    whole = submit(api, nodes=1, gpus_per_node=1, simulate={"duration_seconds": 2})
    kube.cycle()
    (quarter_pod,) = kube.pods(gang_selector(quarter["id"]))
    (mig_pod,) = kube.pods(gang_selector(isolated["id"]))
    (whole_pod,) = kube.pods(gang_selector(whole["id"]))
    requests = quarter_pod.spec.containers[0].resources.requests
    assert requests["nvidia.com/gpu.shared"] == "1" and "nvidia.com/gpu" not in requests
    # A quarter of a GPU's host side, so all 32 quarter slices of the node's 8 GPUs fit its CPUs and memory.
    assert (requests["cpu"], requests["memory"]) == ("2", "16Gi")  # as the API server writes 2000m and 16384Mi
    assert mig_pod.spec.containers[0].resources.requests["nvidia.com/mig-1g.10gb"] == "1"
    env = {e.name: e.value for e in quarter_pod.spec.containers[0].env}
    assert (env["MUSTER_GPU_SHARING"], env["MUSTER_GPU_SHARE"]) == ("time-slicing", "0.25")
    for job_id in (quarter["id"], isolated["id"], whole["id"]):
        kube.cycle_until(lambda job_id=job_id: state(job_id) == JobState.SUCCEEDED)
    ran_on = dict(Allocation.objects.filter(job_id__in=[quarter["id"], isolated["id"], whole["id"]]).values_list("job_id", "node__name"))
    # The real kube-scheduler bound each pod where Muster planned it: slices on the shared nodes, whole GPUs elsewhere.
    assert (ran_on[quarter["id"]], ran_on[isolated["id"]]) == ("gpu-shared-ts-00", "gpu-shared-mig-00")
    assert not by_name[ran_on[whole["id"]]].sharing
    assert whole_pod.spec.containers[0].resources.requests["nvidia.com/gpu"] == "1"


@pytest.mark.usefixtures("classes_open")
def test_an_elastic_job_grows_and_shrinks_its_pods_on_the_cluster(api: APIClient, kube: KubeHarness, settings: Any) -> None:
    """On the real API server: an elastic 2..4 job starts on the two nodes left, grows by two pods (torchrun's PET_*
    rendezvous in their env) when a filler ends, and loses its last two to a production gang, rank 0 staying."""
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    whole = len([n for n in kube.cluster.list_nodes() if not n.sharing])
    filler = submit(api, nodes=whole - 2, gpus_per_node=8, simulate={"duration_seconds": 8})
    kube.cycle()
    elastic = submit(api, nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=8, wall_time_seconds=3600, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(elastic["id"]) == JobState.RUNNING)
    assert Job.objects.get(pk=elastic["id"]).nodes == 2
    first = {p.metadata.name: p for p in kube.pods(gang_selector(elastic["id"]))}
    env = {e.name: e.value for e in next(iter(first.values())).spec.containers[0].env}
    assert env["PET_NNODES"] == "2:4" and env["PET_RDZV_BACKEND"] == "c10d"
    assert env["PET_RDZV_ENDPOINT"] == f"{gang_name(elastic['id'], 1)}-0.{gang_name(elastic['id'], 1)}.{kube.namespace}.svc:29400"
    kube.cycle_until(lambda: state(filler["id"]) == JobState.SUCCEEDED, timeout=90)
    kube.cycle_until(lambda: len(kube.pods(gang_selector(elastic["id"]))) == 4)
    kube.cycle_until(lambda: all(p.status.phase == "Running" for p in kube.pods(gang_selector(elastic["id"]))))
    assert Job.objects.get(pk=elastic["id"]).nodes == 4 and state(elastic["id"]) == JobState.RUNNING
    urgent = submit(api, nodes=whole - 2, gpus_per_node=8, priority_class="production", simulate={"duration_seconds": 2})
    kube.cycle()
    job = Job.objects.get(pk=elastic["id"])
    assert job.nodes == 2 and job.state == JobState.RUNNING
    assert JobResize.objects.filter(job=job).last().reason.startswith(f"Shrunk for job {urgent['id']}, which has priority")
    kube.cycle_until(lambda: sorted(int(p.metadata.labels["muster.io/rank"]) for p in kube.pods(gang_selector(elastic["id"]))) == [0, 1])
    kube.cycle_until(lambda: state(urgent["id"]) == JobState.SUCCEEDED)
    assert state(elastic["id"]) == JobState.RUNNING
    api.post(f"/api/v1/jobs/{elastic['id']}/cancel/")


def test_an_elastic_job_that_grew_onto_gpus_other_pods_took_lets_those_ranks_go_at_once(
    api: APIClient, kube: KubeHarness, other_pods: OtherPods
) -> None:
    """Pods Muster did not start were bound to idle nodes after the count the growth read (a worker's read between
    two recounts): the grown ranks stay Pending. The cycle that counts those pods lets them go; the job runs on with
    the nodes it had (it read "All 2 pods are running" while the nodes stayed held and charged for good)."""
    kube.cluster.foreign_pods_seconds = 3600
    whole = sorted(n.name for n in kube.cluster.list_nodes() if not n.sharing)
    kube.cycle()  # the read of other pods every later cycle of this backend reuses: none
    Node.objects.filter(name__in=whole[2:]).update(held=True)  # room for two nodes only
    elastic = submit(api, nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=8, wall_time_seconds=3600, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(elastic["id"]) == JobState.RUNNING)
    assert sorted(job_assigned_nodes(Job.objects.get(pk=elastic["id"]))) == whole[:2]
    grown = whole[2:4]
    for node in grown:
        other_pods.start(node, {"nvidia.com/gpu": "8"}, tolerations=[{"operator": "Exists"}])
    Node.objects.filter(name__in=grown).update(held=False)
    kube.cycle()
    assert Job.objects.get(pk=elastic["id"]).nodes == 4

    def unbound() -> bool:
        pods = kube.pods(gang_selector(elastic["id"]))
        return sum(c.type == "PodScheduled" and c.status == "False" for p in pods for c in p.status.conditions or []) == 2

    deadline = time.monotonic() + 20
    while not unbound():
        assert time.monotonic() < deadline, "kube-scheduler did not say the grown pods cannot be bound"
        time.sleep(0.2)
    kube.cycle()
    assert Job.objects.get(pk=elastic["id"]).nodes == 4  # counting with the old read, it waits for the launch timeout
    foreign_pods_changed()  # what the watch does when a pod Muster did not start is bound
    kube.cycle()
    job = Job.objects.get(pk=elastic["id"])
    assert (job.state, job.nodes, job.restarts, job.attempt) == (JobState.RUNNING, 2, 0, 1)
    assert sorted(job_assigned_nodes(job)) == whole[:2]
    expected = f"Pods Muster did not start hold GPUs on {', '.join(grown)} that it grew onto (rank "
    assert job.state_reason.startswith(expected) and job.state_reason.endswith("; shrunk back from 4 to 2 nodes."), job.state_reason
    assert "Insufficient nvidia.com/gpu" in job.state_reason
    kube.cycle_until(lambda: sorted(int(p.metadata.labels["muster.io/rank"]) for p in kube.pods(gang_selector(elastic["id"]))) == [0, 1])
    assert state(elastic["id"]) == JobState.RUNNING
    api.post(f"/api/v1/jobs/{elastic['id']}/cancel/")


def test_node_inventory_follows_the_cluster(kube: KubeHarness) -> None:
    names = sorted(n.metadata.name for n in kube.core.list_node().items)
    cordoned, tainted = names[0], names[1]
    by_name = {n.name: n for n in kube.cluster.list_nodes()}
    assert by_name[names[2]].gpus_total == 8 and by_name[names[2]].schedulable
    assert by_name[names[2]].rack.startswith("rack-") and "H100" in by_name[names[2]].gpu_model
    kube.core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    kube.core.patch_node(tainted, {"spec": {"taints": [{"key": "maintenance", "value": "true", "effect": "NoSchedule"}]}})
    try:
        by_name = {n.name: n for n in kube.cluster.list_nodes()}
        # Cordoned and tainted-away nodes are not scheduled on; the GPU operator's own taint is tolerated.
        assert not by_name[cordoned].schedulable and not by_name[tainted].schedulable
        kube.core.patch_node(tainted, {"spec": {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}})
        assert {n.name: n for n in kube.cluster.list_nodes()}[tainted].schedulable
    finally:
        kube.core.patch_node(cordoned, {"spec": {"unschedulable": False}})
        kube.core.patch_node(tainted, {"spec": {"taints": None}})


def test_logs_of_a_rank_come_from_the_api_server(api: APIClient, kube: KubeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jobs.logs.get_backend", lambda: kube.cluster)
    job = submit(api, nodes=2, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    body = api.get(f"/api/v1/jobs/{job['id']}/logs/", {"rank": 1, "tail": 2}).json()
    assert body["rank"] == 1 and body["attempt"] == 1
    expected = kube.core.read_namespaced_pod_log(f"{gang_name(job['id'], 1)}-1", kube.namespace, tail_lines=2)
    assert body["logs"] == expected and body["logs"].strip()


def test_following_a_ranks_output_ends_when_its_job_ends(api: APIClient, tx_kube: KubeHarness, monkeypatch: pytest.MonkeyPatch) -> None:
    """KWOK's kubelets never end a log stream (nor does one through a node gone away): `muster logs -f` of a job that ended
    hung for MUSTER_LOG_FOLLOW_SECONDS. The stream now ends once Muster knows the attempt is over."""
    monkeypatch.setattr("jobs.cluster.kubernetes.FOLLOW_WATCH_SECONDS", 0.2)
    job = submit(api, nodes=1, simulate={"duration_seconds": 600})
    tx_kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    chunks: list[str] = []
    ended = threading.Event()

    def follow() -> None:
        try:
            chunks.extend(job_logs_follow(Job.objects.get(pk=job["id"]), rank=0, tail=None, backend=tx_kube.cluster))
        finally:
            connections.close_all()
            ended.set()

    threading.Thread(target=follow, daemon=True).start()
    assert not ended.wait(3), "it stopped following a running job"
    assert api.post(f"/api/v1/jobs/{job['id']}/cancel/").status_code == 200
    assert ended.wait(30), "it went on following a cancelled job"
    assert "simulated container output" in "".join(chunks)


def kept_logs(api: APIClient, job_id: int, rank: int, attempt: int) -> str:
    body = api.get(f"/api/v1/jobs/{job_id}/logs/", {"rank": rank, "attempt": attempt}).json()
    assert body["source"] == "stored" and body["attempt"] == attempt, body
    return body["logs"]


def test_a_failing_ranks_output_is_kept_through_its_retry_and_after_the_job_failed(api: APIClient, kube: KubeHarness) -> None:
    job = submit(api, nodes=2, max_restarts=1, simulate={"duration_seconds": 2, "exit_code": 3})
    kube.cycle_until(lambda: state(job["id"]) == JobState.FAILED)
    kube.cycle_until(lambda: not kube.pods(gang_selector(job["id"])), timeout=30)
    detail = api.get(f"/api/v1/jobs/{job['id']}/").json()
    assert detail["attempts"] == [{"attempt": 1, "ranks": [0, 1]}, {"attempt": 2, "ranks": [0, 1]}]
    for attempt in (1, 2):  # what the API server served for the pod, kept before the gang went
        assert "muster-testcluster: simulated container output" in kept_logs(api, job["id"], rank=1, attempt=attempt)


@pytest.mark.usefixtures("classes_open")
def test_a_preempted_jobs_output_is_kept_when_it_is_requeued(
    api: APIClient, other_api: APIClient, kube: KubeHarness, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    nodes = len([n for n in kube.cluster.list_nodes() if not n.sharing])  # the nodes of whole GPUs
    sweep = submit(api, nodes=nodes, gpus_per_node=8, priority_class="preemptible", simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(sweep["id"]) == JobState.RUNNING)
    submit(other_api, nodes=2, gpus_per_node=8, priority_class="production", simulate={"duration_seconds": 60})
    kube.cycle_until(lambda: state(sweep["id"]) == JobState.PENDING)
    assert Job.objects.get(pk=sweep["id"]).attempt == 1
    assert "muster-testcluster: simulated container output" in kept_logs(api, sweep["id"], rank=nodes - 1, attempt=1)


# --- a process killed mid-launch -----------------------------------------------------------------

DYING_CYCLE = """
import os, signal, sys
import django
django.setup()
from kubernetes import client, config
from jobs.cluster.kubernetes import KubernetesCluster
from jobs.cluster.manifests import PodOptions
from scheduler.cycle import run_cycle
real = client.CoreV1Api.create_namespaced_pod
calls = []
def dying(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies half-way through creating the gang
    return real(self, *args, **kwargs)
client.CoreV1Api.create_namespaced_pod = dying
api = config.new_client_from_config(config_file=sys.argv[1])
run_cycle(backend=KubernetesCluster(api=api, options=PodOptions(namespace=sys.argv[2], termination_grace_seconds=0)))
"""


@pytest.fixture
def tx_kube(kube_api: client.ApiClient, transactional_db: None, require_postgres: None) -> Iterator[KubeHarness]:
    yield from kube_harness(kube_api)


def test_a_worker_killed_mid_launch_leaves_exactly_one_gang(api: APIClient, tx_kube: KubeHarness) -> None:
    from tests.processes import ROOT, database_url

    job = submit(api, nodes=3, simulate={"duration_seconds": 600})
    env = {**os.environ, "DATABASE_URL": database_url(), "DJANGO_SETTINGS_MODULE": "config.settings"}
    died = subprocess.run(
        [sys.executable, "-c", DYING_CYCLE, kubeconfig_path(), tx_kube.namespace], cwd=ROOT, env=env, capture_output=True, timeout=60
    )
    assert died.returncode == -9, died.stderr.decode()[-2000:]
    # The placement was committed before the launch, and the gang is incomplete.
    assert state(job["id"]) == JobState.SCHEDULED
    assert len(tx_kube.pods(gang_selector(job["id"]))) < 3
    # Another worker's cycle finds the half gang and completes it: same attempt, no second gang.
    tx_kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    pods = tx_kube.pods(gang_selector(job["id"]))
    assert sorted(p.metadata.name for p in pods) == [f"{gang_name(job['id'], 1)}-{r}" for r in range(3)]
    assert len(tx_kube.services(gang_selector(job["id"]))) == 1
    assert Job.objects.get(pk=job["id"]).attempt == 1 and Job.objects.get(pk=job["id"]).restarts == 0


# --- the RBAC operators apply: enough for everything Muster does, and no more ---------------------------------------


@pytest.fixture
def as_muster(kube: KubeHarness) -> Iterator[KubernetesCluster]:
    """Muster's backend signed in as the service account of platform/kubernetes/rbac.yaml, applied as it is shipped
    (its namespaces renamed to this test's, its cluster-wide names suffixed so runs never collide)."""
    suffix = kube.namespace.rsplit("-", 1)[-1]
    home = f"muster-sa-{suffix}"
    rbac = yaml.safe_load_all((ROOT / "platform" / "kubernetes" / "rbac.yaml").read_text())
    text = json.dumps([doc for doc in rbac if doc])
    text = text.replace('"muster-jobs"', json.dumps(kube.namespace)).replace('"namespace": "muster"', f'"namespace": "{home}"')
    text = text.replace('"muster-cluster-reader"', f'"muster-cluster-reader-{suffix}"')
    documents = json.loads(text)
    kube.core.create_namespace({"metadata": {"name": home}})
    rbac_api = client.RbacAuthorizationV1Api(kube.api)
    try:
        utils.create_from_yaml(kube.api, yaml_objects=documents)
        request = {"spec": {"expirationSeconds": 3600}}
        token = kube.core.create_namespaced_service_account_token("muster", home, request).status.token
        configuration = client.Configuration()
        admin = kube.api.configuration
        configuration.host, configuration.ssl_ca_cert = admin.host, admin.ssl_ca_cert
        configuration.api_key = {"authorization": f"Bearer {token}"}
        yield KubernetesCluster(
            api=client.ApiClient(configuration),
            options=PodOptions(namespace=kube.namespace, termination_grace_seconds=0),
            rack_label=kube.cluster.rack_label,
        )
    finally:
        rbac_api.delete_cluster_role_binding(f"muster-cluster-reader-{suffix}")
        rbac_api.delete_cluster_role(f"muster-cluster-reader-{suffix}")
        kube.core.delete_namespace(home, grace_period_seconds=0)


def _cluster_in(kube: KubeHarness, namespace: str) -> KubernetesCluster:
    """The harness's cluster with its jobs in `namespace`, which no one has made: as on a first start."""
    return KubernetesCluster(
        api=kube.api, options=PodOptions(namespace=namespace, termination_grace_seconds=0), rack_label=kube.cluster.rack_label
    )


def test_a_first_start_makes_the_jobs_namespace_and_runs_a_job_there(api: APIClient, kube: KubeHarness) -> None:
    fresh = f"{kube.namespace}-fresh"
    kube.cluster = _cluster_in(kube, fresh)
    try:
        job = submit(api, nodes=2, simulate={"duration_seconds": 2})
        kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
        assert kube.core.read_namespace(fresh).metadata.labels["app.kubernetes.io/managed-by"] == "muster"
        assert Job.objects.get(pk=job["id"]).restarts == 0
    finally:
        kube.core.delete_namespace(fresh, grace_period_seconds=0)


def cycle_while_waiting(kube: KubeHarness, done: Any, waits_for: str, timeout: float = 90.0) -> list[CycleReport]:
    """Cycle until `done()`, as `kube.cycle_until` does, but letting cycles say the cluster refuses jobs for
    `waits_for` (and nothing else) meanwhile; returns every cycle's report."""
    reports = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = run_cycle(backend=kube.cluster)
        assert report.ran and (not report.cluster_error or waits_for in report.cluster_error), report.cluster_error
        reports.append(report)
        if done():
            return reports
        time.sleep(0.5)
    raise AssertionError(f"not done after {timeout} s of cycles")


def test_a_jobs_namespace_deleted_under_muster_is_made_again_and_fails_no_job(api: APIClient, kube: KubeHarness) -> None:
    """Its launches read "Failed launch 1 of at most 5" while it was being deleted (5 such failed the job), then
    "Muster may not create it: run kubectl create namespace" though Muster could, and later did."""
    fresh = f"{kube.namespace}-again"
    kube.cluster = _cluster_in(kube, fresh)
    try:
        first = submit(api, nodes=1, simulate={"duration_seconds": 1})
        kube.cycle_until(lambda: state(first["id"]) == JobState.SUCCEEDED)
        kube.cycle_until(lambda: not kube.core.list_namespaced_pod(fresh).items)
        kube.core.delete_namespace(fresh, grace_period_seconds=0)
        job = submit(api, nodes=1, simulate={"duration_seconds": 1})
        # While it is being deleted (Terminating), the cycles say so and place nothing.
        cycle_while_waiting(kube, lambda: state(job["id"]) == JobState.SUCCEEDED, waits_for="is being deleted")
        reasons = list(JobEvent.objects.filter(job_id=job["id"]).values_list("reason", flat=True))
        assert not any("of at most" in r or "kubectl create namespace" in r for r in reasons), reasons
    finally:
        kube.core.delete_namespace(fresh, grace_period_seconds=0)


def test_a_jobs_namespace_held_terminating_keeps_jobs_waiting_spending_nothing_and_they_start_once_it_is_made_again(
    api: APIClient, kube: KubeHarness
) -> None:
    """An operator's walk: `kubectl delete namespace muster-jobs --wait=false` with jobs running and queued, the
    namespace held Terminating by a finalizer for minutes. Every requeued job was placed again at once and refused
    ("... because it is being terminated. Failed launch 1 in a row"), counts rose to 5 and backoffs to 240 s, attempts to
    10, the namespace was made again only at the next launch (which counted too), and whole nodes stayed idle up to
    the 600 s backoff after it was back."""
    fresh = f"{kube.namespace}-held"
    kube.cluster = _cluster_in(kube, fresh)
    held = {"metadata": {"name": "held", "finalizers": ["muster.io/test-hold"]}}
    try:
        running = submit(api, nodes=2, simulate={"duration_seconds": 600})
        kube.cycle_until(lambda: state(running["id"]) == JobState.RUNNING)
        kube.core.create_namespaced_config_map(fresh, held)  # its finalizer holds the namespace Terminating
        kube.core.delete_namespace(fresh)
        _wait(lambda: kube.core.read_namespace(fresh).status.phase == "Terminating")
        _wait(lambda: not kube.core.list_namespaced_pod(fresh).items)  # the namespace controller deleted the gang's pods
        queued = submit(api, nodes=1, simulate={"duration_seconds": 600})
        jobs = [running["id"], queued["id"]]

        # In the moment between a cycle's check and its launches: the first launch meets the refusal, the rest wait too.
        with pytest.MonkeyPatch.context() as unchecked:
            unchecked.setattr(KubernetesCluster, "_refusal", lambda self, namespace: "")
            report = run_cycle(backend=kube.cluster)
        assert "is being deleted" in report.cluster_error and sorted(report.placed) == sorted(jobs), report
        assert report.launched == [] and report.launch_failed == []
        attempts = dict(Job.objects.filter(pk__in=jobs).values_list("id", "attempt"))
        for job in Job.objects.filter(pk__in=jobs):
            assert (job.state, job.launch_failures, job.launch_not_before, job.restarts) == (JobState.PENDING, 0, None, 0)
            assert job.pending_reason.startswith(f"Not launched: The namespace '{fresh}' for jobs is being deleted"), job.pending_reason

        # Every cycle's own check sees it before placing anything, and every page says why.
        for _ in range(5):
            report = run_cycle(backend=kube.cluster)
            assert report.cluster_error.startswith(f"The namespace '{fresh}' for jobs is being deleted") and report.placed == []
            time.sleep(0.5)
        assert dict(Job.objects.filter(pk__in=jobs).values_list("id", "attempt")) == attempts
        problem = api.get("/api/v1/nodes/").json()["cluster"]["problem"]
        assert problem.startswith(f"The namespace '{fresh}' for jobs is being deleted"), problem

        # Once it is gone Muster makes it again itself (not at a launch), and that very cycle launches both.
        kube.core.patch_namespaced_config_map("held", fresh, {"metadata": {"finalizers": None}})
        # (Gone for a moment between a cycle that found it Terminating and the next, which makes it again.)
        made_again = lambda: _exists(kube, fresh) and kube.core.read_namespace(fresh).status.phase == "Active"  # noqa: E731
        reports = cycle_while_waiting(kube, made_again, "is being deleted", 120)
        assert not reports[-1].cluster_error and sorted(reports[-1].launched) == sorted(jobs), reports[-1]
        assert kube.core.read_namespace(fresh).metadata.labels["app.kubernetes.io/managed-by"] == "muster"
        kube.cycle_until(lambda: all(state(j) == JobState.RUNNING for j in jobs))
        for job in Job.objects.filter(pk__in=jobs):
            assert (job.launch_failures, job.restarts, job.attempt) == (0, 0, attempts[job.pk] + 1)
        told = list(JobEvent.objects.filter(job_id__in=jobs).values_list("reason", flat=True))
        assert not any("Failed launch" in r or "of at most" in r for r in told), told
    finally:
        _let_go(kube, fresh)


def test_a_jobs_namespace_being_deleted_requeues_its_running_jobs_at_once_and_charges_them_no_further(
    api: APIClient, user: Any, kube: KubeHarness
) -> None:
    """`kubectl delete namespace muster-jobs` with a job running, the namespace held Terminating by a finalizer: its
    controller deleted the gang's pods within seconds, yet the job read RUNNING, and was charged node-hours, until the
    namespace was gone and made again minutes later, then was requeued as pods "deleted outside Muster"."""
    fresh = f"{kube.namespace}-going"
    kube.cluster = _cluster_in(kube, fresh)
    held = {"metadata": {"name": "held", "finalizers": ["muster.io/test-hold"]}}
    try:
        job = submit(api, nodes=2, simulate={"duration_seconds": 600})
        kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
        kube.core.create_namespaced_config_map(fresh, held)  # its finalizer holds the namespace Terminating
        kube.core.delete_namespace(fresh)
        # What the namespace controller does to the pods here: it deletes them (KWOK removes a deleted pod at once; a
        # kubelet would stop it within its grace period, the pod read as being deleted meanwhile).
        _wait(lambda: kube.core.read_namespace(fresh).status.phase == "Terminating")
        reports = cycle_while_waiting(kube, lambda: state(job["id"]) == JobState.PENDING, "is being deleted", 60)
        assert reports[-1].requeued == [job["id"]] and reports[-1].placed == [], reports[-1]
        assert kube.core.read_namespace(fresh).status.phase == "Terminating", "requeued while the namespace is still there"
        requeued = Job.objects.get(pk=job["id"])
        assert (requeued.restarts, requeued.launch_failures, requeued.launch_not_before) == (0, 0, None)
        why = (
            f"The cluster deleted 2 of 2 pods (ranks 0, 1) under attempt 1: the namespace '{fresh}' for jobs is being "
            "deleted; requeued without spending a restart, and placed again once the cluster takes jobs."
        )
        assert requeued.pending_reason == why
        shown = api.get(f"/api/v1/jobs/{job['id']}/").json()
        assert shown["state"] == "PENDING" and why in [e["reason"] for e in shown["events"]]
        assert why in session_for(user).get(f"/jobs/{job['id']}/").content.decode().replace("&#x27;", "'")
        # Charged up to the cycle that saw its pods gone, and no further while the namespace stays Terminating.
        released = set(Allocation.objects.filter(job_id=job["id"], attempt=1).values_list("released_at", flat=True))
        assert len(released) == 1 and None not in released
        charged = list(UsageCharge.objects.filter(job_id=job["id"]).values_list("node_seconds", flat=True))
        assert requeued.charged_until == released.pop() and charged and charged[0] > 0
        run_seconds = shown["run_seconds"]
        time.sleep(2)
        for _ in range(2):
            report = run_cycle(backend=kube.cluster)
            assert report.cluster_error.startswith(f"The namespace '{fresh}' for jobs is being deleted") and report.placed == []
        assert list(UsageCharge.objects.filter(job_id=job["id"]).values_list("node_seconds", flat=True)) == charged
        assert api.get(f"/api/v1/jobs/{job['id']}/").json()["run_seconds"] == run_seconds
        assert (state(job["id"]), Job.objects.get(pk=job["id"]).attempt) == (JobState.PENDING, 1)

        # Once it is gone and made again, the job starts again: attempt 2, no restart spent.
        kube.core.patch_namespaced_config_map("held", fresh, {"metadata": {"finalizers": None}})
        cycle_while_waiting(kube, lambda: state(job["id"]) == JobState.RUNNING, "is being deleted", 120)
        again = Job.objects.get(pk=job["id"])
        assert (again.attempt, again.restarts, again.launch_failures) == (2, 0, 0)
    finally:
        _let_go(kube, fresh)


def test_with_the_shipped_rbac_a_jobs_namespace_being_deleted_requeues_its_running_jobs_at_once(
    api: APIClient, kube: KubeHarness, as_muster: KubernetesCluster
) -> None:
    """The shipped rbac.yaml reads no namespaces, and the namespace's deletion takes Muster's Role there with it: the
    cycles read a role cut, yet the pods listed through the cluster-wide role are gone, and the job goes at once."""
    kube.cluster = as_muster
    held = {"metadata": {"name": "held", "finalizers": ["muster.io/test-hold"]}}
    job = submit(api, nodes=1, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    kube.core.create_namespaced_config_map(kube.namespace, held)
    kube.core.delete_namespace(kube.namespace)
    try:
        deadline = time.monotonic() + 60
        while state(job["id"]) != JobState.PENDING:
            assert time.monotonic() < deadline, "still running 60 s after its namespace began terminating"
            report = run_cycle(backend=as_muster)
            assert report.placed == [] and ("is being deleted" in report.cluster_error or "Muster may not" in report.cluster_error)
            time.sleep(0.5)
        requeued = Job.objects.get(pk=job["id"])
        assert (requeued.restarts, requeued.launch_failures) == (0, 0)
        assert "deleted outside Muster" in requeued.pending_reason or "is being deleted" in requeued.pending_reason
        assert kube.core.read_namespace(kube.namespace).status.phase == "Terminating"
    finally:
        kube.core.patch_namespaced_config_map("held", kube.namespace, {"metadata": {"finalizers": None}})
        _wait(lambda: not _exists(kube, kube.namespace))
        kube.core.create_namespace({"metadata": {"name": kube.namespace}})  # for the fixtures' own teardown


def _let_go(kube: KubeHarness, namespace: str) -> None:
    """After a test that held `namespace` Terminating with a ConfigMap's finalizer: the finalizer off, the namespace gone."""
    try:
        kube.core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    except ApiException:
        pass
    if _exists(kube, namespace):
        delete_namespace_and_pods(kube.core, namespace)


def _exists(kube: KubeHarness, namespace: str) -> bool:
    try:
        kube.core.read_namespace(namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return True


def test_without_a_namespace_it_may_use_jobs_wait_and_every_page_says_what_to_do(
    api: APIClient, user: Any, kube: KubeHarness, as_muster: KubernetesCluster
) -> None:
    missing = f"{kube.namespace}-missing"
    restricted = KubernetesCluster(
        api=as_muster.api, options=PodOptions(namespace=missing, termination_grace_seconds=0), rack_label=as_muster.rack_label
    )
    job = submit(api, nodes=1, simulate={"duration_seconds": 2})
    for _ in range(2):
        report = run_cycle(backend=restricted)
        assert report.cluster_error and f"`kubectl create namespace {missing}`" in report.cluster_error
        # rbac.yaml names muster-jobs: the command given writes the namespace in.
        assert f"`sed 's/namespace: muster-jobs$/namespace: {missing}/' platform/kubernetes/rbac.yaml | kubectl apply -f -`" in (
            report.cluster_error
        )
    waiting = Job.objects.get(pk=job["id"])
    assert (waiting.state, waiting.attempt, waiting.restarts) == (JobState.PENDING, 0, 0), "no launch tried, nothing spent"
    assert ClusterHealth.objects.get(pk=1).error == report.cluster_error
    # Every call it lacks, by name (it may list and watch pods: the shipped role does both in every namespace).
    assert "may not create pods, deletecollection pods, get pods/log" in report.cluster_error
    page = session_for(user).get("/").content.decode()
    assert "Jobs cannot start on the cluster" in page and f"kubectl create namespace {missing}" in page
    cluster = api.get("/api/v1/nodes/").json()["cluster"]
    assert cluster["usable"] is False and cluster["problem"] == report.cluster_error and cluster["since"]
    # Once it is usable (here: the namespace Muster's role is in), the same job starts.
    kube.cluster = as_muster
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    assert api.get("/api/v1/nodes/").json()["cluster"] == {
        "usable": True,
        "problem": "",
        "since": None,
        "last_cycle_at": ClusterHealth.objects.get(pk=1).last_cycle_at.isoformat().replace("+00:00", "Z"),
    }


def test_a_role_revoked_under_a_running_muster_is_said_and_jobs_wait_without_spending_launches(
    api: APIClient, kube: KubeHarness, as_muster: KubernetesCluster
) -> None:
    kube.cluster = as_muster
    first = submit(api, nodes=1, simulate={"duration_seconds": 2})
    kube.cycle_until(lambda: state(first["id"]) == JobState.SUCCEEDED)  # the role was checked, and works
    rbac_api = client.RbacAuthorizationV1Api(kube.api)
    binding = rbac_api.read_namespaced_role_binding("muster-gangs", kube.namespace)
    rbac_api.delete_namespaced_role_binding("muster-gangs", kube.namespace)
    try:
        job = submit(api, nodes=1, simulate={"duration_seconds": 2})
        # Revoked in the moment between a cycle's check and its launch: the launch meets the 403.
        with pytest.MonkeyPatch.context() as unchecked:
            unchecked.setattr(KubernetesCluster, "_refusal", lambda self, namespace: "")
            report = run_cycle(backend=as_muster)
        # Not a raw 403 in the job's history and a failed launch: what is missing, and what to apply.
        assert report.cluster_error and "Muster may not create pods" in report.cluster_error, report.cluster_error
        assert report.launch_failed == []
        waiting = Job.objects.get(pk=job["id"])
        # Back to the queue spending nothing: no failed launch counted, no backoff.
        assert (waiting.state, waiting.restarts, waiting.launch_failures, waiting.launch_not_before) == (JobState.PENDING, 0, 0, None)
        told = " ".join(e["reason"] for e in api.get(f"/api/v1/jobs/{job['id']}/").json()["events"])
        assert "Not launched: Muster may not create pods" in told and "Forbidden" not in told and "Failed launch" not in told
        assert api.get("/api/v1/nodes/").json()["cluster"]["usable"] is False
        # The next cycles' own check sees it before they place anything: no attempt taken, nothing spent.
        for _ in range(2):
            report = run_cycle(backend=as_muster)
            assert report.cluster_error.startswith("Muster may not create pods") and report.placed == []
        assert (Job.objects.get(pk=job["id"]).attempt, Job.objects.get(pk=job["id"]).launch_failures) == (1, 0)
    finally:
        binding.metadata = client.V1ObjectMeta(name="muster-gangs", namespace=kube.namespace)
        rbac_api.create_namespaced_role_binding(kube.namespace, binding)
    # The first cycle whose check passes launches it.
    reports = cycle_while_waiting(kube, lambda: Job.objects.get(pk=job["id"]).attempt == 2, waits_for="Muster may not create pods")
    assert reports[-1].launched == [job["id"]] and not reports[-1].cluster_error
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)
    assert Job.objects.get(pk=job["id"]).launch_failures == 0


def test_refused_access_names_the_identity_muster_runs_as_and_how_to_bind_the_roles_to_it(
    kube: KubeHarness, as_muster: KubernetesCluster
) -> None:
    """A new admin ran Muster with their own kubeconfig, applied rbac.yaml as told, and was refused again: its bindings
    name the ServiceAccount muster/muster. The message says who Muster runs as, and the commands it gives work."""
    kube.core.create_namespaced_service_account(kube.namespace, {"metadata": {"name": "nobody"}})
    token = kube.core.create_namespaced_service_account_token("nobody", kube.namespace, {"spec": {"expirationSeconds": 3600}})
    configuration = client.Configuration()
    configuration.host, configuration.ssl_ca_cert = kube.api.configuration.host, kube.api.configuration.ssl_ca_cert
    configuration.api_key = {"authorization": f"Bearer {token.status.token}"}
    nobody = KubernetesCluster(
        api=client.ApiClient(configuration), options=PodOptions(namespace=kube.namespace), rack_label=as_muster.rack_label
    )
    with pytest.raises(ClusterRefuses) as refused:
        nobody.prepare()
    told = str(refused.value)
    assert told.startswith("Muster may not create pods, list pods, watch pods, deletecollection pods, get pods/log, create services")
    assert "list nodes, watch nodes (cluster-wide)" in told
    assert f"Muster runs as system:serviceaccount:{kube.namespace}:nobody" in told
    subject = f"--serviceaccount={kube.namespace}:nobody"
    assert f"`kubectl create rolebinding muster-gangs-nobody --role=muster-gangs -n {kube.namespace} {subject}`" in told
    assert f"`kubectl create clusterrolebinding muster-cluster-reader-nobody --clusterrole=muster-cluster-reader {subject}`" in told
    # Done as said (the cluster role has this run's suffix, as_muster's), Muster may launch.
    reader = f"muster-cluster-reader-{kube.namespace.rsplit('-', 1)[-1]}"
    rbac_api = client.RbacAuthorizationV1Api(kube.api)
    who = [{"kind": "ServiceAccount", "name": "nobody", "namespace": kube.namespace}]
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "muster-gangs"}
    rbac_api.create_namespaced_role_binding(
        kube.namespace, {"metadata": {"name": "muster-gangs-nobody"}, "roleRef": role_ref, "subjects": who}
    )
    cluster_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader}
    rbac_api.create_cluster_role_binding({"metadata": {"name": f"{reader}-nobody"}, "roleRef": cluster_ref, "subjects": who})
    try:
        _wait(lambda: _prepared(nobody))
    finally:
        rbac_api.delete_cluster_role_binding(f"{reader}-nobody")
    # Muster's own ServiceAccount (rbac.yaml's, here in a renamed namespace) is told nothing of the kind.
    assert as_muster._who_is_bound(kube.namespace) == ""


def _prepared(cluster: KubernetesCluster) -> bool:
    try:
        cluster.prepare()
    except ClusterRefuses:
        return False
    return True


def watch_command(cluster: KubernetesCluster, monkeypatch: pytest.MonkeyPatch, settings: Any) -> tuple[str, str, object]:
    """`manage.py muster_watch` starting up against `cluster`, stopped where its watches would start: what it printed
    and the recount it gave the watch of other pods (None: that watch is not run)."""
    started: dict[str, object] = {}
    settings.MUSTER_CLUSTER = "kubernetes"
    monkeypatch.setattr(muster_watch.KubernetesCluster, "from_settings", lambda: cluster)
    monkeypatch.setattr(muster_watch, "watch_forever", lambda _cluster, _trigger, recount: started.update(recount=recount))
    out, err = io.StringIO(), io.StringIO()
    call_command("muster_watch", stdout=out, stderr=err)
    return out.getvalue(), err.getvalue(), started["recount"]


def test_without_reading_pods_in_every_namespace_it_says_so_and_can_be_told_not_to(
    api: APIClient, kube: KubeHarness, as_muster: KubernetesCluster, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    role = f"muster-cluster-reader-{kube.namespace.rsplit('-', 1)[-1]}"
    rbac_api = client.RbacAuthorizationV1Api(kube.api)
    rbac_api.patch_cluster_role(role, {"rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]}]})
    job = submit(api, nodes=1, simulate={"duration_seconds": 2})
    report = run_cycle(backend=as_muster)
    assert report.cluster_error.startswith(
        "Muster may not list pods in every namespace (to count the GPUs pods it did not start hold on its nodes; "
        "where the GPU nodes are Muster's alone, MUSTER_K8S_COUNT_FOREIGN_PODS=0 turns that off): "
        f"`sed 's/namespace: muster-jobs$/namespace: {kube.namespace}/' platform/kubernetes/rbac.yaml | kubectl apply -f -`"
    ), report.cluster_error
    assert state(job["id"]) == JobState.PENDING
    assert not as_muster.may_watch_other_pods()
    out, err, recount = watch_command(as_muster, monkeypatch, settings)  # muster_watch says so and leaves the count to its TTL
    assert recount is None and out.startswith(f"watching pods in namespace {kube.namespace}, nodes;")
    assert err.startswith("Muster may not watch pods in every namespace (platform/kubernetes/rbac.yaml grants it)")
    as_muster.count_foreign_pods = False
    kube.cluster = as_muster
    kube.cycle_until(lambda: state(job["id"]) == JobState.SUCCEEDED)


def test_the_shipped_rbac_is_enough_for_a_job_from_launch_to_teardown_and_no_more(
    api: APIClient, kube: KubeHarness, as_muster: KubernetesCluster, monkeypatch: pytest.MonkeyPatch, settings: Any
) -> None:
    kube.cluster = as_muster  # every cycle below talks to the API server as Muster's service account
    done = submit(api, nodes=2, simulate={"duration_seconds": 2})
    kube.cycle_until(lambda: state(done["id"]) == JobState.RUNNING)
    assert "simulated container output" in as_muster.read_logs(done["id"], 1, 0, 10)  # pods/log
    kube.cycle_until(lambda: state(done["id"]) == JobState.SUCCEEDED)
    cancelled = submit(api, nodes=1, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(cancelled["id"]) == JobState.RUNNING)
    assert api.post(f"/api/v1/jobs/{cancelled['id']}/cancel/").status_code == 200
    kube.cycle_until(lambda: not kube.pods(gang_selector(cancelled["id"])) and not kube.services(gang_selector(cancelled["id"])))
    # A teardown deletes the gang's Secret too, which garbage collection leaves when the Service went with --cascade=orphan.
    assert as_muster._may("delete", "", "secrets", "namespace", kube.namespace)
    # An elastic job's shrink deletes some ranks' pods: with deletecollection, the verb the Role grants (a single
    # delete was refused with 403, and the refusal stopped every cycle).
    wide = submit(api, nodes=3, simulate={"duration_seconds": 600})
    kube.cycle_until(lambda: state(wide["id"]) == JobState.RUNNING)
    as_muster.teardown_ranks(wide["id"], 1, [1, 2])

    def live_ranks() -> list[str]:
        pods = kube.pods(gang_selector(wide["id"]))
        return sorted(p.metadata.labels[LABEL_RANK] for p in pods if p.metadata.deletion_timestamp is None)

    deadline = time.monotonic() + 30  # no cycle meanwhile: it would requeue the fixed gang that lost two pods
    while live_ranks() != ["0"] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert live_ranks() == ["0"]
    assert api.post(f"/api/v1/jobs/{wide['id']}/cancel/").status_code == 200
    # The watch lists and watches pods and nodes, and the pods Muster did not start.
    fired = threading.Event()
    recounted = threading.Event()
    stop = threading.Event()
    for resource_watch in watches_for(as_muster, fired.set, recounted.set):
        resource_watch.resync_seconds = 2
        threading.Thread(target=resource_watch.run, args=(stop,), daemon=True).start()
    try:
        assert fired.wait(10) and recounted.wait(10)
    finally:
        stop.set()
    assert as_muster.may_watch_other_pods()
    out, err, recount = watch_command(as_muster, monkeypatch, settings)
    assert recount is not None and not err
    assert out.startswith(f"watching pods in namespace {kube.namespace}, nodes, the pods Muster did not start;")

    # And no more: no reading the gangs' Secrets (other jobs' tokens), no touching nodes or other namespaces.
    core = as_muster.core
    forbidden = [
        lambda: core.list_namespaced_secret(kube.namespace),
        lambda: core.read_namespaced_secret(f"{gang_name(done['id'], 1)}-env", kube.namespace),
        lambda: core.patch_node(as_muster.list_nodes()[0].name, {"spec": {"unschedulable": True}}),
        lambda: core.read_namespaced_pod("x", "default"),  # pods elsewhere are listed for their GPUs, not read
        lambda: core.delete_collection_namespaced_pod("default"),
        lambda: core.create_namespaced_pod("default", {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "x", "image": "x"}]}}),
    ]
    for call in forbidden:
        with pytest.raises(ApiException) as refused:
            call()
        assert refused.value.status == 403


# --- a node Muster holds, shown on the cluster's Node -------------------------------------------------------------------


@pytest.fixture
def node_marks() -> Iterator[None]:
    """Each test starts with no refusal to mark holds remembered (the process keeps one per API server)."""
    kubernetes_backend._HOLD_MARKS_REFUSED.clear()
    yield
    kubernetes_backend._HOLD_MARKS_REFUSED.clear()


@pytest.fixture
def node_holds_applied(kube: KubeHarness, as_muster: KubernetesCluster, node_marks: None) -> Iterator[None]:
    """platform/kubernetes/node-holds.yaml applied as shipped, for as_muster's ServiceAccount (its names suffixed as
    as_muster's are); waits until its admission policy refuses what it should."""
    suffix = kube.namespace.rsplit("-", 1)[-1]
    text = (ROOT / "platform" / "kubernetes" / "node-holds.yaml").read_text()
    text = text.replace("name: muster-node-holds", f"name: muster-node-holds-{suffix}").replace(
        "policyName: muster-node-holds", f"policyName: muster-node-holds-{suffix}"
    )
    text = text.replace("namespace: muster\n", f"namespace: muster-sa-{suffix}\n").replace(
        "system:serviceaccount:muster:muster", f"system:serviceaccount:muster-sa-{suffix}:muster"
    )
    documents = [doc for doc in yaml.safe_load_all(text) if doc]
    assert [d["kind"] for d in documents] == [
        "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"
    ]  # fmt: skip
    utils.create_from_yaml(kube.api, yaml_objects=documents)
    name = as_muster.list_nodes()[0].name
    rack = kube.core.read_node(name).metadata.labels["muster.io/rack"]

    def policy_refuses() -> bool:
        try:
            as_muster.core.patch_node(name, {"metadata": {"labels": {"muster.io/rack": "elsewhere"}}})
        except ApiException as exc:
            return exc.status == 403 and "only its hold's label" in exc.body
        kube.core.patch_node(name, {"metadata": {"labels": {"muster.io/rack": rack}}})  # the policy was not in force yet
        return False

    try:
        _wait(policy_refuses)
        yield
    finally:
        admission = client.AdmissionregistrationV1Api(kube.api)
        admission.delete_validating_admission_policy_binding(f"muster-node-holds-{suffix}")
        admission.delete_validating_admission_policy(f"muster-node-holds-{suffix}")
        rbac_api = client.RbacAuthorizationV1Api(kube.api)
        rbac_api.delete_cluster_role_binding(f"muster-node-holds-{suffix}")
        rbac_api.delete_cluster_role(f"muster-node-holds-{suffix}")


def _mark(kube: KubeHarness, name: str) -> tuple[str | None, str | None]:
    """The node's label muster.io/held and annotation muster.io/held-reason, as kubectl shows them."""
    metadata = kube.core.read_node(name).metadata
    return (metadata.labels or {}).get("muster.io/held"), (metadata.annotations or {}).get("muster.io/held-reason")


def _unmark(kube: KubeHarness, name: str) -> None:
    kube.core.patch_node(name, {"metadata": {"labels": {"muster.io/held": None}, "annotations": {"muster.io/held-reason": None}}})


def test_a_node_muster_holds_is_marked_on_the_cluster_for_kubectl_and_unmarked_when_released(
    api: APIClient, admin_user: Any, kube: KubeHarness, as_muster: KubernetesCluster, node_holds_applied: None, other_pods: OtherPods
) -> None:
    """An operator looking at the cluster could not tell a node an admin held in Muster from any other."""
    kube.cluster = as_muster  # with the shipped rbac.yaml and node-holds.yaml
    name = kube.cluster.list_nodes()[0].name
    node = Node.objects.get(name=name)
    _unmark(kube, name)
    before = kube.core.read_node(name)
    try:
        nodes_hold(nodes=[node], reason="GPU 3 replaced, back Friday", by=admin_user)
        kube.cycle()
        assert _mark(kube, name) == ("true", "GPU 3 replaced, back Friday")
        after = kube.core.read_node(name)
        # Nothing else of the node changed: no taint, not cordoned, every other label and annotation as it was.
        assert (after.spec.taints, after.spec.unschedulable) == (before.spec.taints, before.spec.unschedulable)
        assert {k: v for k, v in after.metadata.labels.items() if k != "muster.io/held"} == before.metadata.labels
        assert {k: v for k, v in after.metadata.annotations.items() if k != "muster.io/held-reason"} == before.metadata.annotations
        # Other tenants' pods still go there (a taint would have kept them off).
        other = other_pods.ask({"cpu": "100m"}, node=name)
        _wait(lambda: kube.core.read_namespaced_pod(other, other_pods.namespace).spec.node_name == name)
        # Muster's identity may mark holds and nothing else: not cordon, taint or relabel the node.
        for change in (
            {"spec": {"unschedulable": True}},
            {"spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}},
            {"metadata": {"labels": {"muster.io/rack": "elsewhere"}}},
            {"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "5"}}},
        ):
            with pytest.raises(ApiException) as refused:
                as_muster.core.patch_node(name, change)
            assert refused.value.status == 403, change
        # Re-worded, and a mark changed by hand is put back.
        nodes_hold(nodes=[node], reason="GPU 3 replaced, back Monday", by=admin_user)
        kube.cycle()
        assert _mark(kube, name) == ("true", "GPU 3 replaced, back Monday")
        kube.core.patch_node(name, {"metadata": {"annotations": {"muster.io/held-reason": None}}})
        kube.cycle()
        assert _mark(kube, name) == ("true", "GPU 3 replaced, back Monday")
        # Released: both go.
        nodes_release(nodes=[node], by=admin_user)
        kube.cycle()
        assert _mark(kube, name) == (None, None)
        assert kube.core.read_node(name).metadata.labels == before.metadata.labels

        # Held while the API server cannot be reached: marked by the first cycle that reaches it.
        nodes_hold(nodes=[node], reason="PSU swap", by=admin_user)
        down = client.Configuration()
        down.host = "https://127.0.0.1:9"  # nothing listens there
        assert "unreachable" in run_cycle(backend=KubernetesCluster(api=client.ApiClient(down), request_timeout=2)).cluster_error
        assert _mark(kube, name) == (None, None)
        kube.cycle()
        assert _mark(kube, name) == ("true", "PSU swap")
        assert api.get("/api/v1/nodes/").status_code == 200
    finally:
        _unmark(kube, name)


def test_without_patch_on_nodes_a_hold_works_in_muster_and_the_log_says_once_that_nodes_are_not_marked(
    api: APIClient, admin_user: Any, kube: KubeHarness, as_muster: KubernetesCluster, node_marks: None, caplog: pytest.LogCaptureFixture
) -> None:
    kube.cluster = as_muster  # the shipped rbac.yaml alone: read-only on nodes
    names = [n.name for n in as_muster.list_nodes() if not n.sharing]  # the whole-GPU nodes
    held = Node.objects.get(name=names[0])
    caplog.set_level(logging.INFO, logger="jobs.cluster.kubernetes")
    nodes_hold(nodes=[held], reason="GPU 3 replaced", by=admin_user)
    job = submit(api, nodes=len(names) - 1, gpus_per_node=8, simulate={"duration_seconds": 600})  # every one but the held one
    for _ in range(4):
        kube.cycle()
    assert _mark(kube, held.name) == (None, None)
    said = [r for r in caplog.records if r.name == "jobs.cluster.kubernetes" and "not shown on the Kubernetes nodes" in r.getMessage()]
    assert len(said) == 1 and said[0].levelno == logging.WARNING, [r.getMessage() for r in caplog.records]
    assert "apply platform/kubernetes/node-holds.yaml" in said[0].getMessage()
    # The hold itself works: the job runs, elsewhere.
    kube.cycle_until(lambda: state(job["id"]) == JobState.RUNNING)
    assert held.name not in job_assigned_nodes(Job.objects.get(pk=job["id"]))
    assert Node.objects.get(pk=held.pk).held
