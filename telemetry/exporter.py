"""Muster's Prometheus metrics: read from the database at scrape time, plus counters the cycle keeps there.

Web, worker and beat are separate processes (and gunicorn runs several web workers), so
per-process prometheus-client counters would each see a different slice and reset on restart.
Everything /metrics exports is therefore read from the database when Prometheus scrapes:

- queue depth, quota standing, starvation, GPUs and nodes: aggregates over the jobs not ended, live
  allocations and nodes (a handful of queries, whatever the size of the queue or of the history);
- jobs ended, by final state: running totals each end adds 1 to as it is recorded (`telemetry.ended`);
- scheduling latency: a histogram of every start's wait since the job (re-)entered the queue, from running totals
  each start adds to as it is recorded (`telemetry.latency`: a row per bucket, however many jobs have ever started);
- what only the cycle knows (its duration, launches, launch failures, preemptions, cycles run
  or skipped): `CycleCounter` rows that the scheduler adds to at the end of every cycle with a
  single UPDATE (`scheduler.counters`).

`MusterCollector` is registered on a fresh registry per scrape (`metrics_text`), never on the
global one: the global registry would also export this process's own Python metrics, which
say nothing about the other processes.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, F, FloatField, Min, Q, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from jobs.models import Allocation, ClusterHealth, CycleCounter, Job, Node, NodeState
from jobs.selectors import waiting_jobs
from jobs.states import ACTIVE_STATES, TERMINAL_STATES, JobState
from policy.model import HELD
from quotas.selectors import accounts_above_quota
from scheduler.counters import BUCKET_COUNTER, CYCLE_SECONDS_BUCKETS
from scheduler.queue import starving_count
from telemetry.ended import ended_jobs
from telemetry.latency import LATENCY_SECONDS_BUCKETS, latency_histogram

logger = logging.getLogger(__name__)

LIVE_STATES = [state for state in JobState.values if state not in TERMINAL_STATES]
# Pending jobs no cycle has given a reason yet: the same name as the queue API's summary.
NEW_REASON = "NEW"


# --- the collector ---------------------------------------------------------------------------------


def _ts(value: datetime | None) -> float:
    return value.timestamp() if value else 0.0


class MusterCollector(Collector):
    """Reads everything at collect time: about seven queries per scrape, independent of the number of jobs."""

    def __init__(self, *, now: datetime | None = None) -> None:
        self.now = now

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily | HistogramMetricFamily]:
        now = self.now or timezone.now()
        yield from self._jobs(now)
        yield self._latency()
        yield from self._gpus_and_nodes(now)
        yield from self._cycle_counters()
        yield from self._health()

    def _jobs(self, now: datetime) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        # The states not ended, named: the (state, submitted_at) index finds those jobs among every job ever submitted,
        # where excluding the ended states read them all.
        live = (
            Job.objects.filter(state__in=LIVE_STATES)
            .values("state", "over_quota", "pending_reason_code")
            .annotate(
                n=Count("id"),
                oldest=Min("submitted_at"),
            )
        )
        by_state: dict[str, int] = defaultdict(int)
        by_reason: dict[str, int] = defaultdict(int)
        by_quota: dict[str, list[float]] = {"within": [0, 0.0], "over": [0, 0.0]}
        oldest: datetime | None = None
        for row in live:
            by_state[row["state"]] += row["n"]
            if row["state"] == JobState.PENDING:
                by_reason[row["pending_reason_code"] or NEW_REASON] += row["n"]
                if row["pending_reason_code"] != HELD:  # waiting for its release, not for the scheduler
                    oldest = row["oldest"] if oldest is None else min(oldest, row["oldest"])
            elif row["state"] in ACTIVE_STATES:
                counts = by_quota["over" if row["over_quota"] else "within"]
                counts[0] += row["n"]
        # GPUs held, from the live allocations: a slice counts its share and a gang its nodes whole, as quotas count.
        held = (
            Allocation.objects.filter(released_at__isnull=True, job__state__in=ACTIVE_STATES)
            .values("job__over_quota")
            .annotate(gpus=Sum("gpus"))
        )
        for row in held:
            by_quota["over" if row["job__over_quota"] else "within"][1] += row["gpus"] or 0.0
        queue = GaugeMetricFamily("muster_jobs", "Jobs not yet ended, by state (queue depth).", labels=["state"])
        for state in JobState.values:
            if state not in TERMINAL_STATES:
                queue.add_metric([state], by_state.get(state, 0))
        yield queue
        pending = GaugeMetricFamily(
            "muster_jobs_pending", "Pending jobs by why they wait (the scheduler's reason code; NEW: not examined yet).", labels=["reason"]
        )
        for reason, n in sorted(by_reason.items()):
            pending.add_metric([reason], n)
        yield pending
        running = GaugeMetricFamily(
            "muster_jobs_running", "Jobs holding GPUs (scheduled or running), within their quota or borrowing beyond it.", labels=["quota"]
        )
        running_gpus = GaugeMetricFamily(
            "muster_gpus_running", "GPUs held by jobs (a slice its share), within or beyond their quota.", labels=["quota"]
        )
        for standing, (count, gpus) in by_quota.items():
            running.add_metric([standing], count)
            running_gpus.add_metric([standing], gpus)
        yield running
        yield running_gpus
        above = GaugeMetricFamily(
            "muster_accounts_above_quota",
            "Users and teams holding more GPUs than their quota allows, lowered under their running jobs (not stopped).",
            labels=["kind"],
        )
        counted = Counter(a.limits.kind for a in accounts_above_quota())
        for kind in ("user", "team"):
            above.add_metric([kind], counted[kind])
        yield above
        yield GaugeMetricFamily(
            "muster_pending_oldest_wait_seconds",
            "How long the longest-waiting pending job has waited since it was submitted (0 when none is pending).",
            value=max(0.0, (now - oldest).total_seconds()) if oldest else 0.0,
        )
        yield GaugeMetricFamily(
            "muster_jobs_starving",
            "Pending jobs that have waited past their starvation threshold (MUSTER_STARVATION_SECONDS; a single-node job"
            " at least MUSTER_STARVATION_WALL_FACTOR x its wall time): they are owed a reservation.",
            value=starving_count(waiting_jobs(), now),
        )
        yield GaugeMetricFamily(
            "muster_starvation_threshold_seconds",
            "MUSTER_STARVATION_SECONDS: the shortest starvation threshold (longer jobs' grow with their wall time).",
            value=settings.MUSTER_STARVATION_SECONDS,
        )
        # Running totals each end added to (telemetry/ended.py): it counted every job ever ended on each scrape.
        ended = ended_jobs()
        total = CounterMetricFamily("muster_jobs_ended", "Jobs that have ended, by final state.", labels=["state"])
        for state in sorted(TERMINAL_STATES):
            total.add_metric([state], ended.get(state, 0))
        yield total

    def _latency(self) -> HistogramMetricFamily:
        # The running totals the starts added to (a row per bucket, never the starts): never lower at a later scrape,
        # as telemetry/latency.py says (the totals are only added to, in each start's transaction; the migration
        # counted the starts before them).
        counts, n, total = latency_histogram()
        buckets = [(_le(b), c) for b, c in zip(LATENCY_SECONDS_BUCKETS, counts, strict=True)] + [("+Inf", n)]
        return HistogramMetricFamily(
            "muster_scheduling_latency_seconds",
            "Queued (submitted, or requeued after a failed attempt or a preemption) to started (all pods running), per start.",
            buckets=buckets,
            sum_value=total,
        )

    def _gpus_and_nodes(self, now: datetime) -> Iterator[GaugeMetricFamily]:
        nodes = GaugeMetricFamily("muster_nodes", "Known nodes by state.", labels=["state"])
        held_nodes = GaugeMetricFamily(
            "muster_nodes_held", "Nodes held out of placement (by an admin, or after failures in a row), by state.", labels=["state"]
        )
        gpus_by_state = dict.fromkeys(NodeState.values, 0)
        count_by_state = dict.fromkeys(NodeState.values, 0)
        foreign_by_state = dict.fromkeys(NodeState.values, 0)
        held_by_state = dict.fromkeys(NodeState.values, 0)
        held_gpus_by_state = dict.fromkeys(NodeState.values, 0)
        # jobs.selectors.node_settles_until's rule, in SQL: READY again less than MUSTER_NODE_SETTLE_SECONDS ago.
        settling = Q(ready_since__gt=now - timedelta(seconds=settings.MUSTER_NODE_SETTLE_SECONDS))
        by_state = Node.objects.values_list("state").annotate(
            n=Count("id"),
            gpus=Sum("gpus_total"),
            # A shared node's foreign slices count as the share of a GPU each holds, as the nodes API's free GPUs do.
            foreign=Sum(F("gpus_foreign") + F("slices_foreign") * F("slice_gpus"), output_field=FloatField()),
            # Named apart from the columns they count: an annotation called `held` would hide the field from the filters.
            n_held=Count("id", filter=Q(held=True)),
            held_gpus=Sum("gpus_total", filter=Q(held=True)),
            n_settling=Count("id", filter=Q(held=False) & settling),
            open_gpus=Sum("gpus_total", filter=Q(held=False) & ~settling),
        )
        settling_nodes, schedulable = 0, 0
        for state, n, gpus, foreign, held, held_gpus, settles, open_gpus in by_state.values_list(
            "state", "n", "gpus", "foreign", "n_held", "held_gpus", "n_settling", "open_gpus"
        ):
            count_by_state[state] = n
            gpus_by_state[state] = gpus or 0
            foreign_by_state[state] = foreign or 0
            held_by_state[state] = held
            held_gpus_by_state[state] = held_gpus or 0
            if state == NodeState.READY:
                settling_nodes, schedulable = settles, open_gpus or 0
        for state in NodeState.values:
            nodes.add_metric([state], count_by_state[state])
            held_nodes.add_metric([state], held_by_state[state])
        yield nodes
        yield held_nodes
        yield GaugeMetricFamily(
            "muster_nodes_settling",
            "READY nodes not held that take no new work yet: back from NotReady or GONE less than MUSTER_NODE_SETTLE_SECONDS ago.",
            value=settling_nodes,
        )
        yield GaugeMetricFamily(
            "muster_gpus_total",
            "GPUs on nodes the cluster reports (not GONE), schedulable or not.",
            value=sum(g for s, g in gpus_by_state.items() if s != NodeState.GONE),
        )
        yield GaugeMetricFamily(
            "muster_gpus_schedulable",
            "GPUs on READY nodes that take new work: neither held nor settling. What the scheduler may place on.",
            value=schedulable,
        )
        yield GaugeMetricFamily(
            "muster_gpus_held",
            "GPUs on held nodes the cluster reports (not GONE): capacity an admin (or the failure hold) keeps from new work.",
            value=sum(g for s, g in held_gpus_by_state.items() if s != NodeState.GONE),
        )
        allocated = Allocation.objects.filter(released_at__isnull=True).aggregate(g=Sum("gpus"))["g"] or 0
        yield GaugeMetricFamily("muster_gpus_allocated", "GPUs held by live allocations (scheduled or running jobs).", value=allocated)
        yield GaugeMetricFamily(
            "muster_gpus_foreign",
            "GPUs held by pods Muster did not start on nodes the cluster reports (MUSTER_K8S_COUNT_FOREIGN_PODS); "
            "on a shared node, the GPU share of the slices they hold.",
            value=sum(g for s, g in foreign_by_state.items() if s != NodeState.GONE),
        )

    def _cycle_counters(self) -> Iterator[CounterMetricFamily | HistogramMetricFamily]:
        plain: dict[str, float] = defaultdict(float)
        buckets: dict[float, float] = dict.fromkeys(CYCLE_SECONDS_BUCKETS, 0.0)
        for name, le, value in CycleCounter.objects.values_list("name", "le", "value"):
            if name == BUCKET_COUNTER:
                buckets[le] = value
            else:
                plain[name] = value
        cycles = CounterMetricFamily(
            "muster_cycles",
            "Scheduling cycles: ran (held the lock), skipped (another cycle held it), cluster_unavailable (ran, cluster unreachable).",
            labels=["outcome"],
        )
        cycles.add_metric(["ran"], plain["cycles_ran"])
        cycles.add_metric(["skipped"], plain["cycles_skipped"])
        cycles.add_metric(["cluster_unavailable"], plain["cycles_cluster_unavailable"])
        yield cycles
        yield HistogramMetricFamily(
            "muster_cycle_duration_seconds",
            "How long each scheduling cycle that ran took.",
            buckets=[(_le(b), v) for b, v in sorted(buckets.items())] + [("+Inf", plain["cycle_seconds_count"])],
            sum_value=plain["cycle_seconds_sum"],
        )
        yield CounterMetricFamily("muster_launches", "Gangs launched on the cluster.", value=plain["launches"])
        yield CounterMetricFamily(
            "muster_launch_failures",
            "Failed launches, each requeued with a backoff or failed after too many: refused by the cluster, a container "
            "that could not start (ImagePullBackOff), a gang not up within MUSTER_LAUNCH_TIMEOUT_SECONDS.",
            value=plain["launch_failures"],
        )
        yield CounterMetricFamily("muster_preemptions", "Jobs preempted to make room for others.", value=plain["preemptions"])

    def _health(self) -> Iterator[GaugeMetricFamily]:
        health = ClusterHealth.objects.filter(pk=1).first()
        yield GaugeMetricFamily(
            "muster_last_cycle_timestamp_seconds",
            "When the last scheduling cycle that held the lock ran (Unix time; 0 before the first).",
            value=_ts(health.last_cycle_at if health else None),
        )
        yield GaugeMetricFamily(
            "muster_cluster_reachable",
            "1 if the last cycle reached the cluster backend, else 0.",
            value=1 if health is None or health.reachable else 0,
        )
        yield GaugeMetricFamily(
            "muster_cluster_down_since_timestamp_seconds",
            "When the current cluster outage began (Unix time; 0 while reachable).",
            value=_ts(health.down_since if health and not health.reachable else None),
        )


def _le(bound: float) -> str:
    """A bucket bound as Prometheus writes it (1.0, 0.25), so the text matches what client libraries emit."""
    return repr(float(bound))


def metrics_text(*, now: datetime | None = None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(MusterCollector(now=now))
    return generate_latest(registry)
