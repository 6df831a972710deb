"""GET /api/v1/jobs/{id}/metrics/: the same series as the charts, validated, with the jobs' visibility rules."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs.models import Job
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import coarsen
from telemetry.models import JobSeries
from telemetry.selectors import job_run, job_target
from telemetry.sources.simulated import SimulatedTelemetry
from tests.telemetry.helpers import run_to_end, start_running, store_runs_when_they_end, stored_run
from tests.telemetry.test_telemetry_push import inspector_record, pod, push


def metrics_url(job_id: int) -> str:
    return f"/api/v1/jobs/{job_id}/metrics/"


@pytest.fixture
def finished(user) -> Job:
    """A 2-node x 8-GPU job that ran 10 minutes and was stored when it ended."""
    return stored_run(user, nodes=2, gpus_per_node=8, seconds=600)


@pytest.fixture
def finished_through_the_api(submit, sim, monkeypatch, django_capture_on_commit_callbacks) -> Job:
    """The same, submitted over the API and run on the simulated cluster until the end-of-run hook stored it."""
    store_runs_when_they_end(monkeypatch)
    job_id = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 600})["id"]
    return run_to_end(sim, job_id, django_capture_on_commit_callbacks, step=60)


def stored_values(job: Job, metric: str, level: Level) -> list[tuple[str, int, list[float]]]:
    rows = JobSeries.objects.filter(job=job, metric=metric, level=level).order_by("rank", "node", "gpu")
    return [(r.node, r.gpu, [m for m, c in zip(r.buckets().mean, r.buckets().count, strict=True) if c]) for r in rows]


@pytest.mark.parametrize("how", ["built", "through_the_api"])
def test_a_finished_job_returns_its_stored_series(api, request, how) -> None:
    finished = request.getfixturevalue("finished" if how == "built" else "finished_through_the_api")
    response = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "level": "gpu"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["job"], body["run"], body["metric"], body["name"], body["unit"], body["level"]) == (
        finished.pk, 1, "gpu_util", "DCGM_FI_DEV_GPU_UTIL", "%", "gpu",
    )  # fmt: skip
    assert len(body["series"]) == 16 and {s["origin"] for s in body["series"]} == {"stored"}
    expected = stored_values(finished, "gpu_util", Level.GPU)
    assert [(s["node"], s["gpu"], s["mean"]) for s in body["series"]] == expected
    first = body["series"][0]
    assert len(first["t"]) == len(first["mean"]) == len(first["min"]) == len(first["max"]) == len(first["count"])
    assert all(lo <= m <= hi for lo, m, hi in zip(first["min"], first["mean"], first["max"], strict=True))
    assert all(t % body["step"] == 0 for t in first["t"])


def test_levels_and_node_filter(api, finished) -> None:
    job = api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).json()
    assert job["level"] == "job" and len(job["series"]) == 1 and job["series"][0]["gpu"] is None
    nodes = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "level": "node"}).json()
    assert [s["rank"] for s in nodes["series"]] == [0, 1]
    node = nodes["series"][1]["node"]
    one = api.get(metrics_url(finished.pk), {"metric": "DCGM_FI_DEV_GPU_UTIL", "level": "gpu", "node": node}).json()
    assert len(one["series"]) == 8 and {s["node"] for s in one["series"]} == {node}
    # Node metrics have no GPU series: asked per GPU, they answer per node.
    ib = api.get(metrics_url(finished.pk), {"metric": "ib_tx", "level": "gpu"}).json()
    assert ib["level"] == "node" and len(ib["series"]) == 2


def test_step_and_window(api, finished) -> None:
    stored_step = JobSeries.objects.filter(job=finished).values_list("step_seconds", flat=True).first()
    body = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "step": stored_step * 3 - 1}).json()
    assert body["step"] == stored_step * 3  # rounded up to a multiple of the stored resolution
    row = JobSeries.objects.get(job=finished, metric="gpu_util", level=Level.JOB)
    coarse = coarsen(row.buckets(), body["step"])
    assert body["series"][0]["max"] == [v for v, c in zip(coarse.max, coarse.count, strict=True) if c]
    run = job_run(finished)
    start = int(run.started.timestamp()) + 120
    window = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "start": start, "end": start + 180}).json()
    assert window["series"][0]["t"][0] >= start - window["step"] and window["series"][0]["t"][-1] < start + 180
    iso = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "start": run.started.isoformat()}).json()
    assert iso["series"][0]["t"] == api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).json()["series"][0]["t"]


def test_a_running_job_is_read_live_from_the_source(api, submit, sim) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200})
    job_id = job.pk
    run = job_run(job)
    end = run.started.timestamp() + 300
    body = api.get(metrics_url(job_id), {"metric": "tensor_active", "level": "gpu", "end": end}).json()
    assert {s["origin"] for s in body["series"]} == {"simulated"} and len(body["series"]) == 8
    source = SimulatedTelemetry.from_settings()
    expected = source.read(
        job_target(job, run), METRICS["tensor_active"], start=run.started.timestamp(), end=end, step=body["step"], level=Level.GPU
    )
    assert body["series"][3]["mean"] == [m for m, c in zip(expected[3].buckets.mean, expected[3].buckets.count, strict=True) if c]


def test_pushed_nccl_results_come_back_as_their_own_series(api, submit, sim) -> None:
    job = start_running(submit, sim, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 7200})
    assert push(pod(job), job, [inspector_record(400.0), inspector_record(200.0)]).status_code == 201
    body = api.get(metrics_url(job.pk), {"metric": "nccl_busbw", "step": 7200}).json()
    pushed = [s for s in body["series"] if s["origin"] == "pushed"]
    assert len(pushed) == 1 and pushed[0]["count"] == [2] and pushed[0]["mean"] == [300.0] and pushed[0]["max"] == [400.0]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "metric"),
        ({"metric": "gpu_utilisation"}, "metric"),
        ({"metric": "gpu_util", "level": "rack"}, "level"),
        ({"metric": "gpu_util", "step": 0}, "step"),
        ({"metric": "gpu_util", "step": "1m"}, "step"),
        ({"metric": "gpu_util", "start": "yesterday"}, "start"),
        ({"metric": "gpu_util", "start": "99999999999"}, "start"),
        ({"metric": "gpu_util", "start": 1790000000, "end": 1790000000}, "end"),
        ({"metric": "gpu_util", "start": 1790000000, "end": 1790086400, "step": 1}, "step"),
        ({"metric": "gpu_util", "run": 0}, "run"),
        ({"metric": "gpu_util", "colour": "red"}, "colour"),
    ],
)
def test_bad_parameters_are_400_naming_the_field(api, finished, params, field) -> None:
    response = api.get(metrics_url(finished.pk), params)
    assert response.status_code == 400, response.content
    assert field in response.json()


def test_any_start_before_the_run_reads_from_its_start_epoch_seconds_0_too(api, finished) -> None:
    """start=0 was refused ("... or seconds since the epoch"), while start=1000000000 was clamped to the run's start."""
    url, run = metrics_url(finished.pk), job_run(finished)
    clamped = [api.get(url, {"metric": "gpu_util", "start": start}) for start in (0, 100, 1000000000, "1970-01-01T00:00:00Z")]
    assert [r.status_code for r in clamped] == [200] * 4
    assert {r.json()["start"] for r in clamped} == {run.started.isoformat().replace("+00:00", "Z")}
    refused = api.get(url, {"metric": "gpu_util", "start": -1})
    assert refused.status_code == 400 and "from 1970-01-01 to 2200-01-01" in refused.json()["start"][0]


def test_a_step_finer_than_the_data_is_raised_and_the_answer_says_its_resolution(api, finished) -> None:
    """step=1 came back as 5 with nothing saying why."""
    body = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "step": 1}).json()
    stored_step = JobSeries.objects.filter(job=finished).values_list("step_seconds", flat=True).first()
    assert body["resolution"] == stored_step == body["step"]


def test_a_run_the_job_did_not_have_is_a_400_naming_its_runs(api, finished) -> None:
    """It was a 409 ("has not run an attempt 99"): a bad parameter value, as logs?attempt=99 is a 400."""
    response = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "run": 99})
    assert response.status_code == 400
    assert response.json() == {"run": [f"Job {finished.pk} has no run 99; its runs (attempts that reached RUNNING): 1."]}


def test_unknown_metric_lists_the_catalogue(api, finished) -> None:
    message = api.get(metrics_url(finished.pk), {"metric": "gpu"}).json()["metric"][0]
    assert all(key in message for key in METRICS)


def test_an_unknown_level_names_the_levels(api, finished) -> None:
    # DRF's '"rank" is not a valid choice.' named none of them.
    response = api.get(metrics_url(finished.pk), {"metric": "gpu_util", "level": "rank"})
    assert response.json() == {"level": ["Unknown level 'rank'; choose gpu, node or job."]}


def test_a_job_without_runs_is_409(api, submit) -> None:
    job_id = submit()["id"]
    response = api.get(metrics_url(job_id), {"metric": "gpu_util"})
    assert response.status_code == 409 and "has not run" in response.json()["detail"]
    assert api.get(metrics_url(job_id), {"metric": "gpu_util", "run": 5}).status_code == 409


def test_visibility_is_the_jobs(api, other_api, admin_api, finished) -> None:
    assert other_api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).status_code == 404
    assert other_api.get(metrics_url(finished.pk + 1000), {"metric": "gpu_util"}).status_code == 404
    # In the job resource's words (it read "No Job matches the given query.").
    detail = other_api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).json()["detail"]
    assert detail == f"No job {finished.pk} (or none that you may see)." == other_api.get(f"/api/v1/jobs/{finished.pk}/").json()["detail"]
    assert admin_api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).status_code == 200
    assert APIClient().get(metrics_url(finished.pk), {"metric": "gpu_util"}).status_code == 401


def test_an_unavailable_source_is_503_for_live_runs(api, submit, sim, settings) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=8)
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    response = api.get(metrics_url(job.pk), {"metric": "gpu_util"})
    assert response.status_code == 503 and "Telemetry is unavailable" in response.json()["detail"]


def test_stored_runs_do_not_need_the_source(api, finished, settings) -> None:
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    assert api.get(metrics_url(finished.pk), {"metric": "gpu_util"}).status_code == 200


def test_the_schema_lists_the_telemetry_endpoints(db) -> None:
    paths = APIClient().get("/api/schema/", {"format": "json"}).json()["paths"]
    assert "post" in paths["/api/v1/jobs/{id}/telemetry/"] and "get" in paths["/api/v1/jobs/{id}/metrics/"]


def test_a_node_the_job_never_used_or_a_window_outside_its_run_is_400(api, finished) -> None:
    url = metrics_url(finished.pk)
    nodes = [s["node"] for s in api.get(url, {"metric": "gpu_util", "level": "node"}).json()["series"]]
    response = api.get(url, {"metric": "gpu_util", "level": "gpu", "node": "nope"})
    assert response.status_code == 400, response.content
    message = response.json()["node"][0]
    assert "'nope'" in message and all(node in message for node in nodes)
    # At job level a node would be ignored: the answer would not be what was asked for.
    response = api.get(url, {"metric": "gpu_util", "level": "job", "node": nodes[0]})
    assert response.status_code == 400 and "level=node or level=gpu" in response.json()["node"][0]
    assert api.get(url, {"metric": "gpu_util", "node": nodes[0]}).status_code == 400  # job is the default level
    run = job_run(finished)
    for start in ("2030-01-01T00:00:00Z", run.ended.isoformat()):
        response = api.get(url, {"metric": "gpu_util", "start": start})
        assert response.status_code == 400, response.content
        assert f"ended at {run.ended.isoformat()}" in response.json()["start"][0]
    response = api.get(url, {"metric": "gpu_util", "end": int(run.started.timestamp()) - 60})
    assert response.status_code == 400 and "end= is before that" in response.json()["end"][0]
