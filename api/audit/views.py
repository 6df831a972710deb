"""The audit trail over REST: read-only, filtered, paginated."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins

from api.audit.filters import AuditFilter
from api.audit.serializers import AuditEntrySerializer
from apikit.viewsets import VisibleViewSet
from audit.selectors import audit_entries_visible_to


@extend_schema(tags=["audit"])
# `job` as it is read: a whole number (1.5 is a 400), which django-filter's NumberFilter documented as any number.
@extend_schema_view(list=extend_schema(parameters=[OpenApiParameter("job", OpenApiTypes.INT, description="Entries about this job.")]))
class AuditEntryViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, VisibleViewSet):
    """Who changed what, when and from where. Admins see every entry; others the entries about their own jobs."""

    serializer_class = AuditEntrySerializer
    filterset_class = AuditFilter
    visible_to = staticmethod(audit_entries_visible_to)
