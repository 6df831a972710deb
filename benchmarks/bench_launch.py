"""`make bench` (with the test cluster up): from admission of a 32-node gang to all its pods created on the API server.

Times `KubernetesCluster.launch_gang` (Service, then one pod per node) against the real
kube-apiserver of `make testcluster-up`, in a fresh namespace, several times; prints one
JSON line with the median seconds and pods created per second. Without a reachable test
cluster it prints a line saying so and exits 0.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from kubernetes import client  # noqa: E402

from jobs.cluster.base import GangSpec  # noqa: E402
from jobs.cluster.kubernetes import KubernetesCluster  # noqa: E402
from jobs.cluster.manifests import PodOptions, gang_selector  # noqa: E402
from tests.kube import kubeconfig_path, reachable_api  # noqa: E402


def main() -> None:
    nodes = int(sys.argv[1]) if len(sys.argv) > 1 else 32
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    api = reachable_api()
    if api is None:
        why = f"no test cluster at {kubeconfig_path()} (make testcluster-up)"
        print(json.dumps({"name": f"launch_gang_{nodes}_nodes", "skipped": why}))
        return
    core = client.CoreV1Api(api)
    namespace = f"muster-bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    cluster = KubernetesCluster(api=api, options=PodOptions(namespace=namespace, termination_grace_seconds=0))
    times = []
    try:
        for attempt in range(1, repeats + 1):
            spec = GangSpec(
                job_id=1, attempt=attempt, name="bench", image="nvcr.io/nvidia/pytorch:24.05-py3", command=("torchrun", "train.py"),
                env={}, node_names=tuple(f"bench-node-{i:03d}" for i in range(nodes)), gpus_per_node=8,
                wall_time_seconds=3600, owner="bench",
            )  # fmt: skip
            start = time.perf_counter()
            cluster.launch_gang(spec)
            elapsed = time.perf_counter() - start
            created = core.list_namespaced_pod(namespace, label_selector=gang_selector(1, attempt)).items
            assert len(created) == nodes, f"{len(created)} of {nodes} pods created"
            times.append(elapsed)
            cluster.teardown_gang(1, attempt, grace_seconds=0)
    finally:
        core.delete_namespace(namespace, grace_period_seconds=0)
    median = statistics.median(times)
    print(
        json.dumps(
            {
                "name": f"launch_gang_{nodes}_nodes",
                "nodes": nodes,
                "repeats": repeats,
                "median_seconds": round(median, 4),
                "min_seconds": round(min(times), 4),
                "pods_per_second": round(nodes / median, 1),
            }
        )
    )


if __name__ == "__main__":
    main()
