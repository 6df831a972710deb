"""Prepare a laptop install: load the node inventory and make sure there are users to log in with."""

from __future__ import annotations

import secrets
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from jobs.amounts import plural
from jobs.cluster import ClusterUnavailable, get_backend
from jobs.services import nodes_sync
from quotas.models import Team


class Command(BaseCommand):
    help = "Load the cluster's nodes and create the local admin and demo researcher accounts if missing."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--nodes-only", action="store_true", help="Only load the node inventory; create no accounts (production).")

    def handle(self, *args: Any, **options: Any) -> None:
        self._cluster()
        if options["nodes_only"]:
            return
        credentials = settings.DATA_DIR / "local-logins.txt"
        if credentials.exists():
            self.stdout.write(credentials.read_text())
            return
        users = get_user_model()
        lines = []
        for username, staff in (("admin", True), ("researcher", False)):
            if users.objects.filter(username=username).exists():
                continue
            password = secrets.token_urlsafe(12)
            # A local address, so the notifications they ask for show in the worker's log (the console mail backend).
            email = f"{username}@localhost"
            if staff:
                users.objects.create_superuser(username=username, password=password, email=email)
            else:
                user = users.objects.create_user(username=username, password=password, email=email)
                team, _ = Team.objects.get_or_create(name="research", defaults={"description": "Demo team"})
                team.members.add(user)
            lines.append(f"  {username:<11} password: {password}")
        text = "log in as:\n" + "\n".join(lines) + "\n" if lines else "log in with the accounts you created\n"
        credentials.write_text(text)
        credentials.chmod(0o600)
        self.stdout.write(text)

    def _cluster(self) -> None:
        """Prepare the cluster (on Kubernetes: the jobs' namespace) and load its nodes; say plainly what is wrong.

        A cluster Muster cannot use yet is not a crash: the web starts, jobs wait, and every page shows the message
        until it is fixed (the scheduling cycle checks again each time)."""
        backend = get_backend()
        try:
            backend.prepare()
            nodes = nodes_sync(cluster_nodes=backend.list_nodes())
        except ClusterUnavailable as exc:
            self.stderr.write(f"cluster: {settings.MUSTER_CLUSTER}: jobs cannot start yet: {exc}")
            return
        foreign = sum(n.gpus_foreign for n in nodes)
        others = f" ({foreign} held by pods Muster did not start)" if foreign else ""
        # Whole GPUs apart from the shared nodes' (GPU slices only), as the cluster page says them and the size factor
        # counts them: "18 nodes, 144 GPUs" read against the page's 128.
        shared = [n for n in nodes if n.sharing]
        on_shared = f"; {sum(n.gpus_total for n in shared)} more on {plural(len(shared), 'shared node')} (GPU slices only)"
        whole = sum(n.gpus_total for n in nodes if not n.sharing)
        self.stdout.write(
            f"cluster: {settings.MUSTER_CLUSTER}, {plural(len(nodes), 'node')}, {plural(whole, 'GPU')}"
            f"{' for whole-GPU jobs' + on_shared if shared else ''}{others}"
        )
        if not nodes and settings.MUSTER_CLUSTER == "kubernetes":
            self.stderr.write(
                f"cluster: no node has {settings.MUSTER_K8S_GPU_RESOURCE!r} in its allocatable resources: is the GPU device "
                "plugin running, or is the resource named otherwise (MUSTER_K8S_GPU_RESOURCE)?"
            )
