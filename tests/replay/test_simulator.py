"""The simulator's self-checks, preemption and resume, decayed usage, skipped calls, determinism."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from policy.model import Decisions, Placement, PolicyConfig, Snapshot
from replay.load import nodes_for_load
from replay.simulator import ClusterSpec, SimulationError, policy_function, simulate
from replay.trace import Assumptions, TraceJob
from replay.usage import DecayedUsage
from tests.replay.test_baselines import TRACE, job


def double_booker(snapshot: Snapshot, config: PolicyConfig) -> Decisions:
    """A broken policy: every pending job goes on the first node, whatever is free there."""
    return Decisions(tuple(Placement(p.id, ("n0000",), (p.gpus_per_node,)) for p in snapshot.pending), ())


def half_gang(snapshot: Snapshot, config: PolicyConfig) -> Decisions:
    return Decisions(tuple(Placement(p.id, ("n0000",), (8,)) for p in snapshot.pending), ())


def never(snapshot: Snapshot, config: PolicyConfig) -> Decisions:
    return Decisions((), ())


def run(jobs: list[TraceJob], policy: str = "muster", nodes: int = 2, **kw: object) -> list[tuple[float | None, float | None]]:
    result = simulate(jobs, cluster=ClusterSpec(nodes=nodes), policy=policy, config=PolicyConfig(), assumptions=Assumptions(), **kw)  # type: ignore[arg-type]
    return [(r.first_start, r.end) for r in result.records]


def test_a_policy_that_double_books_a_node_raises() -> None:
    jobs = [job(1, 0.0, 10.0, 8), job(2, 0.0, 10.0, 8)]
    with pytest.raises(SimulationError, match="above its GPUs"):
        run(jobs, policy_fn=double_booker)


def test_a_gang_placed_on_part_of_its_nodes_raises() -> None:
    with pytest.raises(SimulationError, match="all its nodes at once"):
        run([job(1, 0.0, 10.0, 16)], policy_fn=half_gang)


def test_a_job_that_never_starts_raises() -> None:
    with pytest.raises(SimulationError, match="every job finishes"):
        run([job(1, 0.0, 10.0, 8)], policy_fn=never)


def test_a_job_larger_than_the_cluster_is_refused() -> None:
    with pytest.raises(SimulationError):
        run([job(1, 0.0, 10.0, 32)], nodes=2)


@pytest.mark.parametrize("policy", ["fifo", "easy", "muster"])
def test_every_policy_finishes_every_job_and_records_checks(policy: str) -> None:
    result = simulate(TRACE, cluster=ClusterSpec(nodes=2), policy=policy, config=PolicyConfig(), assumptions=Assumptions())
    assert all(r.end is not None for r in result.records)
    assert len(result.checks) == 5
    assert result.decisions and all(q >= 1 for q, _ in result.decisions)


@pytest.mark.parametrize("policy", ["fifo", "easy", "muster"])
def test_skipping_calls_and_trimming_the_queue_change_nothing(policy: str) -> None:
    jobs = [job(i, float(i * 7 % 300), float(50 + (i * 37) % 400), [1, 2, 4, 8, 16][i % 5], tenant="ab"[i % 2]) for i in range(1, 120)]
    jobs.sort(key=lambda j: (j.submit, j.id))
    plain = policy_function(policy)

    def wrapped(snapshot: Snapshot, config: PolicyConfig) -> Decisions:
        return plain(snapshot, config)  # an unknown function: called at every event with the whole queue

    def records(**kw: object) -> list[tuple[object, ...]]:
        config = PolicyConfig(starvation_seconds=60, max_jobs=50)
        result = simulate(jobs, cluster=ClusterSpec(nodes=3), policy=policy, config=config, assumptions=Assumptions(), **kw)  # type: ignore[arg-type]
        # Muster estimates every waiting job's start, so a skipped call (nothing could start) skips estimates too;
        # the baselines estimate only the head's, which a skipped call cannot change.
        return [(r.first_start, r.end, r.promised_start, r.predicted_at_submit if policy != "muster" else None) for r in result.records]

    fast = records()
    assert fast == records(call_always=True)
    assert fast == records(policy_fn=wrapped)


def test_same_input_same_output() -> None:
    jobs = [job(i, float(i * 13 % 500), float(30 + (i * 31) % 900), [1, 2, 8, 16][i % 4], tenant="abc"[i % 3]) for i in range(1, 80)]
    jobs.sort(key=lambda j: (j.submit, j.id))
    for policy in ("fifo", "easy", "muster"):
        a = simulate(jobs, cluster=ClusterSpec(nodes=3), policy=policy, config=PolicyConfig(), assumptions=Assumptions())
        b = simulate(jobs, cluster=ClusterSpec(nodes=3), policy=policy, config=PolicyConfig(), assumptions=Assumptions())
        assert [(r.first_start, r.end, r.attempts, r.predictions) for r in a.records] == [
            (r.first_start, r.end, r.attempts, r.predictions) for r in b.records
        ]


def preemption_trace() -> list[TraceJob]:
    low = TraceJob(id=1, submit=0.0, runtime=5000.0, gpus=8, nodes=1, gpus_per_node=8, wall_seconds=14400.0, tenant="a", class_rank=2)
    high = TraceJob(id=2, submit=4000.0, runtime=100.0, gpus=8, nodes=1, gpus_per_node=8, wall_seconds=3600.0, tenant="b", class_rank=0)
    return [low, high]


@pytest.mark.parametrize(("resume", "end", "lost"), [("restart", 4100.0 + 5000.0, 4000.0 * 8), ("checkpoint", 4100.0 + 2000.0, 1000.0 * 8)])
def test_a_preempted_job_is_requeued_and_resumes(resume: str, end: float, lost: float) -> None:
    result = simulate(
        preemption_trace(),
        cluster=ClusterSpec(nodes=1),
        policy="muster",
        config=PolicyConfig(),
        assumptions=Assumptions(resume=resume, checkpoint_seconds=3000.0),
    )
    low, high = result.records
    assert high.first_start == 4000.0 and high.end == 4100.0
    assert low.preemptions == 1 and low.first_start == 0.0 and low.start == 4100.0
    assert low.end == end
    assert low.gpu_seconds_lost == lost
    assert low.attempts == [(0.0, 4000.0, 8), (4100.0, end, 8)]


def test_with_preemption_for_fair_share_a_newcomer_stops_the_heavy_tenants_preemptible_job() -> None:
    # Tenant a holds the only node from 0; b arrives at 1000. With a 10-minute half-life a has by then used 1.4 shares.
    long = TraceJob(id=1, submit=0.0, runtime=20000.0, gpus=8, nodes=1, gpus_per_node=8, wall_seconds=20000.0, tenant="a", preemptible=True)
    newcomer = TraceJob(id=2, submit=1000.0, runtime=500.0, gpus=8, nodes=1, gpus_per_node=8, wall_seconds=3600.0, tenant="b")
    config = PolicyConfig(half_life_seconds=600.0, fair_share_preemption=True)
    result = simulate([long, newcomer], cluster=ClusterSpec(nodes=1), policy="muster", config=config, assumptions=Assumptions())
    first, second = result.records
    assert second.first_start == 1000.0 and first.preemptions == 1 and first.attempts[0] == (0.0, 1000.0, 8)
    # Off, or with a's job not preemptible, b waits for it to end.
    for jobs, cfg in (([long, newcomer], PolicyConfig(half_life_seconds=600.0)), ([replace(long, preemptible=False), newcomer], config)):
        kept = simulate(jobs, cluster=ClusterSpec(nodes=1), policy="muster", config=cfg, assumptions=Assumptions())
        assert kept.records[1].first_start == 20000.0 and kept.records[0].preemptions == 0


def test_decayed_usage_matches_the_closed_form() -> None:
    h = 1000.0
    usage = DecayedUsage(h, origin=0.0)
    usage.allocate(("user:a",), 0.0, 8, 1.0)
    usage.release(("user:a",), 0.0, 500.0, 8, 1.0)
    usage.allocate(("user:a",), 800.0, 2, 0.25)
    now = 1200.0
    usage.advance(now)

    def closed(start: float, end: float) -> float:
        return h / math.log(2) * (2 ** (-(now - end) / h) - 2 ** (-(now - start) / h))

    gpu, node = usage.usage("user:a", now)
    assert gpu == pytest.approx(8 * closed(0, 500) + 2 * closed(800, now))
    assert node == pytest.approx(closed(0, 500) + 0.25 * closed(800, now))
    # Past ten half-lives a released allocation is no longer read, as in quotas.selectors.
    later = 500.0 + 10 * h + 1
    usage.advance(later)
    gpu, _ = usage.usage("user:a", later)
    now = later
    assert gpu == pytest.approx(2 * closed(800, later))


def test_nodes_for_load() -> None:
    # 2 jobs x 8 GPUs x 1000 s over a 1000 s window: 16,000 GPU-s / 1000 s = 16 GPUs = 2 nodes at load 1.
    jobs = [job(1, 0.0, 1000.0, 8), job(2, 1000.0, 1000.0, 8)]
    assert nodes_for_load(jobs, 1.0, 8) == 2
    assert nodes_for_load(jobs, 0.5, 8) == 4


def test_the_forecast_changes_no_decision() -> None:
    jobs = [job(i, float(i * 11 % 400), float(60 + (i * 53) % 900), [1, 2, 8, 16][i % 4], tenant="abc"[i % 3]) for i in range(1, 90)]
    jobs.sort(key=lambda j: (j.submit, j.id))

    def starts(config: PolicyConfig) -> list[tuple[float | None, float | None, float | None]]:
        result = simulate(jobs, cluster=ClusterSpec(nodes=3), policy="muster", config=config, assumptions=Assumptions())
        return [(r.first_start, r.end, r.promised_start) for r in result.records]

    assert starts(PolicyConfig(starvation_seconds=120)) == starts(PolicyConfig(starvation_seconds=120, plan_jobs=0))


def test_a_job_is_promised_a_start_when_its_own_starvation_threshold_passes() -> None:
    # Both nodes are busy until 1000; job 3 (one node, wall 400 s) starves at 1 + max(60, 1.5 x 400) = 601. Nothing
    # else happens in between: only a wake-up at its own threshold calls the policy then.
    jobs = [job(1, 0.0, 1000.0, 8), job(2, 0.0, 1000.0, 8), job(3, 1.0, 400.0, 8)]
    config = PolicyConfig(starvation_seconds=60, starvation_wall_factor=1.5)
    result = simulate(jobs, cluster=ClusterSpec(nodes=2), policy="muster", config=config, assumptions=Assumptions())
    record = next(r for r in result.records if r.job.id == 3)
    assert (record.promised_at, record.promised_start, record.first_start) == (601.0, 1000.0, 1000.0)


def test_an_elastic_job_starts_small_grows_and_finishes_sooner_by_the_work_it_did() -> None:
    """4 nodes. A fixed 2-node job runs an hour; an elastic 2..4-node job of 2 hours' work on all 4 starts on the 2 left,
    grows to 4 when the first ends, and ends at 2.5 h (an hour at half speed, then 1.5 h); fixed, it would end at 3 h."""
    from dataclasses import replace

    hour = 3600.0
    fixed = job(1, 0.0, hour, 16)
    ask = replace(job(2, 1.0, 2 * hour, 32), wall_seconds=4 * hour)
    elastic = replace(ask, min_nodes=2)
    assert run([fixed, ask], nodes=4)[1] == (hour, 3 * hour)
    result = simulate([fixed, elastic], cluster=ClusterSpec(nodes=4), policy="muster", config=PolicyConfig(), assumptions=Assumptions())
    record = result.records[1]
    # An hour less 1 s at half speed, then the rest (1.5 h + 0.5 s) on all four.
    assert record.first_start == 1.0 and record.end == pytest.approx(2.5 * hour + 0.5)
    # Held 2 nodes until the first job ended, then 4: what the utilisation and fair share count.
    assert record.attempts == [(1.0, hour, 16), (hour, pytest.approx(2.5 * hour + 0.5), 32)]
    assert "an elastic job holds min_nodes..nodes whole nodes" in result.checks


def test_the_trace_makes_a_stated_share_of_multi_node_jobs_elastic() -> None:
    from replay.trace import read_trace

    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"] + [
        f"2017-10-01 00:0{i}:00,3600,{g},0,vc1" for i, g in enumerate([8, 16, 32, 16, 64])
    ]
    jobs = read_trace(lines, assumptions=Assumptions(elastic_share=0.5))
    # The multi-node jobs are the 2nd to 5th; every second of them (the 3rd and 5th rows) is elastic on half its nodes.
    assert [(j.nodes, j.min_nodes) for j in jobs] == [(1, 0), (2, 0), (4, 2), (2, 0), (8, 4)]
    # Its wall time is what it needs on its fewest nodes: twice its run time, rounded up to the hour.
    assert [j.wall_seconds for j in jobs if j.min_nodes] == [7200.0, 7200.0]


def test_a_production_job_stops_a_normal_one_and_the_summary_splits_waits_by_class() -> None:
    from replay.metrics import summarize
    from replay.trace import read_trace

    # One 8-GPU node: a normal whole-node job for 10 h, then (20 min later) the trace's second job, made production.
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster", "2017-10-01 00:00:00,36000,8,0,vc1", "2017-10-01 00:20:00,3600,8,0,vc2"]
    jobs = read_trace(lines, assumptions=Assumptions(production_share=0.5))
    assert [j.class_rank for j in jobs] == [1, 0]
    result = simulate(jobs, cluster=ClusterSpec(nodes=1), policy="muster", config=PolicyConfig(), assumptions=Assumptions())
    normal, production = result.records
    assert production.first_start == production.job.submit  # it did not wait: the normal job was stopped for it
    assert normal.preemptions == 1 and normal.gpu_seconds_lost == pytest.approx(8 * 1200.0)
    classes = summarize(result, config=PolicyConfig())["wait"]["by_priority_class"]
    assert classes["production"] == {"mean": 0.0, "median": 0.0, "p99": 0.0, "jobs": 1, "preemptions": 0}
    assert classes["normal"]["jobs"] == 1 and classes["normal"]["preemptions"] == 1 and classes["normal"]["mean"] == 0.0
