"""Downsampling and summaries are exact on known data: hand-computed numbers, and properties over random data."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.catalogue import Level
from telemetry.downsampling import (
    Buckets,
    bucketize,
    bucketize_regular,
    clip,
    coarsen,
    combine,
    samples_integral,
    samples_max,
    samples_mean,
    step_for,
    store_step,
)
from telemetry.rollups import roll_up
from telemetry.sources.base import Series
from telemetry.summaries import summary_fields


def nan_equal(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all((x != x and y != y) or x == y for x, y in zip(a, b, strict=True))


def test_bucketize_keeps_mean_min_max_and_count() -> None:
    # Samples every 30 s from t=0; 60 s buckets: [0, 60) has 10 and 20, [60, 120) has 30 and 70, [120, 180) has 5.
    b = bucketize([0, 30, 60, 90, 120], [10.0, 20.0, 30.0, 70.0, 5.0], 60, start=0, end=180)
    assert (b.first, b.step) == (0, 60)
    assert b.mean == [15.0, 50.0, 5.0]
    assert b.min == [10.0, 30.0, 5.0]
    assert b.max == [20.0, 70.0, 5.0]
    assert b.count == [2, 2, 1]
    assert b.times() == [0, 60, 120]


def test_bucketize_leaves_gaps_empty_and_aligns_to_the_epoch() -> None:
    # NaN is a gap; buckets start at whole multiples of the step whatever `start` is.
    b = bucketize([65, 70, 130, 250], [1.0, math.nan, 3.0, 9.0], 60, start=65, end=260)
    assert b.first == 1 and b.start == 60
    assert b.count == [1, 1, 0, 1]
    assert nan_equal(b.mean, [1.0, 3.0, math.nan, 9.0])


def test_coarsen_is_exact_against_bucketing_the_raw_samples() -> None:
    times = list(range(0, 600, 30))
    values = [float((t * 7) % 23) for t in times]
    fine = bucketize(times, values, 60, start=0, end=600)
    coarse = coarsen(fine, 300)
    direct = bucketize(times, values, 300, start=0, end=600)
    assert coarse.count == direct.count == [10, 10]
    assert coarse.mean == pytest.approx(direct.mean, rel=1e-15)
    assert coarse.min == direct.min and coarse.max == direct.max
    # By hand: the first 300 s hold values (0, 30 ... 270) * 7 mod 23.
    first = [float((t * 7) % 23) for t in range(0, 300, 30)]
    assert coarse.mean[0] == pytest.approx(sum(first) / 10) and coarse.max[0] == max(first) and coarse.min[0] == min(first)


def test_coarsen_weights_means_by_sample_counts() -> None:
    # One bucket of 3 samples averaging 10, one of 1 sample of 50: the mean of the 4 samples is 20, not 30.
    fine = Buckets(first=0, step=60, mean=[10.0, 50.0], min=[5.0, 50.0], max=[15.0, 50.0], count=[3, 1])
    coarse = coarsen(fine, 120)
    assert coarse.mean == [20.0] and coarse.min == [5.0] and coarse.max == [50.0] and coarse.count == [4]


def test_coarsen_refuses_a_step_that_is_not_a_multiple() -> None:
    with pytest.raises(ValueError):
        coarsen(Buckets.empty(0, 60, 2), 90)


def test_a_one_sample_spike_survives_downsampling_a_day_to_2000_points() -> None:
    times = list(range(0, 86400, 30))
    values = [50.0] * len(times)
    values[1234] = 100.0  # one 30 s spike
    values[2345] = 0.0  # one 30 s drop
    step = step_for(86400, 30, 2000)
    b = coarsen(bucketize(times, values, 30, start=0, end=86400), step)
    assert step == 60 and len(b) <= 2000
    assert max(b.max) == 100.0 and min(b.min) == 0.0
    assert samples_mean([b]) == pytest.approx(sum(values) / len(values), rel=1e-12)


def test_combine_gpus_into_a_node_keeps_every_sample() -> None:
    gpu0 = bucketize([0, 30, 60], [10.0, 20.0, 90.0], 60, start=0, end=120)  # buckets: (10, 20), (90)
    gpu1 = bucketize([0, 60, 90], [40.0, 0.0, 30.0], 60, start=0, end=120)  # buckets: (40), (0, 30)
    node = combine([gpu0, gpu1])
    assert node.count == [3, 3]
    assert node.mean == pytest.approx([70 / 3, 40.0])
    assert node.min == [10.0, 0.0] and node.max == [40.0, 90.0]


def test_combine_pads_series_that_cover_different_times() -> None:
    early = bucketize([0], [1.0], 60, start=0, end=60)
    late = bucketize([120], [5.0], 60, start=120, end=180)
    both = combine([early, late])
    assert both.first == 0 and both.count == [1, 0, 1]
    assert nan_equal(both.mean, [1.0, math.nan, 5.0])


def test_clip_keeps_the_buckets_that_overlap_a_window() -> None:
    b = bucketize(list(range(0, 600, 60)), [float(i) for i in range(10)], 60, start=0, end=600)
    part = clip(b, 130, 250)
    assert part.times() == [120, 180, 240] and part.mean == [2.0, 3.0, 4.0]


@pytest.mark.parametrize(
    ("span", "resolution", "points", "expected"),
    [(86400, 30, 2000, 60), (86400, 60, 360, 300), (60, 5, 2000, 5), (3600, 5, 2000, 5), (7 * 86400, 60, 2000, 360)],
)
def test_step_for_stays_within_the_point_budget(span: int, resolution: int, points: int, expected: int) -> None:
    step = step_for(span, resolution, points)
    assert step == expected and step % resolution == 0
    assert math.ceil(span / step) + 1 <= points


def test_store_step_is_one_minute_for_a_day() -> None:
    assert store_step(86400, 30, 1440) == 60
    assert store_step(60, 5, 1440) == 5  # a short run keeps its resolution
    assert store_step(7 * 86400, 30, 1440) == 600


@settings(max_examples=300, deadline=None)
@given(
    interval=st.sampled_from([1, 5, 10, 30]),
    factor=st.sampled_from([1, 2, 3, 12]),
    offset=st.integers(0, 500),
    values=st.lists(st.one_of(st.floats(-1e6, 1e6), st.just(math.nan)), max_size=80),
    window=st.tuples(st.integers(-300, 300), st.integers(1, 3000)),
)
def test_the_fast_regular_bucketing_equals_the_general_one(interval, factor, offset, values, window) -> None:
    first_time = offset * interval
    step = interval * factor
    start = first_time + window[0]
    end = start + window[1]
    times = list(range(first_time, first_time + interval * len(values), interval))
    general = bucketize(times, values, step, start=start, end=end)
    fast = bucketize_regular(first_time, interval, values, step, start=start, end=end)
    assert (fast.first, fast.count) == (general.first, general.count)
    assert nan_equal(fast.min, general.min) and nan_equal(fast.max, general.max)
    for a, b in zip(fast.mean, general.mean, strict=True):
        assert (a != a and b != b) or a == pytest.approx(b, rel=1e-9, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.floats(0, 100), min_size=1, max_size=200),
    fine=st.sampled_from([30, 60]),
    factor=st.sampled_from([2, 3, 5, 10]),
)
def test_coarsening_never_changes_the_summary(values, fine, factor) -> None:
    times = [i * 30 for i in range(len(values))]
    b = bucketize(times, values, fine, start=0, end=len(values) * 30)
    c = coarsen(b, fine * factor)
    assert c.samples == b.samples == len(values)
    assert samples_mean([c]) == pytest.approx(sum(values) / len(values), rel=1e-9, abs=1e-9)
    assert samples_max([c]) == max(values)
    assert min(v for v, n in zip(c.min, c.count, strict=True) if n) == min(values)


def series(metric: str, buckets: Buckets, *, level: Level = Level.JOB, sample_seconds: float = 30, origin: str = "simulated") -> Series:
    return Series(metric, level, "", -1, None, buckets, sample_seconds, origin, 1)


def test_summary_by_hand() -> None:
    """Two GPUs for two minutes at 30 s samples, rolled up to the job, and the summary of it."""
    t = [0, 30, 60, 90]
    util = [bucketize(t, [100.0, 100.0, 50.0, 50.0], 60, start=0, end=120), bucketize(t, [0.0, 0.0, 10.0, 30.0], 60, start=0, end=120)]
    pcie = [bucketize(t, [1e9, 1e9, 2e9, 2e9], 60, start=0, end=120), bucketize(t, [0.0, 0.0, 0.0, 4e9], 60, start=0, end=120)]
    memory = [
        bucketize(t, [100.0, 200.0, 300.0, 250.0], 60, start=0, end=120),
        bucketize(t, [50.0, 60.0, 70.0, 80.0], 60, start=0, end=120),
    ]
    nccl = bucketize([60, 90], [100.0, 200.0], 60, start=0, end=120)

    def job_level(metric: str, gpus: list[Buckets]) -> list[Series]:
        return roll_up([Series(metric, Level.GPU, "n0", g, 0, b, 30, "simulated", 1) for g, b in enumerate(gpus)], Level.JOB)

    fields = summary_fields(
        {
            "gpu_util": job_level("gpu_util", util),
            "pcie_tx": job_level("pcie_tx", pcie),
            "fb_used": job_level("fb_used", memory),
            "nccl_busbw": [series("nccl_busbw", nccl)],
        },
        pushed_mean=None,
        pushed_count=0,
    )
    # Mean of the 8 utilisation samples: (100+100+50+50+0+0+10+30) / 8 = 42.5.
    assert fields["gpu_util_mean"] == 42.5
    # 8 samples x 30 s = 240 GPU-seconds.
    assert fields["gpu_seconds"] == 240
    # Bytes: each sample stands for 30 s: (1+1+2+2+0+0+0+4) GB/s x 30 s = 300 GB.
    assert fields["pcie_tx_bytes"] == 300e9
    assert fields["memory_peak_mib"] == 300.0
    assert fields["nccl_busbw_mean_gbs"] == 150.0 and fields["nccl_busbw_origin"] == "simulated" and fields["nccl_samples"] == 2
    assert fields["tensor_active_mean"] is None and fields["nvlink_tx_bytes"] is None  # no data: null, not 0


def test_pushed_nccl_results_beat_the_source_estimate() -> None:
    fields = summary_fields({"nccl_busbw": [series("nccl_busbw", bucketize([0], [100.0], 60))]}, pushed_mean=321.5, pushed_count=7)
    assert (fields["nccl_busbw_mean_gbs"], fields["nccl_busbw_origin"], fields["nccl_samples"]) == (321.5, "pushed", 7)


def test_integral_uses_each_runs_sample_interval() -> None:
    a = bucketize([0, 10], [2.0, 2.0], 60, start=0, end=60)
    assert samples_integral([a], 10) == 40.0
