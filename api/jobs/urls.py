from typing import Any

from django.urls import path
from rest_framework.routers import DefaultRouter

from api.jobs.maintenance import MaintenanceCancelView, MaintenanceListView
from api.jobs.node_holds import NodeHoldView, NodeReleaseView
from api.jobs.views import JobViewSet, NodeViewSet, NotifyPreferenceView, QueueView


class ApiRouter(DefaultRouter):
    """Its root (`GET /api/v1/`) lists every resource of the API, not only the viewsets registered here (it listed
    jobs and nodes alone, so the root hid the queue, usage, quotas, tokens and the audit trail)."""

    OTHERS = {
        "queue": "queue",
        "notifications": "notify-preference",
        "usage": "usage",
        "usage/report": "usage-report",
        "quotas/users": "user-quota-list",
        "quotas/teams": "team-quota-list",
        "tokens": "token-list",
        "auth/token": "auth-token",
        "audit": "audit-entry-list",
        "schema": "schema",
        "docs": "api-docs",
    }

    def get_api_root_view(self, api_urls: Any = None) -> Any:
        listed = {prefix: self.routes[0].name.format(basename=basename) for prefix, _, basename in self.registry}
        return self.APIRootView.as_view(api_root_dict={**listed, **self.OTHERS})


router = ApiRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("queue/", QueueView.as_view(), name="queue"),
    path("notifications/", NotifyPreferenceView.as_view(), name="notify-preference"),
    # Before the router's nodes/<name>/, which would read "hold" as a node's name.
    path("nodes/hold/", NodeHoldView.as_view(), name="nodes-hold"),
    path("nodes/release/", NodeReleaseView.as_view(), name="nodes-release"),
    path("nodes/maintenance/", MaintenanceListView.as_view(), name="nodes-maintenance"),
    path("nodes/maintenance/<int:pk>/cancel/", MaintenanceCancelView.as_view(), name="nodes-maintenance-cancel"),
    *router.urls,
]
