"""What a job may charge its owners' node-hour budgets: the one figure the cycle holds it to and a submit's estimate shows."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from policy.model import BudgetLeft, NodeView, PendingJob
from policy.sharing import Slices


def whole_gpu_node_sizes(nodes: Iterable[NodeView]) -> list[int]:
    """The GPU counts of the schedulable nodes of whole GPUs, smallest first, once each."""
    return sorted({n.gpus_total for n in nodes if n.schedulable and not n.sharing})


def budget_need(job: PendingJob, node_sizes: Sequence[int], slices: Slices) -> tuple[float, str]:
    """The most the job can charge its budget, in node-hours, and how that is worked out.

    The ledger charges the share of each node a job holds: whole nodes for a gang (an elastic one on its fewest);
    for a single-node job its GPUs over the node's; for a slice its share of a GPU over the node's GPUs. Which node
    it gets is not known yet, so the smallest node it fits on (the largest share) bounds it. `node_sizes` is
    `whole_gpu_node_sizes` of the cluster.
    """
    hours = job.wall_seconds / 3600
    if job.shares_gpu:
        share = slices.node_share(job)
        return share * hours, f"a slice of {share:.3g} of a node x {hours:.2f} h"
    if job.whole_nodes:
        nodes = job.start_shape().nodes
        return nodes * hours, f"{nodes} node{'s' if nodes != 1 else ''} x {hours:.2f} h"
    index = bisect_left(node_sizes, job.gpus_per_node)
    size = node_sizes[index] if index < len(node_sizes) else job.gpus_per_node
    if job.gpus_per_node >= size:
        return hours, f"1 node x {hours:.2f} h"
    return job.gpus_per_node / size * hours, f"{job.gpus_per_node} of a node's {size} GPUs x {hours:.2f} h"


def node_hours_text(hours: float, decimals: int = 1) -> str:
    """Node-hours as a reason or an estimate states them: `decimals` places (one by default), and under one as many
    figures plus one, so a short job on one GPU (0.02) does not read as using nothing."""
    return f"{hours:.{decimals}f}" if hours >= 1 else f"{hours:.{decimals + 1}g}"


def node_hours_words(hours: float | str, spec: str = "g") -> str:
    """A figure with its unit, as every message says it: '4 node-hours', '1 node-hour' for exactly one as written
    ('1.0 node-hours' is a figure to one place), the figure formatted by `spec` or given already written (the text of
    `node_hours_text` or of `node_hours_said`). A budget of 1 read 'its whole budget of 1 node-hours a period'."""
    text = hours if isinstance(hours, str) else format(hours, spec)
    return f"{text} node-hour{'' if text == '1' else 's'}"


# The finest a node-hour figure is stated to: a millionth (3.6 ms of a whole node). A use smaller still is said as that
# much, never as nothing; any other figure smaller still is a float's noise (a budget less a use summing to it).
NODE_HOURS_FINEST_PLACES = 6


def node_hours_places(*figures: float) -> int:
    """The places to state node-hour figures side by side: one, and more while a figure under one would show fewer than
    two significant figures (0.27, 0.011, 0.0042), to six at most. The client's `muster usage` has a copy of this rule
    (muster_client.render.node_hours_places), held to it by a test."""
    places = 1
    for figure in figures:
        size = abs(figure)
        if 0.5 * 10**-NODE_HOURS_FINEST_PLACES <= size < 1:
            places = max(places, min(NODE_HOURS_FINEST_PLACES, 1 - math.floor(math.log10(size))))
    return places


def exact_places(value: float, most: int = 3) -> int:
    """The fewest places (up to `most`) that state `value` as it is: a budget of 3 needs none, of 2.25 two."""
    return next((places for places in range(most) if abs(round(value, places) - value) < 1e-9), most)


@dataclass(frozen=True)
class NodeHoursSaid:
    """An account's node-hour figures as the Usage and Quotas pages state them (and `muster usage`, by the same rule):
    all to the same places, so that what was used and what is left add up to the budget as written, and a use that is
    not nothing never reads 0.0. The team's "0.0 used of 3" beside the user's "0.011 used" for the same jobs was a use
    stated to the places of the budget left."""

    places: int
    used: str
    # What is left and committed, a use too small to state counted as the finest figure (BudgetLeft.words(places)).
    budget: BudgetLeft | None

    @property
    def budget_text(self) -> str:
        return "" if self.budget is None else self.budget.words(self.places)[0]


def node_hours_said(*, used: float, budget: float | None, committed: float = 0.0) -> NodeHoursSaid:
    """`used` this period of `budget` (the period's: the quota's and what admins added; None: no budget), `committed`
    of what is left to running jobs. The places are those of the smallest figure (`node_hours_places`) and the budget's
    own; what was used is said as the budget less the left as written, each within half a unit of the truth."""
    finest = 10.0**-NODE_HOURS_FINEST_PLACES
    used = max(used, finest) if used > 0 else 0.0
    if budget is None:
        places = node_hours_places(used)
        return NodeHoursSaid(places=places, used=f"{used:.{places}f}", budget=None)
    left = BudgetLeft(left=max(0.0, budget - used), committed=committed)
    places = max(node_hours_places(used, left.left, left.committed, left.uncommitted), exact_places(budget))
    if used <= budget:
        used = budget - round(left.left, places)
    return NodeHoursSaid(places=places, used=f"{max(used, 0.0):.{places}f}", budget=left)


def budget_beside_need(budget: BudgetLeft, need: float) -> tuple[str, str]:
    """A budget's words and a job's need beside them, to as few decimals as still tell the truth about whether the
    job fits in what is left for new jobs: at one decimal 37.98 left and a need of 38.0 both read 38.0, and the
    job would wait for no reason a user could see."""
    fits = need <= budget.uncommitted
    for extra in range(3):
        text, free = budget.words(budget.decimals + extra)
        need_text = node_hours_text(need, 1 + extra)
        if (float(need_text) <= free) == fits:
            break
    return text, need_text


# Node-hours are sums of shares times hours: a sum that should be the budget may come out a hair above it.
_EPSILON = 1e-9


class BudgetPlan:
    """One account's node-hour budget as the forecast plans the queue forward.

    Until the period renews, new jobs share what is left less what running and promised jobs are committed to (the
    `BUDGET` check's figure); each job planned in that time commits its whole need, as it will when it starts. From
    the renewal the whole budget is back, less what runs into the new period: the rest of the wall time of every job
    running or planned across the renewal, as the cycle then counts it. So a budget that fits one more job gets one
    job planned at its renewal, not every job waiting on it.
    """

    def __init__(self, room: float, renews: float | None, budget: float | None, holding: Iterable[tuple[float, float, float]]) -> None:
        """`holding`: (node share, start, wall-time end) of what runs or is promised now."""
        self.room = room
        self.renews = renews
        self.next_room: float | None = None
        if renews is not None and budget is not None:
            self.next_room = budget - sum(share * max(0.0, ends - max(start, renews)) / 3600 for share, start, ends in holding)

    def earliest(self, hours: float, after: float) -> float | None:
        """The first instant at or after `after` a job that may use `hours` fits in the budget (None: not this period
        or the next)."""
        if (self.renews is None or after < self.renews) and hours <= self.room + _EPSILON:
            return after
        if self.next_room is None or self.renews is None or hours > self.next_room + _EPSILON:
            return None
        return max(after, self.renews)

    def hold(self, hours: float, start: float, wall_seconds: float) -> None:
        """A job planned to start at `start` that may use `hours` over `wall_seconds`."""
        if self.renews is None or start < self.renews:
            self.room -= hours
            if self.next_room is not None and self.renews is not None and wall_seconds > 0:
                self.next_room -= hours * max(0.0, start + wall_seconds - self.renews) / wall_seconds
        elif self.next_room is not None:
            self.next_room -= hours
