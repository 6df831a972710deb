"""Free GPUs per node, indexed so that one placement costs about as much as there are GPU counts.

A cluster of 1,000 nodes and a queue of 50,000 jobs rules out scanning every node
for every job. Nodes sit in buckets by free-GPU count (ordered sets, so every
walk is deterministic), and idle nodes are also kept per rack for the gangs.

Topology has two levels: the rack (e.g. the nodes under one top-of-rack switch) and
the block above it (a leaf or spine switch's domain). A gang goes to one rack if one
fits it, else to one block (as few racks of it as possible), else over as few blocks
and racks as possible.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from policy.model import NodeView

Allowed = Callable[[str], bool] | None


class Capacity:
    def __init__(self, nodes: Iterable[NodeView]) -> None:
        # Whole GPUs only: a node whose GPUs are shared takes GPU slices (policy/sharing.py) and nothing else.
        usable = sorted((n for n in nodes if n.schedulable and not n.sharing), key=lambda n: n.name)
        self.total = {n.name: n.gpus_total for n in usable}
        self.rack = {n.name: n.rack for n in usable}
        self.block = {n.name: n.block for n in usable}
        self.rdma = {n.name: n.rdma for n in usable}
        self.free = {n.name: min(max(n.gpus_free, 0), n.gpus_total) for n in usable}
        self.buckets: dict[int, dict[str, None]] = defaultdict(dict)
        self.idle_by_rack: dict[str, dict[str, None]] = defaultdict(dict)
        self.free_total = 0
        self.version = 0
        for n in usable:
            self._index(n.name)
            self.free_total += self.free[n.name]
        self.sizes = sorted(set(self.total.values()))

    def _index(self, name: str) -> None:
        self.buckets[self.free[name]][name] = None
        if self.free[name] == self.total[name]:
            self.idle_by_rack[self.rack[name]][name] = None

    def _unindex(self, name: str) -> None:
        del self.buckets[self.free[name]][name]
        if self.free[name] == self.total[name]:
            del self.idle_by_rack[self.rack[name]][name]

    def take(self, name: str, gpus: int) -> None:
        if gpus > self.free[name]:
            raise ValueError(f"{name} has {self.free[name]} GPUs free, cannot take {gpus}")
        self._move(name, -gpus)

    def give(self, name: str, gpus: int) -> None:
        if name in self.free:
            self._move(name, min(gpus, self.total[name] - self.free[name]))

    def _move(self, name: str, delta: int) -> None:
        self._unindex(name)
        self.free[name] += delta
        self.free_total += delta
        self._index(name)
        self.version += 1

    def best_fit(self, gpus: int, allowed: Allowed = None, prefer: Allowed = None, look: int = 1) -> str | None:
        """The allowed node left with the fewest free GPUs after taking `gpus`; of those, the first `prefer` likes
        among the first `look` (a bound on the work), else the first."""
        for free in sorted(k for k, members in self.buckets.items() if k >= gpus and members):
            first: str | None = None
            seen = 0
            for name in self.buckets[free]:
                if allowed is not None and not allowed(name):
                    continue
                seen += 1
                if prefer is None or prefer(name):
                    return name
                first = first or name
                if seen >= look:
                    break
            if first is not None:
                return first
        return None

    def idle_nodes(self, gpus_per_node: int, allowed: Allowed = None) -> dict[str, list[str]]:
        """Idle nodes with at least `gpus_per_node` GPUs, by rack."""
        found: dict[str, list[str]] = {}
        for rack, members in self.idle_by_rack.items():
            names = [n for n in members if self.total[n] >= gpus_per_node and (allowed is None or allowed(n))]
            if names:
                found[rack] = names
        return found

    def idle_count(self) -> int:
        return sum(len(m) for m in self.idle_by_rack.values())

    def whole_nodes(self, count: int, gpus_per_node: int, allowed: Allowed = None) -> list[str] | None:
        """`count` idle nodes for a gang: one rack if any fits (the tightest), else one block (the tightest, as few of
        its racks as possible), else as few blocks and racks as possible."""
        if self.idle_count() < count:
            return None
        by_rack = self.idle_nodes(gpus_per_node, allowed)
        if sum(len(v) for v in by_rack.values()) < count:
            return None
        fitting = [r for r, names in by_rack.items() if len(names) >= count]
        if fitting:
            rack = min(fitting, key=lambda r: (len(by_rack[r]), r))
            return by_rack[rack][:count]
        # A rack's nodes share its block (the rack label is read under the block's).
        racks_of: dict[str, list[str]] = defaultdict(list)
        for rack, names in by_rack.items():
            racks_of[self.block[names[0]]].append(rack)
        idle_in = {block: sum(len(by_rack[r]) for r in racks) for block, racks in racks_of.items()}
        fitting_blocks = [b for b, n in idle_in.items() if n >= count]
        if fitting_blocks:
            blocks = [min(fitting_blocks, key=lambda b: (idle_in[b], b))]
        else:
            blocks = sorted(racks_of, key=lambda b: (-idle_in[b], b))
        chosen: list[str] = []
        for block in blocks:
            for rack in sorted(racks_of[block], key=lambda r: (-len(by_rack[r]), r)):
                chosen.extend(by_rack[rack][: count - len(chosen)])
                if len(chosen) == count:
                    return chosen
        return chosen

    def max_free(self) -> int:
        return max((k for k, members in self.buckets.items() if members), default=0)

    def partly_used(self) -> tuple[int, int]:
        """(nodes partly used, GPUs free on them)."""
        nodes = gpus = 0
        for free, members in self.buckets.items():
            if not free or not members:
                continue
            for name in members:
                if free < self.total[name]:
                    nodes += 1
                    gpus += free
        return nodes, gpus
