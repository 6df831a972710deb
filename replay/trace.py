"""Job traces for the replay: the Philly CSV and Muster's own history CSV, read into `TraceJob`s.

Two formats, told apart by the header line:

- Philly (`timestamp,duration,num_gpus,gpu_time,cluster`): submit time (UTC), run time in seconds,
  GPUs asked; the `cluster` column (the virtual cluster) is the tenant. There are no users.
- Muster history (`submitted_at,started_at,ended_at,nodes,gpus_per_node,wall_time_seconds,owner,team,
  priority_class,runtime_seconds,min_nodes,preemptible`; files without the last two columns are read too):
  ISO 8601 times; runtime = `runtime_seconds` (or ended_at - started_at when it is empty); the tenant is
  the team (the owner when there is none). `min_nodes` (empty: none) makes the job elastic, running on
  min_nodes..nodes nodes with its work scaling with the nodes it holds (its runtime is on all `nodes`);
  `preemptible` (true/false, empty: false) is the job's own flag.

Every bad row raises `TraceError` naming its 1-based line (the header is line 1): nothing partial is
returned. Jobs above one node's GPUs are gangs of whole nodes. Runtimes above
`Assumptions.runtime_cap_seconds` are cut to it; a job's wall time is its row's, else its runtime
rounded up to `wall_round_seconds` (at least one step). A history row whose runtime exceeds its wall
time is cut to its wall time (the platform stops a job at its wall time).
"""

from __future__ import annotations

import csv
import gzip
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

PHILLY_HEADER = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
HISTORY_HEADER = (
    "submitted_at",
    "started_at",
    "ended_at",
    "nodes",
    "gpus_per_node",
    "wall_time_seconds",
    "owner",
    "team",
    "priority_class",
    "runtime_seconds",
    "min_nodes",
    "preemptible",
)
# The history CSV before it said min_nodes and preemptible (every job rigid and not preemptible): still read.
HISTORY_HEADER_V1 = HISTORY_HEADER[:10]
# The platform's default MUSTER_PRIORITY_CLASSES, highest first; an unknown class ranks below them all.
DEFAULT_CLASSES = ("production", "normal", "preemptible")
RESUME_MODES = ("restart", "checkpoint")


class TraceError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line
        self.message = message


@dataclass(frozen=True)
class Assumptions:
    gpus_per_node: int = 8
    # A job asks for its runtime rounded up to this (>= runtime).
    wall_round_seconds: float = 3600.0
    # Runtimes above are cut to this (the trace's tail runs for weeks).
    runtime_cap_seconds: float | None = 7 * 24 * 3600.0
    # "restart" (a preempted job starts again from zero) or "checkpoint".
    resume: str = "restart"
    # With resume="checkpoint": the work since the last checkpoint is lost.
    checkpoint_seconds: float = 3600.0
    # Quotas and borrowing: each tenant's max_gpus is its equal share of the cluster's GPUs, and every job is
    # preemptible (it may borrow idle GPUs beyond the quota and is reclaimed when its owner's quota is needed).
    tenant_quotas: bool = False
    # Every job preemptible, without quotas: what fair-share preemption (PolicyConfig.fair_share_preemption) may stop.
    all_preemptible: bool = False
    # Elastic jobs: this share of the multi-node jobs, evenly spread in submit order (with 0.5 every second one), may run
    # on half their nodes (rounded up) to all of them; their work scales with the nodes they hold, and their wall time
    # is what they need on the fewest.
    elastic_share: float = 0.0
    # Priority classes: this share of the jobs, evenly spread in submit order (with 0.1 every tenth one), is of the highest
    # class and may stop the others' work (the rest keep the trace's class). The Philly trace has no classes, and without
    # them class preemption, and the wait for cheaper victims (PolicyConfig.preemption_defer_seconds), never happen.
    production_share: float = 0.0

    def __post_init__(self) -> None:
        if self.resume not in RESUME_MODES:
            raise ValueError(f"resume must be one of {RESUME_MODES}, not {self.resume!r}")
        if self.gpus_per_node < 1 or self.wall_round_seconds <= 0 or self.checkpoint_seconds <= 0:
            raise ValueError("gpus_per_node, wall_round_seconds and checkpoint_seconds must be positive")
        if not 0.0 <= self.elastic_share <= 1.0:
            raise ValueError("elastic_share is a share of the multi-node jobs, from 0 to 1")
        if not 0.0 <= self.production_share <= 1.0:
            raise ValueError("production_share is a share of the jobs, from 0 to 1")

    def describe(self) -> list[str]:
        cap = "Runtimes are kept as in the trace."
        if self.runtime_cap_seconds is not None:
            cap = f"Runtimes above {self.runtime_cap_seconds / 3600:g} hours are cut to {self.runtime_cap_seconds / 3600:g} hours."
        if self.resume == "restart":
            resume = "A preempted job is requeued (keeping its submit time) and starts again from zero."
        else:
            resume = (
                f"A preempted job is requeued (keeping its submit time) and resumes from its last checkpoint, "
                f"taken every {self.checkpoint_seconds / 3600:g} hours of run time: the work since then is lost."
            )
        quotas = (
            ["Each tenant's GPU quota is its equal share of the cluster's GPUs; every job may borrow beyond it and is preempted first."]
            if self.tenant_quotas
            else ["Every job is preemptible (submitted with preemptible: true); no tenant has a quota."]
            if self.all_preemptible
            else []
        )
        elastic = (
            [
                f"{self.elastic_share:.0%} of the multi-node jobs, evenly spread in submit order, are elastic: they run on half "
                "their nodes (rounded up) to all of them, their work scales with the nodes they hold, and their wall time is what "
                "they need on the fewest (rounded up as the others')."
            ]
            if self.elastic_share
            else []
        )
        production = (
            [
                f"{self.production_share:.0%} of the jobs, evenly spread in submit order, are of the class {DEFAULT_CLASSES[0]}: "
                "they may stop running jobs of a lower class."
            ]
            if self.production_share
            else []
        )
        return [
            f"Nodes have {self.gpus_per_node} GPUs; a job asking for more is a gang of whole nodes.",
            *elastic,
            *production,
            cap,
            f"A job's wall time is its runtime rounded up to {_hours(self.wall_round_seconds)}, unless the trace gives one.",
            resume,
            *quotas,
        ]


@dataclass(frozen=True)
class TraceJob:
    id: int  # 1..N in submit order
    submit: float  # seconds since the epoch
    runtime: float  # seconds (after the cap)
    gpus: int  # as asked
    nodes: int  # gpus <= gpus_per_node: 1; else ceil(gpus / gpus_per_node) whole nodes (a gang)
    gpus_per_node: int  # gpus if 1 node, else gpus_per_node (whole nodes)
    wall_seconds: float  # what the job asks for
    tenant: str  # team; the Philly `cluster` column
    user: str = ""  # if empty the tenant is the only account that counts
    class_rank: int = 1  # 0 highest
    preemptible: bool = False
    min_nodes: int = 0  # an elastic job's fewest nodes (its history row's, or Assumptions.elastic_share); 0: it runs on `nodes`


def open_trace(path: str | Path) -> Iterator[str]:
    """The lines of a trace file, gunzipped when it ends in .gz."""
    path = Path(path)
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
            yield from f
    else:
        with path.open(encoding="utf-8", newline="") as f:
            yield from f


@dataclass
class _Row:
    submit: float
    runtime: float
    nodes: int
    gpus_per_node: int
    gpus: int
    wall: float | None
    tenant: str
    user: str
    class_rank: int
    min_nodes: int = 0
    preemptible: bool = False


def read_trace(
    text_lines: Iterable[str], *, assumptions: Assumptions, start: datetime | None = None, end: datetime | None = None
) -> list[TraceJob]:
    """Parse a trace; keep the jobs submitted in [start, end), renumbered 1..N in submit order."""
    reader = csv.reader(iter(text_lines))
    try:
        header = next(reader)
    except StopIteration:
        raise TraceError(1, "empty trace: no header") from None
    except csv.Error as e:
        raise TraceError(1, f"unreadable header: {e}") from None
    names = tuple(h.strip().lower() for h in header)
    if names == PHILLY_HEADER:
        parse = _philly_row
    elif names in (HISTORY_HEADER, HISTORY_HEADER_V1):
        parse = _history_row
    else:
        raise TraceError(1, f"unknown header {','.join(header)!r}: expected {','.join(PHILLY_HEADER)} or {','.join(HISTORY_HEADER)}")
    lo = start.timestamp() if start else -math.inf
    hi = end.timestamp() if end else math.inf
    rows: list[tuple[float, int, _Row]] = []
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            break
        except csv.Error as e:
            raise TraceError(reader.line_num, f"unreadable row: {e}") from None
        line = reader.line_num
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(names):
            raise TraceError(line, f"expected {len(names)} fields, found {len(fields)}")
        try:
            row = parse([f.strip() for f in fields], assumptions)
        except _Bad as e:
            raise TraceError(line, str(e)) from None
        if lo <= row.submit < hi:
            rows.append((row.submit, line, row))
    rows.sort(key=lambda r: (r[0], r[1]))
    jobs = [_job(i, row, assumptions) for i, (_, _, row) in enumerate(rows, start=1)]
    if assumptions.elastic_share:
        jobs = _elastic(jobs, assumptions)
    return _production(jobs, assumptions.production_share) if assumptions.production_share else jobs


def _production(jobs: list[TraceJob], share: float) -> list[TraceJob]:
    """The evenly spread `share` of the jobs put in the highest class: the k-th job (from 0) when
    floor((k + 1) x share) > floor(k x share), as _elastic spreads its share."""
    return [replace(job, class_rank=0) if math.floor((k + 1) * share) > math.floor(k * share) else job for k, job in enumerate(jobs)]


def _elastic(jobs: list[TraceJob], a: Assumptions) -> list[TraceJob]:
    """The evenly spread `elastic_share` of the multi-node jobs made elastic: the k-th multi-node job (from 0) is elastic when
    floor((k + 1) x share) > floor(k x share), so with 0.5 every second one."""
    out, k = [], 0
    for job in jobs:
        if job.nodes > 1 and not job.min_nodes:  # a job elastic in its trace stays as it was
            if math.floor((k + 1) * a.elastic_share) > math.floor(k * a.elastic_share):
                low = math.ceil(job.nodes / 2)
                wall = max(1, math.ceil(job.runtime * job.nodes / low / a.wall_round_seconds)) * a.wall_round_seconds
                job = replace(job, min_nodes=low, wall_seconds=max(wall, job.wall_seconds))
            k += 1
        out.append(job)
    return out


def _job(job_id: int, row: _Row, a: Assumptions) -> TraceJob:
    runtime = row.runtime
    if a.runtime_cap_seconds is not None:
        runtime = min(runtime, a.runtime_cap_seconds)
    if row.wall is not None:
        wall = row.wall
        runtime = min(runtime, wall)
    else:
        wall = max(1, math.ceil(runtime / a.wall_round_seconds)) * a.wall_round_seconds
    return TraceJob(
        id=job_id,
        submit=row.submit,
        runtime=runtime,
        gpus=row.gpus,
        nodes=row.nodes,
        gpus_per_node=row.gpus_per_node,
        wall_seconds=wall,
        tenant=row.tenant,
        user=row.user,
        class_rank=row.class_rank,
        preemptible=row.preemptible or a.all_preemptible,
        min_nodes=row.min_nodes,
    )


class _Bad(Exception):
    pass


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise _Bad(f"{what} {text!r} is not a number") from None
    if not math.isfinite(value):
        raise _Bad(f"{what} {text!r} is not a finite number")
    return value


def _count(text: str, what: str) -> int:
    value = _number(text, what)
    if value != int(value) or value < 1:
        raise _Bad(f"{what} {text!r} is not a whole number of at least 1")
    return int(value)


def _time(text: str, what: str) -> float:
    try:
        at = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise _Bad(f"{what} {text!r} is not a date and time") from None
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.timestamp()


def _shape(gpus: int, gpus_per_node: int) -> tuple[int, int]:
    if gpus <= gpus_per_node:
        return 1, gpus
    return math.ceil(gpus / gpus_per_node), gpus_per_node


def _philly_row(fields: list[str], a: Assumptions) -> _Row:
    timestamp, duration, num_gpus, _gpu_time, cluster = fields
    submit = _time(timestamp, "timestamp")
    runtime = _number(duration, "duration")
    if runtime < 0:
        raise _Bad(f"duration {duration!r} is negative")
    gpus = _count(num_gpus, "num_gpus")
    if not cluster:
        raise _Bad("cluster is empty")
    nodes, per_node = _shape(gpus, a.gpus_per_node)
    return _Row(submit, runtime, nodes, per_node, gpus, None, cluster, "", 1)


def _history_row(fields: list[str], a: Assumptions) -> _Row:
    submitted, started, ended, nodes_text, per_node_text, wall_text, owner, team, priority_class, runtime_text = fields[:10]
    min_text, preemptible_text = fields[10:] or ("", "")
    submit = _time(submitted, "submitted_at")
    # runtime_seconds first: Muster's export gives the work of every attempt there (muster_history_export), which the
    # first start and the end do not say (a job requeued waited between its attempts).
    if runtime_text:
        runtime = _number(runtime_text, "runtime_seconds")
        if runtime < 0:
            raise _Bad(f"runtime_seconds {runtime_text!r} is negative")
    elif started and ended:
        runtime = _time(ended, "ended_at") - _time(started, "started_at")
        if runtime < 0:
            raise _Bad("ended_at is before started_at")
    else:
        raise _Bad("no runtime: started_at/ended_at and runtime_seconds are empty")
    nodes = _count(nodes_text, "nodes")
    per_node = _count(per_node_text, "gpus_per_node")
    if per_node > a.gpus_per_node:
        raise _Bad(f"gpus_per_node {per_node} is above the nodes' {a.gpus_per_node}")
    wall = _number(wall_text, "wall_time_seconds") if wall_text else None
    if wall is not None and wall <= 0:
        raise _Bad(f"wall_time_seconds {wall_text!r} is not positive")
    if not owner:
        raise _Bad("owner is empty")
    rank = DEFAULT_CLASSES.index(priority_class) if priority_class in DEFAULT_CLASSES else len(DEFAULT_CLASSES)
    min_nodes = _count(min_text, "min_nodes") if min_text else 0
    if min_nodes and min_nodes >= nodes:
        raise _Bad(f"min_nodes {min_nodes} is not below nodes {nodes} (an elastic job runs on min_nodes..nodes)")
    if preemptible_text.lower() not in ("", "true", "false", "1", "0"):
        raise _Bad(f"preemptible {preemptible_text!r} is not true or false")
    preemptible = preemptible_text.lower() in ("true", "1")
    return _Row(submit, runtime, nodes, per_node, nodes * per_node, wall, team or owner, owner, rank, min_nodes, preemptible)


def _hours(seconds: float) -> str:
    hours = seconds / 3600
    return "the hour" if hours == 1 else f"{hours:g} hours"
