"""What `make run`'s simulated cluster shows a user: its log quotes the command as it was given, the job's RUNNING lasts
as long as the log says it ran, an attempt after a checkpoint resumes from it, and a job stopped at its wall time
reads that wall time, whenever the cycle came."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from muster_client.render import elapsed, why_lines

from jobs.models import Job
from tests.conftest import client_for

pytestmark = pytest.mark.django_db

JOBS = "/api/v1/jobs/"


def _events(job_id: int) -> dict[str, Any]:
    return {e.to_state: e.at for e in Job.objects.get(pk=job_id).events.all()}


def test_the_log_quotes_the_command_as_a_shell_would_need_it(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, command=["torchrun", "train.py", "--config", "my run.yaml"])["id"]
    sim.cycle()
    sim.advance(2)
    lines = sim.cluster.read_logs(job_id, 1, 0).splitlines()
    assert lines[1] == "$ torchrun train.py --config 'my run.yaml'"  # it read `--config my run.yaml`: two arguments


def test_running_lasts_as_long_as_the_log_says_it_ran_however_late_the_cycles_look(api: Any, submit: Any, sim: Any) -> None:
    """A busy machine's cycles look late: the first 9 s after placement, the next 3 s later. The job read 9 s SCHEDULED
    and 3 s RUNNING while its log said it ran 10 s."""
    job_id = submit(nodes=1, simulate={"duration_seconds": 10, "exit_code": 3})["id"]
    sim.cycle()
    placed = Job.objects.get(pk=job_id).scheduled_at
    assert placed is not None
    sim.advance(9)
    job = Job.objects.get(pk=job_id)
    assert job.state == "RUNNING" and job.started_at == placed + timedelta(seconds=1)  # its pod took 1 s to start
    sim.advance(3)
    job = Job.objects.get(pk=job_id)
    assert job.state == "FAILED" and job.started_at is not None and job.finished_at is not None
    events = _events(job_id)
    assert (events["RUNNING"], events["FAILED"]) == (job.started_at, job.finished_at)
    assert (job.finished_at - job.started_at).total_seconds() == 10
    log = api.get(f"{JOBS}{job_id}/logs/").json()["logs"]
    assert log.endswith("[simulated cluster] exited with code 3 after 10 s\n")
    # The elapsed time counts from the placement, start-up included, as the wall time does.
    assert api.get(f"{JOBS}{job_id}/").json()["run_seconds"] == 11


@pytest.mark.usefixtures("classes_open")
def test_an_attempt_after_a_checkpoint_resumes_from_it(api: Any, submit: Any, sim: Any, other_user: Any, settings: Any) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 60
    settings.MUSTER_PREEMPTION_DEFER_SECONDS = 0
    whole_cluster = {"duration_seconds": 300, "checkpoint_every_seconds": 60}
    job_id = submit(name="sweep", nodes=16, priority_class="preemptible", simulate=whole_cluster)["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(70)  # 71 s in: its checkpoint at 60 s, step 600, reported
    assert (Job.objects.get(pk=job_id).checkpoint_step, Job.objects.get(pk=job_id).checkpoint_attempt) == (600, 1)
    submit(client_for(other_user), name="eval", nodes=1, priority_class="production", simulate={"duration_seconds": 5})
    assert job_id in sim.advance(1).preempted
    for _ in range(30):  # the eval runs and ends; the sweep is placed again
        sim.advance(2)
        if Job.objects.get(pk=job_id).state == "RUNNING":
            break
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt) == ("RUNNING", 2)
    sim.advance(100)  # 100 s or so into attempt 2: 160 s of the run, its checkpoint at 120 s reported
    assert (Job.objects.get(pk=job_id).checkpoint_step, Job.objects.get(pk=job_id).checkpoint_attempt) == (1200, 2)
    log = sim.cluster.read_logs(job_id, 2, 0).splitlines()
    assert log[2] == "resumed from the checkpoint at step 600 (60 s of 300 s)"
    assert log[3] == "step 700 (70 s of 300 s)"  # not step 100: it counted from 0
    assert "checkpoint saved at step 600; reported to Muster" not in log
    assert "checkpoint saved at step 1200; reported to Muster" in log
    sim.advance(150)  # its 240 s left are over
    job = Job.objects.get(pk=job_id)
    assert job.state == "SUCCEEDED" and job.started_at is not None and job.finished_at is not None
    assert (job.finished_at - job.started_at).total_seconds() == 240
    log = api.get(f"{JOBS}{job_id}/logs/", {"attempt": 2}).json()["logs"].splitlines()
    assert log[-3:] == [
        "step 3000 (300 s of 300 s)",
        "checkpoint saved at step 3000; reported to Muster",
        "[simulated cluster] exited with code 0 after 240 s",
    ]


def test_an_attempt_after_none_was_reported_starts_from_zero(api: Any, submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 20, "exit_code": 1})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(20)  # attempt 1 failed; attempt 2 placed
    sim.advance(2)
    assert Job.objects.get(pk=job_id).attempt == 2
    sim.advance(20)
    log = api.get(f"{JOBS}{job_id}/logs/", {"attempt": 2}).json()["logs"].splitlines()
    assert log[2] == "step 100 (10 s of 20 s)" and log[-1] == "[simulated cluster] exited with code 1 after 20 s"


def test_a_job_stopped_at_its_wall_time_reads_that_wall_time_though_the_cycle_came_later(api: Any, submit: Any, sim: Any) -> None:
    job_id = submit(nodes=1, wall_time_seconds=60, simulate={"duration_seconds": 300})["id"]
    sim.cycle()
    placed = Job.objects.get(pk=job_id).scheduled_at
    assert placed is not None
    sim.advance(2)
    running = api.get(f"{JOBS}{job_id}/").json()
    # `muster why` says since when as `muster queue`'s START does (the placement), and when its pods came up.
    start, up = (placed.astimezone().strftime("%H:%M:%S"), (placed + timedelta(seconds=1)).astimezone().strftime("%H:%M:%S"))
    node = running["assigned_nodes"][0]
    assert why_lines(running) == [
        f"Job {job_id} (train-llm) is RUNNING on {node} since {start} (placed; its pods running since {up}): not waiting."
    ]
    sim.advance(59.5)  # 61.5 s after its placement: the cycle comes a moment after its limit
    job = Job.objects.get(pk=job_id)
    assert job.state == "TIMED_OUT" and job.finished_at == placed + timedelta(seconds=60)
    shown = api.get(f"{JOBS}{job_id}/").json()
    assert shown["run_seconds"] == 60
    assert elapsed(shown) == "1m"  # muster jobs' ELAPSED read 1m1s
