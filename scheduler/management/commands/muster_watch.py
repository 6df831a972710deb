"""`manage.py muster_watch`: follow the Kubernetes cluster's pods and nodes, and enqueue a cycle on every change."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection

from jobs.cluster.base import ClusterUnavailable
from jobs.cluster.kubernetes import KubernetesCluster
from jobs.cluster.watch import Trigger, watch_forever
from scheduler.cycle import foreign_pods_changed
from scheduler.tasks import scheduling_cycle

logger = logging.getLogger(__name__)


def recount_foreign_pods() -> None:
    """A pod Muster did not start took or freed devices: have every worker read those pods again, and run a cycle."""
    try:
        foreign_pods_changed()
    except DatabaseError as exc:
        logger.warning("could not record that pods Muster did not start changed (read again within their TTL): %s", exc)
    finally:
        # Called on a watch's thread or the debounce's timer thread: a recount is rare, a connection left open per thread is not.
        connection.close()
    scheduling_cycle.publish_quietly()


class Command(BaseCommand):
    help = (
        "Watch Muster's pods, the cluster's nodes and the pods Muster did not start (MUSTER_CLUSTER=kubernetes); "
        "each change enqueues a scheduling cycle."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--debounce", type=float, default=1.0, help="At most one cycle per this many seconds (default 1).")

    def handle(self, *args: Any, debounce: float, **options: Any) -> None:
        if settings.MUSTER_CLUSTER != "kubernetes":
            raise CommandError("muster_watch follows a Kubernetes cluster; set MUSTER_CLUSTER=kubernetes.")
        cluster = KubernetesCluster.from_settings()
        recount = None
        if cluster.count_foreign_pods:
            try:
                allowed = cluster.may_watch_other_pods()
            except ClusterUnavailable:
                allowed = True  # the API server is away: the watch tries again until it is back, as the others do
            if allowed:
                recount = Trigger(fire=recount_foreign_pods, debounce=debounce)
            else:
                self.stderr.write(
                    "Muster may not watch pods in every namespace (platform/kubernetes/rbac.yaml grants it): the GPUs "
                    f"pods it did not start take or free count within MUSTER_K8S_FOREIGN_PODS_SECONDS "
                    f"({settings.MUSTER_K8S_FOREIGN_PODS_SECONDS:g} s), not at once."
                )
        others = ", the pods Muster did not start" if recount else ""
        self.stdout.write(f"watching pods in namespace {cluster.options.namespace}, nodes{others}; Ctrl-C stops")
        watch_forever(cluster, Trigger(fire=scheduling_cycle.publish_quietly, debounce=debounce), recount)
