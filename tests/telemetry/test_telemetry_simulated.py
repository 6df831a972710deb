"""The simulated source is plausible (what a GPU cluster would show) and deterministic; the efficiency flags fire on it."""

from __future__ import annotations

import re

from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import bucketize, samples_max, samples_mean
from telemetry.efficiency import efficiency_flags, gpu_ranges, judging_seconds, too_short_to_judge
from telemetry.sources import JobTarget, RankPlacement, Series, get_source
from telemetry.sources.prometheus import PrometheusTelemetry
from telemetry.sources.simulated import Profile, SimulatedTelemetry, job_profile

HOUR = 3600
T0 = 1_779_998_400  # a fixed start on a whole hour, so every run of the test sees the same numbers


def target(*racks: str, gpus: int = 8, job_id: int = 7, seconds: int = HOUR) -> JobTarget:
    ranks = tuple(RankPlacement(rank, f"sim-node-{rank:03d}", rack, gpus) for rank, rack in enumerate(racks))
    return JobTarget(job_id, 1, ranks, float(T0), float(T0 + seconds), float(seconds))


def source(profile: Profile = Profile.HEALTHY) -> SimulatedTelemetry:
    return SimulatedTelemetry(interval=5, profile_for=lambda job_id: profile)


def job_mean(src: SimulatedTelemetry, t: JobTarget, metric: str, *, step: int = 60) -> float:
    series = src.read(t, METRICS[metric], start=t.started, end=t.ended, step=step, level=Level.JOB)
    return samples_mean(s.buckets for s in series)


def test_a_gang_spanning_racks_gets_lower_nccl_bandwidth() -> None:
    src = source()
    one_rack = job_mean(src, target("rack-1", "rack-1", "rack-1", "rack-1"), "nccl_busbw")
    two_racks = job_mean(src, target("rack-1", "rack-1", "rack-2", "rack-2"), "nccl_busbw")
    one_node = job_mean(src, target("rack-1"), "nccl_busbw")
    assert one_node > one_rack > two_racks > 0
    assert two_racks < 0.7 * one_rack  # the spine between racks is the bottleneck
    assert 100 < two_racks and one_node < 900  # GB/s a real H100 cluster reaches


def test_utilisation_falls_with_job_size_and_stays_a_percentage() -> None:
    src = source()
    small = job_mean(src, target("rack-1", gpus=1), "gpu_util")
    large = job_mean(src, target(*(["rack-1"] * 8)), "gpu_util")
    assert 0 < large < small <= 100
    series = src.read(target("rack-1"), METRICS["gpu_util"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU)
    assert len(series) == 8
    assert all(0 <= v <= 100 for s in series for v, c in zip(s.buckets.min + s.buckets.max, s.buckets.count * 2, strict=True) if c)


def test_every_metric_has_plausible_units() -> None:
    src, t = source(), target("rack-1", "rack-1")
    assert 0 < job_mean(src, t, "sm_active") <= 1 and 0 < job_mean(src, t, "tensor_active") < job_mean(src, t, "sm_active")
    peak = samples_max(s.buckets for s in src.read(t, METRICS["fb_used"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU))
    assert 20_000 < peak <= 81_920  # MiB of an 80 GB GPU
    assert 1e8 < job_mean(src, t, "pcie_rx") < 64e9  # bytes/s within PCIe 5 x16
    assert 1e9 < job_mean(src, t, "nvlink_tx") < 900e9
    assert 50 < job_mean(src, t, "power") < 800 and 20 < job_mean(src, t, "temp") < 95
    single = target("rack-1", gpus=1)
    assert job_mean(src, single, "nvlink_tx") == 0  # one GPU: nothing to talk to over NVLink
    assert src.read(single, METRICS["nccl_busbw"], start=T0, end=T0 + HOUR, step=60, level=Level.JOB) == []


def test_node_metrics_and_levels() -> None:
    src, t = source(), target("rack-1", "rack-2")
    assert len(src.read(t, METRICS["ib_tx"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU)) == 2  # per node at finest
    nodes = src.read(t, METRICS["gpu_util"], start=T0, end=T0 + HOUR, step=60, level=Level.NODE)
    assert [(s.node, s.rank, s.gpu) for s in nodes] == [("sim-node-000", 0, -1), ("sim-node-001", 1, -1)]
    assert job_mean(source(), target("rack-1"), "ib_tx") == 0  # one node: no inter-node traffic


def test_series_are_deterministic_and_independent_of_the_window() -> None:
    t = target("rack-1", "rack-2")
    whole = source().read(t, METRICS["gpu_util"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU)
    again = source().read(t, METRICS["gpu_util"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU)
    half = source().read(t, METRICS["gpu_util"], start=T0 + 1800, end=T0 + HOUR, step=60, level=Level.GPU)
    assert [s.buckets.mean for s in whole] == [s.buckets.mean for s in again]
    assert whole[0].buckets.mean[30:] == half[0].buckets.mean


def test_checkpoints_show_as_utilisation_dips_and_pcie_tx_spikes() -> None:
    src, t = source(), target("rack-1")
    util = src.read(t, METRICS["gpu_util"], start=T0, end=T0 + HOUR, step=60, level=Level.JOB)[0].buckets
    pcie = src.read(t, METRICS["pcie_tx"], start=T0, end=T0 + HOUR, step=60, level=Level.JOB)[0].buckets
    minute = 30  # the checkpoint at 30 min
    assert util.mean[minute] < 10 < 60 < util.mean[minute - 5]
    assert pcie.mean[minute] > 10 * pcie.mean[minute - 5]


def test_the_source_is_chosen_by_settings(settings) -> None:
    assert isinstance(get_source(), SimulatedTelemetry)
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    assert isinstance(get_source(), PrometheusTelemetry)


def test_profiles_are_stable_and_a_quarter_have_problems() -> None:
    profiles = [job_profile(i) for i in range(1, 2001)]
    assert profiles == [job_profile(i) for i in range(1, 2001)]
    problems = sum(p != Profile.HEALTHY for p in profiles) / len(profiles)
    assert 0.18 < problems < 0.32


# --- efficiency flags ----------------------------------------------------------------------------


def flags_for(profile: Profile, t: JobTarget) -> dict[str, str]:
    src = source(profile)
    util = src.read(t, METRICS["gpu_util"], start=t.started, end=t.ended, step=60, level=Level.GPU)
    tensor = job_mean(src, t, "tensor_active")
    flags = efficiency_flags(gpu_util=util, tensor_active_mean=tensor, idle_percent=5, idle_seconds=600, large_job_gpus=8)
    return {f.code: f.message for f in flags}


def test_a_healthy_job_raises_no_flag() -> None:
    assert flags_for(Profile.HEALTHY, target("rack-1", "rack-1")) == {}


def test_an_idle_rank_is_named() -> None:
    flags = flags_for(Profile.IDLE_RANK, target("rack-1", "rack-1", "rack-1"))
    assert set(flags) == {"IDLE_RANK"}
    assert re.match(r"Rank 2 \(sim-node-002\) averaged [0-5]% GPU utilisation while the other ranks averaged [6-9]\d%", flags["IDLE_RANK"])


def test_idle_gpus_are_named_per_node_as_ranges() -> None:
    flags = flags_for(Profile.IDLE_GPUS, target("rack-1"))
    assert set(flags) == {"IDLE_GPUS"}
    assert "2 of 8 GPUs sat idle" in flags["IDLE_GPUS"] and "sim-node-000 (rank 0) GPUs 6-7." in flags["IDLE_GPUS"]


def test_a_large_idle_gang_is_summed_up_per_node_not_listed_gpu_by_gpu() -> None:
    # 96 idle GPUs of 12 nodes read as 96 names before: the count, then each node's GPUs as ranges, the first 8 nodes.
    hour = bucketize([i * 60 for i in range(60)], [0.0] * 60, 60, start=0, end=3600)
    idle = [
        Series("gpu_util", Level.GPU, f"node-{n:02d}", g, n, hour, 60, "x") for n in range(12) for g in range(8) if not (n == 1 and g == 4)
    ]
    (flag,) = efficiency_flags(gpu_util=idle, tensor_active_mean=None, idle_percent=5, idle_seconds=600, large_job_gpus=8)
    assert flag.message.startswith("95 of 95 GPUs sat idle (below 5% utilisation) for 10 min or more: node-00 (rank 0) GPUs 0-7; ")
    assert "node-01 (rank 1) GPUs 0-3, 5-7; " in flag.message and "node-07 (rank 7) GPUs 0-7; and 4 more nodes." in flag.message
    assert "node-08" not in flag.message and flag.message.count("GPU") <= 12
    assert gpu_ranges([7, 0, 1, 2, 5]) == "0-2, 5, 7"


def test_unused_tensor_cores_on_a_large_job() -> None:
    assert "TENSOR_CORES_UNUSED" in flags_for(Profile.FP32, target("rack-1", "rack-1"))
    assert flags_for(Profile.FP32, target("rack-1", gpus=4)) == {}  # 4 GPUs: not a large job


def test_idle_flags_need_a_sustained_stretch() -> None:
    # A GPU idle for 9 of 60 minutes is not flagged at the 10-minute threshold; 10 minutes is.
    def gpu(idle_minutes: int) -> Series:
        values = [0.0] * idle_minutes + [80.0] * (60 - idle_minutes)
        return Series("gpu_util", Level.GPU, "n", 0, 0, bucketize([i * 60 for i in range(60)], values, 60, start=0, end=3600), 60, "x")

    def codes(idle_minutes: int) -> set[str]:
        flags = efficiency_flags(gpu_util=[gpu(idle_minutes)], tensor_active_mean=0.5, idle_percent=5, idle_seconds=600, large_job_gpus=8)
        return {f.code for f in flags}

    assert codes(9) == set()
    assert codes(10) == {"IDLE_GPUS"}


def test_an_idle_gpu_slice_is_told_its_slice_is_charged_not_a_whole_gpu() -> None:
    # A quarter slice of a time-sliced GPU read "Idle GPUs are still charged to your quota": a whole GPU, to its owner.
    idle = [Series("gpu_util", Level.GPU, "n", 0, 0, bucketize([i * 60 for i in range(60)], [0.0] * 60, 60, start=0, end=3600), 60, "x")]
    whole, quarter = (
        efficiency_flags(gpu_util=idle, tensor_active_mean=None, idle_percent=5, idle_seconds=600, large_job_gpus=8, slice_share=share)
        for share in (None, 0.25)
    )
    assert whole[0].message.endswith("Idle GPUs are still charged to your quota.")
    assert quarter[0].code == "IDLE_GPUS"
    assert quarter[0].message.endswith("Its slice (0.25 of a GPU) is still charged to your quota while idle.")


def test_a_run_minutes_old_is_too_short_to_judge_not_free_of_problems() -> None:
    # A run's first minutes load data with its GPUs near idle: 30 s of that flagged every GPU of every new job.
    def idle_for(buckets: int) -> list[Series]:
        times = [i * 5 for i in range(buckets)]
        return [Series("gpu_util", Level.GPU, "n", 0, 0, bucketize(times, [0.0] * buckets, 5, start=0, end=5 * buckets), 5, "x")]

    def codes(buckets: int, idle_seconds: float = 600) -> set[str]:
        gpus = idle_for(buckets)
        flags = efficiency_flags(gpu_util=gpus, tensor_active_mean=None, idle_percent=5, idle_seconds=idle_seconds, large_job_gpus=8)
        return {f.code for f in flags}

    # 30 s and 4 min 55 s at 0%: nothing is flagged yet, and the page must not say there is no problem.
    assert codes(6) == set() and too_short_to_judge(idle_for(6), 600)
    assert codes(59) == set() and too_short_to_judge(idle_for(59), 600)
    # Five minutes of it: judged, and flagged.
    assert codes(60) == {"IDLE_GPUS"} and not too_short_to_judge(idle_for(60), 600)
    assert too_short_to_judge([], 600)
    # A site that flags after 1 min of idleness judges after 1 min, not 5.
    assert judging_seconds(60, 5) == 60 and codes(12, idle_seconds=60) == {"IDLE_GPUS"} and codes(11, idle_seconds=60) == set()


def test_an_idle_rank_is_not_judged_while_the_gang_warms_up() -> None:
    def rank(r: int, value: float, buckets: int) -> Series:
        times = [i * 5 for i in range(buckets)]
        return Series("gpu_util", Level.GPU, f"n{r}", 0, r, bucketize(times, [value] * buckets, 5, start=0, end=5 * buckets), 5, "x")

    def codes(buckets: int) -> set[str]:
        gang = [rank(0, 90.0, buckets), rank(1, 90.0, buckets), rank(2, 1.0, buckets)]
        flags = efficiency_flags(gpu_util=gang, tensor_active_mean=None, idle_percent=5, idle_seconds=600, large_job_gpus=8)
        return {f.code for f in flags}

    assert codes(6) == set()
    assert "IDLE_RANK" in codes(60)


# --- the shapes of a real job --------------------------------------------------------------------


def util_at(src: SimulatedTelemetry, t: JobTarget, start: float, end: float, *, step: int = 1, metric: str = "gpu_util") -> list[float]:
    job = src.read(t, METRICS[metric], start=T0 + start, end=T0 + end, step=step, level=Level.JOB)[0].buckets
    return [m for m, c in zip(job.mean, job.count, strict=True) if c]


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def test_a_job_warms_up_loading_then_climbing_to_its_steady_level() -> None:
    src, t = SimulatedTelemetry(interval=1, profile_for=lambda job_id: Profile.HEALTHY), target("rack-1")
    # An hour's job warms up for 3 minutes: it loads for the first 72 s, GPUs near idle and memory filling in steps.
    loading, climbing, steady = util_at(src, t, 0, 70), util_at(src, t, 80, 170), util_at(src, t, 200, 580)
    assert max(loading) < 10
    assert 10 < climbing[0] < climbing[-1] < mean(steady)  # a curve, steep first, then levelling off
    assert climbing[10] - climbing[0] > climbing[-1] - climbing[-11]
    memory = util_at(src, t, 0, 200, metric="fb_used")
    assert len(set(round(m, -2) for m in memory[:70])) >= 3 and memory[150] > 2 * memory[60]


def test_steady_training_oscillates_with_the_step_and_the_links_burst_at_its_all_reduce() -> None:
    src, t = SimulatedTelemetry(interval=1, profile_for=lambda job_id: Profile.HEALTHY), target("rack-1", "rack-1")
    util = util_at(src, t, 200, 560)
    nvlink = util_at(src, t, 200, 560, metric="nvlink_tx")
    assert max(util) - min(util) > 6  # the all-reduce's dip, every step
    # The links carry the all-reduce while the GPUs compute less: the two move against each other.
    mu, mn = mean(util), mean(nvlink)
    covariance = sum((u - mu) * (n - mn) for u, n in zip(util, nvlink, strict=True))
    assert covariance < 0 and max(nvlink) > 2 * min(nvlink)
    # Sampled once a minute the steps average out, as an exporter's samples would.
    coarse = util_at(src, t, 240, 540, step=60)
    assert max(coarse) - min(coarse) < max(util) - min(util)


def test_evaluation_every_ten_minutes_dips_the_gpus_and_pauses_nccl() -> None:
    src, t = source(), target("rack-1", "rack-1")
    util = src.read(t, METRICS["gpu_util"], start=T0 + 540, end=T0 + 720, step=15, level=Level.JOB)[0].buckets
    evaluating, training = util.mean[4], util.mean[0]  # 600-615 s, 540-555 s
    assert 0.3 * training < evaluating < 0.6 * training
    nccl = src.read(t, METRICS["nccl_busbw"], start=T0 + 540, end=T0 + 720, step=15, level=Level.JOB)[0].buckets
    assert nccl.count[4] == 0 and nccl.count[0] > 0  # no collectives to report while evaluating


def test_tx_and_rx_differ_as_on_real_links() -> None:
    src, t = source(), target("rack-1", "rack-2")
    for tx, rx in (("nvlink_tx", "nvlink_rx"), ("ib_tx", "ib_rx"), ("pcie_tx", "pcie_rx")):
        sent, received = job_mean(src, t, tx), job_mean(src, t, rx)
        assert sent != received and sent > 0 and received > 0, tx
    # An all-reduce receives about what it sends; PCIe carries input batches in, checkpoints out.
    assert 0.8 < job_mean(src, t, "nvlink_rx") / job_mean(src, t, "nvlink_tx") < 1.0
    assert job_mean(src, t, "pcie_rx") > 2 * job_mean(src, t, "pcie_tx")


def test_a_healthy_gang_has_a_straggler_now_and_then_but_is_not_flagged() -> None:
    src, t = source(), target("rack-1", "rack-1", seconds=4 * HOUR)
    util = src.read(t, METRICS["gpu_util"], start=t.started, end=t.ended, step=60, level=Level.GPU)
    ahead = 0
    for i in range(len(util[0].buckets)):
        means = sorted((s.buckets.mean[i] for s in util if s.buckets.count[i]), reverse=True)
        ahead += means[0] - means[1] >= 12
    assert 0 < ahead < 0.1 * len(util[0].buckets)  # a few minutes of four hours
    assert flags_for(Profile.HEALTHY, t) == {}


def test_the_model_is_a_function_of_job_attempt_rank_gpu_metric_and_time() -> None:
    t = target("rack-1", "rack-1")
    again = JobTarget(t.job_id, 2, t.ranks, t.started, t.ended, t.expected_seconds)

    def read(src: SimulatedTelemetry, target_: JobTarget) -> list[list[float]]:
        return [s.buckets.mean for s in src.read(target_, METRICS["nvlink_rx"], start=T0, end=T0 + HOUR, step=60, level=Level.GPU)]

    first = read(source(), t)
    assert read(source(), t) == first and read(source(), again) != first
    assert len({tuple(m) for m in first}) == len(first)  # every GPU its own numbers


def test_a_straggling_gpu_is_named() -> None:
    flags = flags_for(Profile.STRAGGLER, target("rack-1", "rack-1"))
    assert set(flags) == {"STRAGGLER"}
    assert re.match(r"GPU \d of sim-node-00[01] \(rank [01]\) was \d+ points busier than every other GPU for \d+ min", flags["STRAGGLER"])


def test_the_straggler_flag_needs_one_gpu_ahead_of_all_the_others_for_a_fifth_of_the_run() -> None:
    def gpu(index: int, values: list[float]) -> Series:
        buckets = bucketize([i * 60 for i in range(len(values))], values, 60, start=0, end=60 * len(values))
        return Series("gpu_util", Level.GPU, "n", index, 0, buckets, 60, "x")

    def codes(*gpus: list[float]) -> set[str]:
        series = [gpu(i, values) for i, values in enumerate(gpus)]
        flags = efficiency_flags(gpu_util=series, tensor_active_mean=0.5, idle_percent=5, idle_seconds=600, large_job_gpus=99)
        return {f.code for f in flags}

    steady = [80.0] * 60
    ahead = lambda minutes: [95.0] * minutes + [80.0] * (60 - minutes)  # noqa: E731
    waiting = lambda minutes: [60.0] * minutes + [80.0] * (60 - minutes)  # noqa: E731
    assert codes(ahead(15), waiting(15), waiting(15)) == {"STRAGGLER"}  # 15 of 60 minutes, 35 points ahead
    assert codes(ahead(8), waiting(8), waiting(8)) == set()  # under a fifth of the run
    assert codes([90.0] * 60, [89.0] * 60, steady) == set()  # two GPUs abreast: nobody is behind one GPU
    # Half the gang idle is an idle rank, not a straggler: the busiest GPU is never alone at the top.
    assert "STRAGGLER" not in codes([90.0] * 60, [91.0] * 60, [1.0] * 60, [2.0] * 60)
