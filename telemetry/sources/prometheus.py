"""The Prometheus source (production): a job's series from the DCGM exporter, node exporter and NCCL Inspector.

One read of one metric is four `query_range` calls, one per aggregation of the samples in each
bucket (`sum`, `min`, `max`, `count`), rendered from the PromQL templates in settings
(`MUSTER_TELEMETRY_PROMQL`, so a site with other exporters maps its own):

- GPU metrics (DCGM exporter): the series of the job's pods (`pod=~"muster-<job>-<attempt>-[0-9]+"`
  in its namespace), grouped per GPU by `pod`, `gpu` and the host label, which the exporter
  renamed from `Hostname` to `hostname` (`MUSTER_TELEMETRY_HOSTNAME_LABELS`; both are accepted,
  and series of one GPU under both spellings, as across an exporter upgrade, are merged);
- inter-node traffic (node exporter): `rate()` of the InfiniBand port counters of the job's
  nodes (`MUSTER_TELEMETRY_NODE_LABEL` holds the node name), summed over ports per node;
- NCCL bus bandwidth: `nccl_bus_bandwidth_gbs` of the job's pods, when NCCL Inspector exports it.

Node and job levels are aggregated by Prometheus (`sum by (...)` of the sums and counts, `min`
of the minimums...), so a bucket's mean is sum / count over every sample: exact, weighted like
`telemetry.downsampling.combine`. A bucket without samples comes back as a gap (count 0, NaN),
never as a zero. Bucket [b, b + step) is evaluated at b + step - 1 ms over a window that holds
exactly its samples: `step` - 1 ms on Prometheus 2 (closed ranges), `step` on Prometheus 3
(left-open ranges), told apart once per URL by /api/v1/status/buildinfo.

Prometheus down, unreachable, slow past MUSTER_TELEMETRY_PROMETHEUS_TIMEOUT_SECONDS, answering
an error or something that is not its JSON: TelemetryUnavailable, saying which and where, so the
job page says telemetry is unavailable and still renders, and the metrics API answers 503.

A Prometheus behind authentication is reached with a bearer token (an authenticating proxy, a
Thanos or managed querier) or HTTP basic auth (Prometheus' own `--web.config.file`), each read
from a file at every request so a rotated secret is picked up; an https URL is verified against
the system's CAs or MUSTER_TELEMETRY_PROMETHEUS_CA_FILE. Credentials refused: TelemetryUnavailable
naming the settings to check.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import os
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from jobs.cluster import gang_name
from telemetry.catalogue import METRICS, Level, Metric, Scope
from telemetry.downsampling import NAN, Buckets
from telemetry.rollups import roll_up
from telemetry.sources.base import JobTarget, Series, TelemetryUnavailable, held_only

# Each bucket needs its mean (sum / count), minimum, maximum and sample count: four range queries per metric.
AGGREGATIONS = ("sum", "min", "max", "count")
# How the per-series aggregation of a bucket rolls up over series of a node or of the job.
ROLLUPS = {"sum": "sum", "min": "min", "max": "max", "count": "sum"}
# Prometheus refuses more than 11,000 points per series in one query_range.
MAX_POINTS_PER_QUERY = 10_000
MAX_RESPONSE_BYTES = 256 * 1024 * 1024

# URL -> whether its range selectors are left-open (Prometheus 3) rather than closed (Prometheus 2).
_LEFT_OPEN: dict[str, bool] = {}
# (CA file, its modification time) -> the TLS context verifying against it (shared: SSLContext is thread-safe).
_TLS_CONTEXTS: dict[tuple[str, int], ssl.SSLContext] = {}
# A Prometheus that did not answer in time is not asked again for this long by this process (URL -> (until, why)):
# else every read waited out the timeout, each ended job's store held the one worker of `make run` for it, and
# scheduling cycles queued behind them (16 jobs read SCHEDULED for 40 s after their pods had ended).
AWAY_SECONDS = 60.0
_AWAY: dict[str, tuple[float, str]] = {}


def promql_regex(value: str) -> str:
    """`value` matched literally by a PromQL regex inside a double-quoted string."""
    return re.escape(value).replace("\\", "\\\\").replace('"', '\\"')


@dataclass
class _Quad:
    """One bucket of one series being assembled from the four queries."""

    sum: float = 0.0
    min: float = math.inf
    max: float = -math.inf
    count: int = 0


@dataclass
class _Group:
    node: str
    gpu: int
    rank: int | None
    buckets: dict[int, _Quad] = field(default_factory=dict)


@dataclass
class PrometheusTelemetry:
    url: str
    templates: dict[str, str]
    hostname_labels: tuple[str, ...] = ("Hostname", "hostname")
    node_label: str = "instance"
    scrape_seconds: int = 30
    timeout: float = 10.0
    name: str = "prometheus"
    # Authentication and TLS (all optional): files, read at each request.
    bearer_token_file: str = ""
    username: str = ""
    password_file: str = ""
    ca_file: str = ""

    @classmethod
    def from_settings(cls) -> PrometheusTelemetry:
        return cls(
            url=settings.MUSTER_TELEMETRY_PROMETHEUS_URL.rstrip("/"),
            templates=dict(settings.MUSTER_TELEMETRY_PROMQL),
            hostname_labels=tuple(label for label in settings.MUSTER_TELEMETRY_HOSTNAME_LABELS if label),
            node_label=settings.MUSTER_TELEMETRY_NODE_LABEL,
            scrape_seconds=settings.MUSTER_TELEMETRY_SCRAPE_SECONDS,
            timeout=settings.MUSTER_TELEMETRY_PROMETHEUS_TIMEOUT_SECONDS,
            bearer_token_file=settings.MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE,
            username=settings.MUSTER_TELEMETRY_PROMETHEUS_USERNAME,
            password_file=settings.MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE,
            ca_file=settings.MUSTER_TELEMETRY_PROMETHEUS_CA_FILE,
        )

    def resolution(self, target: JobTarget) -> int:
        return self.scrape_seconds

    # --- PromQL ----------------------------------------------------------------------------------

    def group_labels(self, metric: Metric, level: Level) -> tuple[str, ...]:
        """The labels a level's series are grouped by at the source."""
        level = metric.finest_level(level)
        if level == Level.JOB:
            return ()
        if metric.scope == Scope.NODE:
            return (self.node_label,)
        return ("pod", "gpu", *self.hostname_labels) if level == Level.GPU else ("pod", *self.hostname_labels)

    def query(self, target: JobTarget, metric: Metric, *, step: int, level: Level, aggregation: str, left_open: bool = False) -> str:
        """The PromQL for one aggregation (sum, min, max, count) of one metric of one attempt, from the settings' templates."""
        level = metric.finest_level(level)
        key = f"{metric.scope.value}_{level.value}"
        template = self.templates.get(key)
        if template is None:
            raise TelemetryUnavailable(f"MUSTER_TELEMETRY_PROMQL has no {key!r} template.")
        try:
            return self._render(template, target, metric, level, aggregation, step, left_open)
        except (KeyError, IndexError, ValueError) as exc:
            raise TelemetryUnavailable(f"The MUSTER_TELEMETRY_PROMQL template {key!r} cannot be rendered ({exc!r}): {template}") from exc

    def _render(self, template: str, target: JobTarget, metric: Metric, level: Level, aggregation: str, step: int, left_open: bool) -> str:
        pods = f"{promql_regex(target.pod_prefix)}[0-9]+" if target.pod_prefix else ".+"
        nodes = "|".join(promql_regex(r.node) for r in target.ranks) or ".+"
        return template.format(
            name=metric.name,
            over=aggregation,
            rollup=ROLLUPS[aggregation],
            by=", ".join(self.group_labels(metric, level)),
            namespace=target.namespace,
            pods=pods,
            nodes=nodes,
            node_label=self.node_label,
            window=f"{step * 1000 - (0 if left_open else 1)}ms",
            resolution=self.scrape_seconds,
            step=step,
            # rate() of a counter at each scrape: over two scrape intervals, so it spans at least two samples.
            rate_window=2 * self.scrape_seconds,
        )

    def _fill(self, key: str, template: str, **fields: Any) -> str:
        """A template with the placeholders `cluster_gpu_use` does not set filled as `_render` would; unavailable, naming
        the template, when it cannot be rendered."""
        defaults = {"nodes": ".+", "node_label": self.node_label, "resolution": self.scrape_seconds, "rate_window": 2 * self.scrape_seconds}
        try:
            return template.format(**{**defaults, **fields})
        except (KeyError, IndexError, ValueError) as exc:
            raise TelemetryUnavailable(f"The MUSTER_TELEMETRY_PROMQL template {key!r} cannot be rendered ({exc!r}): {template}") from exc

    # --- reading ---------------------------------------------------------------------------------

    def read(self, target: JobTarget, metric: Metric, *, start: float, end: float, step: int, level: Level) -> list[Series]:
        if not self.url:
            raise TelemetryUnavailable("No Prometheus is configured (MUSTER_TELEMETRY_PROMETHEUS_URL is empty).")
        level = metric.finest_level(level)
        if level == Level.JOB and metric.scope != Scope.JOB and target.resized:
            # Prometheus would sum every node over the whole run, though some were held only part of it (and, for
            # InfiniBand, carried other jobs' traffic the rest of the time): each node's series is cut to the windows
            # it was held, then combined here, exactly as Prometheus would (sums over counts).
            return roll_up(self.read(target, metric, start=start, end=end, step=step, level=Level.NODE), Level.JOB)
        first = math.floor(start / step)
        length = max(0, math.ceil(end / step) - first)
        if not length:
            return []
        left_open = self._left_open()
        queries = [self.query(target, metric, step=step, level=level, aggregation=a, left_open=left_open) for a in AGGREGATIONS]
        # Bucket [b, b + step) is evaluated at b + step - 1 ms; at most MAX_POINTS_PER_QUERY buckets per call.
        chunks = [(lo, min(length, lo + MAX_POINTS_PER_QUERY)) for lo in range(0, length, MAX_POINTS_PER_QUERY)]
        calls = [(a, q, first + lo, first + hi) for lo, hi in chunks for a, q in zip(AGGREGATIONS, queries, strict=True)]
        with ThreadPoolExecutor(max_workers=len(AGGREGATIONS)) as pool:
            answers = list(pool.map(lambda call: (call[0], self._query_range(call[1], call[2], call[3], step)), calls))
        groups: dict[tuple, _Group] = {}
        for aggregation, result in answers:
            for item in result:
                group = self._group(groups, target, metric, level, item.get("metric") or {})
                if group is None:
                    continue
                for t, raw in item.get("values") or []:
                    index = round((float(t) + 0.001) / step) - 1 - first
                    if 0 <= index < length:
                        self._fold(group.buckets.setdefault(index, _Quad()), aggregation, float(raw))
        series = [self._series(g, target, metric, level, first, step, length) for g in groups.values()]
        if target.resized and level != Level.JOB:
            series = self._held(series, target)
        return sorted(series, key=lambda s: (s.rank if s.rank is not None else -1, s.node, s.gpu))

    def cluster_gpu_use(self, jobs: Sequence[JobTarget], *, start: float, end: float) -> dict[int, float]:
        """Every job's mean utilisation over [start, end) in two instant queries, whatever the jobs: the `gpu_job`
        template's `sum` and `count` of DCGM_FI_DEV_GPU_UTIL over the window, `by (pod)` rather than summed over one
        job's pods, across every Muster pod of the namespace (`muster-<job>-<attempt>-<rank>`); each pod is then given
        to its job here, and pods of no job asked for (an attempt that ended, another workload) are left out. A pod
        has samples from its attempt's start only, so a job that started inside the window is read from its start.

        The window holds exactly the samples in [start, end), as a bucket of `read` does: evaluated at end - 1 ms over
        the window less 1 ms on Prometheus 2 (closed ranges), the whole window on Prometheus 3 (left-open). (A job
        page's read of a window that does not start on a multiple of its length takes the two whole buckets it
        overlaps; this is the window alone: the same figure when it does.)
        """
        if not self.url:
            raise TelemetryUnavailable("No Prometheus is configured (MUSTER_TELEMETRY_PROMETHEUS_URL is empty).")
        by_prefix = {t.pod_prefix: t for t in jobs if t.pod_prefix}
        if not by_prefix or end <= start:
            return {}
        key = "gpu_job"
        template = self.templates.get(key)
        if template is None:
            raise TelemetryUnavailable(f"MUSTER_TELEMETRY_PROMQL has no {key!r} template.")
        left_open = self._left_open()
        window_ms = round((end - start) * 1000) - (0 if left_open else 1)
        # Any attempt's pods: the gang name's numbers as patterns (one regex, not a list of the jobs' pods).
        pods = re.sub("[0-9]+", "[0-9]+", promql_regex(gang_name(0, 0))) + "-[0-9]+"
        totals: dict[str, dict[str, float]] = {"sum": {}, "count": {}}
        for namespace in sorted({t.namespace for t in by_prefix.values()}):  # one: MUSTER_K8S_NAMESPACE
            for aggregation, sums in totals.items():
                fields = {"over": aggregation, "rollup": ROLLUPS[aggregation], "by": "pod", "namespace": namespace, "pods": pods}
                query = self._fill(key, template, name=METRICS["gpu_util"].name, window=f"{window_ms}ms", step=round(end - start), **fields)
                for item in self._query(query, end - 0.001):
                    pod = (item.get("metric") or {}).get("pod", "")
                    target = by_prefix.get(pod.rsplit("-", 1)[0] + "-")
                    value = float((item.get("value") or [0, "nan"])[1])
                    # Another attempt's pod, or a NaN the exporter reported (no sample): not counted.
                    if target is not None and target.namespace == namespace and value == value:
                        sums[target.pod_prefix] = sums.get(target.pod_prefix, 0.0) + value
        means = {}
        for prefix, count in totals["count"].items():
            if count > 0 and prefix in totals["sum"]:
                means[by_prefix[prefix].job_id] = totals["sum"][prefix] / count
        return means

    def _group(self, groups: dict[tuple, _Group], target: JobTarget, metric: Metric, level: Level, labels: dict) -> _Group | None:
        """The series a result belongs to, by node and GPU: both host label spellings of one GPU land in one."""
        if level == Level.JOB:
            key: tuple = ()
            node, gpu, rank = "", -1, None
        else:
            by_node = {r.node: r.rank for r in target.ranks}
            if metric.scope == Scope.NODE:
                node = labels.get(self.node_label, "")
                rank = by_node.get(node)
            else:
                # On its rank's node (the pod's name says which rank; a rank re-placed by a resize ran on several nodes,
                # the host label says which), else where its host label says.
                rank = self._pod_rank(target, labels.get("pod", ""))
                host = next((labels[h] for h in self.hostname_labels if labels.get(h)), "")
                candidates = [r for r in target.ranks if r.rank == rank]
                placement = next((r for r in candidates if r.node == host), candidates[0] if candidates else None)
                if placement is not None:
                    node = placement.node
                else:
                    node = next((labels[h] for h in self.hostname_labels if labels.get(h)), "")
                    rank = by_node.get(node)
            if not node:
                return None
            gpu = -1
            if level == Level.GPU and metric.scope == Scope.GPU:
                try:
                    gpu = int(labels.get("gpu", ""))
                except ValueError:
                    return None
            key = (node, gpu)
        group = groups.get(key)
        if group is None:
            group = groups[key] = _Group(node, gpu, rank)
        return group

    @staticmethod
    def _held(series: list[Series], target: JobTarget) -> list[Series]:
        """Each node's series over the windows the attempt held the node only (a bucket partly held is kept whole)."""
        placements = {r.node: r for r in target.ranks}
        out = []
        for s in series:
            placement = placements.get(s.node)
            if placement is not None:
                s = Series(
                    s.metric, s.level, s.node, s.gpu, placement.rank, held_only(s.buckets, placement), s.sample_seconds, s.origin, s.attempt
                )
            out.append(s)
        return out

    @staticmethod
    def _pod_rank(target: JobTarget, pod: str) -> int | None:
        if target.pod_prefix and pod.startswith(target.pod_prefix) and pod[len(target.pod_prefix) :].isdigit():
            return int(pod[len(target.pod_prefix) :])
        return None

    @staticmethod
    def _fold(quad: _Quad, aggregation: str, value: float) -> None:
        if aggregation == "sum":
            quad.sum += value
        elif aggregation == "min":
            quad.min = min(quad.min, value)
        elif aggregation == "max":
            quad.max = max(quad.max, value)
        else:
            quad.count += int(value)

    def _series(self, group: _Group, target: JobTarget, metric: Metric, level: Level, first: int, step: int, length: int) -> Series:
        buckets = Buckets.empty(first, step, length)
        for i, quad in group.buckets.items():
            # No sample (or a NaN the exporter reported) is a gap, never a zero.
            if quad.count <= 0 or quad.sum != quad.sum:
                continue
            buckets.mean[i] = quad.sum / quad.count
            buckets.min[i] = quad.min if quad.min != math.inf else NAN
            buckets.max[i] = quad.max if quad.max != -math.inf else NAN
            buckets.count[i] = quad.count
        return Series(metric.key, level, group.node, group.gpu, group.rank, buckets, float(self.scrape_seconds), self.name, target.attempt)

    # --- HTTP ------------------------------------------------------------------------------------

    def _left_open(self) -> bool:
        """Whether this Prometheus' range selectors exclude their lower bound (Prometheus 3); asked once per URL."""
        if self.url not in _LEFT_OPEN:
            try:
                version = str(self._get("/api/v1/status/buildinfo", {}).get("version", ""))
            except TelemetryUnavailable as exc:
                if "HTTP 404" not in str(exc):
                    raise
                version = ""  # no build info (some proxies): Prometheus 2's closed ranges
            major = version.split(".", 1)[0]
            _LEFT_OPEN[self.url] = major.isdigit() and int(major) >= 3
        return _LEFT_OPEN[self.url]

    def _query_range(self, query: str, first: int, last: int, step: int) -> list[dict]:
        """Buckets first..last - 1 of the query: evaluated at the end of each bucket, less 1 ms."""
        params = {
            "query": query,
            "start": f"{(first + 1) * step - 0.001:.3f}",
            "end": f"{last * step - 0.001:.3f}",
            "step": str(step),
            "timeout": f"{max(1, math.ceil(self.timeout))}s",
        }
        data = self._get("/api/v1/query_range", params, post=True)
        if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise TelemetryUnavailable(f"Prometheus at {self.url} answered a query_range without a matrix result.")
        return data["result"]

    def _query(self, query: str, at: float) -> list[dict]:
        """The instant vector of the query at `at` (seconds since the epoch)."""
        params = {"query": query, "time": f"{at:.3f}", "timeout": f"{max(1, math.ceil(self.timeout))}s"}
        data = self._get("/api/v1/query", params, post=True)
        if data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
            raise TelemetryUnavailable(f"Prometheus at {self.url} answered a query without a vector result.")
        return data["result"]

    def _secret(self, setting: str, path: str) -> str:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read().strip()
        except OSError as exc:
            raise TelemetryUnavailable(f"Cannot read {setting} ({path}): {exc.strerror or exc}.") from exc

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "muster-telemetry"}
        if self.bearer_token_file:
            headers["Authorization"] = "Bearer " + self._secret("MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE", self.bearer_token_file)
        elif self.username:
            password = self._secret("MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE", self.password_file) if self.password_file else ""
            headers["Authorization"] = "Basic " + base64.b64encode(f"{self.username}:{password}".encode()).decode()
        return headers

    def _tls(self) -> ssl.SSLContext | None:
        """One context per CA file version: loading CAs takes tens of milliseconds, and a page sends dozens of queries."""
        if not self.url.startswith("https:"):
            return None
        try:
            key = (self.ca_file, os.stat(self.ca_file).st_mtime_ns if self.ca_file else 0)
            if key not in _TLS_CONTEXTS:
                _TLS_CONTEXTS[key] = ssl.create_default_context(cafile=self.ca_file or None)
            return _TLS_CONTEXTS[key]
        except (OSError, ssl.SSLError) as exc:
            raise TelemetryUnavailable(f"Cannot load MUSTER_TELEMETRY_PROMETHEUS_CA_FILE ({self.ca_file}): {exc}.") from exc

    def _get(self, path: str, params: dict[str, str], *, post: bool = False) -> dict:
        """The `data` of a Prometheus API answer; TelemetryUnavailable naming what went wrong."""
        url = self.url + path
        body = urllib.parse.urlencode(params).encode() if post else None
        if params and not post:
            url += "?" + urllib.parse.urlencode(params)
        request = urllib.request.Request(url, data=body, headers=self._headers())
        where = f"Prometheus at {self.url}"
        away = _AWAY.get(self.url)
        if away is not None and time.monotonic() < away[0]:
            raise TelemetryUnavailable(f"{away[1]} Not asked again for {AWAY_SECONDS:g} s after that.")
        try:
            return self._get_answer(request, where)
        except TelemetryUnavailable as exc:
            if exc.__cause__ is not None and _timed_out(exc.__cause__):
                _AWAY[self.url] = (time.monotonic() + AWAY_SECONDS, str(exc))
            raise

    def _get_answer(self, request: urllib.request.Request, where: str) -> dict:
        deadline = time.monotonic() + self.timeout
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=self._tls()) as response:
                raw = _read_until(response, deadline)
        except urllib.error.HTTPError as exc:
            detail = _error_detail(exc)
            if exc.code in (401, 403):
                given = "no credentials" if "Authorization" not in request.headers else "the credentials given"
                raise TelemetryUnavailable(
                    f"{where} refused {given} (HTTP {exc.code}{detail}); check MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE, "
                    "or MUSTER_TELEMETRY_PROMETHEUS_USERNAME and MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE."
                ) from exc
            if 400 <= exc.code < 500 and exc.code != 429:
                raise TelemetryUnavailable(f"{where} refused the query (HTTP {exc.code}{detail}); check MUSTER_TELEMETRY_PROMQL.") from exc
            raise TelemetryUnavailable(f"{where} answered HTTP {exc.code}{detail}.") from exc
        except TimeoutError as exc:
            raise TelemetryUnavailable(f"{where} did not answer within {self.timeout:g} s.") from exc
        except urllib.error.URLError as exc:
            reason = exc.reason
            if isinstance(reason, TimeoutError):
                raise TelemetryUnavailable(f"{where} did not answer within {self.timeout:g} s.") from exc
            if isinstance(reason, ssl.SSLCertVerificationError):
                raise TelemetryUnavailable(
                    f"{where} presented a certificate Muster does not trust ({reason.verify_message}); "
                    "set MUSTER_TELEMETRY_PROMETHEUS_CA_FILE to the CA that signed it."
                ) from exc
            raise TelemetryUnavailable(f"{where} cannot be reached: {reason}.") from exc
        except (OSError, ValueError, http.client.HTTPException) as exc:  # reset mid-answer, not HTTP, a malformed URL...
            raise TelemetryUnavailable(f"{where} cannot be reached: {exc}.") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise TelemetryUnavailable(f"{where} answered something that is not Prometheus' JSON (is the URL right?).") from exc
        if not isinstance(answer, dict) or answer.get("status") != "success" or not isinstance(answer.get("data"), dict):
            error = answer.get("error") if isinstance(answer, dict) else None
            raise TelemetryUnavailable(f"{where} answered an error: {error or 'not a successful API answer'}.")
        return answer["data"]


def _read_until(response: Any, deadline: float) -> bytes:
    """The whole body, within the deadline (the socket timeout alone bounds each read, not the total)."""
    chunks, size = [], 0
    while chunk := response.read(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError
        if size > MAX_RESPONSE_BYTES:
            raise ValueError(f"an answer over {MAX_RESPONSE_BYTES // (1024 * 1024)} MiB")
    return b"".join(chunks)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        body = exc.read(64 * 1024)
        error = json.loads(body).get("error")
    except (OSError, ValueError, AttributeError):
        return ""
    return f": {str(error)[:300]}" if error else ""


def _timed_out(exc: BaseException) -> bool:
    """A request that got no answer in time (not one refused or misconfigured, which is said at once anyway)."""
    return isinstance(exc, TimeoutError) or (isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, TimeoutError))
