"""/metrics: values read from the database after simulated jobs, the cycle's persisted counters, access rules, alert rules."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from jobs.cluster.base import PodPhase
from jobs.models import ClusterHealth, CycleCounter, Job, Node, NodeState
from jobs.states import JobState
from scheduler.counters import CYCLE_SECONDS_BUCKETS, cycle_counters_record
from scheduler.cycle import run_cycle
from telemetry.exporter import metrics_text
from tests.scheduler.test_cycle import AlteredPodCluster, RefusingCluster

ALERTS = Path(__file__).resolve().parents[2] / "platform" / "prometheus"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse(text: str | bytes) -> Samples:
    if isinstance(text, bytes):
        text = text.decode()
    return {(s.name, frozenset(s.labels.items())): s.value for family in text_string_to_metric_families(text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[name, frozenset(labels.items())]


@pytest.fixture
def scenario(submit: Any, sim: Any) -> dict[str, int]:
    """One job finished, one running (2 nodes), one pending for room; three cycles plus a few more."""
    short = submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 2})["id"]
    long = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    # Submitted after the others took their GPUs: the whole cluster cannot be free for it.
    big = submit(nodes=16, gpus_per_node=8, simulate={"duration_seconds": 5})["id"]
    sim.advance(1.5)
    sim.advance(3)
    assert Job.objects.get(pk=short).state == JobState.SUCCEEDED
    assert Job.objects.get(pk=long).state == JobState.RUNNING
    assert Job.objects.get(pk=big).state == JobState.PENDING
    return {"short": short, "long": long, "big": big}


def test_metrics_after_simulated_jobs(scenario: dict[str, int], sim: Any, settings: Any) -> None:
    settings.MUSTER_STARVATION_SECONDS = 60
    settings.MUSTER_STARVATION_WALL_FACTOR = 0.0
    big = Job.objects.get(pk=scenario["big"])
    now = sim.clock() + timedelta(seconds=100)
    m = parse(metrics_text(now=now))

    assert value(m, "muster_jobs", state="PENDING") == 1
    assert value(m, "muster_jobs", state="RUNNING") == 1
    assert value(m, "muster_jobs", state="SCHEDULED") == 0
    assert value(m, "muster_jobs_pending", reason=big.pending_reason_code) == 1
    assert big.pending_reason_code  # the cycle said why it waits
    assert value(m, "muster_jobs_running", quota="within") == 1
    assert value(m, "muster_jobs_running", quota="over") == 0
    assert value(m, "muster_gpus_running", quota="within") == 16
    assert value(m, "muster_jobs_ended_total", state="SUCCEEDED") == 1
    assert value(m, "muster_jobs_ended_total", state="FAILED") == 0

    assert value(m, "muster_gpus_total") == 128
    assert value(m, "muster_gpus_schedulable") == 128
    assert value(m, "muster_gpus_allocated") == 16
    assert value(m, "muster_nodes", state="READY") == 16
    assert value(m, "muster_gpus_foreign") == 0
    Node.objects.filter(name__in=["sim-node-014", "sim-node-015"]).update(gpus_foreign=3)
    Node.objects.filter(name="sim-node-013").update(gpus_foreign=8, state=NodeState.GONE)  # gone: not counted
    assert value(parse(metrics_text(now=now)), "muster_gpus_foreign") == 6
    # Slices of a shared node held by other pods count as their share of a GPU (11 quarter slices: 2.75 GPUs).
    Node.objects.filter(name="sim-node-012").update(sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25, slices_foreign=11)
    assert value(parse(metrics_text(now=now)), "muster_gpus_foreign") == 8.75

    # Starvation: the big job has waited past the (lowered) threshold.
    wait = (now - big.submitted_at).total_seconds()
    assert value(m, "muster_pending_oldest_wait_seconds") == pytest.approx(wait)
    assert value(m, "muster_jobs_starving") == 1
    assert value(m, "muster_starvation_threshold_seconds") == 60
    # A gang is owed a reservation after the base threshold whatever its wall time (a single-node job's grows with it:
    # tests/scheduler/test_starving_count.py).
    settings.MUSTER_STARVATION_WALL_FACTOR = 0.5
    assert value(parse(metrics_text(now=now)), "muster_jobs_starving") == 1

    # Submit to start of the two jobs that started.
    started = Job.objects.filter(started_at__isnull=False)
    latencies = sorted((j.started_at - j.submitted_at).total_seconds() for j in started)
    assert value(m, "muster_scheduling_latency_seconds_count") == 2
    assert value(m, "muster_scheduling_latency_seconds_sum") == pytest.approx(sum(latencies))
    assert value(m, "muster_scheduling_latency_seconds_bucket", le="+Inf") == 2
    assert value(m, "muster_scheduling_latency_seconds_bucket", le="1.0") == sum(1 for x in latencies if x <= 1)
    assert value(m, "muster_scheduling_latency_seconds_bucket", le="5.0") == 2

    # What only the cycle knows, persisted by it: three cycles, two launches, no failures.
    assert value(m, "muster_cycles_total", outcome="ran") == 3
    assert value(m, "muster_cycles_total", outcome="skipped") == 0
    assert value(m, "muster_launches_total") == 2
    assert value(m, "muster_launch_failures_total") == 0
    assert value(m, "muster_cycle_duration_seconds_count") == 3
    assert value(m, "muster_cycle_duration_seconds_bucket", le="+Inf") == 3
    assert value(m, "muster_cycle_duration_seconds_bucket", le="60.0") == 3
    assert 0 < value(m, "muster_cycle_duration_seconds_sum") < 60

    assert value(m, "muster_last_cycle_timestamp_seconds") == pytest.approx(sim.clock().timestamp())
    assert value(m, "muster_cluster_reachable") == 1


def test_held_and_settling_nodes_are_not_schedulable(db: None, settings: Any) -> None:
    from django.utils import timezone

    from tests.jobs.factories import NodeFactory

    settings.MUSTER_NODE_SETTLE_SECONDS = 300
    now = timezone.now()
    for i in range(18):
        NodeFactory(name=f"n{i:02}", gpus_total=8)
    # Four held by an admin (one of them also unready), two back from NotReady a minute ago, one settled long since.
    Node.objects.filter(name__in=["n00", "n01", "n02"]).update(held=True)
    Node.objects.filter(name="n03").update(held=True, state=NodeState.NOT_READY)
    Node.objects.filter(name__in=["n04", "n05"]).update(ready_since=now - timedelta(seconds=60))
    Node.objects.filter(name="n06").update(ready_since=now - timedelta(seconds=900))
    m = parse(metrics_text(now=now))
    assert value(m, "muster_gpus_total") == 144
    assert value(m, "muster_gpus_schedulable") == (18 - 4 - 2) * 8
    assert value(m, "muster_gpus_held") == 32
    assert value(m, "muster_nodes_held", state="READY") == 3 and value(m, "muster_nodes_held", state="NOT_READY") == 1
    assert value(m, "muster_nodes_settling") == 2
    assert value(m, "muster_nodes", state="READY") == 17
    # Once settled they take work again.
    assert value(parse(metrics_text(now=now + timedelta(seconds=300))), "muster_gpus_schedulable") == (18 - 4) * 8


def test_cycle_counters_count_failures_outages_and_skips(submit: Any, sim: Any) -> None:
    submit(nodes=2)
    run_cycle(backend=RefusingCluster(sim.cluster), now=sim.clock())
    run_cycle(backend=RefusingCluster(sim.cluster, down=True), now=sim.clock())
    cycle_counters_record(ran=False, seconds=0)  # what a cycle that found the lock held records
    m = parse(metrics_text())
    assert value(m, "muster_launch_failures_total") == 1
    assert value(m, "muster_launches_total") == 0
    assert value(m, "muster_cycles_total", outcome="ran") == 2
    assert value(m, "muster_cycles_total", outcome="cluster_unavailable") == 1
    assert value(m, "muster_cycles_total", outcome="skipped") == 1
    assert value(m, "muster_cycle_duration_seconds_count") == 2
    assert value(m, "muster_cluster_reachable") == 0
    health = ClusterHealth.objects.get(pk=1)
    assert value(m, "muster_cluster_down_since_timestamp_seconds") == pytest.approx(health.down_since.timestamp())


def test_every_failed_launch_is_counted_not_only_those_the_cluster_refused(submit: Any, sim: Any, settings: Any) -> None:
    """An image that does not pull and a gang not up in time, the common failures, were not counted."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 60
    pulling = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    stuck = AlteredPodCluster(sim.cluster, pulling, 0, phase=PodPhase.PENDING, reason="ImagePullBackOff", message="Back-off")
    run_cycle(backend=stuck, now=sim.clock())
    assert value(parse(metrics_text()), "muster_launch_failures_total") == 1
    sim.cluster.start_seconds = 3600.0  # pods stay Pending
    slow = submit(nodes=1)["id"]
    sim.advance(16)  # the first job's backoff; both are placed
    sim.advance(61)
    assert Job.objects.get(pk=slow).launch_failures == 1 and Job.objects.get(pk=pulling).launch_failures == 2
    assert value(parse(metrics_text()), "muster_launch_failures_total") == 3


def test_duration_buckets_are_cumulative(db: None) -> None:
    cycle_counters_record(ran=True, seconds=0.3)
    cycle_counters_record(ran=True, seconds=7.0)
    m = parse(metrics_text())
    for bound in CYCLE_SECONDS_BUCKETS:
        expected = (0.3 <= bound) + (7.0 <= bound)
        assert value(m, "muster_cycle_duration_seconds_bucket", le=repr(bound)) == expected, bound
    assert value(m, "muster_cycle_duration_seconds_sum") == pytest.approx(7.3)
    # One row per counter and bucket, made on first use.
    assert CycleCounter.objects.filter(name="cycle_seconds_bucket").count() == len(CYCLE_SECONDS_BUCKETS)


def test_empty_database_exports_zeros(db: None) -> None:
    m = parse(metrics_text())
    assert value(m, "muster_jobs", state="PENDING") == 0
    assert value(m, "muster_gpus_allocated") == 0
    assert value(m, "muster_cycles_total", outcome="ran") == 0
    assert value(m, "muster_last_cycle_timestamp_seconds") == 0
    assert value(m, "muster_scheduling_latency_seconds_count") == 0


def test_scrape_runs_a_fixed_number_of_queries(scenario: dict[str, int], django_assert_max_num_queries: Any) -> None:
    # 10, and 5 for the accounts above a lowered quota (their users, their teams, account_usages' three), however many.
    with django_assert_max_num_queries(15):
        metrics_text()


# --- access ----------------------------------------------------------------------------------------


def test_without_a_token_only_loopback_may_scrape(db: None, settings: Any) -> None:
    settings.MUSTER_METRICS_TOKEN = ""
    client = Client()
    ok = client.get("/metrics", REMOTE_ADDR="127.0.0.1")
    assert ok.status_code == 200 and ok["Content-Type"].startswith("text/plain")
    assert "muster_jobs" in ok.content.decode()
    assert client.get("/metrics", REMOTE_ADDR="::1").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    # A forwarded-for header is the client's own claim, never trusted.
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_X_FORWARDED_FOR="127.0.0.1").status_code == 403
    assert client.post("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 405


def test_with_a_token_every_scrape_needs_it(db: None, settings: Any) -> None:
    settings.MUSTER_METRICS_TOKEN = "s3cret-token"
    client = Client()
    missing = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert missing.status_code == 401 and missing["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Token s3cret-token").status_code == 401
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200 and "muster_gpus_total" in ok.content.decode()


# --- alert rules -----------------------------------------------------------------------------------


def test_alert_rules_use_only_exported_metrics(db: None) -> None:
    exported = {s.name for family in text_string_to_metric_families(metrics_text().decode()) for s in family.samples}
    rules = yaml.safe_load((ALERTS / "alerts.yml").read_text())["groups"]
    exprs = [rule["expr"] for group in rules for rule in group["rules"]]
    names = {word for expr in exprs for word in _identifiers(expr) if word.startswith("muster_")}
    assert names and names <= exported, names - exported


def _identifiers(expr: str) -> list[str]:
    return re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr)


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed (Debian package prometheus; CI has it)")
def test_alert_rules_pass_promtool() -> None:
    check = subprocess.run(["promtool", "check", "rules", "alerts.yml"], cwd=ALERTS, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    # The rules' own unit tests: each alert fires on the series it is for, and not before.
    test = subprocess.run(["promtool", "test", "rules", "alerts.test.yml"], cwd=ALERTS, capture_output=True, text=True, timeout=60)
    assert test.returncode == 0, test.stdout + test.stderr
