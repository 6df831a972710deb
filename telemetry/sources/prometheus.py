"""The Prometheus source (production): NOT BUILT YET.

What exists is the shape: the PromQL it will send, rendered from templates in settings
(`MUSTER_TELEMETRY_PROMQL`, so a site with other exporters maps its own), for the DCGM
exporter's series of a job's pods and node exporter's InfiniBand counters of its nodes.
`read` raises TelemetryUnavailable with a plain message, so the job page says telemetry is
unavailable and still renders. Querying `/api/v1/query_range`, accepting both `Hostname` and
`hostname` labels, gaps and a Prometheus that is down are to be built against a real
Prometheus server loaded with recorded DCGM data (issue 5).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from telemetry.catalogue import Level, Metric
from telemetry.sources.base import JobTarget, Series, TelemetryUnavailable

# Each bucket needs its mean, minimum, maximum and sample count: four range queries per metric.
AGGREGATIONS = ("avg", "min", "max", "count")


@dataclass
class PrometheusTelemetry:
    url: str
    templates: dict[str, str]
    hostname_labels: tuple[str, ...] = ("Hostname", "hostname")
    node_label: str = "instance"
    scrape_seconds: int = 30
    name: str = "prometheus"

    @classmethod
    def from_settings(cls) -> PrometheusTelemetry:
        return cls(
            url=settings.MUSTER_TELEMETRY_PROMETHEUS_URL,
            templates=dict(settings.MUSTER_TELEMETRY_PROMQL),
            hostname_labels=tuple(settings.MUSTER_TELEMETRY_HOSTNAME_LABELS),
            node_label=settings.MUSTER_TELEMETRY_NODE_LABEL,
            scrape_seconds=settings.MUSTER_TELEMETRY_SCRAPE_SECONDS,
        )

    def resolution(self, target: JobTarget) -> int:
        return self.scrape_seconds

    def query(self, target: JobTarget, metric: Metric, *, step: int, level: Level, aggregation: str) -> str:
        """The PromQL for one aggregation of one metric of one attempt, from the settings' templates."""
        level = metric.finest_level(level)
        template = self.templates[f"{metric.scope.value}_{level.value}"]
        pods = f"{re.escape(target.pod_prefix)}[0-9]+" if target.pod_prefix else ".+"
        nodes = "|".join(re.escape(r.node) for r in target.ranks) or ".+"
        rollup = {"avg": "avg", "min": "min", "max": "max", "count": "sum"}[aggregation]
        return template.format(
            name=metric.name,
            agg=aggregation,
            rollup=rollup,
            namespace=target.namespace,
            pods=pods,
            nodes=nodes,
            node_label=self.node_label,
            step=step,
            rate_window=max(2 * self.scrape_seconds, step),
        )

    def read(self, target: JobTarget, metric: Metric, *, start: float, end: float, step: int, level: Level) -> list[Series]:
        if not self.url:
            raise TelemetryUnavailable("No Prometheus is configured (MUSTER_TELEMETRY_PROMETHEUS_URL is empty).")
        raise TelemetryUnavailable(
            "The Prometheus telemetry source is not built yet: charts of jobs on this site are unavailable "
            "until it is (set MUSTER_TELEMETRY_SOURCE=simulated to see simulated series)."
        )
