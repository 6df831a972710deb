"""`make bench` (with the test cluster up): what counting other pods' GPUs costs the cycle's node inventory.

`KubernetesCluster.list_nodes` reads every bound pod in the cluster once per cycle to count the GPUs pods Muster did
not start hold (`MUSTER_K8S_COUNT_FOREIGN_PODS`). This puts N such pods (default 2,000: a busy cluster's DaemonSets,
notebooks and other schedulers' jobs; a tenth of them hold a GPU) on the test cluster's nodes, then times in the same
process: `list_nodes` without the count (the baseline), with it read fresh (each MUSTER_K8S_FOREIGN_PODS_SECONDS), with
it served from the last read (every other cycle), and the same pod list read through the client's models, which the
count avoids. Prints one JSON line of medians and ratios to the baseline. Without a reachable test
cluster it prints a line saying so and exits 0.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from kubernetes import client  # noqa: E402

from jobs.cluster.kubernetes import BOUND_PODS_SELECTOR, KubernetesCluster  # noqa: E402
from jobs.cluster.manifests import PodOptions  # noqa: E402
from tests.kube import delete_namespace_and_pods, kubeconfig_path, reachable_api  # noqa: E402


def _median(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    pods = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    name = f"list_nodes_with_{pods}_other_pods"
    api = reachable_api()
    if api is None:
        print(json.dumps({"name": name, "skipped": f"no test cluster at {kubeconfig_path()} (make testcluster-up)"}))
        return
    core = client.CoreV1Api(api)
    nodes = [n.metadata.name for n in core.list_node().items if n.metadata.name.startswith("gpu-node-")]
    namespace = f"muster-bench-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})

    def create(i: int) -> None:
        limits = {"nvidia.com/gpu": "1"} if i % 10 == 0 else {}
        container = {"name": "c", "image": "busybox:1.36", "resources": {"limits": limits, "requests": {"cpu": "10m"}}}
        body = {
            "metadata": {"name": f"other-{i}", "labels": {"app": "other"}},
            "spec": {"nodeName": nodes[i % len(nodes)], "containers": [container]},
        }
        core.create_namespaced_pod(namespace, body)

    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(create, range(pods)))
        counting = KubernetesCluster(api=api, options=PodOptions(namespace="muster-jobs"))
        plain = KubernetesCluster(api=api, options=PodOptions(namespace="muster-jobs"), count_foreign_pods=False)
        reused = KubernetesCluster(api=api, options=PodOptions(namespace="muster-bench-reused"), foreign_pods_seconds=3600)
        held = sum(n.gpus_foreign for n in reused.list_nodes())
        baseline = _median(plain.list_nodes, repeats)
        counted = _median(counting.list_nodes, repeats)
        cached = _median(reused.list_nodes, repeats)
        models = _median(lambda: core.list_pod_for_all_namespaces(field_selector=BOUND_PODS_SELECTOR), repeats)
    finally:
        delete_namespace_and_pods(core, namespace, timeout=300)
    print(
        json.dumps(
            {
                "name": name,
                "pods": pods,
                "gpus_held_by_other_pods": held,
                "repeats": repeats,
                "list_nodes_seconds": round(baseline, 4),
                "list_nodes_counting_seconds": round(counted, 4),
                "list_nodes_counting_from_last_read_seconds": round(cached, 4),
                "pods_read_as_models_seconds": round(models, 4),
                "counting_over_baseline": round(counted / baseline, 2),
                "from_last_read_over_baseline": round(cached / baseline, 2),
                "models_over_counting_pod_read": round(models / max(counted - baseline, 1e-9), 2),
            }
        )
    )


if __name__ == "__main__":
    main()
