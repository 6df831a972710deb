"""An admin's holds of nodes (Slurm's `scontrol update state=drain reason=...` and `state=resume`), one or many at once.

A held node takes no new work; the jobs running there keep running until they end, as under Slurm's drain. Every hold,
release and change of a hold's reason is on the audit trail (`node.hold`, `node.release`, `node.update`), in the same
transaction as the change. Django admin's node page and its list's actions call these.
"""

from __future__ import annotations

import copy
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from audit.services import audit_changes, audit_record
from jobs.models import Allocation, Node
from jobs.states import ACTIVE_STATES

# The node's columns Muster owns, and so what an admin may change (the cluster's sync writes the rest).
NODE_HOLD_FIELDS = ("held", "held_reason", "failures_in_row")


def _values(node: Node) -> dict[str, Any]:
    return {name: getattr(node, name) for name in NODE_HOLD_FIELDS}


def node_hold_write(*, current: Node, node: Node, by: Any, request: Any = None) -> str | None:
    """Write `node`'s hold (its `held` and `held_reason`) over `current`, the row as locked, and record the change.

    A release starts a fresh failure count and clears the reason. Only Muster's own columns are written: a plain save()
    would write back the state the caller read over the cluster sync's. Returns the audit action, or None if nothing
    changed. The caller holds `current`'s row lock (select_for_update) in its transaction.
    """
    if not node.held:
        node.failures_in_row, node.held_reason = 0, ""
    else:
        node.failures_in_row = current.failures_in_row
    changes = audit_changes(_values(current), _values(node))
    if not changes:
        return None
    node.save(update_fields=[*NODE_HOLD_FIELDS, "updated_at"])
    action = "node.hold" if node.held and not current.held else "node.release" if current.held and not node.held else "node.update"
    audit_record(actor=by, action=action, target=node, changes=changes, request=request)
    return action


def jobs_running_on(names: Iterable[str]) -> dict[str, list[int]]:
    """The jobs that hold GPUs on each of these nodes now, by node name, each list in id order (nodes without any left out)."""
    found: dict[str, set[int]] = defaultdict(set)
    held = Allocation.objects.filter(node__name__in=list(names), released_at__isnull=True, job__state__in=ACTIVE_STATES)
    for name, job_id in held.values_list("node__name", "job_id"):
        found[name].add(job_id)
    return {name: sorted(ids) for name, ids in sorted(found.items())}


@dataclass(frozen=True)
class NodesHeld:
    """What holding some nodes did: those held now, those already held whose reason changed or stayed, and the jobs
    still running on each (they run to their end there)."""

    held: list[str] = field(default_factory=list)
    reworded: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    running: dict[str, list[int]] = field(default_factory=dict)

    def summary(self) -> str:
        """'Held gpu-07, gpu-08: nothing new is placed there; node gpu-09 was held already: its reason is now this one.'

        Never a node's name first: Django admin capitalises a message's first letter, and "Gpu-09 was held already"
        named no node there is."""
        said = []
        if self.held:
            said.append(f"Held {', '.join(self.held)}: nothing new is placed there")
        for names, reworded in ((self.reworded, True), (self.unchanged, False)):
            if names:
                one = len(names) == 1
                tail = f": {'its' if one else 'their'} reason is now this one" if reworded else ", for this reason"
                said.append(f"{'node' if one else 'nodes'} {', '.join(names)} {'was' if one else 'were'} held already{tail}")
        text = "; ".join(said) + "."
        return text[:1].upper() + text[1:]

    def running_text(self) -> str:
        """'gpu-07: jobs 12, 15; gpu-08: job 3' (empty without any)."""
        return "; ".join(f"{name}: {'job' if len(ids) == 1 else 'jobs'} {', '.join(map(str, ids))}" for name, ids in self.running.items())


def nodes_hold(*, nodes: Iterable[Node], reason: str, by: Any, request: Any = None) -> NodesHeld:
    """Hold these nodes with one reason (required: users waiting for them read it), each on the audit trail.

    A node held already keeps its hold and takes the new reason (`node.update`), as `scontrol update state=drain
    reason=...` rewords a drain. Rows are locked in name order, so two admins holding overlapping sets never deadlock.
    """
    reason = reason.strip()
    if not reason:
        raise ValueError("a hold takes a reason")
    held: list[str] = []
    reworded: list[str] = []
    unchanged: list[str] = []
    with transaction.atomic():
        for current in Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("name"):
            node = copy.copy(current)
            node.held, node.held_reason = True, reason
            action = node_hold_write(current=current, node=node, by=by, request=request)
            (held if action == "node.hold" else reworded if action == "node.update" else unchanged).append(current.name)
        running = jobs_running_on(held + reworded + unchanged)
    return NodesHeld(held=held, reworded=reworded, unchanged=unchanged, running=running)


def nodes_release(*, nodes: Iterable[Node], by: Any, request: Any = None) -> tuple[list[str], list[str]]:
    """Release these nodes (each with a fresh failure count), each on the audit trail; returns (released, not held)."""
    released: list[str] = []
    not_held: list[str] = []
    with transaction.atomic():
        for current in Node.objects.select_for_update().filter(pk__in=[n.pk for n in nodes]).order_by("name"):
            if not current.held:
                not_held.append(current.name)
                continue
            node = copy.copy(current)
            node.held = False
            node_hold_write(current=current, node=node, by=by, request=request)
            released.append(current.name)
    return released, not_held
