"""The browser's quota editor and usage-report form. Quota rules are the API serializer's; this only converts units."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from api.quotas.serializers import FAIR_SHARE_WEIGHT_BOUNDS, MAX_GPUS, MAX_NODE_HOURS, ReportQuerySerializer
from frontend.forms import says
from frontend.templatetags.muster import duration
from quotas.limits import Limits
from quotas.models import MAX_FAIR_SHARE_WEIGHT, MIN_FAIR_SHARE_WEIGHT
from quotas.periods import period_words

UNLIMITED = {"placeholder": "unlimited"}


class QuotaForm(forms.Form):
    # The API's bounds (QuotaInputSerializer), checked here to say them in the form's words.
    max_gpus = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_GPUS,
        error_messages=says(f"Give 0 GPUs or more (at most {MAX_GPUS:,}); leave it empty for no limit."),
        label="Max GPUs at once",
        widget=forms.NumberInput(attrs=UNLIMITED),
        help_text="Guaranteed share; blank = unlimited.",
    )
    max_wall_time_minutes = forms.IntegerField(
        required=False,
        min_value=1,
        error_messages=says("A wall time limit is at least 1 minute; leave it empty for no limit of its own."),
        label="Max wall time per job (minutes)",
        widget=forms.NumberInput(attrs=UNLIMITED),
        help_text="Blank = unlimited.",
    )
    max_node_hours_per_job = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_NODE_HOURS,
        error_messages=says(f"Give 0 node-hours or more (at most {MAX_NODE_HOURS:,.0f}); leave it empty for no limit."),
        label="Max node-hours per job",
        widget=forms.NumberInput(attrs={**UNLIMITED, "step": "any"}),
        help_text="Nodes x wall time: 128 lets a 16-node job run 8 hours. Blank = unlimited.",
    )
    node_hours_per_period = forms.FloatField(
        required=False,
        min_value=0,
        max_value=MAX_NODE_HOURS,
        error_messages=says(f"Give a budget of 0 node-hours or more (at most {MAX_NODE_HOURS:,.0f}); leave it empty for no budget."),
        label="Node-hour budget per period",
        widget=forms.NumberInput(attrs={**UNLIMITED, "step": "any"}),
        help_text="Charged as jobs run. Blank = unlimited.",  # and when it renews: __init__, from the settings in force
    )
    fair_share_weight = forms.FloatField(
        min_value=MIN_FAIR_SHARE_WEIGHT,
        max_value=MAX_FAIR_SHARE_WEIGHT,
        error_messages=says(f"Give a fair-share weight {FAIR_SHARE_WEIGHT_BOUNDS}."),
        label="Fair-share weight",
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text=f"Shares against other accounts (2 weighs twice 1), {FAIR_SHARE_WEIGHT_BOUNDS}.",
    )

    # Where the API's error keys land on this form.
    FIELD_FOR_API = {"max_wall_time_seconds": "max_wall_time_minutes"}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Which period, read when the form is made (the settings in force): "resets each period" said nothing of which.
        budget = self.fields["node_hours_per_period"]
        budget.help_text = (
            f"Charged as jobs run; renews {period_words()} (MUSTER_BUDGET_PERIOD, MUSTER_TIME_ZONE: see Settings). Blank = unlimited."
        )

    @classmethod
    def initial_from(cls, limits: Limits) -> dict[str, Any]:
        seconds = limits.max_wall_time_seconds
        return {
            "max_gpus": limits.max_gpus,
            "max_wall_time_minutes": None if seconds is None else -(-seconds // 60),
            "max_node_hours_per_job": limits.max_node_hours_per_job,
            "node_hours_per_period": limits.node_hours_per_period,
            "fair_share_weight": limits.fair_share_weight,
        }

    def api_payload(self, before: Limits) -> dict[str, Any]:
        """The API's request body (PUT: every limit) from the cleaned fields. A wall time of seconds set through the API
        (5430 s) is shown rounded up to minutes (91); left as shown, it keeps its seconds rather than become 5460 s."""
        data = self.cleaned_data
        minutes = data.get("max_wall_time_minutes")
        seconds = None if minutes is None else minutes * 60
        if minutes is not None and minutes == self.initial_from(before)["max_wall_time_minutes"]:
            seconds = before.max_wall_time_seconds
        return {
            "max_gpus": data.get("max_gpus"),
            "max_wall_time_seconds": seconds,
            "max_node_hours_per_job": data.get("max_node_hours_per_job"),
            "node_hours_per_period": data.get("node_hours_per_period"),
            "fair_share_weight": data.get("fair_share_weight"),
        }

    def clean_max_wall_time_minutes(self) -> int | None:
        """The site's longest wall time in this field's unit: the API says it in seconds ("1209600 s") beside a field
        that asks for minutes."""
        minutes = self.cleaned_data.get("max_wall_time_minutes")
        longest = settings.MUSTER_MAX_WALL_TIME_SECONDS
        if minutes is not None and minutes * 60 > longest:
            raise forms.ValidationError(
                f"At most the site's longest wall time, {longest // 60} minutes ({duration(longest)}: "
                "MUSTER_MAX_WALL_TIME_SECONDS); leave it empty for no limit of its own."
            )
        return minutes

    def add_api_errors(self, errors: dict[str, Any]) -> None:
        for key, messages in errors.items():
            field = self.FIELD_FOR_API.get(key, key)
            if field in self.errors:
                continue
            for message in messages if isinstance(messages, list) else [messages]:
                self.add_error(field if field in self.fields else None, str(message))


class UsageReportForm(forms.Form):
    start = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), label="From")
    end = forms.DateField(widget=forms.DateInput(attrs={"type": "date"}), label="To (included)")
    group_by = forms.ChoiceField(choices=[("user", "user"), ("team", "team")], label="Group by")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what Form.clean returns
        if data.get("start") and data.get("end"):
            # The API's checks, word for word (the order of the dates, the dates a period can be worked out for, the
            # longest report), so the page and its "Download CSV" link never disagree about a range.
            query = ReportQuerySerializer(data={"start": data["start"].isoformat(), "end": data["end"].isoformat()})
            if not query.is_valid():
                for field, messages in query.errors.items():
                    self.add_error(field if field in self.fields else None, messages)
        return data
