"""Input and output shapes of the telemetry API."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apikit.serializers import StrictQuerySerializer
from telemetry.catalogue import METRICS, Level, metric_lookup
from telemetry.sources import Series

_NUMBER = re.compile(r"-?\d+(\.\d+)?")
# Times the API accepts: from the epoch (`start=0`, "from the beginning", is clamped to the run as any early time is)
# to 2200, so a typo cannot ask for year 9999.
_EARLIEST, _LATEST = 0.0, 7258118400.0


@extend_schema_field({"type": "string", "example": "2026-05-01T12:00:00Z"})
class InstantField(serializers.Field):
    """A time: ISO 8601 (naive means UTC) or seconds since the epoch, as Prometheus accepts."""

    default_error_messages = {
        "invalid": "An ISO 8601 time (e.g. 2026-05-01T12:00:00Z) or seconds since the epoch, from 1970-01-01 to 2200-01-01."
    }

    def to_internal_value(self, data: Any) -> datetime:
        text = str(data).strip()
        if _NUMBER.fullmatch(text):
            seconds = float(text)
            if not _EARLIEST <= seconds <= _LATEST:
                self.fail("invalid")
            return datetime.fromtimestamp(seconds, tz=UTC)
        try:
            # A '+' of a UTC offset arrives as a space when the query string was not encoded.
            value = parse_datetime(text) or parse_datetime(text.replace(" ", "+"))
        except ValueError:
            value = None
        if value is None:
            self.fail("invalid")
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        if not _EARLIEST <= value.timestamp() <= _LATEST:
            self.fail("invalid")
        return value

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class MetricsQuerySerializer(StrictQuerySerializer):
    metric = serializers.CharField(help_text=f"A metric key ({', '.join(METRICS)}) or its source name (e.g. DCGM_FI_DEV_GPU_UTIL).")
    start = InstantField(
        required=False,
        help_text="ISO 8601 (naive means UTC) or seconds since the epoch, 1970 to 2200; before the run (0 too) reads from "
        "its start. Default: when the run started.",
    )
    end = InstantField(
        required=False,
        help_text="ISO 8601 or seconds since the epoch, 1970 to 2200; after the run reads to its end. Default: when the "
        "run ended, or now while it runs.",
    )
    step = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=7 * 86400,
        help_text="Bucket length in seconds, rounded up to a multiple of the data's resolution (the answer's `step` is "
        "the one used, its `resolution` the data's). Default: at most 2,000 buckets.",
    )
    level = serializers.ChoiceField(choices=[lv.value for lv in Level], default=Level.JOB.value, help_text="gpu, node or job.")
    node = serializers.CharField(required=False, max_length=253, help_text="Only this node's series (node or gpu level).")
    run = serializers.IntegerField(required=False, min_value=1, help_text="The attempt; default: the latest run.")

    def validate_metric(self, value: str) -> Any:
        metric = metric_lookup(value)
        if metric is None:
            raise serializers.ValidationError(f"Unknown metric {value!r}; choose one of {', '.join(METRICS)}.")
        return metric

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        start, end = attrs.get("start"), attrs.get("end")
        if start is not None and end is not None and start >= end:
            raise serializers.ValidationError({"end": ["Must be after start."]})
        if "step" in attrs and start is not None and end is not None:
            points = math.ceil((end - start).total_seconds() / attrs["step"])
            limit = settings.MUSTER_TELEMETRY_API_MAX_POINTS
            if points > limit:
                raise serializers.ValidationError({"step": [f"{points} buckets for that range; at most {limit}. Use a longer step."]})
        return attrs


def series_data(series: Series) -> dict[str, Any]:
    """One series as columns, only the buckets with samples (a gap is a missing time)."""
    b = series.buckets
    keep = [i for i, c in enumerate(b.count) if c]
    return {
        "node": series.node,
        "gpu": series.gpu if series.gpu >= 0 else None,
        "rank": series.rank,
        "origin": series.origin,
        "t": [(b.first + i) * b.step for i in keep],
        "mean": [b.mean[i] for i in keep],
        "min": [b.min[i] for i in keep],
        "max": [b.max[i] for i in keep],
        "count": [b.count[i] for i in keep],
    }


class SeriesSerializer(serializers.Serializer):
    node = serializers.CharField(help_text='"" at job level.')
    gpu = serializers.IntegerField(allow_null=True, help_text="null above GPU level.")
    rank = serializers.IntegerField(allow_null=True)
    origin = serializers.CharField(help_text="stored, the source's name (simulated, prometheus), or pushed (by the job).")
    t = serializers.ListField(child=serializers.IntegerField(), help_text="Bucket starts, seconds since the epoch.")
    mean = serializers.ListField(child=serializers.FloatField())
    min = serializers.ListField(child=serializers.FloatField())
    max = serializers.ListField(child=serializers.FloatField())
    count = serializers.ListField(child=serializers.IntegerField(), help_text="Samples in each bucket.")


class MetricsSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    run = serializers.IntegerField()
    metric = serializers.CharField()
    name = serializers.CharField(help_text="The series name at the source.")
    label = serializers.CharField()  # type: ignore[assignment]  # a declared field (DRF's metaclass takes it off the class), not Field.label
    unit = serializers.CharField()
    level = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    step = serializers.IntegerField(
        help_text="Seconds per bucket actually used: the `step` asked for rounded up to a multiple of `resolution`."
    )
    resolution = serializers.IntegerField(
        help_text="The data's resolution in seconds (the source's scrape interval, or the stored series' step): the finest step."
    )
    series = SeriesSerializer(many=True)


class PushResultSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    stored = serializers.IntegerField(help_text="NCCL samples stored.")
