"""The Kubernetes objects Muster emits, checked as data (the test cluster dry-runs them for real in test_kubernetes.py)."""

from __future__ import annotations

import pytest

from jobs.cluster.base import GangSpec
from jobs.cluster.manifests import PodOptions, gang_name, label_value, pod_manifest, rendezvous_env, service_manifest
from jobs.cluster.watch import Trigger


def spec(**overrides: object) -> GangSpec:
    values: dict[str, object] = {
        "job_id": 42,
        "attempt": 3,
        "name": "llama",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ("torchrun", "train.py"),
        "env": {"LR": "0.1"},
        "node_names": ("gpu-a", "gpu-b", "gpu-c"),
        "gpus_per_node": 8,
        "wall_time_seconds": 7200,
        "owner": "alice@example.org",
        "team": "vision",
    }
    values.update(overrides)
    return GangSpec(**values)  # type: ignore[arg-type]


def test_each_rank_is_pinned_to_its_node_and_requests_its_gpus() -> None:
    options = PodOptions(cpu_per_gpu="4", memory_per_gpu="32Gi")
    for rank, node in enumerate(spec().node_names):
        pod = pod_manifest(spec(), rank, options, owner_uid="uid-1")
        assert pod["metadata"]["name"] == f"muster-42-3-{rank}"
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]
        assert "nodeName" not in pod["spec"]  # kube-scheduler binds it, and checks it fits
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        assert requests == {"nvidia.com/gpu": "8", "cpu": "32", "memory": "256Gi"}
        assert pod["spec"]["containers"][0]["resources"]["limits"] == requests


def test_pods_are_owned_by_the_gangs_service_and_labelled() -> None:
    pod = pod_manifest(spec(), 0, PodOptions(), owner_uid="uid-1")
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["kind"] == "Service" and owner["name"] == "muster-42-3" and owner["uid"] == "uid-1"
    labels = pod["metadata"]["labels"]
    assert labels["muster.io/job-id"] == "42" and labels["muster.io/attempt"] == "3" and labels["muster.io/rank"] == "0"
    assert labels["muster.io/user"] == "alice_example.org" and labels["muster.io/team"] == "vision"


def test_rendezvous_environment_for_torchrun_and_mpi() -> None:
    env = rendezvous_env(spec(), 2, PodOptions(namespace="ml"))
    assert env["MASTER_ADDR"] == "muster-42-3-0.muster-42-3.ml.svc"
    assert (env["WORLD_SIZE"], env["NODE_RANK"], env["NPROC_PER_NODE"], env["MASTER_PORT"]) == ("3", "2", "8", "29500")
    assert env["MUSTER_HOSTS"].split(",") == [f"muster-42-3-{r}.muster-42-3" for r in range(3)]
    pod = pod_manifest(spec(), 2, PodOptions(namespace="ml"))
    names = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert names["LR"] == "0.1" and names["NODE_RANK"] == "2"
    assert pod["spec"]["hostname"] == "muster-42-3-2" and pod["spec"]["subdomain"] == "muster-42-3"


def test_the_headless_service_selects_exactly_this_attempt() -> None:
    service = service_manifest(spec(), PodOptions())
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"muster.io/job-id": "42", "muster.io/attempt": "3"}


def test_pods_are_locked_down_unless_an_admin_allows_host_networking() -> None:
    pod = pod_manifest(spec(), 0, PodOptions())["spec"]
    container = pod["containers"][0]
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": {"drop": ["ALL"]}}
    assert pod["hostNetwork"] is False and pod["automountServiceAccountToken"] is False
    assert all("hostPath" not in v for v in pod["volumes"])
    assert pod["volumes"] == [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    assert pod["activeDeadlineSeconds"] == 7200 and pod["restartPolicy"] == "Never"
    assert pod_manifest(spec(), 0, PodOptions(host_network_teams=frozenset({"vision"})))["spec"]["hostNetwork"] is True
    assert pod_manifest(spec(team=""), 0, PodOptions(host_network_teams=frozenset({"vision"})))["spec"]["hostNetwork"] is False


def test_rdma_resources_and_secondary_network_come_from_settings() -> None:
    options = PodOptions(extra_resources={"rdma/hca": "1"}, pod_annotations={"k8s.v1.cni.cncf.io/networks": "roce"})
    pod = pod_manifest(spec(), 0, options)
    assert pod["spec"]["containers"][0]["resources"]["requests"]["rdma/hca"] == "1"
    assert pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce"


def test_simulate_becomes_annotations_the_test_cluster_reads_and_only_the_last_rank_fails() -> None:
    s = spec(simulate={"duration_seconds": 2.5, "exit_code": 3})
    annotations = [pod_manifest(s, r, PodOptions())["metadata"]["annotations"] for r in range(3)]
    assert [a["muster.io/sim-duration"] for a in annotations] == ["2.5s"] * 3
    assert [a["muster.io/sim-exit-code"] for a in annotations] == ["0", "0", "3"]
    assert "muster.io/sim-duration" not in pod_manifest(spec(), 0, PodOptions())["metadata"]["annotations"]


@pytest.mark.parametrize(("text", "expected"), [("alice", "alice"), ("a b/c", "a_b_c"), ("-x-", "x"), ("é" * 80, "")])
def test_label_values_are_always_valid(text: str, expected: str) -> None:
    assert label_value(text) == expected


def test_names_derive_from_job_and_attempt() -> None:
    assert gang_name(7, 1) == "muster-7-1" != gang_name(7, 2)


def test_a_burst_of_watch_events_enqueues_one_cycle_per_debounce_window() -> None:
    fired: list[float] = []
    now = [0.0]
    trigger = Trigger(fire=lambda: fired.append(now[0]), debounce=1.0, clock=lambda: now[0])
    for t in (0.0, 0.1, 0.5, 0.99, 1.0, 1.5, 3.0):
        now[0] = t
        trigger()
    assert fired == [0.0, 1.0, 3.0]
