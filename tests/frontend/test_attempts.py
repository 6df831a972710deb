"""The job page's Attempts table: each attempt with where and how long it ran, how it ended and its output.

The outcomes come from the job's history as the scheduler and jobs.lifecycle write it, so each is driven here
through the simulated cluster and the real lifecycle: a change of their wording fails these tests, not the page.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs import attempts as outcomes
from jobs.attempts import job_attempts
from jobs.lifecycle import job_launch_failed
from jobs.models import Allocation, Job, Node, SimulatedPod
from jobs.selectors import jobs_visible_to
from tests.conftest import client_for, session_for


def attempts_of(job_id: int) -> list[outcomes.Attempt]:
    job = jobs_visible_to(Job.objects.get(pk=job_id).owner).prefetch_related("events").get(pk=job_id)
    return job_attempts(job)


def row(html: str, attempt: int) -> str:
    found = re.search(rf'<tr data-attempt="{attempt}"[^>]*>.*?</tr>', html, re.S)
    assert found, f"no row for attempt {attempt}"
    return found.group(0)


@pytest.mark.usefixtures("classes_open")
def test_a_job_preempted_then_succeeded_has_two_attempts_each_with_its_output(
    submit: Any, sim: Any, other_user: Any, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    sweep = submit(name="sweep", nodes=16, priority_class="preemptible", simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.clock.advance(58.5)
    body = {"name": "eval", "image": "busybox:1", "command": ["true"], "nodes": 4, "gpus_per_node": 8, "wall_time_seconds": 3600}
    prod = client_for(other_user).post(
        "/api/v1/jobs/", {**body, "priority_class": "production", "simulate": {"duration_seconds": 100}}, format="json"
    )
    assert prod.status_code == 201, prod.content
    sim.advance(250)
    assert attempts_of(sweep)[0].outcome == outcomes.PREEMPTED
    # Back in the queue, its page says how often it was preempted and how often it may still be.
    owner = Job.objects.get(pk=sweep).owner
    bound = "(Muster preempts a job at most 3 times, then lets it run to its end)"
    assert f'<span data-testid="preempted">; preempted 1 time {bound}</span>' in session_for(owner).get(f"/jobs/{sweep}/").content.decode()
    settings.MUSTER_FAIR_SHARE_PREEMPTION, settings.MUSTER_MAX_FAIR_SHARE_PREEMPTIONS = True, 5
    both = "(Muster preempts a job at most 3 times, 5 for fair share, then lets it run to its end)"
    assert f"; preempted 1 time {both}</span>" in session_for(owner).get(f"/jobs/{sweep}/").content.decode()
    settings.MUSTER_FAIR_SHARE_PREEMPTION = False
    # It holds nothing while it waits: its old nodes, which the production job holds now, were shown as its own.
    page = session_for(owner).get(f"/jobs/{sweep}/").content.decode()
    assert "none now: back in the queue" in page and "Its last attempt started" in page
    assert client_for(owner).get(f"/api/v1/jobs/{sweep}/").json()["assigned_nodes"] == []
    sim.advance(1.5)
    sim.advance(100)  # the production job ends; the sweep starts again
    sim.advance(1.5)
    sim.advance(600)
    job = Job.objects.get(pk=sweep)
    assert job.state == "SUCCEEDED" and job.attempt == 2

    first, second = attempts_of(sweep)
    assert (first.number, first.outcome, first.ran, len(first.nodes)) == (1, outcomes.PREEMPTED, True, 16)
    assert (
        first.reason
        == f"Preempted for job {prod.json()['id']}: it is of a lower priority class. The work since its start is lost (11.0 GPU-hours)."
    )
    assert first.run_seconds is not None and 300 < first.run_seconds < 320
    assert (second.outcome, second.exit_code, second.ended_at) == (outcomes.SUCCEEDED, 0, job.finished_at)

    html = session_for(job.owner).get(f"/jobs/{sweep}/").content.decode()
    assert 'data-testid="attempts"' in html
    preempted = row(html, 1)
    assert "preempted</span>" in preempted and f"Preempted for job {prod.json()['id']}" in preempted
    assert 'href="?attempt=1&amp;run=1#job-logs">logs</a>' in preempted and 'href="?attempt=1&amp;run=1#telemetry">telemetry' in preempted
    assert "succeeded</span>" in row(html, 2) and 'aria-current="true"' in row(html, 2)  # the attempt shown below
    # Ended, it says how often it was preempted, without the bound that no longer matters.
    assert '<span data-testid="preempted">; preempted 1 time</span>' in html
    # Following an attempt's link shows its logs and marks its row.
    earlier = session_for(job.owner).get(f"/jobs/{sweep}/", {"attempt": "1", "run": "1"}).content.decode()
    assert 'aria-current="true"' in row(earlier, 1) and "attempt 1, last 200 lines" in earlier


def test_a_failed_attempt_restarted_then_failed_again_says_so_with_the_exit_code(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 5, "exit_code": 3})["id"]
    for _ in range(3):
        sim.cycle()
        sim.advance(1.5)
        sim.advance(5)
    job = Job.objects.get(pk=job_id)
    assert job.state == "FAILED" and job.attempt == 2
    first, second = attempts_of(job_id)
    assert first.outcome == second.outcome == outcomes.FAILED
    assert first.reason.startswith("Attempt 1 failed:") and "Restarting (1 of 1)." in first.reason
    assert second.exit_code == 3 and first.tone == second.tone == "bad"
    html = session_for(job.owner).get(f"/jobs/{job_id}/").content.decode()
    assert "failed</span>, exit code 3" in row(html, 2)


def test_a_node_leaving_a_launch_failing_and_a_cancel_each_end_an_attempt(submit: Any, sim: Any, user: Any) -> None:
    job_id = submit(nodes=1, max_restarts=0, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(1.5)
    # The node under it leaves the cluster (tests/scheduler/test_cycle.py does the same): requeued, then placed again.
    sim.cluster.nodes = 15
    Allocation.objects.filter(job_id=job_id).update(node=Node.objects.get(name="sim-node-015"))
    SimulatedPod.objects.filter(job_id=job_id).update(node_name="sim-node-015")
    sim.cycle()
    # Its second launch does not come up (as when the cluster refuses it): back to the queue with a pause.
    job_launch_failed(Job.objects.get(pk=job_id), now=sim.clock(), why="The image could not be pulled.")
    sim.advance(120)
    sim.advance(1.5)
    assert Job.objects.get(pk=job_id).state == "RUNNING"
    assert client_for(user).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200

    lost, launch, cancelled = attempts_of(job_id)
    assert (lost.outcome, lost.ran, lost.nodes) == (outcomes.NODE_LOST, True, ["sim-node-015"])
    assert (launch.outcome, launch.ran, launch.tone) == (outcomes.LAUNCH_FAILED, False, "bad")
    assert cancelled.outcome == outcomes.CANCELLED and cancelled.reason == "Cancelled by alice."
    html = session_for(user).get(f"/jobs/{job_id}/").content.decode()
    assert "node lost</span>" in row(html, 1) and "left the cluster" in row(html, 1)
    # A launch that never ran has logs (perhaps none) but no telemetry to link to.
    assert "#job-logs" in row(html, 2) and "#telemetry" not in row(html, 2)


def test_the_attempt_a_job_is_in_is_running_and_its_run_time_counts(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=2, wall_time_seconds=60, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    assert [a.outcome for a in attempts_of(job_id)] == [outcomes.STARTING]
    sim.advance(1.5)
    (running,) = attempts_of(job_id)
    assert (running.outcome, running.ended_at, running.reason, running.tone) == (outcomes.RUNNING, None, "", "live")
    sim.advance(60)
    (timed_out,) = attempts_of(job_id)
    assert timed_out.outcome == outcomes.TIMED_OUT and timed_out.reason.startswith("Stopped: wall time of 1 min reached")


def test_the_attempts_cost_no_query_of_their_own(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, max_restarts=3, simulate={"duration_seconds": 5, "exit_code": 1})["id"]
    page = session_for(Job.objects.get(pk=job_id).owner)
    sim.cycle()
    sim.advance(1.5)

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert page.get(f"/jobs/{job_id}/live/").status_code == 200
        return len(ctx.captured_queries)

    one = queries()
    for _ in range(2):
        sim.advance(5)
        sim.cycle()
        sim.advance(1.5)
    assert len(attempts_of(job_id)) == 3 and queries() <= one
