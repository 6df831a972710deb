from rest_framework.routers import SimpleRouter

from api.audit.views import AuditEntryViewSet

router = SimpleRouter()
router.register("audit", AuditEntryViewSet, basename="audit-entry")

urlpatterns = router.urls
