"""The dashboard's "GPUs used now": measured from the running jobs' live telemetry by the periodic task, read from one
row by the page (one read, however many jobs run), and said plainly when no running job has reported. The task's own
cost is bounded: its database reads do not grow with the jobs' histories (on Prometheus its two queries do not grow with
the jobs either: tests/e2e/test_telemetry_prometheus.py)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from benchmarks.queue_fill import add_running_jobs
from benchmarks.read_cost import read_cost
from jobs.cluster.simulated import SimulatedCluster
from jobs.models import Job, JobEvent, Node
from jobs.services import nodes_sync
from jobs.states import JobState
from telemetry.live_use import USE_WINDOW_SECONDS, cluster_gpu_use, cluster_gpu_use_refresh
from telemetry.sources.simulated import Profile, SimulatedTelemetry
from tests.conftest import session_for
from tests.telemetry.helpers import gpu_use_as_each_page_reads, start_running

N = 20  # running jobs; then ten times as many


def used_now(user: Any) -> str:
    html = session_for(user).get("/dashboard/").content.decode()
    cell = re.search(r'data-testid="gpus-used-now">(.*?)</td>', html, re.S)
    assert cell, html[:2000]
    return re.sub(r"<[^>]+>", "", cell.group(1))


def test_running_jobs_live_utilisation_is_the_clusters_gpus_used_now(submit, sim, user) -> None:
    # Their pages chart utilisation live; the dashboard said "unknown" until a run ended.
    healthy = SimulatedTelemetry(interval=5, profile_for=lambda job_id: Profile.HEALTHY)
    first = start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=1800)
    start_running(submit, sim, nodes=1, gpus_per_node=4, simulate={"duration_seconds": 7200}, ran_for=1800)
    use = cluster_gpu_use_refresh(source=healthy)
    assert use["jobs_running"] == use["jobs_reporting"] == 2 and use["gpus_reporting"] == 12
    # Each job's busy GPUs are its GPUs times its mean utilisation over the window, as its own page reads it.
    assert 0 < use["busy_gpus"] < 12 and use["utilisation"] == pytest.approx(use["busy_gpus"] / 12 * 100)
    shown = used_now(user)
    assert re.match(
        rf"{use['busy_gpus']:.1f} busy of the 12 GPUs held by the 2 running jobs reporting \(\d+% mean GPU utilisation\)", shown
    )
    assert "measured" in shown and first.pk


def test_no_telemetry_from_running_jobs_is_said_plainly(submit, sim, user) -> None:
    assert "no telemetry from running jobs in the last 5 min (it is measured every minute by Celery beat)" in used_now(user)
    cluster_gpu_use_refresh(source=SimulatedTelemetry(interval=5))
    assert used_now(user).strip() == "no telemetry from running jobs in the last 5 min (no job is running)"
    # A measurement older than the window is not "now".
    later = timezone.now() + timedelta(seconds=USE_WINDOW_SECONDS + 1)
    assert not cluster_gpu_use(later)["swept"]


def test_a_job_that_has_not_reported_yet_is_counted_apart(submit, sim, user) -> None:
    start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=1800)
    just = start_running(submit, sim, nodes=1, gpus_per_node=4, simulate={"duration_seconds": 7200}, ran_for=0)
    use = cluster_gpu_use_refresh(source=SimulatedTelemetry(interval=5), now=just.events.get(to_state="RUNNING").at)
    assert use["jobs_running"] == 2 and use["jobs_reporting"] == 1 and use["gpus_reporting"] == 8
    assert "1 more running job without telemetry" in used_now(user)


def test_the_measure_is_what_each_running_jobs_page_reads(submit, sim, user) -> None:
    # Pinned against the first version, which read every job through RunReader as its page does: measured in one call
    # of the source for all the jobs, the figures are the same, a job that started inside the window read from its start.
    source = SimulatedTelemetry(interval=5)
    start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=1800)
    start_running(submit, sim, nodes=2, gpus_per_node=4, simulate={"duration_seconds": 7200}, ran_for=1200)
    start_running(submit, sim, nodes=1, gpus_per_node=2, simulate={"duration_seconds": 7200}, ran_for=100)
    now = timezone.now()
    for at in (now, now.replace(second=0, microsecond=0) + timedelta(minutes=1), now + timedelta(seconds=37.5)):
        expected = gpu_use_as_each_page_reads(source, at, USE_WINDOW_SECONDS)
        assert expected["jobs_running"] == expected["jobs_reporting"] == 3 and expected["busy_gpus"] > 0
        use = cluster_gpu_use_refresh(source=source, now=at)
        assert {key: use[key] for key in expected} == pytest.approx(expected, rel=1e-12)


def test_the_measure_reads_as_much_whatever_the_jobs_histories(user) -> None:
    # It loaded every running job with all its events (a large read every minute, forever): now two queries, the
    # running jobs with their current run's start (found by the database) and their live allocations.
    nodes_sync(cluster_nodes=SimulatedCluster(nodes=25, gpus_per_node=8).list_nodes())
    nodes = list(Node.objects.order_by("name"))
    add_running_jobs([user], 0, N - 1, nodes)
    source = SimulatedTelemetry(interval=5)
    cluster_gpu_use_refresh(source=source)  # the row it keeps, written once
    with read_cost() as small:
        assert cluster_gpu_use_refresh(source=source)["jobs_reporting"] == N
    old = timezone.now() - timedelta(days=2)
    history = [JobEvent(job=job, at=old, to_state=JobState.PENDING, reason="older history") for job in Job.objects.all() for _ in range(10)]
    JobEvent.objects.bulk_create(history)
    with read_cost() as longer:
        cluster_gpu_use_refresh(source=source)
    assert (longer.queries, longer.rows) == (small.queries, small.rows), longer.describe()
    add_running_jobs([user], N, 10 * N - 1, nodes)
    with read_cost() as large:
        assert cluster_gpu_use_refresh(source=source)["jobs_reporting"] == 10 * N
    # A row per running job and one per GPU it holds (one each here): the jobs, never their events.
    assert large.queries == small.queries and large.rows - small.rows == 2 * 9 * N, large.describe()
