"""What tests of a job's own token need: a running job, and a client holding what its pods have in their environment."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from jobs.models import Job
from telemetry.tokens import telemetry_pod_env


def running_job(submit: Any, sim: Any, *, seconds: float) -> Job:
    """A 2 x 8-GPU job running (for `seconds`) on the simulated cluster."""
    job_id = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": seconds})["id"]
    sim.cycle()
    sim.advance(2)
    job = Job.objects.get(pk=job_id)
    assert job.state == "RUNNING"
    return job


def pod(job: Job) -> APIClient:
    """A client holding what a pod of the job has in its environment."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {telemetry_pod_env(job.pk)['MUSTER_TELEMETRY_TOKEN']}")
    return client
