from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import django_filters
from django import forms
from django.contrib.auth import get_user_model
from django.db.models import Q, QuerySet

from jobs.models import Job, Node, NodeState
from jobs.selectors import jobs_visible_to, waiting_after_preemption
from jobs.sorting import JOB_LIST_DEFAULT, Sorting, job_columns, sort_choices
from jobs.states import JobState
from quotas.selectors import job_filter_teams

# The team (or owner) names a refused ?team= (?owner=) lists at most, so an admin's message stays a sentence.
NAMES_LISTED = 20


class _UtcDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 instant read in UTC, so one with no UTC equivalent (9999-12-31T23:59:59-14:00) is refused as a
    malformed one is: under the parameter the client sent (`submitted_before`), not the model field it filters."""

    # Django's "Enter a valid date/time." named no form: `?submitted_after=yesterday` or a US date left a script guessing.
    default_error_messages = {
        "invalid": "Not a date and time: write it in ISO 8601, as 2026-11-29T14:00:00Z (UTC), 2026-11-29T15:00:00+01:00 or "
        "a day, 2026-11-29."
    }

    def to_python(self, value: object) -> datetime | None:
        instant = super().to_python(value)
        if instant is None:
            return None
        try:
            return instant.astimezone(UTC)
        except OverflowError as exc:
            raise forms.ValidationError("The time is out of range (after 9999-12-31 or before 0001-01-01 in UTC).", code="invalid") from exc


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 instant, compared in UTC: PostgreSQL refuses offsets past +-15:59, which ISO 8601 allows."""

    field_class = _UtcDateTimeField


class _StateField(django_filters.fields.MultipleChoiceField):
    """States in any case, as the CLI takes them (`running`); an unknown one is answered with the states there are."""

    default_error_messages = {"invalid_choice": f"Unknown state %(value)s; the states are {', '.join(JobState.values)}."}

    def to_python(self, value: object) -> list[str]:
        # An empty one is no state asked, as the job page's form sends its "any" (?state=&name=): not "Unknown state ;".
        return [text.upper() for text in super().to_python(value) if text]


class StateFilter(django_filters.MultipleChoiceFilter):
    """Jobs in any of the states given. PREEMPTED, a state no job stays in (it is requeued at once), matches the jobs
    waiting again after a preemption (PENDING): the ones a user asking for it is looking for."""

    field_class = _StateField

    def filter(self, qs: QuerySet[Job], value: list[str]) -> QuerySet[Job]:
        if not value:
            return qs
        match = Q(state__in=[state for state in value if state != JobState.PREEMPTED])
        if JobState.PREEMPTED in value:
            match |= waiting_after_preemption()
        return qs.filter(match)


_TRUE, _FALSE = frozenset({"true", "1", "yes"}), frozenset({"false", "0", "no"})


class WholeNumberFilter(django_filters.NumberFilter):
    field_class = forms.IntegerField


class _BooleanField(forms.Field):
    """true or false (also 1/0, yes/no, in any case); anything else is refused, not read as "not asked" (django-filter's
    BooleanWidget reads `?held=1` as no filter at all, so a script releasing `?held=1` jobs acted on every job)."""

    widget = forms.TextInput

    def to_python(self, value: object) -> bool | None:
        text = "" if value is None else str(value).strip().lower()
        if not text:
            return None
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise forms.ValidationError("Enter true or false.", code="invalid")


class StrictBooleanFilter(django_filters.BooleanFilter):
    field_class = _BooleanField


def named(names: list[str]) -> str:
    """Names for a message, the first NAMES_LISTED of them and how many more."""
    more = len(names) - NAMES_LISTED
    return ", ".join(names[:NAMES_LISTED]) + (f" and {more} more" if more > 0 else "")


def unknown_team(team: str, viewer: Any) -> str:
    """Why ?team= lists nothing, or "" if the viewer's job list may be filtered by it (`job_filter_teams`)."""
    teams = job_filter_teams(viewer)
    if team in teams:
        return ""
    if getattr(viewer, "is_staff", False):
        return f"Unknown team {team}; the teams are {named(teams)}." if teams else f"Unknown team {team}; there are no teams."
    return f"No team {team} of yours; your teams are {named(teams)}." if teams else f"No team {team} of yours; you are in no team."


def unknown_owner(owner: str, viewer: Any) -> str:
    """Why ?owner= lists nothing, or "" if it names a user. An admin is told the owners there are; anyone else sees
    only their own jobs, and is told so without a word of anyone else's."""
    if not getattr(viewer, "is_staff", False):
        me = viewer.get_username()
        return "" if owner == me else f"You can list only your own jobs ({me}); {owner} is not you."
    if get_user_model().objects.filter(username=owner).exists():
        return ""  # a user with no jobs (here): an empty list says it
    owners = list(jobs_visible_to(viewer).order_by("owner__username").values_list("owner__username", flat=True).distinct())
    if not owners:
        return f"Unknown owner {owner}; no one has jobs yet."
    return f"Unknown owner {owner}; the owners of jobs are {named(owners)}."


def _job_orderings() -> list[tuple[str, str]]:
    columns = job_columns()
    return [(value, value) for column in columns for value in (column.key, f"-{column.key}")]


class JobFilterForm(forms.Form):
    """Refuses an owner or team the viewer's jobs cannot have, saying which they can: the API listed nothing for
    ?owner=nosuch, which a script reads as "no jobs", and the page said so in its own words."""

    viewer: Any = None

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if self.viewer is None or not self.viewer.is_authenticated:
            return data
        for name, why in (("owner", unknown_owner), ("team", unknown_team)):
            if value := data.get(name):
                if refused := why(value, self.viewer):
                    # As a parameter, not the message: django-filter %-formats messages, and a name may hold a %.
                    self.add_error(name, forms.ValidationError("%(refused)s", code="invalid", params={"refused": refused}))
        return data


class JobFilter(django_filters.FilterSet):
    state = StateFilter(
        choices=JobState.choices,
        help_text="Repeat to match several states; in any case. PREEMPTED: the jobs waiting again after a preemption "
        "(their state is PENDING: a preempted job goes back to the queue at once).",
    )
    owner = django_filters.CharFilter(
        field_name="owner__username",
        help_text="Owner's username: any for admins, only your own for others. One that owns none of the jobs you may see is refused.",
    )
    team = django_filters.CharFilter(
        field_name="team__name",
        help_text="The team the jobs ran for: any for admins; for others one of their teams, or one they ran jobs for before they "
        "left it. Any other is refused, naming the teams there are.",
    )
    name = django_filters.CharFilter(lookup_expr="icontains")
    # Whole numbers only, as the schema's integer says: NumberFilter read ?array=1.5 as a decimal and listed nothing.
    array = WholeNumberFilter(
        field_name="array_id", min_value=1, max_value=2**63 - 1, help_text="The elements of one array, by its array_id."
    )
    held = StrictBooleanFilter(
        method="filter_held",
        help_text="true: the pending jobs held out of placement (`muster hold`); false: every job not held.",
    )
    submitted_after = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="gte", help_text="Submitted at or after (ISO 8601).")
    submitted_before = UtcDateTimeFilter(field_name="submitted_at", lookup_expr="lt", help_text="Submitted before (ISO 8601).")
    ordering = django_filters.ChoiceFilter(
        choices=_job_orderings,
        method="filter_ordering",
        help_text="As the job list page's columns sort: id, name, owner, state (a job's life in order), size (the GPUs "
        "asked), time (run time), priority (the class, then the queue's priority) or submitted; a leading - reverses it. "
        "Jobs with no value (no run time yet) come last either way; ties go by id in the same direction. The default is "
        "-submitted: newest first.",
        # The pages' own words for a sort they do not take (jobs.sorting.sort_refusal).
        error_messages={"invalid_choice": "Cannot sort by %(value)s; " + sort_choices(job_columns())},
    )

    class Meta:
        model = Job
        fields = ["state", "owner", "team", "name", "array", "held", "submitted_after", "submitted_before", "ordering"]
        form = JobFilterForm

    def __init__(self, *args: Any, viewer: Any = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The API's filter backend gives the request; the job list page gives its viewer.
        self.viewer = viewer if viewer is not None else getattr(self.request, "user", None)

    @property
    def form(self) -> JobFilterForm:
        form = cast(JobFilterForm, super().form)
        form.viewer = self.viewer
        return form

    def filter_held(self, qs: QuerySet[Job], name: str, value: bool) -> QuerySet[Job]:
        # Not asked (empty) never comes here: django-filter calls a method only with a value.
        held = Q(state=JobState.PENDING) & ~Q(hold="")
        return qs.filter(held) if value else qs.exclude(held)

    def filter_ordering(self, qs: QuerySet[Job], name: str, value: str) -> QuerySet[Job]:
        return Sorting(job_columns(), value, default=JOB_LIST_DEFAULT).apply(qs)


class _NodeStateField(django_filters.fields.ChoiceField):
    """A node state in any case, as the job list takes a job's; an unknown one is answered with the states there are."""

    default_error_messages = {"invalid_choice": f"Unknown node state %(value)s; the states are {', '.join(NodeState.values)}."}

    def to_python(self, value: object) -> str:
        return str(super().to_python(value)).upper()


class NodeStateFilter(django_filters.ChoiceFilter):
    field_class = _NodeStateField


class NodeFilter(django_filters.FilterSet):
    """The nodes list's filters. `?state=` was django-filter's own: `ready` (the case `muster nodes` prints in) was
    refused with "Select a valid choice. ready is not one of the available choices.", naming none, where the job
    list's `?state=` takes any case and names the states."""

    rack = django_filters.CharFilter(help_text="The nodes of this rack (exactly as the list's `rack` says it).")
    state = NodeStateFilter(
        choices=NodeState.choices,
        help_text=f"The nodes in this state, in any case: {', '.join(NodeState.values)}. A held node keeps its state; "
        "?held=true lists those.",
    )
    held = StrictBooleanFilter(
        help_text="true: the nodes held out of placement (by an admin, or by Muster after failures); false: those not held."
    )

    class Meta:
        model = Node
        fields = ["rack", "state", "held"]
