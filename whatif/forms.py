"""The form that starts a what-if run: the trace, the cluster, the policies and the changed settings."""

from __future__ import annotations

import gzip
import io
from datetime import date, datetime, time, timedelta
from typing import Any

from django import forms
from django.conf import settings
from django.utils import timezone

from jobs.amounts import duration
from replay.overrides import OverrideError, parse_assignments, setting_names
from replay.simulator import POLICIES
from replay.trace import Assumptions
from whatif.models import WhatIfRun
from whatif.runs import runtime_cap_check

# An upload (or its gzip content) larger than this is refused: the trace is kept in the database with the run.
MAX_TRACE_BYTES = 32 * 1024 * 1024
DEFAULTS = Assumptions()
# Beyond these, the day after the last (the range's end) would overflow Python's dates; the usage API's bounds.
EARLIEST, LATEST = date(1970, 1, 1), date(2999, 12, 31)
# A runtime cap above a year cuts nothing a trace holds (Philly's longest runs are weeks); blank is no cap.
MAX_RUNTIME_CAP_SECONDS = 366 * 24 * 3600


def _read_upload(upload: Any) -> str:
    if upload.size > MAX_TRACE_BYTES:
        raise forms.ValidationError(f"The file is too big: {upload.size:,} bytes; the limit is {MAX_TRACE_BYTES:,} bytes.")
    data = upload.read()
    if upload.name.endswith(".gz"):
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
                data = unzipped.read(MAX_TRACE_BYTES + 1)
        except (OSError, EOFError) as exc:
            raise forms.ValidationError(f"The file is not valid gzip: {exc}") from None
        if len(data) > MAX_TRACE_BYTES:
            raise forms.ValidationError(f"Unpacked, the trace is over the limit of {MAX_TRACE_BYTES:,} bytes.")
    try:
        return str(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise forms.ValidationError(f"The file is not UTF-8 text (byte {exc.start}).") from None


class WhatIfForm(forms.Form):
    source = forms.ChoiceField(choices=WhatIfRun.Source.choices, widget=forms.RadioSelect, initial=WhatIfRun.Source.HISTORY)
    start = forms.DateField(required=False, label="From (first day)", widget=forms.DateInput(attrs={"type": "date"}))
    end = forms.DateField(required=False, label="To (last day)", widget=forms.DateInput(attrs={"type": "date"}))
    trace_file = forms.FileField(
        required=False,
        label="Trace file",
        help_text=f"Philly CSV (timestamp,duration,num_gpus,gpu_time,cluster) or a Muster history CSV, optionally .gz; "
        f"at most {MAX_TRACE_BYTES // 2**20} MiB.",
    )
    nodes = forms.IntegerField(required=False, min_value=1, max_value=100_000, label="Nodes", help_text="The simulated cluster's size...")
    load = forms.FloatField(
        required=False,
        min_value=0.01,
        max_value=10,
        label="...or offered load",
        widget=forms.NumberInput(attrs={"step": "any"}),
        help_text="Size the cluster so the trace's GPU-time is this fraction of its capacity over the trace (0.9 = busy).",
    )
    gpus_per_node = forms.IntegerField(min_value=1, max_value=64, initial=DEFAULTS.gpus_per_node, label="GPUs per node")
    policies = forms.MultipleChoiceField(choices=[(p, p) for p in POLICIES], initial=list(POLICIES), widget=forms.CheckboxSelectMultiple)
    settings = forms.CharField(
        required=False,
        label="Changed settings",
        widget=forms.Textarea(attrs={"rows": 4, "placeholder": "starvation_seconds=7200\npreemption=false"}),
        help_text="One NAME=VALUE per line, over the site's current policy settings. Names: " + ", ".join(setting_names()) + ".",
    )
    wall_round_seconds = forms.FloatField(
        min_value=1,
        initial=round(DEFAULTS.wall_round_seconds),  # 3600, not 3600.0
        label="Wall time rounding (s)",
        help_text="A job asks for its runtime rounded up to this.",
    )
    runtime_cap_seconds = forms.FloatField(
        max_value=MAX_RUNTIME_CAP_SECONDS,
        required=False,
        initial=round(DEFAULTS.runtime_cap_seconds) if DEFAULTS.runtime_cap_seconds is not None else None,
        label="Runtime cap (s)",
        help_text="Longer runs are cut (above 0, a year at most); blank = no cap.",
    )
    resume = forms.ChoiceField(
        choices=[("restart", "restart from zero"), ("checkpoint", "resume from the last checkpoint")],
        initial=DEFAULTS.resume,
        label="A preempted job",
    )
    tenant_quotas = forms.BooleanField(
        required=False,
        initial=DEFAULTS.tenant_quotas,
        label="Quotas and borrowing",
        help_text="Each tenant a GPU quota of an equal share of the cluster; every job may borrow beyond it and is reclaimed first.",
    )
    all_preemptible = forms.BooleanField(
        required=False,
        initial=DEFAULTS.all_preemptible,
        label="Every job preemptible",
        help_text="Without quotas: what preemption for fair share (fair_share_preemption=true in the settings) may stop.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The site's longest wall time, read when the form is made (not at import), for the browser's own check too.
        self.fields["wall_round_seconds"].widget.attrs["max"] = settings.MUSTER_MAX_WALL_TIME_SECONDS

    def _clean_day(self, name: str) -> date | None:
        day: date | None = self.cleaned_data.get(name)
        if day is not None and not EARLIEST <= day <= LATEST:
            raise forms.ValidationError(f"A date between {EARLIEST} and {LATEST}.")
        return day

    def clean_start(self) -> date | None:
        return self._clean_day("start")

    def clean_end(self) -> date | None:
        return self._clean_day("end")

    def clean_wall_round_seconds(self) -> float:
        """At most the site's longest wall time: a job's wall time is its runtime rounded up to this, so anything longer
        asks for a wall time no job here may have (1e308 read "rounded up to 2.77778e+304 hours")."""
        seconds: float = self.cleaned_data["wall_round_seconds"]
        longest = settings.MUSTER_MAX_WALL_TIME_SECONDS
        if seconds > longest:
            raise forms.ValidationError(
                f"At most the site's longest wall time, {longest} s ({duration(longest)}: MUSTER_MAX_WALL_TIME_SECONDS)."
            )
        return seconds

    def clean_runtime_cap_seconds(self) -> float | None:
        try:
            return runtime_cap_check(self.cleaned_data.get("runtime_cap_seconds"), no_cap="Leave it blank for no cap.")
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def clean_trace_file(self) -> Any:
        upload = self.cleaned_data.get("trace_file")
        if upload is not None:
            self.cleaned_data["trace_text"] = _read_upload(upload)
        return upload

    def clean_settings(self) -> dict[str, Any]:
        try:
            return parse_assignments(self.cleaned_data.get("settings", "").splitlines(), numbered=True)
        except OverrideError as exc:
            raise forms.ValidationError(exc.problems) from None  # every bad line at once, each with its number

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("source") == WhatIfRun.Source.UPLOAD and not data.get("trace_file") and "trace_file" not in self.errors:
            self.add_error("trace_file", "Choose the trace file to replay.")
        if (data.get("nodes") is None) == (data.get("load") is None) and "nodes" not in self.errors and "load" not in self.errors:
            self.add_error("nodes", "Give either the number of nodes or the offered load.")
        start, end = data.get("start"), data.get("end")
        if start and end and end < start:
            self.add_error("end", "The last day is before the first.")
        return data

    def range(self) -> tuple[datetime | None, datetime | None]:
        """[start, end) as aware datetimes in the site's time zone: the first day's midnight to the day after the last."""
        start, end = self.cleaned_data.get("start"), self.cleaned_data.get("end")
        return (
            timezone.make_aware(datetime.combine(start, time.min)) if start else None,
            timezone.make_aware(datetime.combine(end + timedelta(days=1), time.min)) if end else None,
        )

    def assumptions(self) -> Assumptions:
        return Assumptions(
            gpus_per_node=self.cleaned_data["gpus_per_node"],
            wall_round_seconds=self.cleaned_data["wall_round_seconds"],
            runtime_cap_seconds=self.cleaned_data.get("runtime_cap_seconds"),
            resume=self.cleaned_data["resume"],
            tenant_quotas=self.cleaned_data.get("tenant_quotas", False),
            all_preemptible=self.cleaned_data.get("all_preemptible", False),
        )
