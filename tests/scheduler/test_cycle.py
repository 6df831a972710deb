"""The scheduling cycle on the simulated cluster, driven step by step on a controlled clock."""

from __future__ import annotations

import dataclasses
import random
import time
from collections import defaultdict
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import Sum
from django.utils import timezone

from jobs.cluster import ClusterUnavailable, PodPhase
from jobs.cluster.base import refused_by_node
from jobs.models import Allocation, ClusterHealth, Job, JobEvent, Node, SimulatedPod
from jobs.states import JobState
from quotas.models import UsageCharge
from scheduler.cycle import run_cycle
from scheduler.snapshot import node_views
from tests.conftest import session_for


def states(job_id: int) -> list[str]:
    return list(JobEvent.objects.filter(job_id=job_id).values_list("to_state", flat=True))


def assert_no_gpu_overcommitted() -> None:
    """Checked from both sides: the scheduler's allocations and the pods on the cluster."""
    totals = dict(Node.objects.values_list("name", "gpus_total"))
    held = Allocation.objects.filter(released_at__isnull=True).values("node__name").annotate(gpus=Sum("gpus"))
    for row in held:
        assert row["gpus"] <= totals[row["node__name"]], row
    pods: dict[str, int] = defaultdict(int)
    for pod in SimulatedPod.objects.all():
        pods[pod.node_name] += pod.gpus
    for name, gpus in pods.items():
        assert gpus <= totals[name], (name, gpus)
    # A node with a multi-node rank on it runs nothing else.
    for name in pods:
        jobs_on_node = {p.job_id for p in SimulatedPod.objects.filter(node_name=name)}
        multi = Job.objects.filter(pk__in=jobs_on_node, nodes__gt=1)
        assert not multi.exists() or len(jobs_on_node) == 1, (name, jobs_on_node)


def test_two_node_job_runs_start_to_finish(submit, sim) -> None:
    job_id = submit(nodes=2, gpus_per_node=8, simulate={"duration_seconds": 5})["id"]
    report = sim.cycle()
    assert report.placed == [job_id] and report.launched == [job_id]
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.SCHEDULED and job.attempt == 1
    assert SimulatedPod.objects.filter(job_id=job_id).count() == 2
    sim.advance(1.5)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    sim.advance(3)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    sim.advance(3)
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.exit_code == 0
    assert states(job_id) == ["PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"]
    assert not Allocation.objects.filter(job_id=job_id, released_at__isnull=True).exists()
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    # The history keeps where it ran.
    assert Allocation.objects.filter(job_id=job_id).count() == 2


def test_a_gangs_pods_ask_for_every_gpu_it_holds_and_a_part_node_jobs_for_its_own(submit, sim) -> None:
    # The gang holds (and is charged for) its 8-GPU nodes whole: its pods ask for all 8, though it uses 1 on each.
    gang = submit(nodes=2, gpus_per_node=1, simulate={"duration_seconds": 60})["id"]
    single = submit(nodes=1, gpus_per_node=1, simulate={"duration_seconds": 60})["id"]
    sim.cycle()
    held = dict(Allocation.objects.filter(job_id=gang).values_list("rank", "gpus"))
    assert held == {0: 8, 1: 8}
    assert sorted(SimulatedPod.objects.filter(job_id=gang).values_list("rank", "gpus")) == [(0, 8), (1, 8)]
    assert list(SimulatedPod.objects.filter(job_id=single).values_list("gpus", flat=True)) == [1]
    assert_no_gpu_overcommitted()


def test_twenty_jobs_needing_three_clusters_never_overcommit_and_all_finish(submit, sim) -> None:
    rnd = random.Random(20)
    sizes = [(4, 8), (2, 8), (1, 8), (1, 4), (1, 2), (3, 8), (8, 8), (1, 1)]
    ids, gpus = [], 0
    while len(ids) < 20:
        nodes, per_node = rnd.choice(sizes)
        ids.append(submit(nodes=nodes, gpus_per_node=per_node, simulate={"duration_seconds": rnd.randint(5, 40)})["id"])
        gpus += nodes * per_node
    # Pad the demand to three times the 128-GPU cluster with whole-cluster-half jobs.
    while gpus < 3 * 128:
        ids.append(submit(nodes=8, gpus_per_node=8, simulate={"duration_seconds": 20})["id"])
        gpus += 64
    for _ in range(600):
        sim.advance(1)
        assert_no_gpu_overcommitted()
        if not Job.objects.exclude(state=JobState.SUCCEEDED).exists():
            break
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.SUCCEEDED}
    for job_id in ids:
        assert states(job_id) == ["PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"]


def test_waiting_job_says_why(submit, sim) -> None:
    big = submit(nodes=12, gpus_per_node=8)["id"]
    waiting = submit(nodes=8, gpus_per_node=8)["id"]
    sim.cycle()
    assert Job.objects.get(pk=big).state == JobState.SCHEDULED
    job = Job.objects.get(pk=waiting)
    assert job.state == JobState.PENDING
    assert job.pending_reason_code == "NO_ROOM"
    assert job.pending_reason == "Needs 8 whole nodes with 8 GPUs; 4 are free."


def test_failed_rank_fails_the_gang_and_restarts_within_the_limit(submit, sim) -> None:
    job_id = submit(nodes=2, max_restarts=1, simulate={"duration_seconds": 2, "exit_code": 3})["id"]
    sim.cycle()
    sim.advance(1.5)
    report = sim.advance(2)  # attempt 1 fails: the gang is torn down, requeued, and placed again at once
    assert report.requeued == [job_id] and report.placed == [job_id]
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.SCHEDULED and job.restarts == 1 and job.attempt == 2
    requeue = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last()
    assert requeue.reason == "Attempt 1 failed: rank 1 exited with code 3. Restarting (1 of 1)."
    assert not SimulatedPod.objects.filter(job_id=job_id, attempt=1).exists()
    assert SimulatedPod.objects.filter(job_id=job_id, attempt=2).count() == 2
    sim.advance(1.5)
    sim.advance(2)
    job.refresh_from_db()
    assert job.state == JobState.FAILED and job.exit_code == 3
    assert job.state_reason == "Attempt 2 failed: rank 1 exited with code 3."
    assert states(job_id) == ["PENDING", "SCHEDULED", "RUNNING", "PENDING", "SCHEDULED", "RUNNING", "FAILED"]
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()


def test_job_past_its_wall_time_is_stopped_and_timed_out(submit, sim) -> None:
    job_id = submit(nodes=1, wall_time_seconds=10, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(1.5)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    # Wall time counts from placement (1.5 s of start-up included), as the scheduler's reservations assume.
    sim.advance(8)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    report = sim.advance(0.5)
    job = Job.objects.get(pk=job_id)
    assert report.ended == {job_id: JobState.TIMED_OUT}
    assert job.state == JobState.TIMED_OUT and "wall time of 10 s" in job.state_reason
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    assert not Allocation.objects.filter(job_id=job_id, released_at__isnull=True).exists()


def test_cancel_of_a_running_job_removes_its_pods(submit, sim, api, django_capture_on_commit_callbacks) -> None:
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    sim.advance(1.5)
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    assert Job.objects.get(pk=job_id).state == JobState.CANCELLED


def test_a_cancel_while_the_cluster_is_unreachable_answers_at_once_and_the_next_cycle_deletes_the_pods(
    submit, sim, api, django_capture_on_commit_callbacks
) -> None:
    """Each teardown call waited out its timeout inside the cancel's request: 81 s, and the CLI gave up first."""
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    sim.advance(1.5)
    ClusterHealth.objects.filter(pk=1).update(reachable=False, error="Kubernetes API server unreachable")
    with django_capture_on_commit_callbacks(execute=True):
        assert api.post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 200
    assert Job.objects.get(pk=job_id).state == JobState.CANCELLED
    assert SimulatedPod.objects.filter(job_id=job_id).count() == 2  # not touched by the request
    sim.cycle()  # the cluster answers again
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()


def test_reconcile_deletes_pods_of_jobs_the_database_does_not_run(submit, sim) -> None:
    job_id = submit(nodes=1)["id"]
    sim.cycle()
    # Pods left behind: a job that ended while its teardown was lost, and one Muster never knew.
    Job.objects.filter(pk=job_id).update(state=JobState.CANCELLED)
    Allocation.objects.filter(job_id=job_id).update(released_at=sim.clock())
    SimulatedPod.objects.create(
        job_id=999999, attempt=1, rank=0, node_name="sim-node-005", gpus=8, duration_seconds=60, created_at=sim.clock()
    )
    report = sim.cycle()
    assert sorted(report.orphans_removed) == [(job_id, 1), (999999, 1)]
    assert not SimulatedPod.objects.exists()


def test_a_pod_deleted_outside_muster_requeues_its_job_without_spending_a_restart(submit, sim) -> None:
    # An eviction seen only after the pod is gone, or an operator's kubectl delete: not the job's failure.
    job_id = submit(nodes=2, max_restarts=0)["id"]
    sim.cycle()
    sim.advance(1.5)
    SimulatedPod.objects.filter(job_id=job_id, rank=1).delete()
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    # Requeued and, the nodes being free again, placed anew in the same cycle.
    assert job.restarts == 0 and job.attempt == 2 and job.state == JobState.SCHEDULED
    assert JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason == (
        "1 of 2 pods (rank 1) was deleted outside Muster (an eviction or by hand) under attempt 1; requeued."
    )


def test_reasons_built_from_a_count_of_pods_say_one_pod_in_the_singular(submit, sim, settings) -> None:
    """The reasons a user reads on the job's page and in `muster show` said "1 of 8 pods (rank 3) were deleted", "All 2
    pods are running." and "1 of 1 pods were not running"."""
    pair = submit(nodes=2)["id"]
    single = submit(nodes=1)["id"]
    sim.cycle()
    sim.advance(1.5)
    assert JobEvent.objects.filter(job_id=pair, to_state=JobState.RUNNING).get().reason == "Both pods are running."
    assert JobEvent.objects.filter(job_id=single, to_state=JobState.RUNNING).get().reason == "Its pod is running."
    SimulatedPod.objects.filter(job_id=single).delete()
    sim.cycle()
    assert JobEvent.objects.filter(job_id=single, to_state=JobState.PENDING).last().reason == (
        "Its pod (rank 0) was deleted outside Muster (an eviction or by hand) under attempt 1; requeued."
    )
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 60
    sim.cluster.start_seconds = 3600.0
    lone = submit(nodes=1, gpus_per_node=1)["id"]
    sim.cycle()
    sim.advance(61)
    assert (
        JobEvent.objects.filter(job_id=lone, to_state=JobState.PENDING)
        .last()
        .reason.startswith("Its pod was not running 60 s after launch")
    )


class RefusingCluster:
    """The simulated cluster, except that its API server refuses to create pods or is down."""

    def __init__(self, inner, *, down: bool = False) -> None:
        self.inner, self.down, self.simulated = inner, down, True

    def list_nodes(self):
        if self.down:
            raise ClusterUnavailable("connection refused")
        return self.inner.list_nodes()

    def launch_gang(self, spec) -> None:
        raise RuntimeError("admission webhook denied the request")

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_refused_launch_requeues_the_job_and_frees_its_gpus(submit, sim) -> None:
    job_id = submit(nodes=2)["id"]
    report = run_cycle(backend=RefusingCluster(sim.cluster), now=sim.clock())
    assert report.requeued == [job_id] and report.launched == []
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.PENDING
    assert "admission webhook denied" in job.pending_reason
    assert not Allocation.objects.filter(released_at__isnull=True).exists()
    # It is held back for the first backoff, even though the cluster is healthy again...
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.pending_reason_code, job.attempt) == (JobState.PENDING, "LAUNCH_BACKOFF", 1)
    assert "did not come up" in job.pending_reason
    # ...then starts as attempt 2, and coming up clears the count.
    sim.advance(15)
    sim.advance(2)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt, job.launch_failures, job.launch_not_before) == (JobState.RUNNING, 2, 0, None)


def test_a_launch_that_is_always_refused_backs_off_then_fails_and_blocks_nobody(submit, sim) -> None:
    refusing = RefusingCluster(sim.cluster)
    doomed = submit(nodes=16)["id"]  # the whole cluster
    pauses = []
    for failure in range(1, 5):
        report = run_cycle(backend=refusing, now=sim.clock())
        assert report.launch_failed == [doomed]
        job = Job.objects.get(pk=doomed)
        assert (job.state, job.launch_failures) == (JobState.PENDING, failure)
        pauses.append((job.launch_not_before - sim.clock()).total_seconds())
        assert f"Failed launch {failure} of at most 5 in a row" in job.pending_reason
        # While it is held back, the GPUs it would take go to others.
        other = submit(nodes=1, gpus_per_node=1, simulate={"duration_seconds": 1})["id"]
        sim.cycle()
        assert Job.objects.get(pk=other).state == JobState.SCHEDULED
        assert Job.objects.get(pk=doomed).pending_reason_code == "LAUNCH_BACKOFF"
        sim.clock.advance(pauses[-1] - 1)
        early = run_cycle(backend=refusing, now=sim.clock())  # one second early: not tried, and the small job ends
        assert early.launch_failed == [] and early.ended == {other: JobState.SUCCEEDED}
        sim.clock.advance(1)
    assert pauses == [15, 30, 60, 120]
    report = run_cycle(backend=refusing, now=sim.clock())
    job = Job.objects.get(pk=doomed)
    assert job.state == JobState.FAILED and report.ended == {doomed: JobState.FAILED}
    assert job.state_reason.startswith("5 launches in a row did not come up; the last: The cluster refused the launch: admission webhook")
    assert job.restarts == 0  # its code never ran: no restart was spent
    assert not Allocation.objects.filter(released_at__isnull=True).exists()


def test_a_gang_that_never_comes_up_is_requeued_with_backoff(submit, sim, settings) -> None:
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 60
    sim.cluster.start_seconds = 3600.0  # pods stay Pending, like an image that never pulls
    job_id = submit(nodes=2)["id"]
    sim.cycle()
    sim.advance(61)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.launch_failures, job.restarts) == (JobState.PENDING, 1, 0)
    assert (
        "2 of 2 pods were not running 60 s after launch" in JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    )
    assert job.launch_not_before == sim.clock() + timedelta(seconds=15)


def test_a_gang_not_up_when_its_wall_time_ends_is_a_failed_launch_not_a_time_out(submit, sim, settings) -> None:
    """Its pods could not be bound (a volume claim that does not exist): it ended TIMED_OUT, for good, at its wall time,
    though its page said it would be placed again."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 600
    sim.cluster.start_seconds = 3600.0
    job_id = submit(nodes=2, wall_time_seconds=120)["id"]
    sim.cycle()
    sim.advance(121)
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.launch_failures, job.restarts) == (JobState.PENDING, 1, 0)
    why = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert "2 of 2 pods were not running when its wall time (120 s) ran out" in why
    assert not JobEvent.objects.filter(job_id=job_id, to_state=JobState.TIMED_OUT).exists()


def test_unreachable_cluster_keeps_jobs_queued(submit, sim) -> None:
    job_id = submit(nodes=1)["id"]
    report = run_cycle(backend=RefusingCluster(sim.cluster, down=True), now=sim.clock())
    assert report.cluster_error == "connection refused" and report.placed == []
    assert Job.objects.get(pk=job_id).state == JobState.PENDING
    # Every page says so plainly while it lasts.
    page = session_for(Job.objects.get(pk=job_id).owner)
    banner = page.get("/").content.decode()
    assert 'data-testid="cluster-down-banner"' in banner and "connection refused" in banner
    sim.cycle()
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED
    assert 'data-testid="cluster-down-banner"' not in page.get("/jobs/").content.decode()


def test_nodes_the_cluster_stops_reporting_are_not_used(submit, sim) -> None:
    sim.cluster.nodes = 2
    sim.cycle()
    assert Node.objects.filter(state="GONE").count() == 14
    job_id = submit(nodes=2)["id"]
    other = submit(nodes=1)["id"]
    sim.cycle()
    assert set(Allocation.objects.filter(job_id=job_id).values_list("node__name", flat=True)) == {"sim-node-000", "sim-node-001"}
    assert Job.objects.get(pk=other).state == JobState.PENDING


def test_job_page_shows_a_ranks_logs(submit, sim) -> None:
    job_id = submit(nodes=2)["id"]
    page = session_for(Job.objects.get(pk=job_id).owner)
    assert 'data-testid="logs"' not in page.get(f"/jobs/{job_id}/").content.decode()  # not started: no logs yet
    sim.cycle()
    html = page.get(f"/jobs/{job_id}/?rank=1").content.decode()
    assert 'data-testid="logs"' in html and f"job {job_id} attempt 1 rank 1" in html


def test_a_node_leaving_under_a_running_job_requeues_it_without_spending_a_restart(submit, sim) -> None:
    job_id = submit(nodes=1, max_restarts=0)["id"]
    sim.cycle()
    sim.advance(1.5)
    node = Allocation.objects.get(job_id=job_id).node.name
    assert node == "sim-node-008"  # the first node without RDMA devices: a job that asks none goes there first
    sim.cluster.nodes = 15  # the last node leaves; move the job there first
    Allocation.objects.filter(job_id=job_id).update(node=Node.objects.get(name="sim-node-015"))
    SimulatedPod.objects.filter(job_id=job_id).update(node_name="sim-node-015")
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert "Node sim-node-015 left the cluster" in reason
    # Not the job's fault: no restart spent, and it runs again elsewhere in the same cycle.
    assert job.restarts == 0 and job.attempt == 2 and job.state == JobState.SCHEDULED
    assert Allocation.objects.get(job_id=job_id, attempt=2).node.name != "sim-node-015"


def test_a_node_that_left_with_its_pods_requeues_the_job_without_spending_a_restart(submit, sim) -> None:
    """On Kubernetes the pod GC deletes a deleted node's pods, often before the cycle sees the node go: no pod is
    left to say where it ran, and the job must not fail for it."""
    job_id = submit(nodes=2, max_restarts=0)["id"]
    sim.cycle()
    sim.advance(1.5)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    sim.cluster.nodes = 15  # the last node leaves; move the gang's rank 1 there first
    Allocation.objects.filter(job_id=job_id, rank=1).update(node=Node.objects.get(name="sim-node-015"))
    SimulatedPod.objects.filter(job_id=job_id, rank=1).delete()
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert reason == "Node sim-node-015 left the cluster or stopped being Ready under attempt 1; requeued."
    assert job.restarts == 0 and job.attempt == 2 and job.state == JobState.SCHEDULED
    assert "sim-node-015" not in Allocation.objects.filter(job_id=job_id, attempt=2).values_list("node__name", flat=True)


class AlteredPodCluster:
    """The simulated cluster, where one rank's pod reads otherwise (e.g. the cluster is stopping it, or it is stuck
    pulling its image), as the Kubernetes backend reports such pods."""

    def __init__(self, inner, job_id: int, rank: int, **status) -> None:
        self.inner, self.job_id, self.rank, self.status, self.simulated = inner, job_id, rank, status, True

    def observe_gangs(self):
        gangs = self.inner.observe_gangs()
        for (job_id, _), pods in gangs.items():
            if job_id == self.job_id:
                pods[:] = [dataclasses.replace(p, **self.status) if p.rank == self.rank else p for p in pods]
        return gangs

    def __getattr__(self, name):
        return getattr(self.inner, name)


class EndedGangCluster:
    """The simulated cluster, where one job's pods say when they ended, as the kubelet's containers do."""

    def __init__(self, inner, job_id: int, finished_at, phase=PodPhase.SUCCEEDED, exit_code=0) -> None:
        self.inner, self.job_id, self.simulated = inner, job_id, True
        self.ended = dict(phase=phase, exit_code=exit_code, finished_at=finished_at)

    def observe_gangs(self):
        gangs = self.inner.observe_gangs()
        for (job_id, _), pods in gangs.items():
            if job_id == self.job_id:
                pods[:] = [dataclasses.replace(p, **self.ended) for p in pods]
        return gangs

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.parametrize("phase", [PodPhase.SUCCEEDED, PodPhase.FAILED])
def test_a_gang_that_ended_while_no_cycle_looked_ends_and_is_charged_when_its_pods_did(submit, sim, phase) -> None:
    """Muster stopped for ten minutes; the 20 s job it had started ended meanwhile, well within its 5-minute wall time.
    It ends when its last pod did: not timed out, not charged for the ten minutes, its run time its own."""
    job_id = submit(nodes=2, max_restarts=0, wall_time_seconds=300, simulate={"duration_seconds": 20})["id"]
    sim.cycle()
    sim.advance(2)
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.RUNNING
    ended = job.started_at + timedelta(seconds=20)
    sim.clock.advance(600)
    exit_code = 0 if phase == PodPhase.SUCCEEDED else 3
    run_cycle(backend=EndedGangCluster(sim.cluster, job_id, ended, phase, exit_code), now=sim.clock())
    job.refresh_from_db()
    assert (job.state, job.finished_at) == (JobState.SUCCEEDED if exit_code == 0 else JobState.FAILED, ended)
    assert job.events.last().at == ended
    node_seconds = UsageCharge.objects.filter(job=job).aggregate(n=Sum("node_seconds"))["n"]
    assert node_seconds == pytest.approx(2 * (ended - job.scheduled_at).total_seconds())


def test_a_gang_whose_pods_ended_before_what_was_charged_ends_there(submit, sim) -> None:
    """The kubelet's clock counts whole seconds and may lag ours: the ledger never moves back."""
    job_id = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(2)
    sim.advance(30)
    job = Job.objects.get(pk=job_id)
    run_cycle(backend=EndedGangCluster(sim.cluster, job_id, job.started_at - timedelta(seconds=1)), now=sim.clock() + timedelta(seconds=5))
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED and job.finished_at == job.charged_until == sim.clock()


def test_a_pod_the_cluster_evicts_requeues_its_gang_without_spending_a_restart(submit, sim) -> None:
    job_id = submit(nodes=2, max_restarts=0)["id"]
    sim.cycle()
    sim.advance(1.5)
    report = run_cycle(backend=AlteredPodCluster(sim.cluster, job_id, 1, disruption="PreemptionByScheduler"), now=sim.clock())
    job = Job.objects.get(pk=job_id)
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    assert report.requeued == [job_id] and job.restarts == 0 and job.attempt == 2
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert reason == f"Rank 1 on {node} was preempted by the Kubernetes scheduler for a pod of a higher priority under attempt 1; requeued."
    assert not SimulatedPod.objects.filter(job_id=job_id, attempt=1).exists()


def test_a_pod_the_kubelet_stops_for_node_pressure_spends_a_restart(submit, sim) -> None:
    """Node pressure most often comes from the pod that used too much: requeued for free, it could loop for ever."""
    job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 60, "exit_code": 137})["id"]
    sim.cycle()
    sim.advance(1.5)
    evicted = AlteredPodCluster(sim.cluster, job_id, 0, disruption="TerminationByKubelet", reason="Evicted")
    run_cycle(backend=evicted, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt) == (JobState.RUNNING, 1), "not requeued for free: its failure decides"
    sim.advance(70)
    job = Job.objects.get(pk=job_id)
    assert job.restarts == 1 and job.attempt == 2


def test_a_pod_the_kubelet_stops_for_the_nodes_shutdown_requeues_its_gang_without_spending_a_restart(submit, sim) -> None:
    """Graceful node shutdown (a maintenance reboot) stops the pod with the same disruption as node pressure, but
    it is not the job's doing: the gang goes back to the queue, as for a node lost."""
    job_id = submit(nodes=2, max_restarts=0, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    message = "Pod was terminated in response to imminent node shutdown."
    shutdown = AlteredPodCluster(
        sim.cluster, job_id, 1, phase=PodPhase.FAILED, disruption="TerminationByKubelet", reason="Terminated", message=message
    )
    report = run_cycle(backend=shutdown, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    assert report.requeued == [job_id] and (job.restarts, job.attempt) == (0, 2)
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert reason == (
        f"Rank 1 on {node} was stopped by the cluster (TerminationByKubelet: Pod was terminated in response to imminent "
        "node shutdown) under attempt 1; requeued."
    )


def test_a_pod_stuck_pulling_its_image_fails_the_launch_at_once_and_frees_the_gpus(submit, sim, settings) -> None:
    """Not after the launch timeout (10 minutes, five times over): a wrong image would hold its nodes for most of an hour."""
    settings.MUSTER_LAUNCH_MAX_FAILURES = 2
    job_id = submit(nodes=2, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    message = 'container main: ImagePullBackOff: Back-off pulling image "nvcr.io/nvidia/pytorch:24.13-py3"'
    stuck = AlteredPodCluster(sim.cluster, job_id, 1, phase=PodPhase.PENDING, reason="ImagePullBackOff", message=message)
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    run_cycle(backend=stuck, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.pending_reason_code, job.launch_failures, job.restarts) == (JobState.PENDING, "LAUNCH_BACKOFF", 1, 0)
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert reason.startswith(f"Rank 1 on {node} could not start: {message}. Failed launch 1 of at most 2 in a row")
    assert not Allocation.objects.filter(job_id=job_id, released_at__isnull=True).exists()
    assert not SimulatedPod.objects.filter(job_id=job_id).exists()
    # Still so at the next launch: the job fails, saying why.
    sim.advance(16)
    run_cycle(backend=stuck, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.FAILED and "ImagePullBackOff" in job.events.last().reason


REFUSED = "Pod was rejected: Node didn't have enough resource: nvidia.com/gpu, requested: 8, used: 8, capacity: 8"


def test_a_pod_the_node_refuses_at_launch_is_a_failed_launch_that_avoids_the_node_and_never_fails_the_job(submit, sim, settings) -> None:
    """The kubelet's admission (OutOfnvidia.com/gpu: a GPU gone unhealthy, a pod bound past kube-scheduler): the
    node's trouble, so the launch backs off without counting towards failing the job, and goes elsewhere next."""
    settings.MUSTER_LAUNCH_MAX_FAILURES = 1
    job_id = submit(nodes=2, max_restarts=0, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    refused = AlteredPodCluster(sim.cluster, job_id, 1, phase=PodPhase.FAILED, reason="OutOfnvidia.com/gpu", message=REFUSED)
    run_cycle(backend=refused, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.launch_failures, job.restarts, job.avoid_nodes) == (JobState.PENDING, 1, 0, [node])
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert (
        reason
        == f"Rank 1 was refused by the kubelet of {node} (OutOfnvidia.com/gpu: {REFUSED}). Failed launch 1 in a row; tried again in 15 s."
    )
    assert not Allocation.objects.filter(job_id=job_id, released_at__isnull=True).exists()
    sim.advance(16)
    sim.cycle()
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt) == (JobState.SCHEDULED, 2)
    assert node not in Allocation.objects.filter(job_id=job_id, attempt=2).values_list("node__name", flat=True)


@pytest.mark.parametrize(
    ("reason", "nodes_doing"),
    [
        ("OutOfnvidia.com/gpu", True),
        ("OutOfmemory", True),
        ("UnexpectedAdmissionError", True),
        ("NodeShutdown", True),
        # What the pod asks that the node will never give: the job's to fix, so a restart is spent.
        ("SysctlForbidden", False),
        ("AppArmor", False),
        ("PodOSNotSupported", False),
        ("Error", False),
    ],
)
def test_which_of_the_kubelets_refusals_are_the_nodes_doing(reason: str, nodes_doing: bool) -> None:
    assert refused_by_node(reason) is nodes_doing


def test_a_running_pod_the_node_refuses_after_it_restarted_requeues_its_gang_without_spending_a_restart(submit, sim) -> None:
    """A node that restarted may not admit its pods again (UnexpectedAdmissionError): as for a node lost, no restart."""
    job_id = submit(nodes=2, max_restarts=0, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    assert Job.objects.get(pk=job_id).state == JobState.RUNNING
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=0).node.name
    message = "Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 8, Available: 7"
    refused = AlteredPodCluster(sim.cluster, job_id, 0, phase=PodPhase.FAILED, reason="UnexpectedAdmissionError", message=message)
    report = run_cycle(backend=refused, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert report.requeued == [job_id]
    assert (job.restarts, job.launch_failures, job.attempt, job.avoid_nodes) == (0, 0, 2, [node])
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert (
        reason
        == f"Rank 0 was refused by the kubelet of {node} (UnexpectedAdmissionError: {message.rstrip('.')}) under attempt 1; requeued."
    )
    assert node not in Allocation.objects.filter(job_id=job_id, attempt=2).values_list("node__name", flat=True)


class CordonedCluster(AlteredPodCluster):
    """... where one node has also been cordoned since the placement."""

    def __init__(self, inner, job_id: int, rank: int, cordoned: str, **status) -> None:
        super().__init__(inner, job_id, rank, **status)
        self.cordoned = cordoned

    def list_nodes(self):
        return [dataclasses.replace(n, schedulable=n.name != self.cordoned) for n in self.inner.list_nodes()]


class NotReadyCluster:
    """The simulated cluster, where one node reads NotReady (its kubelet silent); its pods read as they were."""

    def __init__(self, inner, node: str) -> None:
        self.inner, self.node, self.simulated = inner, node, True

    def list_nodes(self):
        return [dataclasses.replace(n, ready=n.name != self.node) for n in self.inner.list_nodes()]

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_node_not_ready_for_a_blip_keeps_its_gang_and_one_not_ready_past_the_grace_loses_it(submit, sim, settings) -> None:
    """A kubelet's blip of a few seconds requeued a multi-day gang whose pods ran on; Kubernetes waits 300 s."""
    settings.MUSTER_NODE_NOT_READY_GRACE_SECONDS = 60
    job_id = submit(nodes=2, max_restarts=0, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    sim.advance(1.5)
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    blip = NotReadyCluster(sim.cluster, node)
    sim.clock.advance(1)
    run_cycle(backend=blip, now=sim.clock())
    assert Node.objects.get(name=node).state == "NOT_READY"
    sim.clock.advance(59)
    run_cycle(backend=blip, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.attempt) == (JobState.RUNNING, 1)
    sim.clock.advance(1)  # 60 s NotReady
    report = run_cycle(backend=blip, now=sim.clock())
    job.refresh_from_db()
    assert report.requeued == [job_id] and job.restarts == 0
    requeued = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert f"Node {node} left the cluster or stopped being Ready" in requeued


def test_a_pod_evicted_for_a_noexecute_taint_is_said_so_not_as_a_drain(submit, sim) -> None:
    """The tainted node reads CORDONED (Muster's pods do not tolerate the taint), but nobody drained it."""
    job_id = submit(nodes=2, max_restarts=0)["id"]
    sim.cycle()
    sim.advance(1.5)
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    tainted = CordonedCluster(sim.cluster, job_id, 1, node, disruption="DeletionByTaintManager")
    report = run_cycle(backend=tainted, now=sim.clock())
    assert report.requeued == [job_id] and Job.objects.get(pk=job_id).restarts == 0
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    assert reason == f"Rank 1 on {node} was evicted for a NoExecute taint on the node under attempt 1; requeued."


def test_a_launching_gang_whose_node_was_cordoned_before_its_pod_was_bound_goes_back_to_the_queue_at_once(submit, sim) -> None:
    """Not after the launch timeout, and not as a failed launch: kube-scheduler will not bind the pod there."""
    job_id = submit(nodes=2, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    node = Allocation.objects.get(job_id=job_id, attempt=1, rank=1).node.name
    message = "0/18 nodes are available: 1 node(s) were unschedulable, 17 node(s) didn't match Pod's node affinity/selector."
    unbound = dict(phase=PodPhase.PENDING, node_name="", reason="Unschedulable", message=message)
    report = run_cycle(backend=CordonedCluster(sim.cluster, job_id, 1, node, **unbound), now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert report.requeued == [job_id]
    assert (job.launch_failures, job.restarts, job.launch_not_before) == (0, 0, None)
    reason = JobEvent.objects.filter(job_id=job_id, to_state=JobState.PENDING).last().reason
    expected = f"{node} is cordoned, so attempt 1's pods cannot all be bound (rank 1: {message.rstrip('.')}); requeued"
    assert reason.startswith(expected), reason
    assert node not in Allocation.objects.filter(job_id=job_id, attempt=2).values_list("node__name", flat=True)


def test_a_launching_gang_whose_unbound_pod_may_yet_be_bound_waits(submit, sim) -> None:
    """Unschedulable for now (the node's last pods still terminating, say) on nodes that still take pods: the launch
    timeout decides; and a node cordoned under a pod of the gang already bound there keeps that pod."""
    job_id = submit(nodes=2, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    bound = Allocation.objects.get(job_id=job_id, attempt=1, rank=0).node.name
    unbound = dict(phase=PodPhase.PENDING, node_name="", reason="Unschedulable", message="0/18 nodes are available")
    run_cycle(backend=AlteredPodCluster(sim.cluster, job_id, 1, **unbound), now=sim.clock())
    run_cycle(backend=CordonedCluster(sim.cluster, job_id, 1, bound, **unbound), now=sim.clock())
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED


def test_a_rank_kube_scheduler_will_not_bind_for_a_cause_muster_does_not_know_is_said_then_placed_elsewhere(submit, sim, settings) -> None:
    """A pod Muster did not start held the node's CPU: the job read "Placed on gpu-node-00." for the whole launch
    timeout, and was then placed on the same node again and again until it failed."""
    settings.MUSTER_LAUNCH_TIMEOUT_SECONDS = 30
    job_id = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    node = Allocation.objects.get(job_id=job_id, attempt=1).node.name
    message = "0/10 nodes are available: 1 Insufficient cpu, 9 node(s) didn't match Pod's node affinity/selector."
    starved = AlteredPodCluster(sim.cluster, job_id, 0, phase=PodPhase.PENDING, node_name="", reason="Unschedulable", message=message)
    sim.clock.advance(5)
    run_cycle(backend=starved, now=sim.clock())
    job = Job.objects.get(pk=job_id)
    assert job.state == JobState.SCHEDULED
    until = job.scheduled_at + timedelta(seconds=30)
    assert job.state_reason == (
        f"Placed on {node}. Not running yet: kube-scheduler cannot bind rank 0 ({message.rstrip('.')}). If it still cannot "
        f"at {until:%H:%M:%S} UTC (MUSTER_LAUNCH_TIMEOUT_SECONDS), the job is placed again, elsewhere if it fits."
    )
    sim.clock.advance(30)
    run_cycle(backend=starved, now=sim.clock())
    job.refresh_from_db()
    assert job.state == JobState.PENDING and job.avoid_nodes == [node]
    sim.advance(60)  # past the launch's backoff
    assert Allocation.objects.get(job_id=job_id, attempt=2).node.name != node


def test_a_pod_still_creating_its_container_waits_for_the_launch_timeout(submit, sim) -> None:
    job_id = submit(nodes=1, simulate={"duration_seconds": 600})["id"]
    sim.cycle()
    run_cycle(backend=AlteredPodCluster(sim.cluster, job_id, 0, phase=PodPhase.PENDING, reason=""), now=sim.clock())
    assert Job.objects.get(pk=job_id).state == JobState.SCHEDULED


def test_every_pod_of_a_gang_gets_its_jobs_telemetry_token(submit, sim) -> None:
    from telemetry.tokens import telemetry_token_verify

    launched = []
    real_launch = sim.cluster.launch_gang
    sim.cluster.launch_gang = lambda spec: (launched.append(spec), real_launch(spec))[1]
    first, second = submit(nodes=1)["id"], submit(nodes=1)["id"]
    sim.cycle()
    tokens = {spec.job_id: spec.secret_env["MUSTER_TELEMETRY_TOKEN"] for spec in launched}
    assert not any("MUSTER_TELEMETRY_TOKEN" in spec.env for spec in launched)  # never in plain sight
    assert set(tokens) == {first, second} and tokens[first] != tokens[second]
    # Each token authenticates exactly its own job.
    assert telemetry_token_verify(tokens[first]).job_id == first
    assert telemetry_token_verify(tokens[second]).job_id == second


def test_a_failed_ranks_retry_is_placed_away_from_the_node_it_failed_on(submit, sim) -> None:
    job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 5, "exit_code": 1})["id"]
    sim.cycle()
    failed_on = Allocation.objects.get(job_id=job_id, attempt=1).node.name
    sim.advance(1.5)
    sim.advance(10)  # attempt 1 fails and is retried in the same cycle
    job = Job.objects.get(pk=job_id)
    assert job.attempt == 2 and job.restarts == 1 and job.avoid_nodes == [failed_on]
    assert Allocation.objects.get(job_id=job_id, attempt=2).node.name != failed_on


def test_a_node_that_fails_gang_after_gang_is_held_out_of_placement(api, submit, sim, settings, admin_user) -> None:
    settings.MUSTER_NODE_FAILURE_HOLD = 2

    def fails_there_then_succeeds_elsewhere() -> tuple[int, str]:
        job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 5, "exit_code": 1})["id"]
        sim.cycle()
        node = Allocation.objects.get(job_id=job_id, attempt=1).node.name
        sim.advance(1.5)
        # Its retry's pod runs clean: whatever failed it was the node's.
        Job.objects.filter(pk=job_id).update(simulate={"duration_seconds": 5, "exit_code": 0})
        sim.advance(10)
        assert Allocation.objects.get(job_id=job_id, attempt=2).node.name != node
        sim.advance(1.5)
        sim.advance(10)
        assert Job.objects.get(pk=job_id).state == JobState.SUCCEEDED
        return job_id, node

    _, node = fails_there_then_succeeds_elsewhere()
    assert Node.objects.get(name=node).failures_in_row == 1 and not Node.objects.get(name=node).held
    second, again = fails_there_then_succeeds_elsewhere()
    assert again == node  # the fullest-first placement picks it again
    held = Node.objects.get(name=node)
    assert held.held and held.failures_in_row == 2 and f"job {second}, attempt 1 here" in held.held_reason
    third = submit(nodes=1, simulate={"duration_seconds": 5})["id"]
    sim.cycle()
    assert Allocation.objects.get(job_id=third).node.name != node
    shown = api.get(f"/api/v1/nodes/{node}/").json()
    assert shown["held"] is True and "2 gangs in a row failed on it and then succeeded elsewhere" in shown["held_reason"]
    # An admin who checked the node clears the hold in Django admin: it takes work again, with a fresh count.
    assert session_for(admin_user).post(f"/admin/jobs/node/{held.pk}/change/", {}).status_code == 302  # "held" unticked
    cleared = Node.objects.get(name=node)
    assert (cleared.held, cleared.failures_in_row, cleared.held_reason) == (False, 0, "")
    assert next(v for v in node_views(timezone.now()) if v.name == node).schedulable


def test_a_job_that_fails_everywhere_counts_against_no_node(submit, sim) -> None:
    job_id = submit(nodes=1, max_restarts=1, simulate={"duration_seconds": 5, "exit_code": 1})["id"]
    sim.cycle()
    sim.advance(1.5)
    sim.advance(10)
    sim.advance(1.5)
    sim.advance(10)
    assert Job.objects.get(pk=job_id).state == JobState.FAILED
    assert not Node.objects.filter(failures_in_row__gt=0).exists()


def test_a_job_submitted_while_the_cycle_observed_the_cluster_is_not_placed_before_its_submit(submit, sim, monkeypatch) -> None:
    """The cycle took its time once, at its start: a job submitted while it followed the cluster (seconds, on a real
    one) read "PENDING 18:17:05, SCHEDULED 18:17:04" in its history."""
    observe, submitted = sim.cluster.observe_gangs, []

    def submitted_while_observing() -> Any:
        gangs = observe()
        time.sleep(0.01)
        submitted.append(submit(nodes=1)["id"])
        return gangs

    monkeypatch.setattr(sim.cluster, "observe_gangs", submitted_while_observing)
    report = run_cycle(backend=sim.cluster)
    job = Job.objects.get(pk=submitted[0])
    assert report.placed == [job.pk]
    assert job.scheduled_at >= job.submitted_at
    history = list(JobEvent.objects.filter(job=job).order_by("at", "id").values_list("to_state", flat=True))
    assert history[:2] == ["PENDING", "SCHEDULED"]
    assert all(a.allocated_at >= job.submitted_at for a in Allocation.objects.filter(job=job))


def test_one_job_the_cluster_refuses_to_follow_does_not_stop_the_queue(
    submit: Any, sim: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """An elastic job whose shrink the cluster refused (a 403) raised out of every cycle: no job started anywhere, for
    everyone, until it was cancelled. Now that job is logged and followed again next cycle; the others go on."""
    import scheduler.cycle

    stuck = submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 3600})
    sim.cycle()
    assert Job.objects.get(pk=stuck["id"]).state in (JobState.SCHEDULED, JobState.RUNNING)
    follow = scheduler.cycle._follow

    def refused(backend: Any, job: Job, *args: Any) -> None:
        if job.pk == stuck["id"]:
            Job.objects.filter(pk=job.pk).update(state_reason="half-way")  # a change the refusal must not leave
            raise RuntimeError("Forbidden: pods is forbidden: cannot delete resource")
        follow(backend, job, *args)

    monkeypatch.setattr(scheduler.cycle, "_follow", refused)
    waiting = submit(nodes=1, gpus_per_node=1, simulate={"duration_seconds": 60})
    report = sim.cycle()
    assert report.ran and Job.objects.get(pk=waiting["id"]).state in (JobState.SCHEDULED, JobState.RUNNING)
    assert Job.objects.get(pk=stuck["id"]).state_reason != "half-way"
    assert f"following job {stuck['id']} failed" in caplog.text
