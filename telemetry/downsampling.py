"""Time buckets that keep the mean, the minimum, the maximum and the sample count of a series.

Every chart, API answer and stored series is made of `Buckets`: equal time buckets aligned to
whole multiples of `step` seconds since the Unix epoch (the way Prometheus aligns its steps).
Because they are aligned absolutely, buckets of different GPUs, attempts or reads line up
without resampling, and any bucketing can be coarsened exactly to a step that is a multiple of
its own: the mean is weighted by sample counts, the minimum and maximum survive, so a spike
of one 30 s sample is still visible in a day-long chart of 2,000 points.

Pure Python over lists (no numpy in the dependencies); the loops are kept tight because a
16-node x 8-GPU job has 128 series per metric.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

NAN = math.nan


@dataclass
class Buckets:
    """One series in buckets: bucket i covers [(first + i) * step, (first + i + 1) * step) seconds since the epoch.

    A bucket without samples has count 0 and NaN mean/min/max.
    """

    first: int
    step: int
    mean: list[float]
    min: list[float]
    max: list[float]
    count: list[int]

    def __len__(self) -> int:
        return len(self.count)

    @property
    def start(self) -> int:
        """Start of the first bucket, in seconds since the epoch."""
        return self.first * self.step

    @property
    def end(self) -> int:
        """End of the last bucket (exclusive), in seconds since the epoch."""
        return (self.first + len(self.count)) * self.step

    def times(self) -> list[int]:
        """Start of every bucket, in seconds since the epoch."""
        step, first = self.step, self.first
        return [(first + i) * step for i in range(len(self.count))]

    @property
    def samples(self) -> int:
        return sum(self.count)

    @classmethod
    def empty(cls, first: int, step: int, length: int) -> Buckets:
        return cls(first, step, [NAN] * length, [NAN] * length, [NAN] * length, [0] * length)


def bucket_index(t: float, step: int) -> int:
    return math.floor(t / step)


def bucketize(
    times: Sequence[float], values: Sequence[float], step: int, *, start: float | None = None, end: float | None = None
) -> Buckets:
    """Group raw samples (seconds since the epoch, value) into buckets of `step` seconds.

    NaN values are gaps and are skipped. With `start`/`end` the buckets span that range
    (samples outside it are dropped); otherwise they span the samples.
    """
    if step < 1:
        raise ValueError("step must be at least 1 second")
    if start is None or end is None:
        kept = [t for t, v in zip(times, values, strict=True) if v == v]
        if not kept:
            return Buckets.empty(0, step, 0)
        start = min(kept) if start is None else start
        end = (math.floor(max(kept) / step) + 1) * step if end is None else end
    first = bucket_index(start, step)
    length = max(0, math.ceil(end / step) - first)
    sums = [0.0] * length
    lows = [NAN] * length
    highs = [NAN] * length
    counts = [0] * length
    for t, v in zip(times, values, strict=True):
        if v != v or t < start or t >= end:  # NaN (a gap), or outside the range
            continue
        i = int(t // step) - first
        if counts[i]:
            sums[i] += v
            if v < lows[i]:
                lows[i] = v
            if v > highs[i]:
                highs[i] = v
        else:
            sums[i] = v
            lows[i] = v
            highs[i] = v
        counts[i] += 1
    means = [s / c if c else NAN for s, c in zip(sums, counts, strict=True)]
    return Buckets(first, step, means, lows, highs, counts)


def _merge(means: Sequence[float], lows: Sequence[float], highs: Sequence[float], counts: Sequence[int]) -> tuple[float, float, float, int]:
    """One bucket from several (mean, min, max, count): builtins over the common case, a filter where some are empty."""
    if 0 in counts:
        kept = [i for i, c in enumerate(counts) if c]
        if not kept:
            return NAN, NAN, NAN, 0
        means = [means[i] for i in kept]
        lows = [lows[i] for i in kept]
        highs = [highs[i] for i in kept]
        counts = [counts[i] for i in kept]
    n = sum(counts)
    return sum(map(operator.mul, means, counts)) / n, min(lows), max(highs), n


def bucketize_regular(first_time: int, interval: int, values: Sequence[float], step: int, *, start: float, end: float) -> Buckets:
    """`bucketize` for samples every `interval` seconds from `first_time` (the simulated source's hot path).

    When `interval` divides `step`, every whole bucket holds k = step / interval consecutive
    samples, so the buckets are k strided columns reduced by builtins (map(min, *columns)...),
    with no Python-level work per sample. Gaps (NaN) or an irregular grid take `bucketize`.
    """
    times = range(first_time, first_time + interval * len(values), interval)
    if not values or step % interval or first_time % interval:
        return bucketize(times, values, step, start=start, end=end)
    lo = max(0, math.ceil((start - first_time) / interval))
    hi = max(lo, min(len(values), math.ceil((end - first_time) / interval)))
    values = list(values[lo:hi])
    total = sum(values)
    if total != total:  # a NaN gap somewhere
        return bucketize(times[lo:hi], values, step, start=start, end=end)
    first = bucket_index(start, step)
    out = Buckets.empty(first, step, max(0, math.ceil(end / step) - first))
    if not values:
        return out
    t0 = first_time + lo * interval
    k = step // interval
    head = ((step - t0 % step) % step) // interval  # samples before the first bucket boundary
    full = max(0, (len(values) - head) // k)
    _fill(out, bucket_index(t0, step) - first, values[:head])
    body = values[head : head + full * k]
    if full:
        j0 = bucket_index(t0 + head * interval, step) - first
        if k == 1:
            means, lows, highs = body, body, body
        else:
            columns = [body[i::k] for i in range(k)]
            means = [s / k for s in map(sum, zip(*columns, strict=True))]
            lows, highs = list(map(min, *columns)), list(map(max, *columns))
        out.mean[j0 : j0 + full] = means
        out.min[j0 : j0 + full] = lows
        out.max[j0 : j0 + full] = highs
        out.count[j0 : j0 + full] = [k] * full
    tail = values[head + full * k :]
    if tail:
        _fill(out, bucket_index(t0 + (head + full * k) * interval, step) - first, tail)
    return out


def _fill(out: Buckets, j: int, chunk: Sequence[float]) -> None:
    if chunk:
        n = len(chunk)
        out.mean[j], out.min[j], out.max[j], out.count[j] = sum(chunk) / n, min(chunk), max(chunk), n


def coarsen(series: Buckets, step: int) -> Buckets:
    """The same samples in buckets of `step` seconds, a whole multiple of the series' step: exact."""
    if step == series.step:
        return series
    if step % series.step:
        raise ValueError(f"cannot coarsen {series.step} s buckets to {step} s: not a multiple")
    factor = step // series.step
    first = series.first // factor  # floor division: also right for negative indices
    length = 0 if not len(series) else (series.first + len(series) - 1) // factor - first + 1
    out = Buckets.empty(first, step, length)
    for j in range(length):
        lo = max(0, (first + j) * factor - series.first)
        hi = min(len(series), (first + j + 1) * factor - series.first)
        out.mean[j], out.min[j], out.max[j], out.count[j] = _merge(
            series.mean[lo:hi], series.min[lo:hi], series.max[lo:hi], series.count[lo:hi]
        )
    return out


def combine(series: Iterable[Buckets]) -> Buckets:
    """Several series (e.g. the GPUs of a node) as one: per bucket, the mean of all their samples,
    the lowest minimum and the highest maximum. They must share one step."""
    series = [s for s in series if len(s)]
    if not series:
        return Buckets.empty(0, 1, 0)
    step = series[0].step
    if any(s.step != step for s in series):
        raise ValueError("series of different steps cannot be combined; coarsen them first")
    first = min(s.first for s in series)
    length = max(s.first + len(s) for s in series) - first
    # Pad every series to the common span, then merge bucket by bucket across series.
    padded = [_pad(s, first, length) for s in series]
    out = Buckets.empty(first, step, length)
    columns = zip(
        zip(*(p.mean for p in padded), strict=True),
        zip(*(p.min for p in padded), strict=True),
        zip(*(p.max for p in padded), strict=True),
        zip(*(p.count for p in padded), strict=True),
        strict=True,
    )
    for j, (means, lows, highs, counts) in enumerate(columns):
        out.mean[j], out.min[j], out.max[j], out.count[j] = _merge(means, lows, highs, counts)
    return out


def _pad(series: Buckets, first: int, length: int) -> Buckets:
    before = series.first - first
    after = length - before - len(series)
    if not before and not after:
        return series
    nan_before, nan_after = [NAN] * before, [NAN] * after
    return Buckets(
        first,
        series.step,
        nan_before + series.mean + nan_after,
        nan_before + series.min + nan_after,
        nan_before + series.max + nan_after,
        [0] * before + series.count + [0] * after,
    )


def clip(series: Buckets, start: float, end: float) -> Buckets:
    """Only the buckets that overlap [start, end)."""
    lo = max(0, bucket_index(start, series.step) - series.first)
    hi = min(len(series), math.ceil(end / series.step) - series.first)
    if lo == 0 and hi == len(series):
        return series
    hi = max(lo, hi)
    return Buckets(series.first + lo, series.step, series.mean[lo:hi], series.min[lo:hi], series.max[lo:hi], series.count[lo:hi])


def step_for(span_seconds: float, resolution: int, max_points: int) -> int:
    """The finest step, a whole multiple of `resolution`, that covers `span_seconds` in at most `max_points` buckets.

    One more bucket than span/step may be needed when the span does not start on a bucket
    boundary, hence the +1.
    """
    resolution = max(1, int(resolution))
    if span_seconds <= 0:
        return resolution
    factor = max(1, math.ceil(span_seconds / (resolution * max(1, max_points - 1))))
    return resolution * factor


# Steps used to store finished runs: each divides the next, so stored attempts always line up.
STORE_STEPS = (1, 5, 10, 30, 60, 300, 600, 1800, 3600, 10800, 21600, 86400)


def store_step(span_seconds: float, sample_seconds: float, max_buckets: int) -> int:
    """The finest step of STORE_STEPS, no finer than the samples, giving at most `max_buckets` buckets."""
    for step in STORE_STEPS:
        if step >= sample_seconds and span_seconds / step <= max_buckets:
            return step
    return STORE_STEPS[-1]


# --- Summaries: exact over the samples, whatever the bucketing ---------------------------------


def _samples_sum(series: Iterable[Buckets]) -> tuple[float, int]:
    """The sum of every sample of every series (bucket means weighted by their counts), and how many there are."""
    total = 0.0
    count = 0
    for s in series:
        for m, c in zip(s.mean, s.count, strict=True):
            if c:
                total += m * c
                count += c
    return total, count


def samples_mean(series: Iterable[Buckets]) -> float | None:
    """The mean of every sample of every series; None without samples."""
    total, count = _samples_sum(series)
    return total / count if count else None


def samples_max(series: Iterable[Buckets]) -> float | None:
    peak = None
    for s in series:
        for hi, c in zip(s.max, s.count, strict=True):
            if c and (peak is None or hi > peak):
                peak = hi
    return peak


def samples_integral(series: Iterable[Buckets], sample_seconds: float) -> float | None:
    """The integral of a rate (e.g. bytes/s -> bytes): each sample stands for `sample_seconds`."""
    total, count = _samples_sum(series)
    return total * sample_seconds if count else None
