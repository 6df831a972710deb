from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from jobs.models import ClusterHealth


def cluster(request: HttpRequest) -> dict[str, object]:
    """Every page says which cluster it drives, plainly when it is the simulated one, and when it cannot be reached."""
    return {
        "cluster_kind": settings.MUSTER_CLUSTER,
        "cluster_simulated": settings.MUSTER_CLUSTER == "simulated",
        "cluster_down": ClusterHealth.objects.filter(pk=1, reachable=False).first(),
    }
