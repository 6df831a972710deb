"""Planned maintenance windows (Slurm's `scontrol create reservation ... flags=maint`), over plain data.

A window takes every GPU of its whole-GPU nodes from its start to its end, as a hold on the cycle's timelines
(`maintenance_holds`) that no job owns, the way a reservation holds its nodes. So, with nothing else to it:
- before the start, backfill still starts there a job that ends by the start, and no job whose wall time would reach
  it (the waiting job's reason says which window, `maintenance_text`);
- from the start to the end, nothing new starts there (a job still running there runs on: it was started before the
  window was scheduled), nor is a job preempted or an elastic job grown into it;
- after the end the nodes are free again, with no one acting;
- promises and estimates plan around the window from the moment it is scheduled, so a promise is right from the
  start and not moved later when the window comes (issue 13).
A node that shares its GPUs (GPU slices, which the timelines do not plan) is closed while its window is on
(`close_for_maintenance`) and counted back from the end, as a node settling after NotReady.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace

from policy.model import MaintenanceWindow, NodeView, Snapshot, when
from policy.nodelist import hostlist
from policy.timeline import Hold


def _closed(node: NodeView, window: MaintenanceWindow) -> NodeView:
    why = f"in maintenance until {when(window.end)}" + (f": {window.reason}" if window.reason else "")
    if not node.schedulable and node.opens_at is None:
        # Closed already until someone acts (held, cordoned, not ready): the window changes nothing of that.
        return node
    opens = window.end if node.opens_at is None else max(node.opens_at, window.end)
    return replace(node, schedulable=False, closed_why=why, opens_at=opens)


def close_for_maintenance(snapshot: Snapshot) -> Snapshot:
    """The snapshot with the GPU-sharing nodes of each window on now closed until its end, and only the windows not
    over yet kept. A snapshot without windows is returned as it is."""
    if not snapshot.maintenance:
        return snapshot
    now = snapshot.now
    on: dict[str, MaintenanceWindow] = {}
    for window in sorted(snapshot.maintenance, key=lambda w: (w.start, w.id)):
        if window.start <= now < window.end:
            for name in window.node_names:
                on.setdefault(name, window)
    nodes = tuple(_closed(n, on[n.name]) if n.sharing and n.name in on else n for n in snapshot.nodes)
    kept = tuple(w for w in snapshot.maintenance if w.end > now)
    return replace(snapshot, nodes=nodes, maintenance=kept)


def maintenance_holds(windows: Sequence[MaintenanceWindow], total: Mapping[str, int]) -> Iterator[tuple[str, Hold]]:
    """A hold of every GPU of each whole-GPU node (`total`: the open ones) from each window's start to its end. The
    hold's job id is the window's id made negative: no job has it, so no job's own hold is ever taken for it."""
    for window in windows:
        for name in window.node_names:
            if name in total:
                yield name, Hold(window.start, -window.id, window.end, total[name])


def maintenance_text(windows: Sequence[MaintenanceWindow], now: float, ends_at: float, fits: Callable[[str], bool]) -> str:
    """Why a job that would fit now, but for the windows, waits: 'Nodes gpu-[07-08] go into maintenance at 2026-11-28
    18:00 UTC (firmware), until 2026-11-29 02:00 UTC: this job's wall time would reach it.', or for a window on now
    'Nodes gpu-[07-08] are in maintenance (firmware) until ...: nothing new starts there before.' Empty when no window
    on nodes it could run on (`fits`) starts before the job's wall time would end."""
    reached = [w for w in sorted(windows, key=lambda w: (w.start, w.id)) if w.start < ends_at and any(fits(n) for n in w.node_names)]
    if not reached:
        return ""
    first = reached[0]
    one = len(first.node_names) == 1
    names = f"{'Node' if one else 'Nodes'} {hostlist(first.node_names)}"
    why = f" ({first.reason})" if first.reason else ""
    if first.start <= now:
        text = f"{names} {'is' if one else 'are'} in maintenance{why} until {when(first.end)}: nothing new starts there before."
    else:
        text = (
            f"{names} {'goes' if one else 'go'} into maintenance at {when(first.start)}{why}, until {when(first.end)}: "
            "this job's wall time would reach it."
        )
    if rest := len(reached) - 1:
        text += f" {rest} more maintenance window{'' if rest == 1 else 's'} start{'s' if rest == 1 else ''} before it would end."
    return text
