"""Output that outlives the pods: kept per attempt and rank before every teardown, read back by the API and the page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from rest_framework.test import APIClient

from jobs.cluster import ClusterUnavailable
from jobs.cluster.base import CapturedLog
from jobs.cluster.simulated import SimulatedCluster
from jobs.models import Job, JobLog, SimulatedPod
from jobs.states import JobState
from tests.conftest import job_payload, session_for

JOBS = "/api/v1/jobs/"


def logs(api: APIClient, job_id: int, **query: Any) -> dict[str, Any]:
    response = api.get(f"{JOBS}{job_id}/logs/", query)
    assert response.status_code == 200, response.content
    return response.json()


def test_a_failed_jobs_output_of_every_attempt_is_readable_after_its_pods_are_gone(api: APIClient, submit: Any, sim: Any) -> None:
    job_id = submit(nodes=2, max_restarts=1, simulate={"duration_seconds": 25, "exit_code": 3})["id"]
    sim.cycle()
    sim.advance(1.5)
    live = logs(api, job_id, rank=1)
    assert live["source"] == "live" and live["attempt"] == 1
    sim.advance(30)  # attempt 1 fails on its last rank, is requeued and placed again
    sim.advance(1.5)
    sim.advance(30)  # attempt 2 fails: out of restarts
    job = api.get(f"{JOBS}{job_id}/").json()
    assert job["state"] == "FAILED" and job["exit_code"] == 3 and job["attempt"] == 2
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    assert job["attempts"] == [{"attempt": 1, "ranks": [0, 1]}, {"attempt": 2, "ranks": [0, 1]}]
    for attempt in (1, 2):
        kept = logs(api, job_id, rank=1, attempt=attempt)
        assert kept["source"] == "stored" and kept["attempt"] == attempt and not kept["truncated"]
        assert f"job {job_id} attempt {attempt} rank 1" in kept["logs"]
        assert "step 200 (20 s of 25 s)" in kept["logs"]
        assert kept["logs"].endswith("exited with code 3 after 25 s\n")
    # The latest attempt by default; the failing rank's neighbour exited cleanly.
    assert logs(api, job_id)["attempt"] == 2
    assert logs(api, job_id, rank=0)["logs"].endswith("exited with code 0 after 25 s\n")
    assert logs(api, job_id, rank=1, attempt=1, tail=1)["logs"] == "[simulated cluster] exited with code 3 after 25 s\n"
    bad = api.get(f"{JOBS}{job_id}/logs/", {"attempt": 3})
    assert bad.status_code == 400 and bad.json() == {"attempt": ["The job has had 2 attempts."]}


def test_a_cancelled_running_jobs_output_is_kept(api: APIClient, submit: Any, sim: Any, django_capture_on_commit_callbacks: Any) -> None:
    job_id = submit(nodes=1, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(60)
    with django_capture_on_commit_callbacks(execute=True):  # the teardown follows the cancel's commit
        assert api.post(f"{JOBS}{job_id}/cancel/").status_code == 200
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    kept = logs(api, job_id)
    assert kept["source"] == "stored" and f"job {job_id} attempt 1 rank 0" in kept["logs"]


@pytest.mark.usefixtures("classes_open")
def test_a_preempted_jobs_output_is_kept_when_it_is_requeued(api: APIClient, other_api: APIClient, sim: Any, settings: Any) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    sweep = api.post(JOBS, _job(nodes=16, priority_class="preemptible", duration=600), format="json").json()["id"]
    sim.cycle()
    sim.advance(31.5)
    other_api.post(JOBS, _job(nodes=4, priority_class="production", duration=100), format="json")
    assert sim.cycle().preempted == [sweep]
    assert Job.objects.get(pk=sweep).state == JobState.PENDING
    kept = logs(api, sweep, rank=15)
    assert kept["source"] == "stored" and kept["attempt"] == 1 and "step 300 (30 s of 600 s)" in kept["logs"]


def test_only_the_end_of_a_long_output_is_kept(api: APIClient, submit: Any, sim: Any, settings: Any) -> None:
    settings.MUSTER_LOG_CAPTURE_BYTES = 100
    job_id = submit(nodes=1, simulate={"duration_seconds": 100})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(100)
    row = JobLog.objects.get(job_id=job_id, attempt=1, rank=0)
    assert row.truncated and row.size == 100
    kept = logs(api, job_id)
    assert kept["truncated"] and len(kept["logs"].encode()) == 100
    assert kept["logs"].endswith("exited with code 0 after 100 s\n")
    html = session_for(Job.objects.get(pk=job_id).owner).get(f"/jobs/{job_id}/").content.decode()
    assert "Only the end of this output was kept." in html and "kept when the attempt ended" in html


class FlakyLogs(SimulatedCluster):
    """The simulated cluster whose log reads fail while `failing` is set, as an API server that drops them would."""

    failing: bool = True

    def read_log_tail(self, job_id: int, attempt: int, rank: int, max_bytes: int) -> CapturedLog | None:
        if self.failing:
            raise ClusterUnavailable("log read timed out")
        return super().read_log_tail(job_id, attempt, rank, max_bytes)


def _flaky(sim: Any) -> FlakyLogs:
    flaky = FlakyLogs(nodes=16, gpus_per_node=8, racks=2, start_seconds=1.0, clock=sim.clock)
    sim.cluster = flaky
    return flaky


def test_a_failed_capture_leaves_the_pods_for_the_next_cycle_which_keeps_the_output(api: APIClient, submit: Any, sim: Any) -> None:
    flaky = _flaky(sim)
    job_id = submit(nodes=1, simulate={"duration_seconds": 20})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(20)
    assert Job.objects.get(pk=job_id).state == JobState.SUCCEEDED
    assert SimulatedPod.objects.filter(job_id=job_id).exists(), "not torn down before its output is kept"
    # Until then, the output is read from the pods that are still there.
    assert logs(api, job_id)["source"] == "live"
    flaky.failing = False
    report = sim.cycle()
    assert report.orphans_removed == [(job_id, 1)]
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    kept = JobLog.objects.get(job_id=job_id)
    assert kept.tries == 1 and kept.name and kept.error == ""
    assert logs(api, job_id)["source"] == "stored"


def test_a_capture_that_keeps_failing_never_holds_the_teardown_for_good(api: APIClient, submit: Any, sim: Any, settings: Any) -> None:
    settings.MUSTER_LOG_CAPTURE_TRIES = 3
    _flaky(sim)
    job_id = submit(nodes=1, simulate={"duration_seconds": 20})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(20)  # try 1, as the job ends
    sim.cycle()  # try 2
    assert SimulatedPod.objects.filter(job_id=job_id).exists()
    report = sim.cycle()  # try 3: given up, the gang goes
    assert report.orphans_removed == [(job_id, 1)]
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    assert JobLog.objects.get(job_id=job_id).tries == 3
    body = logs(api, job_id)
    assert body["source"] == "none" and body["logs"] == ""


def test_follow_streams_a_running_attempt_until_it_ends(api: APIClient, submit: Any, sim: Any, settings: Any) -> None:
    # The web process's simulated cluster runs on the wall clock: a pod created now that runs 2 s.
    job_id = submit(nodes=1, simulate={"duration_seconds": 2})["id"]
    sim.clock.now = datetime.now(sim.clock.now.tzinfo)
    sim.cycle()
    response = api.get(f"{JOBS}{job_id}/logs/", {"follow": "true"})
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")
    chunks = [chunk.decode() for chunk in response.streaming_content]
    assert len(chunks) >= 2, "the start, then the end as it was written"
    assert chunks[0].startswith(f"[simulated cluster] no container runs: job {job_id} attempt 1 rank 0")
    assert "".join(chunks).endswith("exited with code 0 after 2 s\n")


def test_a_follow_whose_pods_go_between_two_reads_still_sends_how_the_job_ended(api: APIClient, submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    sim.clock.now = datetime.now(sim.clock.now.tzinfo)
    sim.cycle()
    stream = iter(api.get(f"{JOBS}{job_id}/logs/", {"follow": "true"}).streaming_content)
    first = next(stream).decode()
    assert first.startswith(f"[simulated cluster] no container runs: job {job_id} attempt 1 rank 0")
    sim.advance(700)  # the job ends and its pod goes (output kept first) before the follow reads again
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    rest = b"".join(stream).decode()
    assert rest.endswith("exited with code 0 after 600 s\n") and "step 5900 (590 s of 600 s)" in rest
    assert first + rest == logs(api, job_id, tail=100_000)["logs"], "every line once"


def test_follow_of_an_ended_attempt_sends_its_kept_output_once(api: APIClient, submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, simulate={"duration_seconds": 20})["id"]
    assert api.get(f"{JOBS}{job_id}/logs/", {"follow": "true"}).status_code == 409
    sim.cycle()
    sim.advance(1.5)
    sim.advance(20)
    response = api.get(f"{JOBS}{job_id}/logs/", {"follow": "true"})
    text = b"".join(response.streaming_content).decode()
    assert text == logs(api, job_id, tail=100_000)["logs"] and text.endswith("exited with code 0 after 20 s\n")


def test_the_job_page_offers_every_attempts_output(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=2, max_restarts=1, simulate={"duration_seconds": 20, "exit_code": 1})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(20)
    sim.advance(1.5)
    page = session_for(Job.objects.get(pk=job_id).owner)
    html = page.get(f"/jobs/{job_id}/?attempt=1&rank=1").content.decode()
    assert 'data-testid="log-attempts"' in html and f"job {job_id} attempt 1 rank 1" in html
    assert "exited with code 1" in html


def _job(*, nodes: int, priority_class: str, duration: int) -> dict[str, Any]:
    return job_payload(nodes=nodes, priority_class=priority_class, simulate={"duration_seconds": duration})
