"""The dashboard's "GPUs used now": measured from the running jobs' live telemetry by the periodic task, read from the
cache by the page (one read, however many jobs run), and said plainly when no running job has reported."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from telemetry.live_use import USE_WINDOW_SECONDS, cluster_gpu_use, cluster_gpu_use_refresh
from telemetry.sources.simulated import Profile, SimulatedTelemetry
from tests.conftest import session_for
from tests.telemetry.helpers import start_running


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
