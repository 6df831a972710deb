"""The Kubernetes objects Muster emits, checked as data (the test cluster dry-runs them for real in test_kubernetes.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from jobs.cluster.base import GangSpec, GpuSlice, PodPhase, PodStatus, stopped_by_cluster
from jobs.cluster.crd_manifests import mpi_env, mpijob_manifest, native_podgroup_manifest, podgroup_manifest
from jobs.cluster.kubernetes import KubernetesCluster, _counts_for_gang, _pod_status, mpijob_statuses, pod_requests
from jobs.cluster.manifests import (
    PodOptions,
    env_secret_manifest,
    gang_name,
    label_value,
    pod_manifest,
    rendezvous_env,
    service_manifest,
    service_owner_reference,
)
from jobs.cluster.watch import Trigger
from tests.kube import mpi_launcher_pod, mpi_worker_pod


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


@pytest.mark.parametrize(
    ("share", "cpu", "memory"),
    [(0.25, "2000m", "16384Mi"), (0.5, "4000m", "32768Mi"), (1 / 7, "1143m", "9363Mi")],
)
def test_a_slice_pod_asks_its_slices_share_of_a_gpus_cpu_and_memory(share: float, cpu: str, memory: str) -> None:
    # A whole GPU's each, the slices a node offers would ask it for several times its CPUs: most would never start.
    sliced = spec(node_names=("gpu-shared",), gpus_per_node=1, gpu_slice=GpuSlice("nvidia.com/gpu.shared", "time-slicing", share))
    pod = pod_manifest(sliced, 0, PodOptions(cpu_per_gpu="8", memory_per_gpu="64Gi"), owner_uid="uid-1")
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"nvidia.com/gpu.shared": "1", "cpu": cpu, "memory": memory}


def _gpu_requests(pod: dict[str, Any]) -> dict[str, str]:
    return pod["spec"]["containers"][0]["resources"]["requests"]


def test_a_gangs_pod_asks_for_every_gpu_muster_holds_for_it_on_its_node() -> None:
    # A 2-node x 1-GPU gang on 8-GPU nodes holds (and is charged for) 16 GPUs: its pods ask for 8 each, so the cluster
    # binds nothing else there. CPU, memory and NPROC_PER_NODE stay what it runs: 1 GPU's.
    gang = spec(node_names=("gpu-a", "gpu-b"), gpus_per_node=1, gpus_held=(8, 8))
    options = PodOptions(cpu_per_gpu="4", memory_per_gpu="32Gi")
    for rank in range(2):
        pod = pod_manifest(gang, rank, options, owner_uid="uid-1")
        assert _gpu_requests(pod) == {"nvidia.com/gpu": "8", "cpu": "4", "memory": "32Gi"}
        assert pod["spec"]["containers"][0]["resources"]["limits"] == _gpu_requests(pod)
        assert rendezvous_env(gang, rank, options)["NPROC_PER_NODE"] == "1"
    # Nodes of different sizes: each rank asks for its own node's.
    mixed = spec(node_names=("gpu-a", "gpu-small"), gpus_per_node=2, gpus_held=(8, 4))
    assert [_gpu_requests(pod_manifest(mixed, r, options))["nvidia.com/gpu"] for r in range(2)] == ["8", "4"]


def test_a_single_node_job_of_part_of_a_node_asks_for_its_gpus_only() -> None:
    one = spec(node_names=("gpu-a",), gpus_per_node=1, gpus_held=(1,))
    assert _gpu_requests(pod_manifest(one, 0, PodOptions(cpu_per_gpu="4", memory_per_gpu="32Gi"))) == {
        "nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi",
    }  # fmt: skip
    # A spec built without gpus_held (an old caller) asks for gpus_per_node, as before.
    assert _gpu_requests(pod_manifest(spec(gpus_per_node=2), 1, PodOptions()))["nvidia.com/gpu"] == "2"


def test_an_elastic_jobs_grown_rank_asks_for_its_whole_node() -> None:
    elastic = spec(node_names=("gpu-a", "gpu-b", "gpu-c"), gpus_per_node=2, gpus_held=(8, 8, 8), min_nodes=1, max_nodes=4)
    assert _gpu_requests(pod_manifest(elastic, 2, PodOptions()))["nvidia.com/gpu"] == "8"


def test_a_slice_pod_asks_one_slice_whatever_is_held() -> None:
    sliced = spec(
        node_names=("gpu-shared",), gpus_per_node=1, gpus_held=(8,), gpu_slice=GpuSlice("nvidia.com/gpu.shared", "time-slicing", 0.25)
    )
    requests = _gpu_requests(pod_manifest(sliced, 0, PodOptions(cpu_per_gpu="8", memory_per_gpu="64Gi")))
    assert requests == {"nvidia.com/gpu.shared": "1", "cpu": "2000m", "memory": "16384Mi"}


def test_mpijob_workers_of_a_gang_ask_for_every_gpu_held_on_a_node() -> None:
    gang = spec(node_names=("gpu-a", "gpu-b"), gpus_per_node=1, gpus_held=(8, 8))
    job = mpijob_manifest(gang, PodOptions(launch_mode="mpijob", cpu_per_gpu="4", memory_per_gpu="32Gi"))
    launcher, worker = _replicas(job)
    (container,) = worker["template"]["spec"]["containers"]
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8", "cpu": "4", "memory": "32Gi"}
    assert job["spec"]["slotsPerWorker"] == 1  # mpirun starts one rank per GPU it uses
    assert {e["name"]: e.get("value") for e in container["env"]}["NPROC_PER_NODE"] == "1"
    assert "nvidia.com/gpu" not in launcher["template"]["spec"]["containers"][0]["resources"]["requests"]
    # One template for every worker, which may land on any planned node: the fewest held on any of them, so each fits.
    mixed = spec(node_names=("gpu-a", "gpu-small"), gpus_per_node=2, gpus_held=(8, 4))
    (container,) = _replicas(mpijob_manifest(mixed, PodOptions(launch_mode="mpijob")))[1]["template"]["spec"]["containers"]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "4"


def test_pods_are_owned_by_the_gangs_service_and_labelled() -> None:
    pod = pod_manifest(spec(), 0, PodOptions(), owner_uid="uid-1")
    (owner,) = pod["metadata"]["ownerReferences"]
    assert owner["kind"] == "Service" and owner["name"] == "muster-42-3" and owner["uid"] == "uid-1"
    labels = pod["metadata"]["labels"]
    assert labels["muster.io/job-id"] == "42" and labels["muster.io/attempt"] == "3" and labels["muster.io/rank"] == "0"
    assert labels["muster.io/user"] == "alice_example.org" and labels["muster.io/team"] == "vision"


def test_an_elastic_jobs_pods_get_no_size_that_a_resize_would_make_wrong() -> None:
    """A pod that runs on after its job grew from 3 to 5 nodes kept WORLD_SIZE=3 and a host list of 3."""
    env = rendezvous_env(spec(min_nodes=2, max_nodes=5), 1, PodOptions(namespace="ml"))
    assert "WORLD_SIZE" not in env and "MUSTER_HOSTS" not in env and "RANK" not in env
    assert (env["NODE_RANK"], env["PET_NNODES"], env["MUSTER_MIN_NODES"]) == ("1", "2:5", "2")
    # Its node rank and master come from the c10d rendezvous, not from a static one that a resize would break.
    assert "PET_NODE_RANK" not in env and "PET_MASTER_ADDR" not in env
    assert env["PET_NPROC_PER_NODE"] == "8"


def test_rendezvous_environment_for_torchrun_and_mpi() -> None:
    env = rendezvous_env(spec(), 2, PodOptions(namespace="ml"))
    assert env["MASTER_ADDR"] == "muster-42-3-0.muster-42-3.ml.svc"
    assert (env["WORLD_SIZE"], env["NODE_RANK"], env["NPROC_PER_NODE"], env["MASTER_PORT"]) == ("3", "2", "8", "29500")
    assert env["MUSTER_HOSTS"].split(",") == [f"muster-42-3-{r}.muster-42-3" for r in range(3)]
    # One process per pod for a script started with `python`: its rank among the pods.
    assert env["RANK"] == "2"


# torchrun's flags for a static multi-node rendezvous; it reads each from PET_<FLAG> when the flag is not given
# (torch.distributed.run's `env` action: "PET_" + the option's name, upper case, dashes as underscores).
TORCHRUN_STATIC_FLAGS = ("--nnodes", "--node-rank", "--master-addr", "--master-port", "--nproc-per-node")


def test_a_gang_started_with_plain_torchrun_forms_one_world() -> None:
    """`torchrun train.py` with no flags on each of a 3-node gang's pods: 3 nodes of 8 workers, rank 2 of them, one master."""
    envs = [rendezvous_env(spec(), rank, PodOptions(namespace="ml")) for rank in range(3)]
    flags = [{flag: env.get("PET_" + flag[2:].upper().replace("-", "_")) for flag in TORCHRUN_STATIC_FLAGS} for env in envs]
    assert flags[2] == {
        "--nnodes": "3",
        "--node-rank": "2",
        "--master-addr": "muster-42-3-0.muster-42-3.ml.svc",
        "--master-port": "29500",
        "--nproc-per-node": "8",
    }
    assert [f["--node-rank"] for f in flags] == ["0", "1", "2"]
    assert len({(f["--master-addr"], f["--master-port"], f["--nnodes"]) for f in flags}) == 1
    pod = pod_manifest(spec(), 2, PodOptions(namespace="ml"))
    names = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert names["LR"] == "0.1" and names["NODE_RANK"] == "2"
    assert pod["spec"]["hostname"] == "muster-42-3-2" and pod["spec"]["subdomain"] == "muster-42-3"


def test_the_telemetry_token_is_in_the_gangs_secret_never_in_a_pod_spec() -> None:
    token = "mtt.42.deadbeef"
    secret_spec = spec(env={"LR": "0.1", "MUSTER_TELEMETRY_TOKEN": "a user's own value"}, secret_env={"MUSTER_TELEMETRY_TOKEN": token})
    pods = [pod_manifest(secret_spec, 0, PodOptions(), owner_uid="uid-1")]
    mpi = PodOptions(launch_mode="mpijob")
    pods += [mpi_launcher_pod(secret_spec, mpi), mpi_worker_pod(secret_spec, mpi, 0)]
    for pod in pods:
        assert token not in repr(pod)
        env = pod["spec"]["containers"][0]["env"]
        refs = [e for e in env if e["name"] == "MUSTER_TELEMETRY_TOKEN"]
        # Exactly one entry, from the Secret: the job's own env cannot shadow the token.
        assert refs == [
            {"name": "MUSTER_TELEMETRY_TOKEN", "valueFrom": {"secretKeyRef": {"name": "muster-42-3-env", "key": "MUSTER_TELEMETRY_TOKEN"}}}
        ]
    secret = env_secret_manifest(secret_spec, PodOptions(), service_owner_reference(secret_spec, "uid-1"))
    assert secret["metadata"]["name"] == "muster-42-3-env" and secret["stringData"] == {"MUSTER_TELEMETRY_TOKEN": token}
    assert secret["metadata"]["labels"]["muster.io/job-id"] == "42"
    assert [(o["kind"], o["uid"]) for o in secret["metadata"]["ownerReferences"]] == [("Service", "uid-1")]


def test_the_headless_service_selects_exactly_this_attempt() -> None:
    service = service_manifest(spec(), PodOptions())
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["selector"] == {"muster.io/job-id": "42", "muster.io/attempt": "3"}


def test_an_elastic_gang_declares_the_port_its_ranks_meet_on() -> None:
    # PET_RDZV_ENDPOINT points at rank 0's port 29400; the Service and the pods declared only 29500.
    elastic = spec(min_nodes=2, max_nodes=5)
    endpoint = rendezvous_env(elastic, 1, PodOptions())["PET_RDZV_ENDPOINT"]
    port = int(endpoint.rsplit(":", 1)[1])
    service_ports = service_manifest(elastic, PodOptions())["spec"]["ports"]
    assert {"name": "c10d-rendezvous", "port": port, "targetPort": port} in service_ports
    container = pod_manifest(elastic, 0, PodOptions())["spec"]["containers"][0]
    assert {"name": "c10d-rendezvous", "containerPort": port} in container["ports"]
    # A gang of fixed size meets on the master port alone.
    assert [p["port"] for p in service_manifest(spec(), PodOptions())["spec"]["ports"]] == [29500]


def test_pods_are_locked_down_unless_an_admin_allows_host_networking() -> None:
    pod = pod_manifest(spec(), 0, PodOptions())["spec"]
    container = pod["containers"][0]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "readOnlyRootFilesystem": True,
    }
    assert pod["securityContext"] == {
        "seccompProfile": {"type": "RuntimeDefault"},
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 1000,
        "fsGroup": 1000,
    }
    assert pod["hostNetwork"] is False and pod["automountServiceAccountToken"] is False
    assert all("hostPath" not in v for v in pod["volumes"])
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    assert container["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"}, {"name": "dshm", "mountPath": "/dev/shm"}]
    assert pod["activeDeadlineSeconds"] == 7200 and pod["restartPolicy"] == "Never"
    assert pod_manifest(spec(host_network=True), 0, PodOptions())["spec"]["hostNetwork"] is True


def test_a_team_allowed_root_or_a_writable_root_gets_only_that() -> None:
    root = pod_manifest(spec(run_as_root=True), 0, PodOptions(run_as_user=4242))["spec"]
    assert root["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    assert root["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    writable = pod_manifest(spec(writable_root_filesystem=True), 0, PodOptions(run_as_user=4242))["spec"]
    assert writable["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is False
    assert writable["securityContext"]["runAsNonRoot"] is True and writable["securityContext"]["runAsUser"] == 4242


def test_a_stored_env_a_job_may_no_longer_set_never_reaches_the_pod() -> None:
    """Submit refuses these names; a job stored before that rule still cannot pass them to its pods."""
    old = spec(env={"NVIDIA_VISIBLE_DEVICES": "all", "LD_PRELOAD": "/x.so", "NCCL_DEBUG": "INFO"})
    env = {e["name"]: e.get("value") for e in pod_manifest(old, 0, PodOptions())["spec"]["containers"][0]["env"]}
    assert "NVIDIA_VISIBLE_DEVICES" not in env and "LD_PRELOAD" not in env
    assert env["NCCL_DEBUG"] == "INFO"


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


def test_a_burst_of_watch_events_enqueues_one_cycle_per_debounce_window_and_one_after_it() -> None:
    fired: list[float] = []
    held: list[tuple[float, Callable[[], object]]] = []  # (due, call): what the trigger asked to run later
    now = [0.0]

    def at(t: float) -> None:
        while held and held[0][0] <= t:
            due, call = held.pop(0)
            now[0] = due
            call()
        now[0] = t

    trigger = Trigger(
        fire=lambda: fired.append(now[0]), debounce=1.0, clock=lambda: now[0], later=lambda delay, call: held.append((now[0] + delay, call))
    )
    for t in (0.0, 0.1, 0.5, 0.99, 2.5, 2.6, 5.0):
        at(t)
        trigger()
    at(10.0)
    # 0.1-0.99 held back, fired once at the window's end (1.0); 2.5 fired at once; 2.6 at 3.5; 5.0 at once.
    assert fired == [0.0, 1.0, 2.5, 3.5, 5.0]


# --- the optional launch modes (MUSTER_K8S_LAUNCH_MODE) --------------------------------------------------------------


def test_an_unknown_launch_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="launch mode"):
        PodOptions(launch_mode="volcano")


def test_the_default_mode_uses_the_default_scheduler_and_no_pod_group() -> None:
    pod = pod_manifest(spec(), 0, PodOptions())
    assert "schedulerName" not in pod["spec"] and "scheduling.x-k8s.io/pod-group" not in pod["metadata"]["labels"]


def test_podgroup_mode_adds_a_podgroup_of_the_gangs_size_owned_by_its_service() -> None:
    options = PodOptions(namespace="ml", launch_mode="podgroup", scheduler_name="scheduler-plugins-scheduler")
    group = podgroup_manifest(spec(), options, owner_uid="uid-1")
    assert (group["apiVersion"], group["kind"]) == ("scheduling.x-k8s.io/v1alpha1", "PodGroup")
    assert group["metadata"]["name"] == "muster-42-3" and group["metadata"]["namespace"] == "ml"
    assert group["metadata"]["labels"]["muster.io/job-id"] == "42"
    assert group["spec"] == {"minMember": 3}  # no timeout unless one is set
    (owner,) = group["metadata"]["ownerReferences"]
    assert owner["kind"] == "Service" and owner["name"] == "muster-42-3" and owner["uid"] == "uid-1"
    timed = podgroup_manifest(spec(), PodOptions(launch_mode="podgroup", podgroup_schedule_timeout_seconds=120))
    assert timed["spec"] == {"minMember": 3, "scheduleTimeoutSeconds": 120}
    for rank in range(3):
        pod = pod_manifest(spec(), rank, options, owner_uid="uid-1")
        assert pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] == "muster-42-3"
        assert pod["spec"]["schedulerName"] == "scheduler-plugins-scheduler"
        # Still pinned: the coscheduling scheduler binds the gang together, to the nodes Muster planned.
        terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == [spec().node_names[rank]]
    # An empty scheduler name keeps the default scheduler (the plugin may run as the default one's profile).
    assert "schedulerName" not in pod_manifest(spec(), 0, PodOptions(launch_mode="podgroup"))["spec"]


def _replicas(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    replicas = job["spec"]["mpiReplicaSpecs"]
    return replicas["Launcher"], replicas["Worker"]


def test_mpijob_mode_emits_one_mpijob_with_a_launcher_and_a_worker_per_node() -> None:
    s = spec(simulate={"duration_seconds": 5, "exit_code": 2})
    job = mpijob_manifest(s, PodOptions(namespace="ml", launch_mode="mpijob"))
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v2beta1", "MPIJob")
    assert job["metadata"]["name"] == "muster-42-3" and job["metadata"]["namespace"] == "ml"
    assert job["metadata"]["labels"]["muster.io/job-id"] == "42" and job["metadata"]["labels"]["muster.io/attempt"] == "3"
    assert job["spec"]["slotsPerWorker"] == 8
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running", "backoffLimit": 0, "activeDeadlineSeconds": 7200}
    launcher, worker = _replicas(job)
    assert (launcher["replicas"], launcher["restartPolicy"], worker["replicas"], worker["restartPolicy"]) == (1, "Never", 3, "Never")
    for template, role in ((launcher["template"], "launcher"), (worker["template"], "worker")):
        labels = template["metadata"]["labels"]
        assert labels["muster.io/job-id"] == "42" and labels["muster.io/attempt"] == "3" and labels["muster.io/role"] == role
        assert labels["app.kubernetes.io/managed-by"] == "muster" and "muster.io/rank" not in labels
    # The launcher runs the job's command and holds no GPU; its exit is the job's (simulated) exit.
    (main,) = launcher["template"]["spec"]["containers"]
    assert main["command"] == ["torchrun", "train.py"] and main["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert launcher["template"]["metadata"]["annotations"]["muster.io/sim-exit-code"] == "2"
    env = {e["name"]: e["value"] for e in main["env"]}
    assert (env["WORLD_SIZE"], env["NPROC_PER_NODE"], env["MUSTER_JOB_ID"], env["LR"]) == ("3", "8", "42", "0.1")


def test_mpijob_workers_each_take_a_distinct_planned_node_and_its_gpus() -> None:
    options = PodOptions(launch_mode="mpijob", extra_resources={"rdma/hca": "1"}, pod_annotations={"k8s.v1.cni.cncf.io/networks": "roce"})
    _, worker = _replicas(mpijob_manifest(spec(), options))
    pod = worker["template"]["spec"]
    affinity = pod["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["gpu-a", "gpu-b", "gpu-c"]}]}]
    (apart,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert apart["topologyKey"] == "kubernetes.io/hostname"
    assert apart["labelSelector"] == {"matchLabels": {"muster.io/job-id": "42", "muster.io/attempt": "3", "muster.io/role": "worker"}}
    (container,) = pod["containers"]
    assert "command" not in container  # the operator starts sshd in a worker without a command
    assert container["resources"]["requests"] == {"nvidia.com/gpu": "8", "cpu": "64", "memory": "512Gi", "rdma/hca": "1"}
    assert container["securityContext"]["privileged"] is False and pod["automountServiceAccountToken"] is False
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "32Gi"}}]
    assert pod["securityContext"]["runAsNonRoot"] is True and container["securityContext"]["readOnlyRootFilesystem"] is True
    assert worker["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"] == "roce"
    # What the operator makes of the template: the worker's index is its rank.
    made = mpi_worker_pod(spec(), options, 2)
    assert made["metadata"]["name"] == "muster-42-3-worker-2"
    assert made["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "2"


def _worker(rank: int, phase: PodPhase = PodPhase.RUNNING) -> PodStatus:
    return PodStatus(rank=rank, node_name=f"gpu-{rank}", phase=phase)


def _mpijob(replicas: int = 2, *conditions: dict[str, str]) -> dict[str, Any]:
    return {"spec": {"mpiReplicaSpecs": {"Worker": {"replicas": replicas}}}, "status": {"conditions": list(conditions)}}


def test_an_mpijob_whose_operator_made_no_pods_yet_is_a_pending_gang() -> None:
    """So the launch timeout requeues it on a cluster without the MPI operator, instead of it counting as vanished."""
    statuses = mpijob_statuses(_mpijob(3), [_worker(1)], None)
    assert [(s.rank, s.phase) for s in statuses] == [(0, PodPhase.PENDING), (1, PodPhase.RUNNING), (2, PodPhase.PENDING)]
    assert statuses[0].node_name == ""  # not a lost node


def test_the_launchers_end_is_the_mpijobs_end() -> None:
    done = PodStatus(rank=0, node_name="cpu-0", phase=PodPhase.SUCCEEDED, exit_code=0)
    assert {s.phase for s in mpijob_statuses(_mpijob(2), [_worker(0), _worker(1)], done)} == {PodPhase.SUCCEEDED}
    # Workers already cleaned up by the operator: the Succeeded condition still says so.
    succeeded = _mpijob(2, {"type": "Succeeded", "status": "True"})
    assert [s.phase for s in mpijob_statuses(succeeded, [], None)] == [PodPhase.SUCCEEDED] * 2
    crashed = PodStatus(rank=0, node_name="cpu-0", phase=PodPhase.FAILED, exit_code=3, message="container launcher exited with code 3")
    failed = mpijob_statuses(_mpijob(2), [_worker(0), _worker(1)], crashed)
    assert (failed[0].phase, failed[0].exit_code, failed[0].node_name) == (PodPhase.FAILED, 3, "gpu-0")
    assert "MPI launcher failed" in failed[0].message and failed[1].phase == PodPhase.RUNNING
    late = _mpijob(2, {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "Job was active longer"})
    (first, _) = mpijob_statuses(late, [], None)
    assert (first.phase, first.reason) == (PodPhase.FAILED, "DeadlineExceeded") and "active longer" in first.message
    not_yet = _mpijob(2, {"type": "Failed", "status": "False"})
    assert {s.phase for s in mpijob_statuses(not_yet, [_worker(0), _worker(1)], None)} == {PodPhase.RUNNING}


def test_a_launcher_its_node_refused_or_shut_down_names_its_own_node_not_rank_0s() -> None:
    """So the retry avoids the node that refused the launcher, and a shutdown requeues the gang without a restart."""
    message = "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000, used: 63000, capacity: 64000"
    refused = PodStatus(rank=0, node_name="cpu-0", phase=PodPhase.FAILED, reason="OutOfcpu", message=message)
    (first, second) = mpijob_statuses(_mpijob(2), [_worker(0), _worker(1)], refused)
    assert (first.node_name, first.reason, first.phase) == ("cpu-0", "OutOfcpu", PodPhase.FAILED)
    assert first.message == f"the MPI launcher failed: {message}" and second.phase == PodPhase.RUNNING
    shutdown = PodStatus(
        rank=0, node_name="cpu-1", phase=PodPhase.FAILED, reason="Terminated", disruption="TerminationByKubelet",
        message="Pod was terminated in response to imminent node shutdown.",
    )  # fmt: skip
    (first, _) = mpijob_statuses(_mpijob(2), [_worker(0), _worker(1)], shutdown)
    assert (first.node_name, first.disruption, stopped_by_cluster(first)) == ("cpu-1", "TerminationByKubelet", True)


def test_an_mpi_workers_rank_is_the_operators_replica_index() -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(labels={"muster.io/job-id": "42", "training.kubeflow.org/replica-index": "5"}),
        spec=client.V1PodSpec(containers=[], node_name="gpu-e"),
        status=client.V1PodStatus(phase="Running"),
    )
    assert (_pod_status(pod).rank, _pod_status(pod).node_name) == (5, "gpu-e")


def test_a_pod_the_cluster_is_stopping_says_why_from_its_disruption_target_condition() -> None:
    def pod(*conditions: client.V1PodCondition) -> client.V1Pod:
        return client.V1Pod(
            metadata=client.V1ObjectMeta(labels={"muster.io/rank": "1"}),
            spec=client.V1PodSpec(containers=[], node_name="gpu-a"),
            status=client.V1PodStatus(phase="Running", conditions=list(conditions)),
        )

    ready = client.V1PodCondition(type="Ready", status="True")
    evicted = client.V1PodCondition(type="DisruptionTarget", status="True", reason="EvictionByEvictionAPI")
    assert _pod_status(pod(ready, evicted)).disruption == "EvictionByEvictionAPI"
    assert _pod_status(pod(ready)).disruption == ""
    assert _pod_status(pod(client.V1PodCondition(type="DisruptionTarget", status="False", reason="x"))).disruption == ""


def test_a_pending_pod_says_why_its_container_cannot_start() -> None:
    def pending(reason: str, message: str | None = None, *, init: bool = False) -> client.V1Pod:
        waiting = client.V1ContainerStatus(
            name="fetch" if init else "main", image="x", image_id="", ready=False, restart_count=0,
            state=client.V1ContainerState(waiting=client.V1ContainerStateWaiting(reason=reason, message=message)),
        )  # fmt: skip
        statuses = {"init_container_statuses": [waiting]} if init else {"container_statuses": [waiting]}
        return client.V1Pod(
            metadata=client.V1ObjectMeta(labels={"muster.io/rank": "0"}),
            spec=client.V1PodSpec(containers=[], node_name="gpu-a"),
            status=client.V1PodStatus(phase="Pending", **statuses),
        )

    pulled = _pod_status(pending("ImagePullBackOff", 'Back-off pulling image "nvcr.io/nvidia/pytorch:24.13-py3"'))
    assert pulled.reason == "ImagePullBackOff"
    assert pulled.message == 'container main: ImagePullBackOff: Back-off pulling image "nvcr.io/nvidia/pytorch:24.13-py3"'
    assert _pod_status(pending("CreateContainerConfigError", 'secret "hf-token" not found', init=True)).message == (
        'container fetch: CreateContainerConfigError: secret "hf-token" not found'
    )
    # Still coming up: nothing to say yet.
    creating = _pod_status(pending("ContainerCreating"))
    assert (creating.reason, creating.message) == ("", "")


def test_a_jobs_rdma_devices_are_asked_per_pod_under_the_sites_resource_name() -> None:
    options = PodOptions(rdma_resource="rdma/rdma_shared_device_a")
    resources = pod_manifest(spec(rdma_per_node=4), 0, options)["spec"]["containers"][0]["resources"]
    assert resources["requests"]["rdma/rdma_shared_device_a"] == "4" == resources["limits"]["rdma/rdma_shared_device_a"]
    # Not asked, or no resource name set: nothing added.
    assert "rdma/rdma_shared_device_a" not in pod_manifest(spec(), 0, options)["spec"]["containers"][0]["resources"]["requests"]
    assert set(pod_manifest(spec(rdma_per_node=4), 0, PodOptions())["spec"]["containers"][0]["resources"]["requests"]) == set(
        pod_manifest(spec(), 0, PodOptions())["spec"]["containers"][0]["resources"]["requests"]
    )


def test_a_nodes_rdma_devices_and_block_are_read_from_its_allocatable_and_labels() -> None:
    node = client.V1Node(
        metadata=client.V1ObjectMeta(name="gpu-a", labels={"topology.kubernetes.io/zone": "r1", "muster.io/block": "spine-2"}),
        status=client.V1NodeStatus(allocatable={"nvidia.com/gpu": "8", "rdma/rdma_shared_device_a": "8"}),
    )
    cluster = KubernetesCluster(
        api=client.ApiClient(), options=PodOptions(rdma_resource="rdma/rdma_shared_device_a"), block_label="muster.io/block"
    )
    seen = cluster._node(node, {})
    assert (seen.rack, seen.block, seen.rdma_devices, seen.gpus_foreign) == ("r1", "spine-2", 8, 0)
    # Other pods' GPUs, never more than the node has (a pod bound past its allocatable still holds no more).
    assert cluster._node(node, {"nvidia.com/gpu": 3}).gpus_foreign == 3
    assert cluster._node(node, {"nvidia.com/gpu": 12}).gpus_foreign == 8
    plain = KubernetesCluster(api=client.ApiClient())._node(node, {})
    assert (plain.block, plain.rdma_devices) == ("", 0)


def test_cpu_or_memory_other_pods_hold_makes_gpus_of_the_node_unusable_beyond_what_it_has_to_spare() -> None:
    """A notebook holding 60 of 96 CPUs left the node reading 8 free GPUs: gangs were placed there and sat unbound
    ("Insufficient cpu") until the launch timeout, again and again. 8 GPUs x 8 CPUs leave 32 to spare."""
    node = client.V1Node(
        metadata=client.V1ObjectMeta(name="gpu-a"),
        status=client.V1NodeStatus(allocatable={"nvidia.com/gpu": "8", "cpu": "96", "memory": "1536Gi"}),
    )
    cluster = KubernetesCluster(api=client.ApiClient(), options=PodOptions(cpu_per_gpu="8", memory_per_gpu="64Gi"))
    assert cluster._node(node, {"cpu": 32_000}).gpus_foreign == 0  # within what it spares
    assert cluster._node(node, {"cpu": 60_000}).gpus_foreign == 4  # 28 CPUs short: 4 GPUs' worth
    assert cluster._node(node, {"cpu": 60_000, "nvidia.com/gpu": 5}).gpus_foreign == 5  # the larger, not the sum
    assert cluster._node(node, {"memory": 1500 * 2**30}).gpus_foreign == 8


def test_a_pods_gpus_are_counted_as_kube_scheduler_counts_them() -> None:
    def container(limits: dict[str, str] | None = None, requests: dict[str, str] | None = None, **extra: str) -> dict[str, Any]:
        return {"name": "c", "resources": {"limits": limits or {}, "requests": requests or {}}, **extra}

    gpu = "nvidia.com/gpu"
    # Containers add up; a request stands for its limit; cpu in millicores and memory in bytes.
    two = {"containers": [container({gpu: "1", "cpu": "500m"}), container(requests={gpu: "1", "memory": "64Gi", "cpu": "2"})]}
    assert pod_requests(two) == {gpu: 2, "cpu": 2500, "memory": 64 * 2**30}
    # Init containers run one at a time: the largest counts if it asks more than the containers together.
    assert pod_requests({**two, "initContainers": [container({gpu: "4"}), container({gpu: "3"})]})[gpu] == 4
    assert pod_requests({**two, "initContainers": [container({gpu: "1"})]})[gpu] == 2
    # A sidecar (an init container that keeps running) runs alongside the containers.
    assert pod_requests({**two, "initContainers": [container({gpu: "1"}, restartPolicy="Always")]})[gpu] == 3
    assert pod_requests({"containers": [container({"nvidia.com/mig-1g.10gb": "2"})]}) == {"nvidia.com/mig-1g.10gb": 2}
    assert pod_requests({"containers": [{"name": "c"}]}) == {}


def test_workload_mode_links_every_pod_to_a_native_gang_podgroup_of_the_gangs_size() -> None:
    options = PodOptions(launch_mode="workload")
    group = native_podgroup_manifest(spec(), options, owner_uid="uid-1")
    assert (group["apiVersion"], group["kind"]) == ("scheduling.k8s.io/v1alpha2", "PodGroup")
    assert group["metadata"]["name"] == gang_name(42, 3)
    assert group["spec"] == {"schedulingPolicy": {"gang": {"minCount": 3}}}
    assert group["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    pods = [pod_manifest(spec(), rank, options) for rank in range(3)]
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {gang_name(42, 3)}
    # Pinned to the planned nodes as in every mode; the default scheduler, no scheduler-plugins label.
    assert "schedulerName" not in pods[0]["spec"] and "scheduling.x-k8s.io/pod-group" not in pods[0]["metadata"]["labels"]
    assert "schedulingGroup" not in pod_manifest(spec(), 0, PodOptions())["spec"]


def test_a_pod_being_deleted_counts_for_its_gang_only_while_the_cluster_says_why() -> None:
    """kube-scheduler's preemption marks the pod (DisruptionTarget), then deletes it with its grace period: skipped as
    "being deleted", the gang read as pods "deleted outside Muster (an eviction or by hand)"."""
    from datetime import UTC, datetime

    def pod(deleting: bool, *conditions: client.V1PodCondition) -> client.V1Pod:
        meta = client.V1ObjectMeta(name="p", deletion_timestamp=datetime.now(UTC) if deleting else None)
        return client.V1Pod(metadata=meta, status=client.V1PodStatus(conditions=list(conditions)))

    preempted = client.V1PodCondition(type="DisruptionTarget", status="True", reason="PreemptionByScheduler")
    assert _counts_for_gang(pod(False))
    assert not _counts_for_gang(pod(True))  # Muster's own teardown, or a kubectl delete
    assert _counts_for_gang(pod(True, preempted))
    assert not _counts_for_gang(pod(True, client.V1PodCondition(type="DisruptionTarget", status="False")))


def test_an_array_elements_pods_find_its_index_on_kubernetes() -> None:
    """MUSTER_ARRAY_* were put in the job's env, whose Muster names the Kubernetes pods drop: every element of a sweep
    ran without its index. They are Muster's part of the environment, for pods and MPI replicas alike."""
    element = spec(array_id=40, array_index=2, env={"LR": "0.1", "MUSTER_ARRAY_INDEX": "7"})
    pod = pod_manifest(element, 0, PodOptions(namespace="ml"))
    names = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert (names["MUSTER_ARRAY_ID"], names["MUSTER_ARRAY_INDEX"], names["LR"]) == ("40", "2", "0.1")
    assert mpi_env(element)["MUSTER_ARRAY_INDEX"] == "2"
    assert "MUSTER_ARRAY_INDEX" not in rendezvous_env(spec(), 0, PodOptions(namespace="ml"))
    # And labelled, so `kubectl get pods -l muster.io/array-id=40` finds a sweep's pods.
    labels = pod["metadata"]["labels"]
    assert (labels["muster.io/array-id"], labels["muster.io/array-index"]) == ("40", "2")
    assert "muster.io/array-id" not in pod_manifest(spec(), 0, PodOptions(namespace="ml"))["metadata"]["labels"]
