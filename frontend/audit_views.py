"""The audit trail page: admins see every entry, others the entries about their own jobs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from api.audit.filters import AuditFilter
from audit.models import AuditEntry
from audit.selectors import audit_actions_for, audit_entries_visible_to, audit_target_types_for

PAGE_SIZE = 50

# The filters as the page labels them (audit.html), for its error messages: "From: Enter a valid date.", not the
# query's name ("since: ...").
FILTER_LABELS = {"action": "Action", "actor": "Who", "target_type": "About", "job": "Job", "since": "From", "until": "To"}


@dataclass(frozen=True)
class ChangeLine:
    field: str
    before: Any
    after: Any
    # For lists (a team's members): what joined and what left, easier to read than two long lists.
    added: list[Any] | None = None
    removed: list[Any] | None = None


def change_lines(entry: AuditEntry) -> list[ChangeLine]:
    lines = []
    for name, pair in sorted(entry.changes.items()):
        before, after = [*pair, None, None][:2] if isinstance(pair, list) else (None, pair)
        if isinstance(before, list) and isinstance(after, list):
            lines.append(ChangeLine(name, before, after, [x for x in after if x not in before], [x for x in before if x not in after]))
        else:
            lines.append(ChangeLine(name, before, after))
    return lines


@login_required
def audit_view(request: HttpRequest) -> HttpResponse:
    filters = AuditFilter(request.GET or None, queryset=audit_entries_visible_to(request.user), request=request)
    valid = not filters.is_bound or filters.is_valid()
    # Bad filters show their errors and no entries, rather than every entry as if unfiltered.
    entries = filters.qs if valid else AuditEntry.objects.none()
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "frontend/audit.html",
        {
            "filters": filters,
            # Only the kinds its entries can be about: a researcher was offered user, team, node and whatifrun.
            "target_types": audit_target_types_for(request.user),
            "actions": audit_actions_for(request.user),
            "errors": [] if valid else [(FILTER_LABELS.get(name, name), messages) for name, messages in filters.errors.items()],
            "page": page,
            "rows": [(entry, change_lines(entry)) for entry in page.object_list],
        },
    )
