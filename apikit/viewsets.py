"""Each resource serves only what its one visibility rule lets the requester see."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from rest_framework import viewsets


class VisibleViewSet(viewsets.GenericViewSet):
    """A viewset whose rows (list, detail and every detail action) come from `visible_to(request.user)`.

    `visible_to` is the resource's `<resource>_visible_to` selector: the same function the pages and
    the dashboard call, so the API can never show more (or less) than they do. An object outside it
    is a 404, never a 403, so its existence is not disclosed.
    """

    @staticmethod
    def visible_to(user: Any, /) -> QuerySet[Any]:
        raise NotImplementedError("set visible_to = staticmethod(<resource>_visible_to)")

    def get_queryset(self) -> QuerySet[Any]:
        return self.visible_to(self.request.user)
