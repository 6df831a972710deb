"""The audit trail over REST: read-only, filtered, paginated."""

from __future__ import annotations

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets

from api.audit.filters import AuditFilter
from api.audit.serializers import AuditEntrySerializer
from audit.models import AuditEntry
from audit.selectors import audit_entries_visible_to


@extend_schema(tags=["audit"])
class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Who changed what, when and from where. Admins see every entry; others the entries about their own jobs."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter

    def get_queryset(self) -> QuerySet[AuditEntry]:
        return audit_entries_visible_to(self.request.user)
