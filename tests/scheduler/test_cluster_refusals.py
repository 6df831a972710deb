"""A starting gang the cluster will not take: what its reason says, on the simulated cluster, on a controlled clock."""

from __future__ import annotations

import dataclasses
from typing import Any

from jobs.cluster import PodPhase
from jobs.cluster.base import UNSCHEDULABLE
from jobs.models import Job, JobEvent
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState
from scheduler.cycle import run_cycle


def pending_reason(job_id: int) -> str:
    return JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason


class NodeGoneWhileBinding:
    """The simulated cluster after one node of a starting gang was deleted: its pods wait unbound, each with
    kube-scheduler's words, and the node is no longer listed."""

    def __init__(self, inner: Any, job_id: int, gone: str, said: dict[int, str]) -> None:
        self.inner, self.job_id, self.gone, self.said, self.simulated = inner, job_id, gone, said, True

    def list_nodes(self) -> list[Any]:
        return [n for n in self.inner.list_nodes() if n.name != self.gone]

    def observe_gangs(self) -> dict[tuple[int, int], list[Any]]:
        gangs = self.inner.observe_gangs()
        for (job_id, _), pods in gangs.items():
            if job_id == self.job_id:
                pods[:] = [
                    dataclasses.replace(p, phase=PodPhase.PENDING, node_name="", reason=UNSCHEDULABLE, message=self.said[p.rank])
                    for p in pods
                ]
        return gangs

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_starting_gang_whose_node_left_quotes_the_rank_planned_on_that_node(submit: Any, sim: Any) -> None:
    """Its reason quoted rank 0, which only waited for the gang ("pod group is unschedulable, waiting for minCount
    pods"), not the rank on the deleted node."""
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    gone = job_assigned_nodes(Job.objects.get(pk=job_id))[1]
    said = {
        0: "pod group is unschedulable, waiting for minCount pods",
        1: "0/17 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
    }
    run_cycle(backend=NodeGoneWhileBinding(sim.cluster, job_id, gone, said), now=sim.clock())
    assert pending_reason(job_id) == (
        f"{gone} left the cluster, so attempt 1's pods cannot all be bound (rank 1: 0/17 nodes are available: 1 node(s) "
        "didn't match Pod's node affinity/selector); requeued to be placed again."
    )
