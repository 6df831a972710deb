"""A run's series are stored when it ends, with the job's summary; what the user then sees on the job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Job
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import samples_integral, samples_mean
from telemetry.models import JobSeries, JobTelemetrySummary, RunStoreDue
from telemetry.services import telemetry_store_due, telemetry_store_run
from tests.telemetry.helpers import run_to_end, store_runs_when_they_end


def test_a_finished_job_keeps_its_series_and_summary(submit, sim, api, monkeypatch, django_capture_on_commit_callbacks) -> None:
    stored = store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 40})["id"]
    job = run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    assert job.state == "SUCCEEDED"
    assert stored == [(job_id, 1)]
    rows = JobSeries.objects.filter(job_id=job_id, attempt=1)
    # Per GPU metric: 16 GPUs + 2 nodes + the job; node metrics: 2 nodes + the job; NCCL: the job.
    gpu_metrics = [m for m in METRICS.values() if m.scope == "gpu"]
    assert rows.filter(metric="gpu_util").count() == 16 + 2 + 1
    assert rows.count() == len(gpu_metrics) * 19 + 2 * 3 + 1
    detail = api.get(f"/api/v1/jobs/{job_id}/").json()
    summary = detail["telemetry_summary"]
    assert summary is not None and summary["attempts"] == [1]
    assert 0 < summary["gpu_util_mean"] <= 100
    assert summary["pcie_rx_bytes"] > 0 and summary["nvlink_tx_bytes"] > 0 and summary["ib_tx_bytes"] > 0
    assert summary["nccl_busbw_origin"] == "simulated" and summary["nccl_busbw_mean_gbs"] > 0


def test_summary_equals_the_stored_gpu_samples(submit, sim, monkeypatch, django_capture_on_commit_callbacks) -> None:
    """The summary is computed from job roll-ups; it must equal the numbers over every GPU's own samples."""
    store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=2, gpus_per_node=4, simulate={"duration_seconds": 60})["id"]
    run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    summary = JobTelemetrySummary.objects.get(job_id=job_id)

    def gpu_buckets(metric: str) -> list[Any]:
        return [r.buckets() for r in JobSeries.objects.filter(job_id=job_id, metric=metric, level=Level.GPU)]

    sample_seconds = JobSeries.objects.filter(job_id=job_id).values_list("sample_seconds", flat=True).first()
    assert summary.gpu_util_mean == pytest.approx(samples_mean(gpu_buckets("gpu_util")), rel=1e-12)
    assert summary.tensor_active_mean == pytest.approx(samples_mean(gpu_buckets("tensor_active")), rel=1e-12)
    assert summary.memory_peak_mib == max(v for b in gpu_buckets("fb_used") for v, c in zip(b.max, b.count, strict=True) if c)
    assert summary.pcie_tx_bytes == pytest.approx(samples_integral(gpu_buckets("pcie_tx"), sample_seconds), rel=1e-12)
    assert summary.gpu_seconds == sum(b.samples for b in gpu_buckets("gpu_util")) * sample_seconds


def test_storing_a_run_again_replaces_it(submit, sim, monkeypatch, django_capture_on_commit_callbacks) -> None:
    store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=1, gpus_per_node=2, simulate={"duration_seconds": 20})["id"]
    run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    before = list(JobSeries.objects.filter(job_id=job_id).order_by("metric", "level", "node", "gpu").values_list("metric", "gpu", "mean"))
    assert telemetry_store_run(job_id=job_id, attempt=1) == len(before)
    after = list(JobSeries.objects.filter(job_id=job_id).order_by("metric", "level", "node", "gpu").values_list("metric", "gpu", "mean"))
    assert [(m, g, bytes(v)) for m, g, v in after] == [(m, g, bytes(v)) for m, g, v in before]


def test_a_restarted_job_keeps_both_runs(submit, sim, api, monkeypatch, django_capture_on_commit_callbacks) -> None:
    stored = store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=1, gpus_per_node=8, max_restarts=1, simulate={"duration_seconds": 20, "exit_code": 3})["id"]
    job = run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    assert job.state == "FAILED" and job.attempt == 2
    assert stored == [(job_id, 1), (job_id, 2)]
    summary = api.get(f"/api/v1/jobs/{job_id}/").json()["telemetry_summary"]
    assert summary["attempts"] == [1, 2]


def test_a_job_that_never_ran_has_no_summary(submit, api) -> None:
    job_id = submit()["id"]
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["telemetry_summary"] is None
    assert not Job.objects.get(pk=job_id).telemetry_series.exists()


def test_a_cancelled_running_job_keeps_its_charts(submit, sim, api, monkeypatch, django_capture_on_commit_callbacks) -> None:
    stored = store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(30)
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    assert stored == [(job_id, 1)]
    assert JobSeries.objects.filter(job_id=job_id, metric="gpu_util", level=Level.GPU).count() == 8


def test_the_store_task_stores_the_run(submit, sim, monkeypatch, django_capture_on_commit_callbacks) -> None:
    from telemetry.tasks import telemetry_store_run_task

    enqueued: list[tuple[int, int]] = []
    monkeypatch.setattr(telemetry_store_run_task, "delay_on_commit", lambda *args: enqueued.append(args))
    job_id = submit(nodes=1, gpus_per_node=2, simulate={"duration_seconds": 20})["id"]
    run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    assert enqueued == [(job_id, 1)] and not JobSeries.objects.filter(job_id=job_id).exists()
    assert RunStoreDue.objects.filter(job_id=job_id, attempt=1).exists()
    assert telemetry_store_run_task.apply(args=enqueued[0]).get() > 0
    assert JobTelemetrySummary.objects.filter(job_id=job_id).exists()
    # Stored: nothing is left due.
    assert not RunStoreDue.objects.exists()


def test_a_run_whose_store_task_was_lost_or_failed_is_stored_by_the_sweep(
    submit, sim, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from telemetry.sources import TelemetryUnavailable
    from telemetry.sources.simulated import SimulatedTelemetry
    from telemetry.tasks import telemetry_store_run_task

    enqueued: list[tuple[int, int]] = []
    monkeypatch.setattr(telemetry_store_run_task, "delay_on_commit", lambda *args: enqueued.append(args))
    job_id = submit(nodes=1, gpus_per_node=2, simulate={"duration_seconds": 20})["id"]
    job = run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    ended = job.finished_at
    assert enqueued == [(job_id, 1)]
    enqueued.clear()  # the task is lost: the broker was down, or the worker died holding it

    # Not due yet: a task that is merely slow is not doubled.
    assert telemetry_store_due(now=ended + timedelta(seconds=60)) == []
    # Due: enqueued again. The source is away this time, so the run stays due, later.
    assert telemetry_store_due(now=ended + timedelta(seconds=121)) == [(job_id, 1)]

    def away(*args, **kwargs):
        raise TelemetryUnavailable("Prometheus is down")

    monkeypatch.setattr(SimulatedTelemetry, "read", away)
    assert telemetry_store_run_task.apply(args=enqueued.pop()).get() == 0
    row = RunStoreDue.objects.get(job_id=job_id)
    assert row.tries == 1 and "Prometheus is down" in row.last_error
    assert telemetry_store_due(now=ended + timedelta(seconds=300)) == []  # backing off
    monkeypatch.undo()
    monkeypatch.setattr(telemetry_store_run_task, "delay_on_commit", lambda *args: enqueued.append(args))
    assert telemetry_store_due(now=row.due_at) == [(job_id, 1)]
    assert telemetry_store_run_task.apply(args=enqueued.pop()).get() > 0
    assert JobTelemetrySummary.objects.filter(job_id=job_id).exists()
    assert not RunStoreDue.objects.exists()


def test_the_sweep_gives_up_after_its_tries(submit, sim, monkeypatch, settings, django_capture_on_commit_callbacks) -> None:
    from telemetry.tasks import telemetry_store_run_task

    settings.MUSTER_TELEMETRY_STORE_MAX_TRIES = 2
    monkeypatch.setattr(telemetry_store_run_task, "delay_on_commit", lambda *args: None)
    job_id = submit(nodes=1, gpus_per_node=2, simulate={"duration_seconds": 20})["id"]
    run_to_end(sim, job_id, django_capture_on_commit_callbacks)
    far = timezone.now() + timedelta(days=30)
    assert telemetry_store_due(now=far) == [(job_id, 1)]
    assert telemetry_store_due(now=far + timedelta(days=1)) == [(job_id, 1)]
    assert telemetry_store_due(now=far + timedelta(days=2)) == []
    assert not RunStoreDue.objects.exists()
