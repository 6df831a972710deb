"""A plain-text progress bar with an ETA for a terminal: one line, redrawn with \\r, at most a few times a second."""

from __future__ import annotations

import time
from collections.abc import Callable


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


class ProgressBar:
    def __init__(self, write: Callable[[str], None], *, width: int = 30, interval: float = 0.2) -> None:
        self.write = write
        self.width = width
        self.interval = interval
        self.began = time.monotonic()
        self.shown = 0.0
        self.label = ""
        self.label_began = self.began

    def update(self, label: str, fraction: float, overall: float) -> None:
        now = time.monotonic()
        if label != self.label:
            self.label, self.label_began = label, now
        elif fraction < 1.0 and now - self.shown < self.interval:
            return
        self.shown = now
        done = round(self.width * fraction)
        elapsed = now - self.began
        eta = f"ETA {_clock(elapsed * (1 - overall) / overall)}" if overall > 0.001 else "ETA --:--"
        bar = "#" * done + "." * (self.width - done)
        self.write(f"\r{label:<8} [{bar}] {100 * fraction:5.1f}%  all {100 * overall:5.1f}%  {_clock(elapsed)} {eta} ")

    def finish(self) -> None:
        self.write(f"\rdone in {_clock(time.monotonic() - self.began)}".ljust(self.width + 60) + "\n")
