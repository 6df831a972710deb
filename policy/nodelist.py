"""Node names as Slurm writes a list of them (squeue's NODELIST, scontrol's NodeName=), for every page and reason.

The client has its own copy (`muster_client.render.hostlist`, with the parser `hostlist_names`): it is installed
without the server, so it cannot import this one."""

from __future__ import annotations

import re
from collections.abc import Sequence


def hostlist(names: Sequence[str]) -> str:
    """Numbered names of one prefix and width as ranges, `sim-node-[000-007,009-012]`; other names as they are."""
    groups: dict[tuple[str, int], list[int]] = {}
    others: list[str] = []
    for name in names:
        match = re.fullmatch(r"(.*?)(\d+)", name)
        if match:
            groups.setdefault((match.group(1), len(match.group(2))), []).append(int(match.group(2)))
        else:
            others.append(name)
    parts = []
    for (prefix, width), numbers in groups.items():
        numbers = sorted(set(numbers))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        spans: list[list[int]] = []
        for n in numbers:
            if spans and n == spans[-1][1] + 1:
                spans[-1][1] = n
            else:
                spans.append([n, n])
        ranges = ",".join(f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in spans)
        parts.append(f"{prefix}[{ranges}]")
    return ",".join(parts + others)
