from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest


def cluster(request: HttpRequest) -> dict[str, object]:
    """Every page says which cluster it drives, and plainly when it is the simulated one."""
    return {"cluster_kind": settings.MUSTER_CLUSTER, "cluster_simulated": settings.MUSTER_CLUSTER == "simulated"}
