from __future__ import annotations

import django_filters

from jobs.models import Job
from jobs.states import JobState


class JobFilter(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=JobState.choices, help_text="Repeat to match several states.")
    owner = django_filters.CharFilter(field_name="owner__username", help_text="Owner's username (admins see every owner).")
    team = django_filters.CharFilter(field_name="team__name")
    name = django_filters.CharFilter(lookup_expr="icontains")

    class Meta:
        model = Job
        fields = ["state", "owner", "team", "name"]
