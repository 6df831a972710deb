"""Job arrays: Slurm's `--array` index syntax, and the environment each element of an array runs with."""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.core.exceptions import ValidationError

ARRAY_MAX_INDEX = 1_000_000
ARRAY_SYNTAX = "Give the indices as Slurm does: 0-99, 1,3,5-7 or 0-98:2."
# One element: `7`, `0-99` or `0-98:2` (a range with a step), as `sbatch --array` writes them.
_ELEMENT = re.compile(r"(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?")


def array_indices(spec: str, *, max_count: int) -> list[int]:
    """The sorted, distinct indices of `spec` (`0-99`, `1,3,5-7`, `0-98:2`), at most `max_count` of them.

    Raises ValidationError({"array": [...]}) naming what is wrong with the text.
    """

    def refuse(message: str) -> ValidationError:
        return ValidationError({"array": [message]})

    text = spec.replace(" ", "")
    if not text:
        raise refuse(ARRAY_SYNTAX)
    if "%" in text:
        raise refuse("A limit on running elements (`%N`) is not supported; the queue and quotas decide how many run at once.")
    too_many = f"An array has at most {max_count} elements (MUSTER_MAX_ARRAY_SIZE); '{spec}' has more."
    indices: set[int] = set()
    for element in text.split(","):
        match = _ELEMENT.fullmatch(element)
        if match is None:
            raise refuse(f"'{element}' is not an index or a range; write 7, 0-99 or 0-98:2.")
        first = int(match["first"])
        last = int(match["last"]) if match["last"] is not None else first
        step = int(match["step"]) if match["step"] is not None else 1
        if last < first:
            raise refuse(f"'{element}' ends before it starts.")
        if step < 1:
            raise refuse(f"'{element}' has a step of 0.")
        if last > ARRAY_MAX_INDEX:
            raise refuse(f"Indices go up to {ARRAY_MAX_INDEX}; '{element}' goes past it.")
        if (last - first) // step + 1 > max_count:
            raise refuse(too_many)
        indices.update(range(first, last + 1, step))
        if len(indices) > max_count:
            raise refuse(too_many)
    return sorted(indices)


def index_ranges(indices: Iterable[int]) -> str:
    """Indices as sbatch --array writes them: `0-3,7` (the client's render.index_ranges, which cannot import this)."""
    spans: list[list[int]] = []
    for n in sorted(set(indices)):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)


def array_env(array_id: int | None, array_index: int | None) -> dict[str, str]:
    """What an element of an array finds in its environment (Slurm's SLURM_ARRAY_JOB_ID and SLURM_ARRAY_TASK_ID)."""
    if array_id is None or array_index is None:
        return {}
    return {"MUSTER_ARRAY_ID": str(array_id), "MUSTER_ARRAY_INDEX": str(array_index)}
