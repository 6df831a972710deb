"""CSV for usage reports, so a spreadsheet opens them as they are."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

from rest_framework.renderers import BaseRenderer

REPORT_COLUMNS = ("jobs", "gpu_hours", "node_hours")


def report_csv(*, group_by: str, rows: Iterable[Mapping[str, Any]]) -> str:
    """A header row (`user` or `team`, jobs, gpu_hours, node_hours), then one row per account."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([group_by, *REPORT_COLUMNS])
    for row in rows:
        writer.writerow([row["name"], row["jobs"], round(row["gpu_hours"], 4), round(row["node_hours"], 4)])
    return out.getvalue()


class ReportCSVRenderer(BaseRenderer):
    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Mapping[str, Any] | None = None) -> bytes:
        return report_csv(group_by=data["group_by"], rows=data["rows"]).encode(self.charset)
