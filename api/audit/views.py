"""The audit trail over REST: read-only, filtered, paginated."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins

from api.audit.filters import AuditFilter
from api.audit.serializers import AuditEntrySerializer
from apikit.viewsets import VisibleViewSet
from audit.selectors import audit_entries_visible_to


@extend_schema(tags=["audit"])
class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, VisibleViewSet):
    """Who changed what, when and from where. Admins see every entry; others the entries about their own jobs."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
    visible_to = staticmethod(audit_entries_visible_to)
