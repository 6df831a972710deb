"""Planning the queue forward reuses what it worked out for one job for the next (policy/forecast.py's _Planner):
every answer must be the one worked out from scratch over every node (policy.timeline.earliest_start)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policy.forecast import _Planner
from policy.model import PendingJob
from policy.timeline import Hold, Timelines, earliest_start
from tests.policy.test_fair_share_policy import NOW, pend

NODES = {f"n{i}": 8 for i in range(5)} | {"small": 4}
STEP = 600.0


def need_on(job: PendingJob, name: str) -> int:
    return NODES[name] if job.whole_nodes else job.gpus_per_node


def fitting_nodes(job: PendingJob) -> list[str]:
    return [name for name in sorted(NODES) if NODES[name] >= job.gpus_per_node]


@settings(max_examples=300, deadline=None)
@given(
    used=st.dictionaries(st.sampled_from(sorted(NODES)), st.tuples(st.integers(1, 4), st.integers(1, 6))),
    jobs=st.lists(
        st.tuples(st.integers(1, 3), st.sampled_from([1, 2, 4, 8]), st.integers(0, 3), st.integers(0, 2)), min_size=1, max_size=12
    ),
)
def test_each_planned_start_is_the_one_worked_out_over_every_node(
    used: dict[str, tuple[int, int]], jobs: list[tuple[int, int, int, int]]
) -> None:
    # Steps of ten minutes, so that nodes free up, and jobs fit, at the same instants (the ties the planner orders).
    def free(name: str) -> int:
        return NODES[name] - used[name][0] if name in used else NODES[name]

    def releases(name: str) -> list[tuple[float, int]]:
        return [(NOW + used[name][1] * STEP, used[name][0])] if name in used else []

    planned = Timelines(NODES, free, releases, NOW)
    scratch = Timelines(NODES, free, releases, NOW)
    planner = _Planner(planned, need_on, fitting_nodes)
    for i, (nodes, gpus, wall, after) in enumerate(jobs):
        job = pend(i, nodes=nodes, gpus=8 if nodes > 1 else gpus, wall=wall * STEP)
        expected = earliest_start(scratch, job, fitting_nodes(job), NOW + after * STEP, need_on, latest_open=True)
        assert planner.earliest(job, NOW + after * STEP) == expected
        if expected is not None:
            start, chosen = expected
            for tl in (planned, scratch):
                for name in chosen:
                    tl.hold(name, Hold(start, job.id, start + job.wall_seconds + STEP, need_on(job, name)))
