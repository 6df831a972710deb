"""Filters of the audit list (API and page): by action, actor, target type, job and a date range."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from typing import Any

import django_filters
from django import forms
from django.db.models import QuerySet
from django.utils import timezone

from audit.models import ACTIONS, TARGET_TYPES, AuditEntry

# Django's "Enter a valid date." said no form, as the usage report's dates do.
NOT_A_DAY = "Not a day: write it as YYYY-MM-DD (2026-11-01), a date that exists."


def _day_start(day: date) -> datetime:
    """Midnight at the start of `day` in the site's time zone."""
    return timezone.make_aware(datetime.combine(day, time.min))


class AuditFilterForm(forms.Form):
    """Checks the date range as a whole: each day in range, and the end not before the start."""

    # Beyond these, the day after `until` would overflow Python's dates.
    EARLIEST, LATEST = date(1970, 1, 1), date(2999, 12, 31)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns
        for name in ("since", "until"):
            value = data.get(name)
            if value is not None and not self.EARLIEST <= value <= self.LATEST:
                self.add_error(name, f"A date between {self.EARLIEST} and {self.LATEST}.")
        since, until = data.get("since"), data.get("until")
        if since and until and until < since:
            self.add_error("until", "The end date is before the start date.")
        return data


class JobNumberFilter(django_filters.NumberFilter):
    # Whole numbers only, within a bigint: a job id.
    field_class = forms.IntegerField


class AuditFilter(django_filters.FilterSet):
    action = django_filters.ChoiceFilter(
        choices=[(name, name) for name in ACTIONS],
        help_text="What was done: " + ", ".join(ACTIONS) + ".",
        error_messages={"invalid_choice": "Unknown action %(value)s; the actions are " + ", ".join(ACTIONS) + "."},
    )
    actor = django_filters.CharFilter(field_name="actor_username", help_text="Username of who did it.")
    target_type = django_filters.ChoiceFilter(
        choices=[(name, name) for name in TARGET_TYPES],
        help_text="What the entries are about: " + ", ".join(TARGET_TYPES) + ".",
        # As `action` says it; Django's "Select a valid choice. x is not one of the available choices." named none.
        error_messages={"invalid_choice": "Unknown target type %(value)s; the types are " + ", ".join(TARGET_TYPES) + "."},
    )
    job = JobNumberFilter(field_name="job_id", min_value=1, max_value=2**63 - 1, help_text="Entries about this job.")
    since = django_filters.DateFilter(
        method="filter_since", help_text="From this day on (YYYY-MM-DD, site time zone).", error_messages={"invalid": NOT_A_DAY}
    )
    until = django_filters.DateFilter(
        method="filter_until", help_text="Up to and including this day (YYYY-MM-DD).", error_messages={"invalid": NOT_A_DAY}
    )

    class Meta:
        model = AuditEntry
        fields = ["action", "actor", "target_type", "job", "since", "until"]
        form = AuditFilterForm

    def filter_since(self, queryset: QuerySet[AuditEntry], name: str, value: date) -> QuerySet[AuditEntry]:
        return queryset.filter(at__gte=_day_start(value))

    def filter_until(self, queryset: QuerySet[AuditEntry], name: str, value: date) -> QuerySet[AuditEntry]:
        return queryset.filter(at__lt=_day_start(value + timedelta(days=1)))
