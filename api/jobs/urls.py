from django.urls import path
from rest_framework.routers import DefaultRouter

from api.jobs.views import JobViewSet, NodeViewSet, NotifyPreferenceView, QueueView

router = DefaultRouter()
router.register("jobs", JobViewSet, basename="job")
router.register("nodes", NodeViewSet, basename="node")

urlpatterns = [
    path("queue/", QueueView.as_view(), name="queue"),
    path("notifications/", NotifyPreferenceView.as_view(), name="notify-preference"),
    *router.urls,
]
