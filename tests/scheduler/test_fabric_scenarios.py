"""RDMA devices counted end to end on the simulated cluster: only the first rack's nodes have them."""

from __future__ import annotations

from typing import Any

from jobs.models import Job, Node
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState

RDMA_NODES = {f"sim-node-{i:03d}" for i in range(8)}


def test_nodes_report_their_rdma_devices(sim: Any, api: Any) -> None:
    nodes = {n["name"]: n for n in api.get("/api/v1/nodes/?limit=100").json()["results"]}
    assert {name for name, n in nodes.items() if n["rdma_devices"] == 8} == RDMA_NODES
    assert Node.objects.filter(rdma_devices=0).count() == 8


def test_a_gang_asking_for_rdma_runs_only_on_nodes_that_have_them_and_waits_for_them(submit: Any, sim: Any) -> None:
    # Fills the first rack, the one with RDMA devices (a job that asks none goes to the other while it fits there).
    filler = submit(nodes=8, rdma_per_node=1, simulate={"duration_seconds": 20})["id"]
    sim.advance(1)
    assert set(job_assigned_nodes(Job.objects.get(pk=filler))) == RDMA_NODES

    fabric = submit(nodes=2, rdma_per_node=8, simulate={"duration_seconds": 5})["id"]
    sim.advance(1)
    job = Job.objects.get(pk=fabric)
    # Eight idle nodes without RDMA devices do not count for it.
    assert job.state == JobState.PENDING
    assert "Needs 2 whole nodes with 8 GPUs and 8 RDMA devices; 0 are free" in job.pending_reason

    sim.advance(25)
    job.refresh_from_db()
    assert job.state in (JobState.SCHEDULED, JobState.RUNNING, JobState.SUCCEEDED)
    assert set(job_assigned_nodes(job)) <= RDMA_NODES
    assert job.rdma_per_node == 8
