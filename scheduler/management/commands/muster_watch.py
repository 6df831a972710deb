"""`manage.py muster_watch`: follow the Kubernetes cluster's pods and nodes, and enqueue a cycle on every change."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from jobs.cluster.kubernetes import KubernetesCluster
from jobs.cluster.watch import Trigger, watch_forever
from scheduler.tasks import scheduling_cycle


class Command(BaseCommand):
    help = "Watch Muster's pods and the cluster's nodes (MUSTER_CLUSTER=kubernetes); each change enqueues a scheduling cycle."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--debounce", type=float, default=1.0, help="At most one cycle per this many seconds (default 1).")

    def handle(self, *args: Any, debounce: float, **options: Any) -> None:
        if settings.MUSTER_CLUSTER != "kubernetes":
            raise CommandError("muster_watch follows a Kubernetes cluster; set MUSTER_CLUSTER=kubernetes.")
        cluster = KubernetesCluster.from_settings()
        self.stdout.write(f"watching pods in namespace {cluster.options.namespace} and nodes; Ctrl-C stops")
        watch_forever(cluster, Trigger(fire=scheduling_cycle.publish_quietly, debounce=debounce))
