"""Efficiency flags: what a researcher should know about how their job uses its GPUs.

Pure functions over a run's per-GPU utilisation and its job-wide means, so the job page (live)
and the stored summary (when a run ends) flag the same things.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.conf import settings

from telemetry.downsampling import samples_mean
from telemetry.sources.base import Series

# A rank is idle when its GPUs average below this while the other ranks average at least BUSY.
IDLE_RANK_PERCENT = 10.0
BUSY_PERCENT = 40.0
# Tensor cores count as unused below this activity (ratio) when the GPUs are at least this busy.
TENSOR_UNUSED_RATIO = 0.05
TENSOR_BUSY_PERCENT = 30.0
# A straggler: one GPU at least STRAGGLER_GAP points busier than every other GPU of the gang (the others wait for it
# at each step), in buckets adding up to STRAGGLER_SHARE of the run and at least half the idle-seconds setting.
STRAGGLER_GAP = 12.0
STRAGGLER_SHARE = 0.2
# Nothing is judged idle before this much of the run has reported (or the idle-seconds setting, if shorter): a run's
# first minutes load data and build the model with its GPUs near idle, and judging 30 s of that flagged every GPU of
# every new job. Long enough for a warm-up, short enough that a job left idle hears it while it still runs.
JUDGE_SECONDS = 300.0
# Nodes named in an idle-GPU flag: a 96-GPU job is summed up in a line, not listed GPU by GPU.
LISTED = 8


@dataclass(frozen=True)
class Flag:
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def longest_idle_seconds(series: Series, idle_percent: float) -> float:
    """The longest stretch of consecutive buckets whose mean utilisation is below `idle_percent` (a gap ends a stretch)."""
    longest = run = 0
    for mean, count in zip(series.buckets.mean, series.buckets.count, strict=True):
        if count and mean < idle_percent:
            run += 1
            longest = max(longest, run)
        else:
            run = 0
    return longest * series.buckets.step


def observed_seconds(gpu_util: list[Series]) -> float:
    """How much of the run the GPUs reported for: the buckets with samples of the GPU seen longest."""
    return max((sum(1 for c in s.buckets.count if c) * s.buckets.step for s in gpu_util if s.buckets.samples), default=0.0)


def judging_seconds(idle_seconds: float, step: float) -> float:
    """How much of a run must have reported before it is judged idle: JUDGE_SECONDS, or the idle-seconds setting if
    shorter, and never fewer than three buckets."""
    return max(min(idle_seconds, JUDGE_SECONDS), 3 * step)


def too_short_to_judge(gpu_util: list[Series], idle_seconds: float) -> bool:
    """No samples, or less of them than `judging_seconds`: no idleness can be flagged yet (a run minutes old may
    still be loading), so "no problems seen" would claim what was not looked at."""
    series = [s for s in gpu_util if s.buckets.samples]
    return not series or observed_seconds(series) < judging_seconds(idle_seconds, series[0].buckets.step)


def gpu_ranges(gpus: list[int]) -> str:
    """GPU indices as compact ranges: [0, 1, 2, 3, 6] -> "0-3, 6"."""
    spans: list[list[int]] = []
    for gpu in sorted(set(gpus)):
        if spans and spans[-1][1] == gpu - 1:
            spans[-1][1] = gpu
        else:
            spans.append([gpu, gpu])
    return ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in spans)


def idle_summary(idle: list[Series]) -> str:
    """The idle GPUs per node, their indices as ranges: "sim-node-000 (rank 0) GPUs 0-7; sim-node-001 (rank 1) GPU 3",
    the first LISTED nodes, then how many more nodes."""
    by_node: dict[tuple[int, str], list[int]] = {}
    for s in idle:
        by_node.setdefault((s.rank if s.rank is not None else -1, s.node), []).append(s.gpu)
    parts = []
    for (rank, node), gpus in sorted(by_node.items())[:LISTED]:
        where = f"{node} (rank {rank})" if rank >= 0 else node
        if gpus == [-1]:
            parts.append(where)
            continue
        parts.append(f"{where} GPU{'s' if len(gpus) > 1 else ''} {gpu_ranges(gpus)}")
    more = len(by_node) - LISTED
    return "; ".join(parts) + (f"; and {more} more node{'s' if more > 1 else ''}" if more > 0 else "")


def efficiency_flags(
    *,
    gpu_util: list[Series],
    tensor_active_mean: float | None,
    idle_percent: float,
    idle_seconds: float,
    large_job_gpus: int,
    slice_share: float | None = None,
) -> list[Flag]:
    """Flags for one run from its per-GPU utilisation series (percent) and its mean tensor-core activity (ratio).

    `slice_share`: the share of a GPU a slice job holds (None: whole GPUs), which is what its quota is charged."""
    flags: list[Flag] = []
    gpu_util = [s for s in gpu_util if s.buckets.samples]
    if not gpu_util:
        return flags
    observed = observed_seconds(gpu_util)
    step = gpu_util[0].buckets.step
    judge = judging_seconds(idle_seconds, step)
    by_rank: dict[int, list[Series]] = {}
    for s in gpu_util:
        by_rank.setdefault(s.rank if s.rank is not None else 0, []).append(s)

    idle_ranks: set[int] = set()
    # A rank that loads more slowly than the others is not stuck: wait for the judging window here too.
    if len(by_rank) > 1 and observed >= judge:
        means = {rank: samples_mean(s.buckets for s in group) or 0.0 for rank, group in by_rank.items()}
        for rank, mean in sorted(means.items()):
            others = [m for r, m in means.items() if r != rank]
            others_mean = sum(others) / len(others)
            if mean < IDLE_RANK_PERCENT and others_mean >= BUSY_PERCENT:
                idle_ranks.add(rank)
                flags.append(
                    Flag(
                        "IDLE_RANK",
                        f"Rank {rank} ({by_rank[rank][0].node}) averaged {mean:.0f}% GPU utilisation while the other ranks averaged "
                        f"{others_mean:.0f}%: it may be stuck or starved of data, and the rest of the gang waits for it.",
                    )
                )

    # Sustained: the idle-seconds setting, or half the run for runs shorter than twice that, and never less than the
    # judging window (a run minutes old may still be loading: that is not idleness).
    needed = max(min(idle_seconds, observed / 2), judge)
    if observed >= needed:
        idle = [s for s in gpu_util if (s.rank or 0) not in idle_ranks and longest_idle_seconds(s, idle_percent) >= needed]
        if idle:
            names = idle_summary(idle)
            # A slice is charged its share, not the GPU: "Idle GPUs are still charged" read as a whole GPU to a
            # researcher holding a quarter of one.
            charged = (
                "Idle GPUs are still charged to your quota."
                if slice_share is None
                else f"Its slice ({slice_share:.3g} of a GPU) is still charged to your quota while idle."
            )
            flags.append(
                Flag(
                    "IDLE_GPUS",
                    f"{len(idle)} of {len(gpu_util)} GPUs sat idle (below {idle_percent:g}% utilisation) for "
                    f"{_duration(needed)} or more: {names}. {charged}",
                )
            )

    straggler = _straggler(gpu_util, needed=max(STRAGGLER_SHARE * observed, idle_seconds / 2, 3 * step))
    if straggler is not None:
        slow, seconds, gap = straggler
        who = f"GPU {slow.gpu} of {slow.node} (rank {slow.rank})" if slow.gpu >= 0 else slow.label
        flags.append(
            Flag(
                "STRAGGLER",
                f"{who} was {gap:.0f} points busier than every other GPU for {_duration(seconds)} "
                f"({seconds / observed:.0%} of the run): the rest of the gang waits for it at each step. "
                "A throttling GPU, a slow link or an uneven share of the data would do this.",
            )
        )

    util_mean = samples_mean(s.buckets for s in gpu_util)
    if (
        len(gpu_util) >= large_job_gpus
        and tensor_active_mean is not None
        and util_mean is not None
        and tensor_active_mean < TENSOR_UNUSED_RATIO
        and util_mean >= TENSOR_BUSY_PERCENT
    ):
        flags.append(
            Flag(
                "TENSOR_CORES_UNUSED",
                f"Tensor cores were nearly unused ({tensor_active_mean:.1%} active on average) while the {len(gpu_util)} GPUs were "
                f"{util_mean:.0f}% busy: the model may be computing in FP32. Mixed precision (bf16/fp16) or TF32 would use them.",
            )
        )
    return flags


def _straggler(gpu_util: list[Series], *, needed: float) -> tuple[Series, float, float] | None:
    """The GPU that most often ran STRAGGLER_GAP points above all the others, if it did for `needed` seconds or more:
    (its series, for how long, its mean lead over the next busiest GPU meanwhile)."""
    if len(gpu_util) < 2:
        return None
    step = gpu_util[0].buckets.step
    if any(s.buckets.step != step for s in gpu_util):
        return None
    first = min(s.buckets.first for s in gpu_util)
    length = max(s.buckets.first + len(s.buckets) for s in gpu_util) - first
    # The busiest and the second busiest GPU of every bucket, in one pass over each series.
    top = [-1.0] * length
    second = [-1.0] * length
    leader = [-1] * length
    for index, s in enumerate(gpu_util):
        offset = s.buckets.first - first
        for i, (mean, count) in enumerate(zip(s.buckets.mean, s.buckets.count, strict=True), offset):
            if not count:
                continue
            if mean > top[i]:
                second[i] = top[i]
                top[i] = mean
                leader[i] = index
            elif mean > second[i]:
                second[i] = mean
    ahead: dict[int, list[float]] = {}
    for i in range(length):
        if second[i] >= 0.0 and top[i] - second[i] >= STRAGGLER_GAP:
            ahead.setdefault(leader[i], []).append(top[i] - second[i])
    if not ahead:
        return None
    index, gaps = max(ahead.items(), key=lambda item: len(item[1]))
    seconds = len(gaps) * step
    if seconds < needed:
        return None
    return gpu_util[index], seconds, sum(gaps) / len(gaps)


def site_efficiency_flags(*, gpu_util: list[Series], tensor_active_mean: float | None, slice_share: float | None = None) -> list[Flag]:
    """`efficiency_flags` with the site's thresholds (MUSTER_TELEMETRY_IDLE_*, MUSTER_TELEMETRY_LARGE_JOB_GPUS)."""
    return efficiency_flags(
        gpu_util=gpu_util,
        tensor_active_mean=tensor_active_mean,
        idle_percent=settings.MUSTER_TELEMETRY_IDLE_PERCENT,
        idle_seconds=settings.MUSTER_TELEMETRY_IDLE_SECONDS,
        large_job_gpus=settings.MUSTER_TELEMETRY_LARGE_JOB_GPUS,
        slice_share=slice_share,
    )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:g} h"
    if seconds >= 60:
        return f"{seconds / 60:g} min"
    return f"{seconds:g} s"
