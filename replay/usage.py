"""Fair-share usage decayed as the cycle decays it (quotas.selectors.accounts_snapshot), kept as running sums."""

from __future__ import annotations

import math

# As quotas.selectors.DECAY_HORIZON_HALF_LIVES: older allocations are not read.
DECAY_HORIZON_HALF_LIVES = 10


class DecayedUsage:
    """Decayed GPU- and node-seconds per account, as quotas.selectors._decayed_usage computes them."""

    def __init__(self, half_life: float, origin: float) -> None:
        self.h = half_life
        self.base = origin  # terms are g * 2^((t - base) / h)
        self.closed: dict[str, list[float]] = {}  # key -> [gpu, node] sums of released allocations
        self.live: dict[str, list[float]] = {}  # key -> [gpus, gpu terms, node share, node terms]
        self.released: list[tuple[float, float, float, int, float, tuple[str, ...]]] = []  # (end, start, end, gpus, share, keys)
        self.released_head = 0

    def _term(self, t: float) -> float:
        return float(2 ** ((t - self.base) / self.h))

    def allocate(self, keys: tuple[str, ...], start: float, gpus: int, share: float) -> None:
        term = self._term(start)
        for key in keys:
            live = self.live.setdefault(key, [0.0, 0.0, 0.0, 0.0])
            live[0] += gpus
            live[1] += gpus * term
            live[2] += share
            live[3] += share * term

    def release(self, keys: tuple[str, ...], start: float, end: float, gpus: int, share: float) -> None:
        term_start, term_end = self._term(start), self._term(end)
        for key in keys:
            live = self.live[key]
            live[0] -= gpus
            live[1] -= gpus * term_start
            live[2] -= share
            live[3] -= share * term_start
            closed = self.closed.setdefault(key, [0.0, 0.0])
            closed[0] += gpus * (term_end - term_start)
            closed[1] += share * (term_end - term_start)
        self.released.append((end, start, end, gpus, share, keys))

    def advance(self, now: float) -> None:
        horizon = now - DECAY_HORIZON_HALF_LIVES * self.h
        while self.released_head < len(self.released) and self.released[self.released_head][0] < horizon:
            _, start, end, gpus, share, keys = self.released[self.released_head]
            diff = self._term(end) - self._term(start)
            for key in keys:
                self.closed[key][0] -= gpus * diff
                self.closed[key][1] -= share * diff
            self.released_head += 1
        if self.released_head > 4096 and self.released_head * 2 > len(self.released):
            del self.released[: self.released_head]
            self.released_head = 0
        if (now - self.base) / self.h > 64:  # rebase so the terms stay small
            scale = float(2 ** (-(now - self.base) / self.h))
            self.base = now
            for closed in self.closed.values():
                closed[0] *= scale
                closed[1] *= scale
            for live in self.live.values():
                live[1] *= scale
                live[3] *= scale

    def usage(self, key: str, now: float) -> tuple[float, float]:
        window = self.h / math.log(2)
        decay = 1 / self._term(now)
        closed = self.closed.get(key, (0.0, 0.0))
        live = self.live.get(key, (0.0, 0.0, 0.0, 0.0))
        now_term = self._term(now)
        gpu = window * decay * (closed[0] + live[0] * now_term - live[1])
        node = window * decay * (closed[1] + live[2] * now_term - live[3])
        return max(0.0, gpu), max(0.0, node)
