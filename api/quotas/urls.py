from django.urls import path
from rest_framework.routers import SimpleRouter

from api.quotas.views import TeamQuotaViewSet, UsageReportView, UsageView, UserQuotaViewSet

router = SimpleRouter()
router.register("quotas/users", UserQuotaViewSet, basename="user-quota")
router.register("quotas/teams", TeamQuotaViewSet, basename="team-quota")

urlpatterns = [
    path("usage/", UsageView.as_view(), name="usage"),
    path("usage/report/", UsageReportView.as_view(), name="usage-report"),
    *router.urls,
]
