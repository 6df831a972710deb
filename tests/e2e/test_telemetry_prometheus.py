"""The Prometheus telemetry source against a real Prometheus server loaded with recorded exporter data.

The server is Debian's `prometheus` (with `promtool`, which turns the recorded OpenMetrics text of
tests/e2e/prometheus/recorded.py into TSDB blocks), started once per session on a free loopback port.
Expected numbers are worked out by hand from the recording: utilisation of rank r, GPU g at
scrape k is 50 + 10 r + g + (k % 4) %, scraped every 30 s from 2024-03-01 00:00 UTC.
"""

from __future__ import annotations

import dataclasses
import http.server
import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.conf import settings as django_settings

from jobs.models import Job, JobEvent
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import coarsen, samples_mean
from telemetry.live_use import USE_WINDOW_SECONDS, cluster_gpu_use_refresh
from telemetry.models import JobSeries, JobTelemetrySummary
from telemetry.services import telemetry_store_run
from telemetry.sources import JobTarget, RankPlacement, Series, TelemetryUnavailable, get_source
from telemetry.sources.prometheus import PrometheusTelemetry
from tests.conftest import REQUIRE_SERVICES, need_service, session_for
from tests.e2e.prometheus.recorded import (
    ATTEMPT,
    JOB,
    NAMESPACE,
    NODES,
    PASSWORD,
    POD_PREFIX,
    RUN_SECONDS,
    T0,
    USERNAME,
    PrometheusServer,
    free_port,
)
from tests.jobs.factories import JobFactory, NodeFactory
from tests.telemetry.helpers import gpu_use_as_each_page_reads, start_running

STEP = 60
BUCKETS = RUN_SECONDS // STEP  # 30 one-minute buckets
TARGET = JobTarget(
    job_id=JOB,
    attempt=ATTEMPT,
    ranks=(RankPlacement(0, "gpu-a", "rack-1", 8), RankPlacement(1, "gpu-b", "rack-1", 8)),
    started=float(T0),
    ended=float(T0 + RUN_SECONDS),
    expected_seconds=float(RUN_SECONDS),
    namespace=NAMESPACE,
    pod_prefix=POD_PREFIX,
)


@pytest.fixture(scope="session", params=["prometheus2", "prometheus3"])
def prometheus_bin(request: pytest.FixtureRequest) -> str | None:
    """Where a real Prometheus is: Debian's 2.x on PATH, and 3.x built by scripts/prometheus3.sh (MUSTER_PROMETHEUS3_BIN).

    Both, because their range selectors differ (closed on 2, left-open on 3) and the source must read the same
    numbers from either. Each is skipped locally when missing, and fails CI.
    """
    if request.param == "prometheus2":
        installed, where, what = bool(shutil.which("prometheus") and shutil.which("promtool")), None, "Debian's prometheus package"
        hint = "apt-get install prometheus; scripts/test-services.sh does"
    else:
        where = os.environ.get("MUSTER_PROMETHEUS3_BIN", "")
        installed = bool(where) and all(os.access(os.path.join(where, tool), os.X_OK) for tool in ("prometheus", "promtool"))
        what, hint = f"Prometheus 3 in MUSTER_PROMETHEUS3_BIN ({where or 'unset'})", 'eval "$(scripts/prometheus3.sh)"'
    if not installed and not REQUIRE_SERVICES:
        pytest.skip(f"{what} is not there ({hint})")
    need_service(installed, f"Prometheus: {what}")
    return where


@pytest.fixture(scope="session")
def prometheus_url(prometheus_bin: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Prometheus serving the recorded data."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus"), bin_dir=prometheus_bin).start()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def secure_prometheus(prometheus_bin: str | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The same recorded data behind https (a CA made for the run) and basic auth, as Prometheus' web config does it."""
    server = PrometheusServer(tmp_path_factory.mktemp("prometheus-secure"), secure=True, bin_dir=prometheus_bin).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def prom(prometheus_url: str, settings: Any) -> PrometheusTelemetry:
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    settings.MUSTER_TELEMETRY_PROMETHEUS_URL = prometheus_url
    source = get_source()
    assert isinstance(source, PrometheusTelemetry)
    return source


def read(source: PrometheusTelemetry, key: str, level: Level, *, step: int = STEP, target: JobTarget = TARGET) -> list[Series]:
    return source.read(target, METRICS[key], start=T0, end=T0 + RUN_SECONDS, step=step, level=level)


def one(series: list[Series], node: str, gpu: int = -1) -> Series:
    [found] = [s for s in series if s.node == node and s.gpu == gpu]
    return found


# --- numbers --------------------------------------------------------------------------------------


def test_every_gpu_of_the_jobs_pods_comes_back_with_its_numbers(prom) -> None:
    series = read(prom, "gpu_util", Level.GPU)
    assert [(s.rank, s.node, s.gpu) for s in series] == [(r, node, g) for r, node in enumerate(NODES) for g in range(8)]
    assert {s.origin for s in series} == {"prometheus"} and {s.sample_seconds for s in series} == {30.0}
    b = one(series, "gpu-b", 3).buckets  # 50 + 10 + 3 = 63, plus k % 4 over scrapes (0, 1), (2, 3), (4, 5)...
    assert (b.first * b.step, b.step, len(b)) == (T0, STEP, BUCKETS)
    assert (b.mean[:2], b.min[:2], b.max[:2], b.count[:2]) == ([63.5, 65.5], [63.0, 65.0], [64.0, 66.0], [2, 2])
    assert b.count == [2] * BUCKETS


def test_node_and_job_levels_weigh_every_sample(prom) -> None:
    nodes = read(prom, "gpu_util", Level.NODE)
    assert [(s.rank, s.node, s.gpu) for s in nodes] == [(0, "gpu-a", -1), (1, "gpu-b", -1)]
    a = one(nodes, "gpu-a").buckets  # GPUs 50..57, first minute scrapes +0 and +1
    assert (a.mean[0], a.min[0], a.max[0], a.count[0]) == (54.0, 50.0, 58.0, 16)
    job = read(prom, "gpu_util", Level.JOB)
    assert len(job) == 1 and (job[0].node, job[0].gpu, job[0].rank) == ("", -1, None)
    assert (job[0].buckets.mean[0], job[0].buckets.min[0], job[0].buckets.max[0], job[0].buckets.count[0]) == (59.0, 50.0, 68.0, 32)


def test_both_spellings_of_the_host_label_are_one_gpu(prom) -> None:
    # gpu-a is labelled `Hostname`, gpu-b `hostname`; gpu-a's GPU 0 switched spelling half way through.
    series = read(prom, "gpu_util", Level.GPU)
    renamed = one(series, "gpu-a", 0).buckets
    assert renamed.count == [2] * BUCKETS
    assert renamed.mean[14:16] == [50.5, 52.5]  # either side of the rename at minute 15
    assert len(one(series, "gpu-b", 0).buckets) == BUCKETS
    assert one(read(prom, "gpu_util", Level.NODE), "gpu-a").buckets.count == [16] * BUCKETS


def test_a_host_label_alone_places_a_series(prom) -> None:
    # Pods the source cannot map to a rank (another naming scheme) are placed by their host label, in either spelling.
    odd = JobTarget(JOB, ATTEMPT, TARGET.ranks, TARGET.started, TARGET.ended, TARGET.expected_seconds, NAMESPACE, "")
    series = [s for s in read(prom, "fb_used", Level.NODE, target=odd) if s.node in NODES]
    assert [(s.rank, s.node) for s in series] == [(0, "gpu-a"), (1, "gpu-b")]


def test_gaps_stay_gaps(prom) -> None:
    # gpu-b's GPU 5 reported nothing from minute 10 to 15.
    gap = one(read(prom, "gpu_util", Level.GPU), "gpu-b", 5).buckets
    assert gap.count[9:16] == [2, 0, 0, 0, 0, 0, 2]
    assert all(math.isnan(v) for v in gap.mean[10:15] + gap.min[10:15] + gap.max[10:15])
    # The node's mean is over the GPUs that reported, not pulled down by zeros: 60..67 less 65, +0/+1.
    node = one(read(prom, "gpu_util", Level.NODE), "gpu-b").buckets
    assert (node.count[10], node.mean[10]) == (14, (sum(range(60, 68)) - 65) / 7 + 0.5)
    # NCCL bus bandwidth went missing for every pod from minute 20 to 25: gaps in the job's series.
    nccl = read(prom, "nccl_busbw", Level.JOB)[0].buckets
    assert nccl.count[18:27] == [4, 4, 0, 0, 0, 0, 0, 4, 4]
    assert math.isnan(nccl.mean[20]) and nccl.mean[19] == 305.0 and (nccl.min[19], nccl.max[19]) == (300.0, 310.0)


def test_only_the_jobs_pods_are_counted(prom) -> None:
    # The recording has attempt 10 of the job (0 %), job 42421 (100 %) and the job's pod name in another namespace.
    series = read(prom, "gpu_util", Level.GPU)
    assert {s.node for s in series} == set(NODES) and len(series) == 16
    job = read(prom, "gpu_util", Level.JOB)[0].buckets
    assert min(job.min) == 50.0 and max(job.max) == 70.0  # 50 + 10 + 7 + 3
    assert sum(job.count) == 16 * 60 - 10


def test_inter_node_traffic_is_the_rate_of_the_jobs_nodes_infiniband_counters(prom) -> None:
    tx = read(prom, "ib_tx", Level.GPU)  # a node metric asked per GPU answers per node
    assert [(s.level, s.rank, s.node) for s in tx] == [(Level.NODE, 0, "gpu-a"), (Level.NODE, 1, "gpu-b")]
    assert one(tx, "gpu-a").buckets.mean == pytest.approx([2.0e9] * BUCKETS)  # two ports at 1 GB/s
    assert one(tx, "gpu-b").buckets.count == [2] * BUCKETS  # one rate per scrape interval
    rx = read(prom, "ib_rx", Level.JOB)[0].buckets  # gpu-c's 14 GB/s is another job's
    assert rx.mean == pytest.approx([2.5e9] * BUCKETS) and rx.max == pytest.approx([4.0e9] * BUCKETS)


def test_coarser_steps_are_exact(prom) -> None:
    fine = one(read(prom, "gpu_util", Level.NODE), "gpu-b").buckets
    coarse = one(read(prom, "gpu_util", Level.NODE, step=300), "gpu-b").buckets
    expected = coarsen(fine, 300)
    assert (coarse.count, coarse.min, coarse.max) == (expected.count, expected.min, expected.max)
    assert coarse.mean == pytest.approx(expected.mean)
    scrape = read(prom, "gpu_util", Level.GPU, step=30)
    assert one(scrape, "gpu-a", 1).buckets.mean[:4] == [51.0, 52.0, 53.0, 54.0]


def test_the_queries_are_rendered_from_the_settings_templates(settings) -> None:
    settings.MUSTER_TELEMETRY_PROMETHEUS_URL = "http://prometheus:9090"
    prom = PrometheusTelemetry.from_settings()
    t = JobTarget(12, 3, (RankPlacement(0, "gpu-a.example", "r1", 8),), float(T0), None, 60.0, "muster-jobs", "muster-12-3-")
    gpu = prom.query(t, METRICS["gpu_util"], step=60, level=Level.GPU, aggregation="count")
    assert gpu == (
        'sum by (pod, gpu, Hostname, hostname) (count_over_time(DCGM_FI_DEV_GPU_UTIL{namespace="muster-jobs",'
        'pod=~"muster\\\\-12\\\\-3\\\\-[0-9]+"}[59999ms]))'
    )
    assert prom.query(t, METRICS["gpu_util"], step=60, level=Level.JOB, aggregation="max").startswith("max by () (max_over_time(")
    ib = prom.query(t, METRICS["ib_tx"], step=300, level=Level.GPU, aggregation="sum", left_open=True)
    assert ib == (
        "sum by (instance) (sum_over_time(sum by (instance) (rate(node_infiniband_port_data_transmitted_bytes_total"
        '{instance=~"gpu\\\\-a\\\\.example"}[60s]))[300000ms:30s]))'
    )
    # A site's template with a placeholder the source does not know: unavailable, naming the template.
    settings.MUSTER_TELEMETRY_PROMQL = {**settings.MUSTER_TELEMETRY_PROMQL, "gpu_gpu": "avg_over_time({name}[{agg}])"}
    with pytest.raises(TelemetryUnavailable, match="template 'gpu_gpu' cannot be rendered"):
        PrometheusTelemetry.from_settings().query(t, METRICS["gpu_util"], step=60, level=Level.GPU, aggregation="sum")


# --- a run read from Prometheus: stored, on the job page and in the API -----------------------------


def recorded_job(owner: Any) -> Job:
    """Job 4242 of the recording: ran on gpu-a and gpu-b for 30 minutes from 2024-03-01 00:00 UTC."""
    started, ended = datetime.fromtimestamp(T0, tz=UTC), datetime.fromtimestamp(T0 + RUN_SECONDS, tz=UTC)
    job = JobFactory(
        pk=JOB, owner=owner, name="recorded", image="nvcr.io/nvidia/pytorch:24.05-py3", command=["train"], nodes=2,
        wall_time_seconds=3600, finished=True, attempt=ATTEMPT, submitted_at=started, finished_at=ended,
        held=[NodeFactory(name=name, rack="rack-1") for name in NODES],
    )  # fmt: skip
    JobEvent.objects.create(job=job, at=started, from_state="STARTING", to_state="RUNNING", reason="running", attempt=ATTEMPT)
    JobEvent.objects.create(job=job, at=ended, from_state="RUNNING", to_state="SUCCEEDED", reason="exit 0", attempt=ATTEMPT)
    return job


def test_the_job_page_and_api_chart_a_run_from_prometheus(prom, user, api) -> None:
    job = recorded_job(user)
    page = session_for(user)
    response = page.get(f"/jobs/{job.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and "telemetry-heatmap" in html and 'data-testid="telemetry-error"' not in html
    body = api.get(f"/api/v1/jobs/{job.pk}/metrics/", {"metric": "gpu_util", "level": "node", "step": 60}).json()
    assert [(s["node"], s["origin"]) for s in body["series"]] == [("gpu-a", "prometheus"), ("gpu-b", "prometheus")]
    gpu_b = body["series"][1]
    assert gpu_b["t"][:2] == [T0, T0 + 60] and gpu_b["mean"][0] == 64.0 and gpu_b["count"][10] == 14


def test_a_run_stored_from_prometheus_has_the_right_summary(prom, user) -> None:
    job = recorded_job(user)
    assert telemetry_store_run(job_id=job.pk, attempt=ATTEMPT, source=prom) > 0
    assert set(JobSeries.objects.filter(job=job).values_list("origin", flat=True)) == {"prometheus"}
    summary = JobTelemetrySummary.objects.get(job=job)
    # 960 samples of mean 60 % less the gap's ten samples of gpu-b GPU 5 (65 % + k % 4 for k = 20..29: 663).
    assert summary.gpu_util_mean == pytest.approx((60 * 960 - 663) / 950)
    assert summary.memory_peak_mib == 41_007.0
    assert summary.pcie_tx_bytes == pytest.approx((480 * 1e9 + 470 * 2e9) * 30)
    assert summary.ib_tx_bytes == pytest.approx((2e9 + 3e9) * RUN_SECONDS)
    assert (summary.nccl_busbw_mean_gbs, summary.nccl_samples, summary.nccl_busbw_origin) == (305.0, 100, "prometheus")
    assert summary.flags == []


# --- the dashboard's "GPUs used now": every running job at once ----------------------------------------

NOW = T0 + 1200  # 20 minutes into the run: the 5 minutes before hold scrapes 30..39
UTIL_NOW = 50 + 5 + 3.5 + 1.7  # 50 + 10 r + g + k % 4, over both ranks, 8 GPUs and scrapes 30..39 (k % 4: 2,3,0,1,2,3,0,1,2,3)


def running(**changes: Any) -> JobTarget:
    return dataclasses.replace(TARGET, ended=None, **changes)


def test_the_clusters_gpu_use_is_each_running_jobs_mean_over_the_window(prom) -> None:
    stranger = running(job_id=JOB * 10 + 1, pod_prefix=f"muster-{JOB}1-1-")  # at 100 % on gpu-c
    means = prom.cluster_gpu_use([running(), stranger], start=NOW - USE_WINDOW_SECONDS, end=NOW)
    # Attempt 10 of the job (at 0 %) and a pod named like its in another namespace are no job asked for.
    assert means == {JOB: pytest.approx(UTIL_NOW), JOB * 10 + 1: 100.0}
    # What the job's page reads over the same window, one query per job and aggregation.
    [job] = prom.read(running(), METRICS["gpu_util"], start=NOW - USE_WINDOW_SECONDS, end=NOW, step=USE_WINDOW_SECONDS, level=Level.JOB)
    assert means[JOB] == pytest.approx(samples_mean([job.buckets]), rel=1e-12)


def test_the_clusters_gpu_use_is_two_queries_however_many_jobs_run(prom, monkeypatch) -> None:
    # It was a read per running job, four queries each: 16,000 a minute at 4,000 jobs. Every HTTP request is counted.
    asked: list[str] = []
    get = PrometheusTelemetry._get

    def counted(self: PrometheusTelemetry, path: str, params: dict[str, str], *, post: bool = False) -> dict:
        asked.append(path)
        return get(self, path, params, post=post)

    monkeypatch.setattr(PrometheusTelemetry, "_get", counted)
    prom.cluster_gpu_use([running()], start=NOW - USE_WINDOW_SECONDS, end=NOW)  # build info, once per URL
    for jobs in (20, 200):
        asked.clear()
        others = [running(job_id=10_000 + i, pod_prefix=f"muster-{10_000 + i}-1-") for i in range(jobs - 1)]
        means = prom.cluster_gpu_use([running(), *others], start=NOW - USE_WINDOW_SECONDS, end=NOW)
        assert asked == ["/api/v1/query", "/api/v1/query"] and means == {JOB: pytest.approx(UTIL_NOW)}


def test_gpus_used_now_from_prometheus_is_what_the_running_jobs_page_reads(prom, user) -> None:
    started = datetime.fromtimestamp(T0, tz=UTC)
    job = JobFactory(
        pk=JOB, owner=user, nodes=2, running=True, attempt=ATTEMPT, submitted_at=started, scheduled_at=started, started_at=started,
        held=[NodeFactory(name=name, rack="rack-1") for name in NODES],
    )  # fmt: skip
    JobEvent.objects.create(job=job, at=started, from_state="STARTING", to_state="RUNNING", reason="running", attempt=ATTEMPT)
    now = datetime.fromtimestamp(NOW, tz=UTC)
    expected = gpu_use_as_each_page_reads(prom, now, USE_WINDOW_SECONDS)
    assert expected == {"jobs_running": 1, "jobs_reporting": 1, "gpus_reporting": 16.0, "busy_gpus": pytest.approx(16 * UTIL_NOW / 100)}
    use = cluster_gpu_use_refresh(source=prom, now=now)
    assert {key: use[key] for key in expected} == pytest.approx(expected, rel=1e-12)
    assert use["utilisation"] == pytest.approx(UTIL_NOW) and not use["unavailable"]


# --- Prometheus down or misbehaving ------------------------------------------------------------------


def unavailable_message(url: str, timeout: float = 2.0) -> str:
    source = PrometheusTelemetry(url=url, templates=dict(django_settings.MUSTER_TELEMETRY_PROMQL), timeout=timeout)
    with pytest.raises(TelemetryUnavailable) as raised:
        read(source, "gpu_util", Level.GPU)
    return str(raised.value)


@pytest.fixture
def fake_prometheus() -> Iterator[Callable[[Callable[[http.server.BaseHTTPRequestHandler], None]], str]]:
    """A loopback HTTP server answering every request with `answer(handler)`: a Prometheus gone wrong."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def serve(answer: Callable[[http.server.BaseHTTPRequestHandler], None]) -> str:
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                answer(self)

            do_POST = do_GET

            def log_message(self, *args: Any) -> None:
                pass

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def reply(status: int, body: bytes, content_type: str = "application/json") -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        if handler.path.startswith("/api/v1/status/buildinfo"):
            status_, body_ = 200, json.dumps({"status": "success", "data": {"version": "2.42.0"}}).encode()
        else:
            status_, body_ = status, body
        handler.send_response(status_)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(body_)))
        handler.end_headers()
        handler.wfile.write(body_)

    return answer


def test_a_prometheus_that_is_down_is_unavailable_saying_where() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    assert unavailable_message(url).startswith(f"Prometheus at {url} cannot be reached:")
    assert "MUSTER_TELEMETRY_PROMETHEUS_URL is empty" in unavailable_message("")


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (503, b'{"status":"error","errorType":"unavailable","error":"TSDB not ready"}', "answered HTTP 503: TSDB not ready."),
        (502, b"<html>Bad Gateway</html>", "answered HTTP 502."),
        (200, b"<html>Grafana</html>", "answered something that is not Prometheus' JSON"),
        (200, b'{"status":"success","data":{"resultType":"vector","result":[]}}', "without a matrix result"),
        (400, b'{"status":"error","errorType":"bad_data","error":"parse error"}', "refused the query (HTTP 400: parse error)"),
    ],
)
def test_a_misbehaving_prometheus_is_unavailable_saying_how(fake_prometheus, status, body, expected) -> None:
    url = fake_prometheus(reply(status, body))
    message = unavailable_message(url)
    assert message.startswith(f"Prometheus at {url} ") and expected in message


def test_a_prometheus_that_hangs_is_unavailable_within_the_timeout(fake_prometheus) -> None:
    url = fake_prometheus(lambda handler: time.sleep(3))
    started = time.monotonic()
    assert unavailable_message(url, timeout=0.5) == f"Prometheus at {url} did not answer within 0.5 s."
    assert time.monotonic() - started < 2.5


def test_a_prometheus_that_did_not_answer_is_not_asked_again_for_a_while(fake_prometheus) -> None:
    """Each read waited out the timeout: every ended job's store held the one worker of `make run` for 10 s, and the
    scheduling cycles queued behind them (jobs read SCHEDULED for 40 s after their pods had ended)."""
    asked: list[str] = []
    url = fake_prometheus(lambda handler: (asked.append(handler.path), time.sleep(3)))
    assert unavailable_message(url, timeout=0.5) == f"Prometheus at {url} did not answer within 0.5 s."
    again = unavailable_message(url, timeout=0.5)
    assert again == f"Prometheus at {url} did not answer within 0.5 s. Not asked again for 60 s after that."
    assert len(asked) == 1  # the second read never reached it


def test_when_prometheus_is_down_the_page_renders_and_says_so_and_the_api_is_503(submit, sim, user, api, settings) -> None:
    job = start_running(submit, sim, nodes=2, gpus_per_node=8)
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    settings.MUSTER_TELEMETRY_PROMETHEUS_URL = url = f"http://127.0.0.1:{free_port()}"
    page = session_for(user)
    response = page.get(f"/jobs/{job.pk}/")
    html = response.content.decode()
    assert response.status_code == 200 and job.name in html
    assert 'data-testid="telemetry-error"' in html and f"Telemetry is unavailable: Prometheus at {url} cannot be reached" in html
    api_response = api.get(f"/api/v1/jobs/{job.pk}/metrics/", {"metric": "gpu_util"})
    assert api_response.status_code == 503
    assert api_response.json()["detail"].startswith(f"Telemetry is unavailable: Prometheus at {url} cannot be reached")


# --- Prometheus behind authentication and TLS ----------------------------------------------------------


@pytest.fixture
def secure_settings(prom: PrometheusTelemetry, secure_prometheus: PrometheusServer, settings: Any, tmp_path: Any) -> Any:
    """Point the source at the secure server (after `prom`, the plain one, was made)."""
    password = tmp_path / "password"
    password.write_text(PASSWORD + "\n")  # as a mounted Secret often has it
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    settings.MUSTER_TELEMETRY_PROMETHEUS_URL = secure_prometheus.url
    settings.MUSTER_TELEMETRY_PROMETHEUS_USERNAME = USERNAME
    settings.MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE = str(password)
    settings.MUSTER_TELEMETRY_PROMETHEUS_CA_FILE = secure_prometheus.ca_file
    return settings


def refusal(**changes: str) -> str:
    with pytest.raises(TelemetryUnavailable) as raised:
        for name, value in changes.items():
            setattr(django_settings, name, value)
        read(get_source(), "gpu_util", Level.GPU)
    return str(raised.value)


def test_a_prometheus_behind_tls_and_basic_auth_gives_the_same_numbers(prom, secure_settings) -> None:
    secure = get_source()
    assert secure.url.startswith("https://")
    plain = read(prom, "gpu_util", Level.GPU)
    assert len(plain) == 16 and read(secure, "gpu_util", Level.GPU) == plain


def test_credentials_and_certificates_that_do_not_fit_say_what_to_fix(secure_settings, tmp_path) -> None:
    url = secure_settings.MUSTER_TELEMETRY_PROMETHEUS_URL
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password")
    message = refusal(MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE=str(wrong))
    assert message.startswith(f"Prometheus at {url} refused the credentials given (HTTP 401")
    assert "MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE" in message
    assert "refused no credentials (HTTP 401" in refusal(MUSTER_TELEMETRY_PROMETHEUS_USERNAME="")
    missing = str(tmp_path / "gone")
    assert refusal(MUSTER_TELEMETRY_PROMETHEUS_USERNAME=USERNAME, MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE=missing).startswith(
        f"Cannot read MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE ({missing}): No such file or directory"
    )
    message = refusal(MUSTER_TELEMETRY_PROMETHEUS_PASSWORD_FILE=str(wrong), MUSTER_TELEMETRY_PROMETHEUS_CA_FILE="")
    assert message.startswith(f"Prometheus at {url} presented a certificate Muster does not trust (")
    assert "set MUSTER_TELEMETRY_PROMETHEUS_CA_FILE" in message


def test_a_bearer_token_is_sent_and_a_rotated_one_is_picked_up(fake_prometheus, settings, tmp_path) -> None:
    token = tmp_path / "token"
    seen: list[str] = []
    ok = reply(200, b'{"status":"success","data":{"resultType":"matrix","result":[]}}')

    def answer(handler: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(handler.headers.get("Authorization", ""))
        if handler.headers.get("Authorization") == f"Bearer {token.read_text().strip()}":
            ok(handler)
        else:
            reply(401, b"Unauthorized\n", "text/plain")(handler)

    url = fake_prometheus(answer)
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    settings.MUSTER_TELEMETRY_PROMETHEUS_URL = url
    settings.MUSTER_TELEMETRY_PROMETHEUS_BEARER_TOKEN_FILE = str(token)
    token.write_text("first\n")
    assert all(s.buckets.count == [0] * BUCKETS for s in read(get_source(), "gpu_util", Level.JOB))
    assert set(seen) == {"Bearer first"}
    token.write_text("second")  # rotated on disk: the next request carries the new one
    seen.clear()
    read(get_source(), "gpu_util", Level.JOB)
    assert set(seen) == {"Bearer second"}
