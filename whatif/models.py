"""A what-if run: a trace replayed under several policies in the background, with its summary and charts."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class WhatIfRun(models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class Source(models.TextChoices):
        HISTORY = "history", "this site's finished jobs"
        UPLOAD = "upload", "an uploaded trace"

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.FloatField(default=0.0)
    # What was asked: source, trace name, cluster size, policies, the changed settings and the full policy config used.
    parameters = models.JSONField(default=dict)
    source = models.CharField(max_length=16, choices=Source.choices)
    trace_name = models.CharField(max_length=200)
    # The trace itself (CSV text, validated before the run was queued), so the worker needs no shared disk.
    trace = models.TextField(blank=True)
    trace_jobs = models.PositiveIntegerField(default=0)
    # replay.report.summary_document: trace, assumptions, settings, one summary per policy.
    summary = models.JSONField(null=True, blank=True)
    # replay.report.report_figures: the charts as Plotly figure JSON.
    figures = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)
    # The Celery worker replaying it (its hostname): when that worker stops, or starts again after it died, a run it
    # left "running" is marked as stopped (whatif.tasks) instead of reading "running" forever.
    worker = models.CharField(max_length=255, blank=True)
    cancelled_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        verbose_name = "what-if run"

    def __str__(self) -> str:
        return f"what-if run {self.pk} ({self.trace_name})"

    @property
    def ended(self) -> bool:
        """Done, failed or cancelled: it may be deleted, not cancelled."""
        return self.status in ENDED

    @property
    def policies(self) -> list[str]:
        value: Any = self.parameters.get("policies", [])
        return list(value)

    @property
    def policy_summaries(self) -> list[dict[str, Any]]:
        return list((self.summary or {}).get("policies", []))


ENDED = (WhatIfRun.Status.DONE, WhatIfRun.Status.FAILED, WhatIfRun.Status.CANCELLED)
