"""Jobs report their checkpoints (their pods with the job's token, or their owner): what a preemption then throws away,
and so which job it stops, is the work since the last one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.throttling import CheckpointRateThrottle
from jobs.checkpoints import job_checkpoint_report
from jobs.models import Job
from telemetry.tokens import telemetry_pod_env
from tests.conftest import client_for, job_payload, make_sim, session_for
from tests.job_token import pod, running_job


@pytest.fixture
def running(submit, sim) -> Job:
    return running_job(submit, sim, seconds=3600)


def report(client: APIClient, job: Job | int, body: Any = None) -> Any:
    job_id = job if isinstance(job, int) else job.pk
    return client.post(f"/api/v1/jobs/{job_id}/checkpoint/", body if body is not None else {}, format="json")


def test_a_pod_reports_a_checkpoint_and_the_job_shows_it(running: Job, api: APIClient, user: Any) -> None:
    response = report(pod(running), running, {"step": 4000, "attempt": 1})
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["job"] == running.pk and body["attempt"] == 1 and body["checkpoint_step"] == 4000 and body["recorded"] is True
    job = api.get(f"/api/v1/jobs/{running.pk}/").json()
    assert job["checkpoint_step"] == 4000 and job["checkpoint_attempt"] == 1
    assert job["checkpointed_at"] == body["checkpointed_at"]
    page = session_for(user).get(f"/jobs/{running.pk}/").content.decode()
    assert 'data-testid="checkpoint"' in page and "step 4000, attempt 1" in page and "loses only the work since then" in page


def test_a_running_job_without_a_report_says_a_preemption_loses_everything(running: Job, user: Any) -> None:
    page = session_for(user).get(f"/jobs/{running.pk}/").content.decode()
    assert "none reported: a preemption would lose all the work since it started" in page


def test_a_running_gpu_slice_job_says_nothing_of_preemption_losing_work(api: APIClient, user: Any, settings: Any) -> None:
    """GPU slices are never preempted (docs/gpu-sharing.md): the page says what would lose its work instead."""
    sim = make_sim(settings, shared="time-slicing:4:1")
    payload = job_payload(nodes=1, gpus_per_node=1, gpu_fraction=0.25, preemptible=True, simulate={"duration_seconds": 3600})
    job_id = api.post("/api/v1/jobs/", payload, format="json").json()["id"]
    sim.cycle()
    sim.advance(2)
    job = Job.objects.get(pk=job_id)
    assert job.state == "RUNNING" and job.shares_gpu
    client = session_for(user)
    page = client.get(f"/jobs/{job_id}/").content.decode()
    assert "a preemption would lose" not in page and "preempted first" not in page
    assert "none reported: a restart (its node lost, a failed attempt retried) would lose all the work since it started" in page
    assert "GPU slices are not preempted" in page
    assert report(pod(job), job, {"step": 10, "attempt": 1}).status_code == 200
    page = client.get(f"/jobs/{job_id}/").content.decode()
    assert "a preemption now loses" not in page
    assert "(a restart now loses only the work since then; GPU slices are not preempted)" in page


def test_the_latest_report_of_the_attempt_stands_and_an_earlier_one_changes_nothing(running: Job) -> None:
    now = timezone.now()
    later = report(pod(running), running, {"at": now.isoformat(), "step": 20}).json()
    earlier = report(pod(running), running, {"at": (now - timedelta(seconds=30)).isoformat(), "step": 10})
    assert earlier.status_code == 200 and earlier.json()["recorded"] is False
    assert earlier.json()["checkpoint_step"] == 20 and earlier.json()["checkpointed_at"] == later["checkpointed_at"]
    same = report(pod(running), running, {"at": now.isoformat(), "step": 20}).json()
    assert same["recorded"] is False, "every rank reporting the same checkpoint is not an error"
    running.refresh_from_db()
    assert running.checkpoint_step == 20


def test_the_owner_may_report_with_a_login_but_nobody_else(
    running: Job, api: APIClient, other_api: APIClient, admin_api: APIClient
) -> None:
    assert report(api, running, {"step": 1}).status_code == 200
    assert report(other_api, running).status_code == 404, "another user's job does not exist for them"
    refused = report(admin_api, running)
    assert refused.status_code == 403 and "Only the job's owner" in refused.json()["detail"]
    assert report(APIClient(), running).status_code == 401


def test_a_token_reports_for_its_own_job_only(running: Job, submit, sim) -> None:
    other = Job.objects.get(pk=submit(nodes=1, gpus_per_node=8)["id"])
    sim.advance(2)
    refused = report(pod(other), running)
    assert refused.status_code == 403 and refused.json()["detail"] == "This token belongs to another job."
    forged = APIClient()
    forged.credentials(HTTP_AUTHORIZATION=f"Bearer mtt.{running.pk}.{'0' * 64}")
    assert report(forged, running).status_code == 401
    running.refresh_from_db()
    assert running.checkpointed_at is None


def test_only_the_running_attempt_reports(running: Job, submit) -> None:
    stale = report(pod(running), running, {"attempt": 2})
    assert stale.status_code == 409 and "from attempt 2" in stale.json()["detail"]
    queued = Job.objects.get(pk=submit(nodes=16, gpus_per_node=8)["id"])
    waiting = report(pod(queued), queued)
    assert waiting.status_code == 409 and waiting.json()["detail"] == f"Job {queued.pk} is PENDING: only a running job reports checkpoints."
    running.refresh_from_db()
    assert running.checkpointed_at is None


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ({"step": -1}, "step", "greater than or equal to 0"),
        ({"step": "many"}, "step", "Must be an integer, not the string 'many'"),
        ({"at": "yesterday"}, "at", "Datetime has wrong format"),
        ({"at": "2999-01-01T00:00:00Z"}, "at", "is in the future"),
        ({"at": "2000-01-01T00:00:00Z"}, "at", "is before attempt 1 was placed"),
        ({"attempt": 0}, "attempt", "greater than or equal to 1"),
        ({"path": "/ckpt"}, "path", "Unknown field."),
    ],
)
def test_bad_reports_are_refused_with_the_field_named_and_nothing_stored(running: Job, body: dict[str, Any], field: str, says: str) -> None:
    response = report(pod(running), running, body)
    assert response.status_code == 400, response.content
    assert says in str(response.json()[field])
    running.refresh_from_db()
    assert running.checkpointed_at is None and running.checkpoint_step is None


def test_reports_are_rate_limited_per_job(running: Job, settings: Any) -> None:
    settings.MUSTER_THROTTLE_CHECKPOINTS = "2/minute"
    # Job ids restart at 1 in every test database, and the counts (in Redis in CI) outlive a test.
    cache.delete(CheckpointRateThrottle.cache_format % {"scope": CheckpointRateThrottle.scope, "ident": running.pk})
    assert [report(pod(running), running).status_code for _ in range(2)] == [200, 200]
    over = report(pod(running), running)
    assert over.status_code == 429 and int(over["Retry-After"]) > 0


def test_the_pods_are_told_where_to_report(running: Job, settings: Any) -> None:
    assert "MUSTER_CHECKPOINT_URL" not in telemetry_pod_env(running.pk)
    settings.MUSTER_PUBLIC_URL = "http://muster-web.muster:8000"
    assert telemetry_pod_env(running.pk)["MUSTER_CHECKPOINT_URL"] == f"http://muster-web.muster:8000/api/v1/jobs/{running.pk}/checkpoint/"


# --- what it changes: the preemption ---------------------------------------------------------------------------------


@pytest.mark.parametrize("checkpointed", [False, True])
@pytest.mark.usefixtures("classes_open")
def test_a_preemption_stops_the_job_that_loses_least_and_says_what_was_lost(
    submit, sim, other_user: Any, settings: Any, checkpointed: bool
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    sweeps = [
        submit(
            name=f"sweep-{i}", nodes=8, priority_class="preemptible", wall_time_seconds=4 * 3600, simulate={"duration_seconds": 5 * 3600}
        )["id"]
        for i in range(2)
    ]
    sim.cycle()
    sim.advance(2)
    assert set(Job.objects.filter(pk__in=sweeps).values_list("state", flat=True)) == {"RUNNING"}
    sim.advance(3600)
    if checkpointed:
        # At the cycle's time (the simulated clock runs ahead of the server's): the service the API calls.
        job_checkpoint_report(sweeps[1], at=sim.clock() - timedelta(seconds=300), step=900, now=sim.clock())
    prod = submit(client_for(other_user), name="eval", nodes=8, priority_class="production")["id"]
    report_ = sim.advance(1)
    # Checkpointed, sweep 1 loses least; without, the two lose alike and either may go.
    stopped = sweeps[1] if checkpointed else report_.preempted[0]
    kept = sweeps[0] if stopped == sweeps[1] else sweeps[1]
    assert report_.preempted == [stopped] and prod in report_.placed
    assert Job.objects.get(pk=kept).state == "RUNNING"
    reason = Job.objects.get(pk=stopped).events.get(to_state="PREEMPTED").reason
    if checkpointed:
        assert reason.endswith("The work since its last checkpoint is lost (5.4 GPU-hours).")  # 64 GPUs x 301 s
    else:
        assert reason.startswith(f"Preempted for job {prod}: it is of a lower priority class. The work since its start is lost (")


# --- the simulated cluster's jobs report as training code would ---------------------------------------------------------


def test_a_simulated_job_reports_a_checkpoint_as_it_runs_and_says_so_in_its_log(submit, sim) -> None:
    job_id = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 3600, "checkpoint_every_seconds": 600})["id"]
    sim.cycle()
    sim.advance(2)
    started = Job.objects.get(pk=job_id).started_at
    assert Job.objects.get(pk=job_id).checkpointed_at is None, "nothing written before its first 10 minutes"
    sim.advance(1300)  # 1,301 s in: the pods started 1 s after launch, so two checkpoints, at 601 s and 1,201 s of the clock
    job = Job.objects.get(pk=job_id)
    assert (job.checkpoint_step, job.checkpoint_attempt) == (12_000, 1)  # a log line of 100 steps every 10 s
    assert job.checkpointed_at is not None and started is not None
    assert 1190 < (job.checkpointed_at - started).total_seconds() < 1205
    logs = sim.cluster.read_logs(job_id, 1, 0)  # at the simulated clock's time (the API reads the server's)
    assert "checkpoint saved at step 6000; reported to Muster\n" in logs
    assert logs.index("step 6000 (") < logs.index("checkpoint saved at step 6000") < logs.index("step 6100 (")
    assert "checkpoint saved at step 12000" in logs and "checkpoint saved at step 18000" not in logs


def test_a_simulated_job_reports_each_checkpoint_once(submit, sim) -> None:
    job_id = submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 3600, "checkpoint_every_seconds": 600})["id"]
    sim.cycle()
    sim.advance(2)  # running
    sim.advance(700)
    assert Job.objects.get(pk=job_id).checkpoint_step == 6000
    # Nothing new written: observing the cluster again takes no lock on the job's row (a report would).
    with CaptureQueriesContext(connection) as queries:
        sim.cluster.observe_gangs()
    assert not [q["sql"] for q in queries if "FOR UPDATE" in q["sql"]]
    sim.advance(600)
    assert Job.objects.get(pk=job_id).checkpoint_step == 12_000


def test_the_simulated_checkpoint_interval_is_validated(api: APIClient) -> None:
    response = api.post("/api/v1/jobs/", {**job_payload(), "simulate": {"checkpoint_every_seconds": 5}}, format="json")
    assert response.status_code == 400
    assert "greater than or equal to 60" in str(response.json()["simulate"]["checkpoint_every_seconds"])


def test_a_simulated_checkpoint_interval_at_the_top_level_is_told_it_belongs_in_simulate(api: APIClient, db: None) -> None:
    """docs/cli.md showed `checkpoint_every_seconds: 600` as if a job's own field: the API answered "Unknown field."."""
    response = api.post("/api/v1/jobs/", {**job_payload(), "checkpoint_every_seconds": 600}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "checkpoint_every_seconds": [
            'A field of simulate, not of the job: "simulate": {"checkpoint_every_seconds": 600} (the simulated cluster only).'
        ]
    }
    schema = api.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]["SimulateRequest"]
    assert schema["properties"]["checkpoint_every_seconds"]["minimum"] == 60
    assert "at least 60 seconds" in schema["properties"]["checkpoint_every_seconds"]["description"]
