"""Promises hold over many cycles: a stateful property test of the policy's kept reservations.

Hypothesis drives a small cluster through sequences of submits, cycles, jobs ending (at or before
their wall time), time passing and nodes lost. As on the platform, a cycle runs whenever a job ends
and when a reservation's start comes (the beat runs one every few seconds besides). Between cycles the only state that crosses is what the
platform stores: the previous cycle's reservations (Snapshot.reservations). The properties:

- a reserved job keeps its start until it starts: a later cycle may move it earlier (onto other
  nodes only then), never later, unless a node it held was lost in between (then its reason says it moved);
- a reserved job whose start has come is started in that cycle;
- nothing started, running or reserved ever overlaps another beyond a node's GPUs.

`PromisesUnderQuotas` runs the same machine with GPU quotas on two of the three users: their later jobs
(started within quota, or borrowing when preemptible) must not take the quota a promised job needs, and a
preempted job is requeued barred from borrowing for the hysteresis, as on the platform.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from policy.model import ESTIMATE_RESERVED, Account, NodeView, PendingJob, PolicyConfig, Reservation, RunningJob, Snapshot, user_key
from policy.schedule import schedule

NOW = 1_800_000_000.0
GPUS = 8
NODES = ("n0", "n1", "n2", "n3", "n4")
CONFIG = PolicyConfig(starvation_seconds=600.0, max_reservations=3, preemption_min_runtime_seconds=300.0, plan_jobs=20)


@dataclass
class Run:
    job: PendingJob
    nodes: tuple[str, ...]
    gpus: tuple[int, ...]
    started: float
    # When it really ends: at most its wall time.
    finishes: float
    over_quota: bool = False


class Promises(RuleBasedStateMachine):
    accounts: tuple[Account, ...] = ()

    @initialize()
    def start(self) -> None:
        self.now = NOW
        self.next_id = 1
        self.nodes = {name: GPUS for name in NODES}
        self.pending: dict[int, PendingJob] = {}
        self.running: dict[int, Run] = {}
        self.runtimes: dict[int, float] = {}
        self.reservations: tuple[Reservation, ...] = ()
        self.lost_since_cycle: set[str] = set()

    @rule(
        nodes=st.sampled_from([1, 1, 1, 2, 3]),
        gpus=st.sampled_from([1, 2, 4, 8]),
        wall=st.sampled_from([300.0, 900.0, 1800.0, 3600.0]),
        fraction=st.sampled_from([0.25, 0.5, 1.0]),
        rank=st.sampled_from([0, 1, 1, 2]),
    )
    def submit(self, nodes: int, gpus: int, wall: float, fraction: float, rank: int) -> None:
        job_id, self.next_id = self.next_id, self.next_id + 1
        self.pending[job_id] = PendingJob(
            id=job_id,
            nodes=nodes,
            gpus_per_node=gpus if nodes == 1 else GPUS,
            class_rank=rank,
            submitted_at=self.now,
            user=f"u{job_id % 3}",
            preemptible=rank == 2,
            wall_seconds=wall,
        )
        self.runtimes[job_id] = wall * fraction

    @rule(seconds=st.sampled_from([60.0, 300.0, 700.0, 1800.0]))
    def time_passes(self, seconds: float) -> None:
        """Time passes as on the platform: a cycle runs when a job ends and when a reservation's start comes."""
        until = self.now + seconds
        while True:
            due = [run.finishes for run in self.running.values()] + [r.start for r in self.reservations]
            next_event = min((t for t in due if self.now < t <= until), default=None)
            if next_event is None:
                break
            self.now = next_event
            self._finish_due()
            self.cycle()
        self.now = until
        self._finish_due()

    def _finish_due(self) -> None:
        for job_id in [j for j, run in self.running.items() if run.finishes <= self.now]:
            del self.running[job_id]

    @precondition(lambda self: len(self.nodes) > 3)
    @rule(data=st.data())
    def a_node_is_lost(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        del self.nodes[name]
        self.lost_since_cycle.add(name)
        for job_id, run in list(self.running.items()):
            if name in run.nodes:
                # Its gang is torn down and requeued, keeping its submit time (the platform's node-loss path).
                del self.running[job_id]
                self.pending[job_id] = run.job

    @rule()
    def cycle(self) -> None:
        promised = {r.job_id: r for r in self.reservations}
        held: dict[str, int] = {}
        for run in self.running.values():
            for name, gpus in zip(run.nodes, run.gpus, strict=True):
                held[name] = held.get(name, 0) + gpus
        snapshot = Snapshot(
            nodes=tuple(NodeView(name, total, total - held.get(name, 0)) for name, total in sorted(self.nodes.items())),
            pending=tuple(self.pending.values()),
            running=tuple(
                RunningJob(
                    id=job_id,
                    node_names=run.nodes,
                    gpus_held=run.gpus,
                    class_rank=run.job.class_rank,
                    started_at=run.started,
                    ends_at=run.started + run.job.wall_seconds,
                    user=run.job.user,
                    preemptible=run.job.preemptible,
                    over_quota=run.over_quota,
                )
                for job_id, run in sorted(self.running.items())
            ),
            accounts={a.key: a for a in self.accounts},
            now=self.now,
            reservations=self.reservations,
        )
        decisions = schedule(snapshot, CONFIG)
        placed = {p.job_id for p in decisions.placements}
        kept = {r.job_id: r for r in decisions.reservations}
        waits = {w.job_id: w for w in decisions.waiting}
        for job_id, old in promised.items():
            if job_id not in self.pending or job_id in placed:
                continue
            if set(old.node_names) & self.lost_since_cycle:
                assert "Moved" in waits[job_id].reason or job_id in kept
                continue
            # Kept, on the same nodes, no later; and started once its start has come.
            assert job_id in kept, f"job {job_id} lost its reservation"
            assert kept[job_id].start <= old.start
            # Other nodes only for an earlier start (they freed up sooner).
            assert kept[job_id].node_names == old.node_names or kept[job_id].start < old.start
            assert self.now < old.start, f"job {job_id} was promised {old.start} and did not start at {self.now}"
            # Expected no later than promised: earlier when this cycle freed its nodes sooner (a reservation ahead of it
            # started elsewhere), which the promise, worked out before the walk, follows in the next cycle.
            assert waits[job_id].estimate == ESTIMATE_RESERVED
            assert self.now <= (waits[job_id].estimated_start or 0.0) <= kept[job_id].start
        for p in decisions.preemptions:
            run = self.running.pop(p.job_id)
            self.pending[p.job_id] = replace(run.job, preempted_at=self.now)
        for p in decisions.placements:
            job = self.pending.pop(p.job_id)
            self.running[p.job_id] = Run(job, p.node_names, p.gpus_held, self.now, self.now + self.runtimes[p.job_id], p.over_quota)
        self.reservations = decisions.reservations
        self.lost_since_cycle = set()
        self._no_overlap(decisions.reservations)

    def _no_overlap(self, reservations: tuple[Reservation, ...]) -> None:
        spoken: dict[str, list[tuple[float, float, int]]] = {name: [] for name in self.nodes}
        for run in self.running.values():
            for name, gpus in zip(run.nodes, run.gpus, strict=True):
                spoken[name].append((self.now, run.started + run.job.wall_seconds, gpus))
        for r in reservations:
            job = self.pending[r.job_id]
            for name in r.node_names:
                spoken[name].append((r.start, r.start + job.wall_seconds, GPUS if job.nodes > 1 else job.gpus_per_node))
        for name, intervals in spoken.items():
            for at in {start for start, _, _ in intervals}:
                assert sum(g for s, e, g in intervals if s <= at < e) <= self.nodes[name], (name, at)

    @invariant()
    def never_above_a_node(self) -> None:
        if not hasattr(self, "nodes"):
            return
        for name, total in self.nodes.items():
            assert sum(g for run in self.running.values() for n, g in zip(run.nodes, run.gpus, strict=True) if n == name) <= total


class PromisesUnderQuotas(Promises):
    accounts = (Account(user_key("u0"), max_gpus=8), Account(user_key("u1"), max_gpus=12))


Promises.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestPromisesOverTime = Promises.TestCase
PromisesUnderQuotas.TestCase.settings = settings(max_examples=600, stateful_step_count=40, deadline=None)
TestPromisesUnderQuotas = PromisesUnderQuotas.TestCase
