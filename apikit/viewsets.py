"""Each resource serves only what its one visibility rule lets the requester see."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from rest_framework import viewsets
from rest_framework.exceptions import NotFound


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

    def get_object(self) -> Any:
        try:
            return super().get_object()
        except Http404:
            # Django's "No Job matches the given query." names a model class; this names what was asked for, and
            # reads the same whether it does not exist or belongs to someone else.
            asked = self.kwargs.get(self.lookup_url_kwarg or self.lookup_field)
            name = self.get_queryset().model._meta.verbose_name
            raise NotFound(f"No {name} {asked} (or none that you may see).") from None
