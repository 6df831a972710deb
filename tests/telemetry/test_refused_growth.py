"""An elastic job's growth that never came up (the cluster refused its pods, so the cycle shrank it back): the job never
ran on that node, so its Attempts row does not list it and its telemetry has no series of it, nor a straggler flag."""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.attempts import allocations_never_up, job_attempts
from jobs.models import Allocation, Job, JobResize
from jobs.states import JobState
from scheduler.cycle import run_cycle
from telemetry.page import job_telemetry_context
from telemetry.selectors import job_run, job_target
from tests.conftest import SimHarness, session_for


class RefusedGrowthCluster:
    """The simulated cluster, except that its API server refuses the pods of a growth."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.simulated = inner, True

    def launch_ranks(self, spec: Any, ranks: Any) -> None:
        raise RuntimeError("admission webhook denied the request")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def live_nodes(job_id: int) -> list[str]:
    return list(Allocation.objects.filter(job_id=job_id, released_at__isnull=True).order_by("rank").values_list("node__name", flat=True))


@pytest.fixture
def refused(sim: SimHarness, submit: Any, settings: Any) -> tuple[Job, list[str], str]:
    """An elastic 2..4 job running on 3 nodes whose growth onto a fourth the cluster refused: (job, its nodes, the node)."""
    settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS = 7200  # it does not grow again within the test
    submit(nodes=13, simulate={"duration_seconds": 20})
    sim.cycle()
    elastic = submit(nodes=None, min_nodes=2, max_nodes=4, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    three = live_nodes(elastic)
    assert len(three) == 3 and Job.objects.get(pk=elastic).state == JobState.RUNNING
    sim.clock.advance(25)  # the 13-node job has ended: the cycle grows the elastic job onto one of its nodes
    run_cycle(backend=RefusedGrowthCluster(sim.cluster), now=sim.clock())
    grown, back = JobResize.objects.filter(job_id=elastic).order_by("id")
    assert (grown.to_nodes, back.to_nodes) == (4, 3) and "The cluster refused the pods it grew by" in back.reason
    assert live_nodes(elastic) == three
    sim.advance(2)
    sim.clock.advance(600)  # it runs on, on its three nodes
    return Job.objects.get(pk=elastic), three, grown.added[0]


def test_the_attempts_row_lists_only_the_nodes_it_ran_on(refused: tuple[Job, list[str], str], user: Any) -> None:
    job, three, node = refused
    (attempt,) = job_attempts(Job.objects.prefetch_related("events", "allocations__node").get(pk=job.pk))
    assert attempt.nodes == three
    html = session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    row = re.search(r'<tr data-attempt="1"[^>]*>.*?</tr>', html, re.S)
    assert row and ", ".join(three) in row.group(0) and node not in row.group(0)
    # Its resizes still say what happened.
    assert "The cluster refused the pods it grew by" in html


def test_its_telemetry_has_no_series_nor_straggler_flag_of_the_node_it_never_ran_on(
    refused: tuple[Job, list[str], str], sim: SimHarness
) -> None:
    job, three, node = refused
    job = Job.objects.prefetch_related("events", "allocations__node").get(pk=job.pk)
    assert [r.node for r in job_target(job, job_run(job)).ranks] == three
    ctx = job_telemetry_context(job, {}, now=sim.clock())
    # No flag names that node (the simulated series may flag one of its real ranks: its seed is the job's id).
    assert not [f for f in ctx["flags"] if f["code"] == "IDLE_RANK" and node in f["message"]], ctx["flags"]
    heat = next(f["figure"] for f in ctx["figures"] if f["id"] == "telemetry-heatmap")["data"][0]
    assert not [y for y in heat["y"] if node in y] and len(heat["y"]) == 3 * 8


def test_a_rank_whose_output_was_kept_as_it_went_did_run(refused: tuple[Job, list[str], str]) -> None:
    """A growth by several ranks let go from its first stuck one: a later rank that came up goes too, its output kept
    first (scheduler.cycle._shrink_back). That one ran."""
    job, _, _ = refused
    job.logs.create(attempt=1, rank=3, name="", tries=0)
    assert allocations_never_up(Job.objects.prefetch_related("allocations__node").get(pk=job.pk)) == set()


class PassingRefusalCluster(RefusedGrowthCluster):
    """A refusal that passes: a rank's old pod still terminating on a node deleted under the job."""

    def launch_ranks(self, spec: Any, ranks: Any) -> None:
        from jobs.cluster.base import LaunchRefused

        raise LaunchRefused("the pod of rank 3 from before is still there", transient=True)


def test_a_growth_refused_for_a_passing_cause_is_tried_again_within_a_minute(sim: SimHarness, submit: Any, settings: Any) -> None:
    """It waited the launch backoff's longest, 10 minutes, with an idle node the job could have run on."""
    from datetime import timedelta

    from django.utils import timezone

    settings.MUSTER_LAUNCH_BACKOFF_MAX_SECONDS = 600
    submit(nodes=13, simulate={"duration_seconds": 20})
    sim.cycle()
    elastic = submit(nodes=None, min_nodes=2, max_nodes=4, wall_time_seconds=7200, simulate={"duration_seconds": 3600})["id"]
    sim.cycle()
    sim.advance(2)
    sim.clock.advance(25)
    now = sim.clock()
    run_cycle(backend=PassingRefusalCluster(sim.cluster), now=now)
    back = JobResize.objects.filter(job_id=elastic).order_by("id").last()
    assert back is not None and back.to_nodes == 3
    again = Job.objects.get(pk=elastic).launch_not_before
    # From when the cluster refused it: the wall clock, as the shrink back is stamped (not the test's cycle clock).
    left = again - timezone.now() if again is not None else None
    assert left is not None and timedelta(seconds=50) <= left <= timedelta(seconds=60), left
