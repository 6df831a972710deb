"""The cluster refusing launches for causes of its own (the jobs' namespace gone or being deleted, Muster's role cut), a
launch cut short against a pod lost before its gang ran, and how an unavailable cluster is logged: on the simulated
cluster, on a controlled clock. tests/e2e/test_kubernetes.py plays the same on the real API server."""

from __future__ import annotations

import dataclasses
import logging
from datetime import timedelta
from typing import Any

import pytest

from jobs.cluster import ClusterDeletingGangs, ClusterRefuses, ClusterUnavailable, PodPhase
from jobs.cluster.base import UNSCHEDULABLE, LaunchRefused
from jobs.models import Allocation, ClusterHealth, Job, JobEvent, SimulatedPod
from jobs.selectors import job_assigned_nodes
from jobs.states import JobState
from quotas.models import UsageCharge
from scheduler.cycle import run_cycle

TERMINATING = "The namespace 'muster-jobs' for jobs is being deleted (Terminating until its objects and finalizers are gone)."
GOING = "the namespace 'muster-jobs' for jobs is being deleted"


class RefusingNamespace:
    """The simulated cluster, as the Kubernetes backend is while the jobs' namespace is being deleted: its per-cycle
    check refuses (`check_refuses`), or, in the moment between that check and a launch, only the launch does."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.simulated = inner, True
        self.check_refuses = self.launch_refuses = False
        self.launches = 0

    def prepare(self) -> None:
        if self.check_refuses:
            raise ClusterDeletingGangs(TERMINATING, cause=GOING)

    def launch_gang(self, spec: Any) -> None:
        self.launches += 1
        if self.launch_refuses:
            raise ClusterRefuses(TERMINATING)
        self.inner.launch_gang(spec)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pending_reason(job_id: int) -> str:
    return JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason


def test_launches_the_cluster_refuses_for_its_own_cause_spend_nothing_and_start_in_the_first_cycle_it_takes_them(
    submit: Any, sim: Any
) -> None:
    """A namespace held Terminating for 3.5 minutes: each refused launch counted ("Failed launch 5 in a row; tried
    again in 240 s"), attempts reached 10, and whole nodes stayed idle up to the 600 s backoff after it was back."""
    jobs = [submit(nodes=2)["id"], submit(nodes=1, gpus_per_node=8)["id"]]
    cluster = RefusingNamespace(sim.cluster)
    cluster.launch_refuses = True  # the namespace began terminating after this cycle's check
    report = run_cycle(backend=cluster, now=sim.clock())
    assert sorted(report.placed) == sorted(jobs) and report.launched == [] and report.launch_failed == []
    assert cluster.launches == 1, "the second launch would be refused alike: not tried"
    assert report.cluster_error == TERMINATING
    for job_id in jobs:
        job = Job.objects.get(pk=job_id)
        assert (job.state, job.launch_failures, job.launch_not_before, job.restarts) == (JobState.PENDING, 0, None, 0)
        assert pending_reason(job_id) == (
            f"Not launched: {TERMINATING} It waits, spending no launch, and is placed again once the cluster takes jobs."
        )
    assert not Allocation.objects.filter(released_at__isnull=True).exists()
    health = ClusterHealth.objects.get(pk=1)
    assert (health.reachable, health.error) == (False, TERMINATING)  # every page says why

    # While the check refuses, nothing is placed: no attempt taken, nothing counted.
    cluster.check_refuses = True
    for _ in range(3):
        sim.clock.advance(2)
        assert run_cycle(backend=cluster, now=sim.clock()).placed == []
    assert sorted(Job.objects.filter(pk__in=jobs).values_list("attempt", flat=True)) == [1, 1]

    # Back: the first cycle places and launches both, no backoff left to wait out.
    cluster.check_refuses = cluster.launch_refuses = False
    sim.clock.advance(2)
    report = run_cycle(backend=cluster, now=sim.clock())
    assert sorted(report.launched) == sorted(jobs) and not report.cluster_error
    assert list(Job.objects.filter(pk__in=jobs).values_list("launch_failures", flat=True)) == [0, 0]
    assert ClusterHealth.objects.get(pk=1).reachable


def test_a_running_gang_the_cluster_deletes_while_it_refuses_jobs_is_requeued_at_once_and_charged_no_further(submit: Any, sim: Any) -> None:
    """The jobs' namespace being deleted: its pods went within seconds, but the cycle stopped at the refusal, so the job
    read RUNNING, charged, until the namespace was back minutes later. A gang still running stays so meanwhile."""
    going, staying = submit(nodes=2)["id"], submit(nodes=1, gpus_per_node=8)["id"]
    sim.cycle()
    sim.advance(1.5)
    assert set(Job.objects.filter(pk__in=[going, staying]).values_list("state", flat=True)) == {JobState.RUNNING}
    cluster = RefusingNamespace(sim.cluster)
    cluster.check_refuses = True
    queued = submit(nodes=1, gpus_per_node=8)["id"]
    sim.clock.advance(5)
    SimulatedPod.objects.filter(job_id=going).delete()  # the namespace controller deleted its pods
    now = sim.clock()
    report = run_cycle(backend=cluster, now=now)
    assert report.cluster_error == TERMINATING and report.requeued == [going] and report.placed == []
    job = Job.objects.get(pk=going)
    assert (job.state, job.restarts, job.launch_failures, job.charged_until) == (JobState.PENDING, 0, 0, now)
    assert pending_reason(going) == (
        f"The cluster deleted 2 of 2 pods (ranks 0, 1) under attempt 1: {GOING}; requeued without spending a restart, "
        "and placed again once the cluster takes jobs."
    )
    assert Job.objects.get(pk=staying).state == JobState.RUNNING and Job.objects.get(pk=queued).attempt == 0
    charged = UsageCharge.objects.get(job_id=going).node_seconds
    for _ in range(3):
        sim.clock.advance(60)
        assert run_cycle(backend=cluster, now=sim.clock()).placed == []
    assert UsageCharge.objects.get(job_id=going).node_seconds == charged
    assert Job.objects.get(pk=going).attempt == 1


class DownCluster:
    def __init__(self, inner: Any) -> None:
        self.inner, self.simulated, self.down = inner, True, True

    def prepare(self) -> None:
        if self.down:
            raise ClusterUnavailable("Kubernetes API server unreachable (list nodes): connection refused")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_an_unavailable_cluster_is_logged_when_it_starts_once_a_minute_and_when_it_is_back(
    submit: Any, sim: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """One WARNING every 2-s cycle was ~1,800 lines an hour."""
    caplog.set_level(logging.INFO, logger="scheduler.cycle")
    cluster = DownCluster(sim.cluster)
    for _ in range(75):  # 150 s of cycles
        assert run_cycle(backend=cluster, now=sim.clock()).cluster_error
        sim.clock.advance(2)
    said = [r.getMessage() for r in caplog.records if r.name == "scheduler.cycle"]
    assert said == [
        "cluster unavailable, jobs wait (said again at most once a minute while it lasts): "
        "Kubernetes API server unreachable (list nodes): connection refused",
        "cluster still unavailable after 1 min, jobs wait: Kubernetes API server unreachable (list nodes): connection refused",
        "cluster still unavailable after 2 min, jobs wait: Kubernetes API server unreachable (list nodes): connection refused",
    ]
    caplog.clear()
    cluster.down = False
    run_cycle(backend=cluster, now=sim.clock())
    run_cycle(backend=cluster, now=sim.clock() + timedelta(seconds=2))
    assert [r.getMessage() for r in caplog.records if r.name == "scheduler.cycle"] == [
        "cluster available again after 2 min 30 s: jobs are placed and launched"
    ]


class CompletingRefused:
    """The simulated cluster refusing the launch that completes a gang cut short."""

    def __init__(self, inner: Any, refusal: Exception) -> None:
        self.inner, self.refusal, self.simulated = inner, refusal, True

    def launch_gang(self, spec: Any) -> None:
        raise self.refusal

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def cut_short(sim: Any, job_id: int) -> None:
    """As a worker killed half-way through the launch leaves it: rank 1 never made, and the cycle that placed it never
    got to record itself."""
    SimulatedPod.objects.filter(job_id=job_id, rank=1).delete()
    ClusterHealth.objects.filter(pk=1).update(last_cycle_at=sim.clock() - timedelta(seconds=5))


def test_completing_a_launch_the_cluster_refuses_is_one_warning_line_not_a_traceback(
    submit: Any, sim: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """It logged `ERROR ... completing the launch of job 10 attempt 5 failed` and two chained tracebacks, where the same
    refusal on the launch's own path is one WARNING line."""
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    cut_short(sim, job_id)
    refusal = LaunchRefused('pods "muster-1-1-1" is forbidden: exceeded quota: gpu-cap', transient=True)
    caplog.set_level(logging.INFO, logger="scheduler.cycle")
    report = run_cycle(backend=CompletingRefused(sim.cluster, refusal), now=sim.clock())
    assert report.launch_failed == [job_id]
    records = [r for r in caplog.records if r.name == "scheduler.cycle"]
    assert [(r.levelname, r.getMessage(), r.exc_info) for r in records] == [
        (
            "WARNING",
            f'completing the launch of job {job_id} attempt 1 failed: pods "muster-1-1-1" is forbidden: exceeded quota: gpu-cap',
            None,
        )
    ]


def test_completing_a_launch_into_a_namespace_being_deleted_waits_spending_nothing_and_places_nothing(
    submit: Any, sim: Any, caplog: pytest.LogCaptureFixture
) -> None:
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    cut_short(sim, job_id)
    waiting = submit(nodes=1, gpus_per_node=8)["id"]
    report = run_cycle(backend=CompletingRefused(sim.cluster, ClusterRefuses(TERMINATING)), now=sim.clock())
    assert report.cluster_error == TERMINATING and report.placed == [] and report.launch_failed == []
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.launch_failures, job.launch_not_before) == (JobState.PENDING, 0, None)
    assert pending_reason(job_id).startswith(f"Not launched: {TERMINATING}")
    assert Job.objects.get(pk=waiting).attempt == 0
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_pod_deleted_while_its_gang_starts_requeues_the_gang_whole_without_spending_anything(submit: Any, sim: Any) -> None:
    """It was made again under the same attempt, unsaid (the history read Placed, then Running), where the same pod
    deleted from a running gang requeued it: a gang is all or nothing, as Kueue and Volcano hold one."""
    job_id = submit(nodes=2, max_restarts=0)["id"]
    sim.cycle()  # placed and launched: its pods take a second to start
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED
    SimulatedPod.objects.filter(job_id=job_id, rank=1).delete()
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert (job.restarts, job.launch_failures, job.attempt, job.state) == (0, 0, 2, JobState.SCHEDULED)
    assert pending_reason(job_id) == (
        "1 of 2 pods (rank 1) was deleted outside Muster (an eviction or by hand) under attempt 1, before it was running; requeued."
    )
    assert not SimulatedPod.objects.filter(job_id=job_id, attempt=1).exists()  # rank 0 went with it


def test_a_launch_cut_short_is_completed_under_the_same_attempt(submit: Any, sim: Any) -> None:
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    cut_short(sim, job_id)
    sim.cycle()
    assert sorted(SimulatedPod.objects.filter(job_id=job_id).values_list("attempt", "rank")) == [(1, 0), (1, 1)]
    sim.advance(1.5)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt) == (JobState.RUNNING, 1)
    assert not JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING, attempt=1).exists()


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
