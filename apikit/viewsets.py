"""Each resource serves only what its one visibility rule lets the requester see."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from django.db.models import QuerySet
from rest_framework import viewsets


class VisibleViewSet(viewsets.GenericViewSet):
    """A viewset whose rows (list, detail and every detail action) come from `visible_to(request.user)`.

    `visible_to` is the resource's `<resource>_visible_to` selector: the same function the pages and
    the dashboard call, so the API can never show more (or less) than they do. An object outside it
    is a 404, never a 403, so its existence is not disclosed.
    """

    visible_to: ClassVar[Callable[[Any], QuerySet[Any]]]

    def get_queryset(self) -> QuerySet[Any]:
        return type(self).visible_to(self.request.user)
