"""Input and output shapes of the quotas and usage API."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.conf import settings
from rest_framework import serializers

from apikit.serializers import StrictQuerySerializer, StrictSerializer
from jobs.amounts import gpu_amount
from quotas.models import MAX_FAIR_SHARE_WEIGHT, MIN_FAIR_SHARE_WEIGHT
from quotas.services import GRANT_AMOUNT_REFUSED, GRANT_REASON_MISSING, GRANT_REVOKE_REASON_MISSING, MIN_GRANT_NODE_HOURS


class GpuAmountField(serializers.FloatField):
    """GPUs held: 32 for whole GPUs, 0.25 for a GPU slice's share (jobs.amounts.gpu_amount)."""

    def to_representation(self, value: float) -> float:  # type: ignore[override]  # DRF's stubs say str; JSON wants a number
        return gpu_amount(value)


NOT_A_DAY = "Not a day: write it as YYYY-MM-DD (2026-11-01), a date that exists."
MAX_GPUS = 10_000_000
MAX_NODE_HOURS = 1e9
# Both bounds in one phrase, for the API's help and errors and the quota page's (it said "greater than 0", while the
# model refused under 0.001 in Django's generic words).
FAIR_SHARE_WEIGHT_BOUNDS = f"from {MIN_FAIR_SHARE_WEIGHT:g} to {MAX_FAIR_SHARE_WEIGHT:,}"
FAIR_SHARE_WEIGHT_REFUSED = f"The fair-share weight must be {FAIR_SHARE_WEIGHT_BOUNDS}."


class QuotaInputSerializer(StrictSerializer):
    """PUT sends every limit; PATCH only those it changes. null means unlimited."""

    # Bounds past which a limit means nothing, so a typo (a wall time in minutes typed as seconds, digits held down) is
    # refused rather than stored and shown as 106751991167300 days.
    max_gpus = serializers.IntegerField(
        min_value=0, max_value=MAX_GPUS, allow_null=True, help_text=f"GPUs held at once by non-preemptible jobs; at most {MAX_GPUS}."
    )
    max_wall_time_seconds = serializers.IntegerField(
        min_value=1, allow_null=True, help_text="Longest wall time of one job; at most the site's longest (MUSTER_MAX_WALL_TIME_SECONDS)."
    )
    max_node_hours_per_job = serializers.FloatField(
        min_value=0,
        max_value=MAX_NODE_HOURS,
        allow_null=True,
        help_text=f"Nodes x wall time (hours) of one job; at most {MAX_NODE_HOURS:g}.",
    )
    node_hours_per_period = serializers.FloatField(
        min_value=0, max_value=MAX_NODE_HOURS, allow_null=True, help_text=f"Node-hour budget per budget period; at most {MAX_NODE_HOURS:g}."
    )
    fair_share_weight = serializers.FloatField(
        min_value=MIN_FAIR_SHARE_WEIGHT,
        max_value=MAX_FAIR_SHARE_WEIGHT,
        error_messages={"min_value": FAIR_SHARE_WEIGHT_REFUSED, "max_value": FAIR_SHARE_WEIGHT_REFUSED},
        help_text=f"Shares in the fair-share priority; {FAIR_SHARE_WEIGHT_BOUNDS}.",
    )

    def validate_max_wall_time_seconds(self, value: int | None) -> int | None:
        longest = settings.MUSTER_MAX_WALL_TIME_SECONDS
        if value is not None and value > longest:
            raise serializers.ValidationError(
                f"At most the site's longest wall time, {longest} s ({longest / 86400:g} days: MUSTER_MAX_WALL_TIME_SECONDS); "
                "leave it empty for no limit of its own."
            )
        return value


class GrantInputSerializer(StrictSerializer):
    """Node-hours added to the account's budget for the current budget period only."""

    node_hours = serializers.FloatField(
        help_text=f"Node-hours to add to this period's budget: at least {MIN_GRANT_NODE_HOURS:g}, at most {MAX_NODE_HOURS:g}."
    )
    reason = serializers.CharField(
        max_length=200,
        error_messages={"blank": GRANT_REASON_MISSING, "required": GRANT_REASON_MISSING},
        help_text="Why, for the audit trail (up to 200 characters).",
    )

    def validate_node_hours(self, value: float) -> float:
        # Checked here too (the service checks it again), so a 0 is said beside a missing reason, not after it.
        if not MIN_GRANT_NODE_HOURS <= value <= MAX_NODE_HOURS:
            raise serializers.ValidationError(GRANT_AMOUNT_REFUSED)
        return value


class GrantRevokeInputSerializer(StrictSerializer):
    """Why a grant of the current period is taken back."""

    reason = serializers.CharField(
        max_length=200,
        error_messages={"blank": GRANT_REVOKE_REASON_MISSING, "required": GRANT_REVOKE_REASON_MISSING},
        help_text="Why it is revoked, for the audit trail (up to 200 characters).",
    )


class GrantSerializer(serializers.Serializer):
    """Node-hours an admin added to one period's budget, and whether they were taken back."""

    id = serializers.IntegerField(help_text="What POST .../grants/<id>/revoke/ names.")
    node_hours = serializers.FloatField()
    reason = serializers.CharField()
    granted_by = serializers.CharField(source="granted_by_username", help_text="Who added them (empty: Muster itself).")
    granted_at = serializers.DateTimeField()
    period_start = serializers.DateTimeField(help_text="The budget period they add to.")
    revoked = serializers.SerializerMethodField(help_text="Taken back: they add nothing to the budget any more.")
    revoked_at = serializers.DateTimeField(allow_null=True)
    revoked_by = serializers.CharField(source="revoked_by_username", help_text="Who revoked them; empty if not revoked.")
    revoke_reason = serializers.CharField(help_text="Why they were revoked; empty if not revoked.")

    def get_revoked(self, grant: Any) -> bool:
        return grant.revoked_at is not None


class UsageSerializer(serializers.Serializer):
    gpus_in_use = GpuAmountField(
        help_text="GPUs held now by the account's running and scheduled jobs (a GPU slice counts its share): "
        "gpus_within_quota + gpus_borrowed."
    )
    gpus_within_quota = GpuAmountField(
        help_text="Of gpus_in_use, what jobs hold within the GPU quota (max_gpus): what the quota counts, and what the "
        "jobs' reasons and the cluster page say is in use of it."
    )
    gpus_borrowed = GpuAmountField(
        help_text="Of gpus_in_use, what preemptible jobs borrow beyond the quota: counted against no quota, and preempted "
        "first when the quota's own jobs need the GPUs."
    )
    node_hours_used = serializers.FloatField(
        help_text="Node-hours charged in the current budget period, unrounded, as are node_hours_left and "
        "node_hours_committed. The Usage and Quotas pages and muster usage state an account's three to the same places "
        "(one, or more while the smallest that is not zero would show fewer than two significant figures, at most six), "
        "node_hours_used as the budget less node_hours_left as written: they add up, and a use is never 0.0."
    )
    node_hours_left = serializers.FloatField(
        allow_null=True,
        help_text="Budget left this period (the budget and node_hours_granted, less the node-hours charged); null without a budget.",
    )
    node_hours_granted = serializers.FloatField(
        help_text="Node-hours admins added to this period's budget only (POST .../grant/); the next period starts without them."
    )
    node_hours_committed = serializers.FloatField(
        source="budget.committed",
        allow_null=True,
        help_text="The part of node_hours_left the account's running jobs may still use by their wall time, which the "
        "scheduler counts as spent: a new job must fit in the rest. Null without a budget.",
    )
    gpu_hours_used = serializers.FloatField(help_text="GPU-hours charged in the current budget period.")
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()


class QuotaSerializer(serializers.Serializer):
    """One account's effective limits and current usage."""

    account = serializers.ChoiceField(choices=["user", "team"], source="limits.kind")
    name = serializers.CharField(source="limits.name")
    max_gpus = serializers.IntegerField(source="limits.max_gpus", allow_null=True)
    max_wall_time_seconds = serializers.IntegerField(source="limits.max_wall_time_seconds", allow_null=True)
    max_node_hours_per_job = serializers.FloatField(source="limits.max_node_hours_per_job", allow_null=True)
    node_hours_per_period = serializers.FloatField(source="limits.node_hours_per_period", allow_null=True)
    fair_share_weight = serializers.FloatField(source="limits.fair_share_weight")
    is_default = serializers.BooleanField(
        source="limits.is_default", help_text="No quota of its own: a user gets the site default, a team is unlimited."
    )
    usage = UsageSerializer(source="*", help_text="Use now and in the current budget period.")


class UsageSummarySerializer(serializers.Serializer):
    username = serializers.CharField()
    period_start = serializers.DateTimeField(help_text="The budget period's first instant: midnight in MUSTER_TIME_ZONE.")
    period_end = serializers.DateTimeField(
        help_text="When the period resets, exclusive: midnight after its last day (2026-12-01T00:00 ends November), "
        "which the Usage page and muster usage say as 1 Nov 2026 to 30 Nov 2026."
    )
    user = QuotaSerializer(source="user_account", help_text="The user's own limits and usage.")
    teams = QuotaSerializer(source="team_accounts", many=True, help_text="Each of the user's teams, by name.")


class ReportQuerySerializer(StrictQuerySerializer):
    """The report's query string. Both dates are included: start=2026-11-01&end=2026-11-30 is all of November."""

    # DRF says "Date has wrong format" of 2026-13-01 too, whose format is right.
    start = serializers.DateField(
        required=False,
        error_messages={"invalid": NOT_A_DAY},
        help_text="First day (YYYY-MM-DD); default: the current budget period's first day.",
    )
    end = serializers.DateField(
        required=False, error_messages={"invalid": NOT_A_DAY}, help_text="Last day, included (YYYY-MM-DD); default: today."
    )
    group_by = serializers.ChoiceField(choices=["user", "team"], default="user")
    # DRF's own query parameter: it picks the renderer (csv or json) before the view runs.
    format = serializers.ChoiceField(choices=["json", "csv"], required=False)

    MAX_DAYS = 3660
    # Beyond these, a period's end (the day after `end`) would overflow Python's dates.
    EARLIEST, LATEST = date(1970, 1, 1), date(2999, 12, 31)

    def _in_range(self, value: date) -> date:
        if not self.EARLIEST <= value <= self.LATEST:
            raise serializers.ValidationError(f"A date between {self.EARLIEST} and {self.LATEST}.")
        return value

    def validate_start(self, value: date) -> date:
        return self._in_range(value)

    def validate_end(self, value: date) -> date:
        return self._in_range(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("start"), attrs.get("end")
        if start and end:
            if end < start:
                raise serializers.ValidationError({"end": ["The end date is before the start date."]})
            if (end - start).days > self.MAX_DAYS:
                raise serializers.ValidationError({"end": [f"A report covers at most {self.MAX_DAYS} days."]})
        return attrs


class ReportRowSerializer(serializers.Serializer):
    name = serializers.CharField(
        help_text="Username or team name; by team, an admin's report ends with `(no team)`, the jobs submitted for no team."
    )
    jobs = serializers.IntegerField(help_text="Jobs that held GPUs in the range.")
    gpu_hours = serializers.FloatField()
    node_hours = serializers.FloatField(help_text="Nodes' share held x hours: a 2-GPU job on an 8-GPU node counts 1/4 per hour.")


class ReportSerializer(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField(help_text="Last day, included.")
    group_by = serializers.CharField()
    rows = ReportRowSerializer(many=True)


class QuotaSavedSerializer(QuotaSerializer):
    """The account's limits and usage after a change, and what the change means for its jobs now."""

    warnings = serializers.ListField(
        child=serializers.CharField(),
        help_text="Set when a limit went below what the account holds or used: what happens to its running and new jobs.",
    )


# A quota read and sent back whole (is_default, usage included) is told which fields are read-only.
QuotaInputSerializer.answer_serializer = QuotaSavedSerializer
