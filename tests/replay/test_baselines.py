"""FIFO and EASY backfill on hand-made snapshots and traces where the right schedule is known."""

from __future__ import annotations

from policy.baselines import HEAD_OF_LINE, easy, fifo
from policy.model import NOT_EXAMINED, RESERVATION, NodeView, PendingJob, PolicyConfig, RunningJob, Snapshot
from replay.simulator import ClusterSpec, simulate
from replay.trace import Assumptions, TraceJob

NOW = 1_000_000.0


def nodes(free: list[int]) -> tuple[NodeView, ...]:
    return tuple(NodeView(f"n{i}", 8, f, "r0") for i, f in enumerate(free))


def pending(job_id: int, n: int = 1, gpus: int = 8, wall: float = 3600.0, at: float | None = None) -> PendingJob:
    return PendingJob(
        id=job_id, nodes=n, gpus_per_node=gpus, class_rank=1, submitted_at=NOW - 100 + job_id if at is None else at, wall_seconds=wall
    )


def running(job_id: int, node: str, gpus: int, ends_in: float) -> RunningJob:
    return RunningJob(id=job_id, node_names=(node,), gpus_held=(gpus,), class_rank=1, started_at=NOW - 10, ends_at=NOW + ends_in)


def test_fifo_head_of_line_blocks_everything_behind_it() -> None:
    # n0 has 4 GPUs free, n1 none: the head wants 8 on one node; the 1-GPU job behind would fit but must wait.
    snap = Snapshot(
        nodes([4, 0]), (pending(1, gpus=8), pending(2, gpus=1)), (running(10, "n0", 4, 600), running(11, "n1", 8, 7200)), now=NOW
    )
    d = fifo(snap, PolicyConfig())
    assert d.placements == ()
    head, behind = d.waiting
    assert head.job_id == 1 and head.estimated_start == NOW + 600
    assert behind.job_id == 2 and behind.reason_code == HEAD_OF_LINE and behind.estimated_start is None


def test_fifo_starts_in_submit_order_while_they_fit() -> None:
    snap = Snapshot(
        nodes([8, 8]), (pending(2, gpus=8, at=NOW - 5), pending(1, gpus=8, at=NOW - 9), pending(3, gpus=1, at=NOW - 1)), now=NOW
    )
    d = fifo(snap, PolicyConfig())
    assert [p.job_id for p in d.placements] == [1, 2]
    assert [w.job_id for w in d.waiting] == [3]


def test_easy_backfills_a_short_job_that_ends_before_the_reservation() -> None:
    # Head: a 2-node gang; n0 frees at +2h, n1 at +1h, so the reservation starts at +2h on both.
    # n2 has 4 GPUs free and is not reserved; n0 has 4 free but is reserved.
    snap = Snapshot(
        nodes([4, 0, 4]),
        (pending(1, n=2, gpus=8), pending(2, gpus=4, wall=3600.0)),
        (running(10, "n0", 4, 7200), running(11, "n1", 8, 3600), running(12, "n2", 4, 90000)),
        now=NOW,
    )
    d = easy(snap, PolicyConfig())
    (reservation,) = d.reservations
    assert reservation.job_id == 1 and reservation.start == NOW + 7200
    assert set(reservation.node_names) == {"n0", "n1"}
    (placement,) = d.placements
    assert placement.job_id == 2  # ends by +1h, before the reservation: backfilled (best fit may pick either node)


def test_easy_refuses_a_job_that_would_delay_the_reservation() -> None:
    # As above, but the candidate runs 3h: it may not touch n0 (reserved from +2h); n2 is not free enough for 8 GPUs.
    snap = Snapshot(
        nodes([4, 0, 4]),
        (pending(1, n=2, gpus=8), pending(2, gpus=4, wall=3 * 3600.0)),
        (running(10, "n0", 4, 7200), running(11, "n1", 8, 3600), running(12, "n2", 4, 90000)),
        now=NOW,
    )
    d = easy(snap, PolicyConfig())
    # n2 is not reserved, so the long 4-GPU job may use it: only nodes the reservation does not need.
    (placement,) = d.placements
    assert placement.node_names == ("n2",)
    snap_long = Snapshot(
        nodes([4, 0, 0]),
        (pending(1, n=2, gpus=8), pending(2, gpus=4, wall=3 * 3600.0)),
        (running(10, "n0", 4, 7200), running(11, "n1", 8, 3600), running(12, "n2", 8, 90000)),
        now=NOW,
    )
    d = easy(snap_long, PolicyConfig())
    assert d.placements == ()
    assert {w.job_id: w.reason_code for w in d.waiting}[2] == RESERVATION


def test_baselines_honour_max_jobs() -> None:
    snap = Snapshot(nodes([0]), tuple(pending(i, gpus=1) for i in range(1, 6)), (running(10, "n0", 8, 60),), now=NOW)
    d = easy(snap, PolicyConfig(max_jobs=2))
    assert [w.reason_code for w in d.waiting][2:] == [NOT_EXAMINED] * 3


def job(job_id: int, submit: float, runtime: float, gpus: int, tenant: str = "a") -> TraceJob:
    nodes_ = 1 if gpus <= 8 else -(-gpus // 8)
    return TraceJob(
        id=job_id,
        submit=submit,
        runtime=runtime,
        gpus=gpus,
        nodes=nodes_,
        gpus_per_node=gpus if nodes_ == 1 else 8,
        wall_seconds=runtime,
        tenant=tenant,
    )


TRACE = [
    job(1, 0.0, 100.0, 8),  # fills n0 until 100
    job(2, 1.0, 50.0, 16),  # a gang: needs n0 and n1, waits for job 1
    job(3, 2.0, 40.0, 4),  # fits n1 now; ends at 42 < 100 (the gang's reservation)
    job(4, 3.0, 500.0, 4),  # fits n1 now but would run past 100 and n1 is reserved for the gang
]


def starts(policy: str) -> dict[int, float | None]:
    result = simulate(TRACE, cluster=ClusterSpec(nodes=2), policy=policy, config=PolicyConfig(), assumptions=Assumptions())
    return {r.job.id: r.first_start for r in result.records}


def test_fifo_schedule_on_a_trace() -> None:
    # Job 2 blocks 3 and 4 until it starts at 100 and ends at 150; then 3 and 4 share n0 (best fit).
    assert starts("fifo") == {1: 0.0, 2: 100.0, 3: 150.0, 4: 150.0}


def test_easy_schedule_on_a_trace() -> None:
    # Job 3 is backfilled at 2 (ends at 42, before 100); job 4 would delay the gang and waits until it ends.
    assert starts("easy") == {1: 0.0, 2: 100.0, 3: 2.0, 4: 150.0}
