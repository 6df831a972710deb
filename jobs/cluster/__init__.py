"""Cluster backends: the one small interface the scheduler drives, and its implementations."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from jobs.cluster.base import (
    ClusterBackend,
    ClusterDeletingGangs,
    ClusterNode,
    ClusterRefuses,
    ClusterUnavailable,
    GangSpec,
    PodPhase,
    PodStatus,
    gang_name,
    pod_name,
)

__all__ = [
    "ClusterBackend",
    "ClusterDeletingGangs",
    "ClusterNode",
    "ClusterRefuses",
    "ClusterUnavailable",
    "GangSpec",
    "PodPhase",
    "PodStatus",
    "gang_name",
    "get_backend",
    "pod_name",
]


def get_backend() -> ClusterBackend:
    """The backend chosen by MUSTER_CLUSTER."""
    if settings.MUSTER_CLUSTER == "simulated":
        from jobs.cluster.simulated import SimulatedCluster

        return SimulatedCluster.from_settings()
    if settings.MUSTER_CLUSTER == "kubernetes":
        from jobs.cluster.kubernetes import KubernetesCluster

        return KubernetesCluster.from_settings()
    raise ImproperlyConfigured(f"MUSTER_CLUSTER={settings.MUSTER_CLUSTER!r}: choose simulated or kubernetes.")
