"""`make bench`: one full scheduling decision (priority, placement, quotas, budgets, reservations,
backfill, preemption search) over a synthetic 1,000-node x 8-GPU cluster with 2,000 running jobs.

Prints one JSON line per case, each with the time of one EASY backfill pass over the same snapshot
(`cost_against_easy`, the figure to compare across machines), then a line comparing the cost per
pending job at 50,000 against 10,000 (measured in this same process, so the ratio holds on a busy machine).
The bar: median at 10,000 pending <= 1.0 s, and the ratio no worse than about linear (~1).

`--fair-share-preemption` times each case a second time with MUSTER_FAIR_SHARE_PREEMPTION on (a fifth of the
running jobs are preemptible, owners' usage spread over two orders of magnitude) and prints its cost against
the default's, measured in the same process.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from benchmarks.synthetic import synthetic_snapshot  # noqa: E402
from policy.baselines import easy  # noqa: E402
from policy.model import Decisions, PolicyConfig  # noqa: E402
from policy.schedule import schedule  # noqa: E402


def timed(decide: Callable[[], Decisions], repeats: int) -> tuple[list[float], Decisions]:
    times = []
    decisions = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        decisions = decide()
        times.append(time.perf_counter() - start)
    assert decisions is not None
    return times, decisions


def run_case(pending: int, repeats: int, *, fair_share_preemption: bool = False) -> dict[str, Any]:
    snapshot = synthetic_snapshot(nodes=1000, running=2000, pending=pending)
    # The settings' defaults (every starving job reserved up to 256, 500 jobs planned forward), and the steady
    # state: the reservations a first cycle made are handed to the timed ones, as the stored plan is.
    config = PolicyConfig(starvation_seconds=6 * 3600, max_jobs=None, fair_share_preemption=fair_share_preemption)
    snapshot = replace(snapshot, reservations=schedule(snapshot, config).reservations)
    times, decisions = timed(lambda: schedule(snapshot, config), repeats)
    # The baseline, over the same snapshot in the same process: one EASY backfill pass (FIFO order, one reservation),
    # so the figure can be read on a machine slower or busier than the one the bar was set on.
    easy_times, _ = timed(lambda: easy(snapshot, config), repeats)
    codes: dict[str, int] = {}
    for w in decisions.waiting:
        codes[w.reason_code] = codes.get(w.reason_code, 0) + 1
    return {
        "name": f"cycle_1000x8_running2000_pending{pending}" + ("_fair_share_preemption" if fair_share_preemption else ""),
        "pending": pending,
        "nodes": len(snapshot.nodes),
        "running": len(snapshot.running),
        "median_seconds": round(statistics.median(times), 4),
        "min_seconds": round(min(times), 4),
        "easy_median_seconds": round(statistics.median(easy_times), 4),
        "cost_against_easy": round(statistics.median(times) / statistics.median(easy_times), 2),
        "repeats": repeats,
        "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "placed": len(decisions.placements),
        "preempted": len(decisions.preemptions),
        "reservations": len(decisions.reservations),
        "reservations_kept": len(snapshot.reservations),
        "estimates": dict(sorted(Counter(w.estimate or "none" for w in decisions.waiting).items())),
        "waiting_by_reason": codes,
    }


def main() -> None:
    with_option = "--fair-share-preemption" in sys.argv[1:]
    sizes = [int(a) for a in sys.argv[1:] if a != "--fair-share-preemption"] or [1000, 10_000, 50_000]
    results = {}
    for pending in sizes:
        repeats = 5 if pending <= 10_000 else 3
        result = run_case(pending, repeats)
        results[pending] = result
        print(json.dumps(result), flush=True)
        if with_option:
            on = run_case(pending, repeats, fair_share_preemption=True)
            on["cost_against_default"] = round(on["median_seconds"] / result["median_seconds"], 3)
            print(json.dumps(on), flush=True)
    if 10_000 in results and 50_000 in results:
        per_job_10k = results[10_000]["median_seconds"] / 10_000
        per_job_50k = results[50_000]["median_seconds"] / 50_000
        print(json.dumps({"name": "growth_10k_to_50k", "cost_per_pending_job_ratio": round(per_job_50k / per_job_10k, 3),
                          "bar_10k_median_le_1s": results[10_000]["median_seconds"] <= 1.0}))  # fmt: skip


if __name__ == "__main__":
    main()
