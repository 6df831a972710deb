"""An elastic job resized during its run: each node's series covers only the time the job held it, on every source."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from jobs.models import Allocation, Job
from telemetry.catalogue import METRICS, Level
from telemetry.selectors import job_run, job_target
from telemetry.services import telemetry_store_run
from telemetry.sources.prometheus import PrometheusTelemetry
from tests.jobs.factories import JobFactory, NodeFactory

STEP = 20


@pytest.fixture
def resized(user: Any) -> Job:
    """Four nodes from the start; ranks 2 and 3 (c, d) released at +200 s; e given rank 2 at +300 s, d rank 3 back at +400 s."""
    ended = timezone.now() - timedelta(minutes=1)
    started = ended - timedelta(seconds=600)
    job = JobFactory(
        owner=user, finished=True, nodes=4, gpus_per_node=8, simulate={"duration_seconds": 600}, submitted_at=started,
        started_at=started, finished_at=ended, history=True, held=[],
    )  # fmt: skip
    nodes = {name: NodeFactory(name=name) for name in "abcde"}

    def held(node: str, rank: int, since: float, until: float | None) -> None:
        Allocation.objects.create(
            job=job, node=nodes[node], attempt=1, rank=rank, gpus=8,
            allocated_at=started + timedelta(seconds=since), released_at=started + timedelta(seconds=until) if until else ended,
        )  # fmt: skip

    held("a", 0, 0, None)
    held("b", 1, 0, None)
    held("c", 2, 0, 200)
    held("d", 3, 0, 200)
    held("e", 2, 300, None)
    held("d", 3, 400, None)
    return job


def by_node(api: Any, job: Job, **params: Any) -> dict[str, dict[str, Any]]:
    body = api.get(f"/api/v1/jobs/{job.pk}/metrics/", {"metric": "gpu_util", "step": STEP, **params}).json()
    return {s["node"]: s for s in body["series"]}


def offsets(job: Job, series: dict[str, Any]) -> list[float]:
    started = job_run(job).started.timestamp()
    return [t - started for t in series["t"]]


@pytest.mark.parametrize("stored", [False, True])
def test_each_node_shows_only_the_time_it_was_held_and_the_job_only_the_nodes_held(api: Any, resized: Job, stored: bool) -> None:
    if stored:
        assert telemetry_store_run(job_id=resized.pk, attempt=1) > 0
    nodes = by_node(api, resized, level="node")
    assert sorted(nodes) == ["a", "b", "c", "d", "e"]
    assert {n: s["rank"] for n, s in nodes.items()} == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 2}
    assert max(offsets(resized, nodes["c"])) < 200 and min(offsets(resized, nodes["e"])) > 300 - STEP
    assert not [t for t in offsets(resized, nodes["d"]) if 200 <= t < 400 - STEP]
    assert min(offsets(resized, nodes["a"])) < STEP and max(offsets(resized, nodes["a"])) > 600 - 2 * STEP
    # The job's mean at each time is over the nodes held then: between the shrink and the growth, a and b only.
    job = by_node(api, resized)[""]
    count = {t: c for t, c in zip(job["t"], job["count"], strict=True)}
    for node in ("a", "b", "c", "d", "e"):
        for t, c in zip(nodes[node]["t"], nodes[node]["count"], strict=True):
            count[t] -= c
    assert set(count.values()) == {0}
    middle = [t for t in job["t"] if 220 <= t - job_run(resized).started.timestamp() < 280]
    assert middle and all(t not in nodes["c"]["t"] and t not in nodes["e"]["t"] for t in middle)


def test_prometheus_cuts_a_released_nodes_infiniband_traffic_to_when_it_was_held(resized: Job, monkeypatch: Any) -> None:
    """On a real cluster InfiniBand series match by node: another job's traffic on a released node is not this job's."""
    run = job_run(resized)
    target = job_target(resized, run)
    start, end = run.window(run.ended)
    templates = {"node_node": "{name}"}
    source = PrometheusTelemetry(url="http://prometheus.invalid", templates=templates, node_label="instance", scrape_seconds=STEP)
    monkeypatch.setattr(source, "_left_open", lambda: False)

    def answer(query: str, first: int, last: int, step: int) -> list[dict]:
        # Every node busy at 1 GB/s for the whole window, whoever held it.
        values = [[(i + 1) * step - 0.001, "1000000000"] for i in range(first, last)]
        return [{"metric": {"instance": node}, "values": values} for node in "abcde"]

    monkeypatch.setattr(source, "_query_range", answer)
    nodes = {s.node: s for s in source.read(target, METRICS["ib_tx"], start=start, end=end, step=STEP, level=Level.NODE)}
    held_c = [t - run.started.timestamp() for t, c in zip(nodes["c"].buckets.times(), nodes["c"].buckets.count, strict=True) if c]
    assert held_c and max(held_c) < 200
    job = source.read(target, METRICS["ib_tx"], start=start, end=end, step=STEP, level=Level.JOB)[0].buckets
    times = job.times()
    counts = {t - run.started.timestamp(): c for t, c in zip(times, job.count, strict=True)}
    # One sample per node per bucket ("count" answers 1e9 too, so compare node counts instead of values).
    per_node = {n: dict(zip(s.buckets.times(), s.buckets.count, strict=True)) for n, s in nodes.items()}
    for t, c in zip(times, job.count, strict=True):
        assert c == sum(p.get(t, 0) for p in per_node.values())
    assert any(240 <= t < 280 and c for t, c in counts.items())
