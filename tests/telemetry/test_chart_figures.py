"""What a reader sees on a chart, decided server-side: units and ranges, labels, legends, empty states.

The figures are checked as JSON here (every one also validated by plotly's graph objects); the
browser tests in tests/e2e/test_browser_charts.py read the same things off the drawn SVG.
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from telemetry.catalogue import METRICS, Level
from telemetry.downsampling import bucketize
from telemetry.figure_style import base_layout, empty_figure, legend_height
from telemetry.figures import (
    CHARTS,
    HEATMAP_EMPTY,
    HEATMAP_LABELLED_ROWS,
    Capacity,
    band_outline,
    heatmap_figure,
    line_figure,
    max_points,
    memory_capacity,
    model_memory_gb,
    not_applicable,
    scale_for,
)
from telemetry.page import job_telemetry_context
from telemetry.sources.base import RankPlacement, Series
from tests.telemetry.helpers import as_plotly_figure, start_running

T0 = 1_779_998_400
CHART = {c.key: c for c in CHARTS}


def series(metric: str, values: list[float], *, level: Level = Level.JOB, node: str = "", gpu: int = -1, rank: int | None = None) -> Series:
    """A series of one value a minute from T0 (NaN: a minute without samples)."""
    times = [T0 + 60 * i for i in range(len(values))]
    buckets = bucketize(times, values, 60, start=T0, end=T0 + 60 * len(values))
    return Series(metric, level, node, gpu, rank, buckets, 60, "simulated")


def gpu_series(metric: str, node: str, rank: int, gpus: int, value: float = 50.0) -> list[Series]:
    return [series(metric, [value] * 10, level=Level.GPU, node=node, gpu=g, rank=rank) for g in range(gpus)]


def is_empty(figure: dict[str, Any]) -> bool:
    return figure["data"] == [] and figure["layout"].get("meta", {}).get("empty") is True


def message(figure: dict[str, Any]) -> str:
    return figure["layout"]["annotations"][0]["text"]


# --- units and ranges ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("metric", "peak", "suffix", "divisor"),
    [
        ("nvlink_tx", 0.0, " kB/s", 1000),  # all zero: never millibytes
        ("nvlink_tx", 0.4, " kB/s", 1000),  # a fraction of a byte per second is still shown in kB/s
        ("pcie_rx", 999.0, " kB/s", 1000),
        ("pcie_rx", 400e6, " MB/s", 1e6),
        ("pcie_tx", 9.9e9, " GB/s", 1e9),
        ("nvlink_tx", 1.2e12, " TB/s", 1e12),
        ("ib_rx", 2e15, " TB/s", 1e12),  # the largest unit, however fast
        ("nccl_busbw", 450.0, " GB/s", 1),  # NCCL reports GB/s already
        ("nccl_busbw", 0.5, " MB/s", 1e-3),
    ],
)
def test_byte_rates_are_shown_in_a_unit_that_suits_the_largest_value(metric: str, peak: float, suffix: str, divisor: float) -> None:
    scale = scale_for(METRICS[metric], peak)
    assert scale.suffix == suffix and scale.divisor == pytest.approx(divisor)
    assert scale.yaxis["ticksuffix"] == suffix and "tickformat" not in scale.yaxis  # plain numbers: no SI "m" prefix
    assert scale.yaxis["rangemode"] == "tozero"
    # Every value the chart can show is at most 1000 of its unit, so no tick needs a prefix of its own.
    assert peak / scale.divisor < 1000 or suffix == " TB/s"


def test_an_all_zero_byte_rate_gets_a_zero_based_range_in_whole_bytes() -> None:
    figure = line_figure(CHART["nvlink"], {"nvlink_tx": [series("nvlink_tx", [0.0] * 10)], "nvlink_rx": [series("nvlink_rx", [0.0] * 10)]})
    yaxis = figure["layout"]["yaxis"]
    # 0 to 1 kB/s: ticks at 0.2 kB/s are 200 bytes, not Plotly's -1 to 1 around zero in millibytes.
    assert yaxis["range"] == [0, 1] and yaxis["ticksuffix"] == " kB/s"
    assert all(v == 0 for t in figure["data"] for v in t["y"] if v is not None)


def test_values_are_divided_into_the_unit_and_hovered_in_it() -> None:
    figure = line_figure(CHART["pcie"], {"pcie_tx": [series("pcie_tx", [2.5e9] * 5)], "pcie_rx": [series("pcie_rx", [1.25e9] * 5)]})
    band, mean = figure["data"][:2]
    assert mean["y"] == [2.5] * 5 and band["y"][:5] == [2.5] * 5
    assert mean["hovertemplate"] == "PCIe TX: %{y:.3~g} GB/s<extra></extra>"
    assert figure["layout"]["yaxis"]["ticksuffix"] == " GB/s"


def test_a_lone_sample_is_drawn_as_a_point_since_a_line_needs_two() -> None:
    nan = float("nan")
    # A run of a few seconds: one bucket with samples. Plotly draws no line through one point.
    short = line_figure(CHART["gpu_util"], {"gpu_util": [series("gpu_util", [nan, 42.0])]})
    assert short["data"][1]["mode"] == "lines+markers"
    # One between gaps, in a longer run, too; a run without a lone one stays a plain line.
    gap = line_figure(CHART["gpu_util"], {"gpu_util": [series("gpu_util", [40.0, 41.0, nan, 42.0, nan, 43.0, 44.0])]})
    assert gap["data"][1]["mode"] == "lines+markers"
    steady = line_figure(CHART["gpu_util"], {"gpu_util": [series("gpu_util", [40.0, 41.0, nan, 42.0, 43.0])]})
    assert steady["data"][1]["mode"] == "lines"
    per_gpu = line_figure(CHART["gpu_util"], {"gpu_util": [series("gpu_util", [42.0], level=Level.GPU, node="n1", gpu=0, rank=0)]})
    assert per_gpu["data"][0]["mode"] == "lines+markers"


def test_percent_ratio_memory_and_other_units() -> None:
    util = scale_for(METRICS["gpu_util"], 42.0)
    assert util.yaxis == {"ticksuffix": "%", "range": [0, 100]}
    assert scale_for(METRICS["sm_active"], 0.5).yaxis["tickformat"] == ".0%"
    # A small ratio (tensor cores at 2%) keeps its ticks apart: 0.5%, 1%, 1.5%, not 0%, 1%, 1%, 2%.
    assert scale_for(METRICS["sm_active"], 0.02).yaxis["tickformat"] == ".2~%"
    memory = scale_for(METRICS["fb_used"], 61_440.0)
    assert memory.divisor == 1024 and memory.yaxis["ticksuffix"] == " GiB"
    assert scale_for(METRICS["power"], 700.0).yaxis["ticksuffix"] == " W"


def test_axes_make_room_for_their_labels_and_the_legend_for_itself() -> None:
    layout = base_layout("t", legend=["a"] * 40)
    # Tick labels and titles push the margins (nothing is cut or drawn over); the legend sits at the bottom of the
    # figure and pushes the plot up, clear of the time axis' title.
    assert layout["xaxis"]["automargin"] and layout["yaxis"]["automargin"] and layout["xaxis"]["ticklabelstandoff"] > 0
    assert layout["xaxis"]["title"]["text"] == "time (UTC)"
    assert layout["legend"]["yref"] == "container" and layout["legend"]["y"] == 0 and layout["legend"]["yanchor"] == "bottom"
    # The figure grows with its legend, so a per-GPU chart's plot is as tall as the whole job's.
    assert layout["height"] == 300 + legend_height(["a"] * 40) > 300
    assert legend_height([]) == 0 and legend_height(["GPU 0"]) == legend_height(["GPU 0", "GPU 1"]) > 0


# --- lines and legends -----------------------------------------------------------------------------


def test_tx_and_rx_are_told_apart_where_they_coincide() -> None:
    same = [1e9] * 10
    job = line_figure(CHART["nvlink"], {"nvlink_tx": [series("nvlink_tx", same)], "nvlink_rx": [series("nvlink_rx", same)]})
    tx, rx = job["data"][1], job["data"][3]
    assert (tx["name"], rx["name"]) == ("NVLink TX", "NVLink RX")
    assert tx["line"]["dash"] == "solid" and rx["line"]["dash"] == "dash" and tx["line"]["color"] != rx["line"]["color"]
    per_gpu = line_figure(
        CHART["nvlink"], {"nvlink_tx": gpu_series("nvlink_tx", "n-1", 1, 2, 1e9), "nvlink_rx": gpu_series("nvlink_rx", "n-1", 1, 2, 1e9)}
    )
    names = [t["name"] for t in per_gpu["data"]]
    assert names == ["TX GPU 0", "TX GPU 1", "RX GPU 0", "RX GPU 1"]
    # One GPU, one colour; the metric is the dash.
    assert [t["line"]["color"] for t in per_gpu["data"][:2]] == [t["line"]["color"] for t in per_gpu["data"][2:]]
    assert {t["line"]["dash"] for t in per_gpu["data"][2:]} == {"dash"}


def test_one_nodes_gpus_are_named_by_gpu_with_the_node_in_the_title() -> None:
    figure = line_figure(CHART["gpu_util"], {"gpu_util": gpu_series("gpu_util", "dgx-h100-rack12-node-008", 3, 8)})
    assert figure["layout"]["title"]["text"] == "GPU utilisation · dgx-h100-rack12-node-008 (rank 3)"
    assert [t["name"] for t in figure["data"]] == [f"GPU {g}" for g in range(8)]
    # Several nodes' GPUs (not what the page asks for, but possible): each line keeps its whole name.
    both = line_figure(CHART["gpu_util"], {"gpu_util": gpu_series("gpu_util", "a", 0, 1) + gpu_series("gpu_util", "b", 1, 1)})
    assert [t["name"] for t in both["data"]] == ["rank 0 · a · GPU 0", "rank 1 · b · GPU 0"]


def test_gpu_memory_says_its_line_is_a_per_gpu_mean_and_draws_the_gpus_capacity() -> None:
    # 60 GiB on a chart of its own scale read as the job's total, or as nearly full: neither was said.
    used = [61_440.0] * 10
    job = line_figure(CHART["memory"], {"fb_used": [series("fb_used", used)]}, capacity=Capacity(80 * 1024, "80 GB per GPU (H100)"))
    as_plotly_figure(job)
    assert job["layout"]["title"]["text"] == "GPU memory used per GPU (mean of the GPUs; band: lowest to highest GPU)"
    (line,) = job["layout"]["shapes"]
    assert line["y0"] == line["y1"] == 80 and line["xref"] == "paper" and job["layout"]["annotations"][0]["text"] == "80 GB per GPU (H100)"
    assert job["layout"]["yaxis"]["range"][0] == 0 and 80 < job["layout"]["yaxis"]["range"][1] < 90
    nodes = line_figure(CHART["memory"], {"fb_used": [series("fb_used", used, level=Level.NODE, node="n1", rank=0)]})
    assert nodes["layout"]["title"]["text"] == "GPU memory used per GPU (each node's mean)" and "shapes" not in nodes["layout"]
    gpus = line_figure(CHART["memory"], {"fb_used": gpu_series("fb_used", "n1", 0, 2, 61_440.0)})
    assert gpus["layout"]["title"]["text"] == "GPU memory used per GPU · n1 (rank 0)"
    # Other charts keep their titles.
    assert line_figure(CHART["gpu_util"], {"gpu_util": [series("gpu_util", [50.0])]})["layout"]["title"]["text"] == "GPU utilisation"


def test_a_gpus_memory_is_known_from_its_product_name_or_not_drawn() -> None:
    assert model_memory_gb("NVIDIA-H100-80GB-HBM3") == 80 and model_memory_gb("NVIDIA-A100-SXM4-40GB") == 40
    assert model_memory_gb("Simulated H100 80GB") == 80 and model_memory_gb("NVIDIA H100 NVL") == 94
    assert model_memory_gb("NVIDIA-H200") == 141 and model_memory_gb("NVIDIA-L40S") == 48 and model_memory_gb("NVIDIA-L4") == 24
    # Sold in two sizes, or unknown: no line rather than a wrong one.
    assert model_memory_gb("NVIDIA-A100-SXM4") is None and model_memory_gb("") is None

    def placed(model: str, slice_mib: float = 0.0) -> RankPlacement:
        return RankPlacement(0, "n", "r", 8, slice_memory_mib=slice_mib, gpu_model=model)

    assert memory_capacity([placed("NVIDIA-H100-80GB-HBM3")] * 2) == Capacity(81_920, "80 GB per GPU (NVIDIA-H100-80GB-HBM3)")
    assert memory_capacity([placed("NVIDIA-H100-80GB-HBM3"), placed("NVIDIA-A100-SXM4-40GB")]) is None  # two sizes
    assert memory_capacity([placed("NVIDIA-H100-80GB-HBM3"), placed("")]) is None
    # A MIG slice's chart is its instance's memory.
    mig = memory_capacity([placed("NVIDIA-H100-80GB-HBM3", 10e9 / 2**20)])
    assert mig is not None and mig.label == "10 GB per slice"


def test_a_band_is_one_outline_per_run_of_samples_so_gaps_stay_gaps() -> None:
    x = [0, 1, 2, 3, 4, 5]
    low = [1.0, 2.0, None, None, 3.0, 4.0]
    high = [5.0, 6.0, None, None, 7.0, 8.0]
    bx, by = band_outline(x, low, high)
    # Along the top, back along the bottom; a gap (None) before the next outline, which Plotly closes on its own.
    assert bx == [0, 1, 1, 0, 4, 4, 5, 5, 4] and by == [5.0, 6.0, 2.0, 1.0, None, 7.0, 8.0, 4.0, 3.0]
    assert band_outline([0, 1], [None, None], [None, None]) == ([], [])
    nccl = line_figure(CHART["nccl"], {"nccl_busbw": [series("nccl_busbw", [400.0, 410.0, float("nan"), 405.0])]})
    band = nccl["data"][0]
    assert band["fill"] == "toself" and band["y"].count(None) == 1
    assert max_points(nccl) == 4  # a band's outline passes each time twice: counted once


# --- empty states ----------------------------------------------------------------------------------


def test_a_chart_with_nothing_to_draw_says_why_instead_of_an_empty_axis() -> None:
    nothing_yet = line_figure(CHART["nccl"], {"nccl_busbw": [series("nccl_busbw", [float("nan")] * 10)]})
    assert is_empty(nothing_yet)
    assert message(nothing_yet).startswith("NCCL bus bandwidth appears when the job reports it")
    # No axes at all: a date axis with no data reads "Jan 2000" to "Jan 2001".
    assert nothing_yet["layout"]["xaxis"] == {"visible": False} and nothing_yet["layout"]["yaxis"] == {"visible": False}
    assert is_empty(line_figure(CHART["gpu_util"], {}))
    for chart in CHARTS:
        figure = line_figure(chart, {})
        assert is_empty(figure) and message(figure) == chart.empty and chart.empty
        as_plotly_figure(figure)
    heat = heatmap_figure([series("gpu_util", [float("nan")] * 3, level=Level.GPU, node="n", gpu=0, rank=0)])
    assert is_empty(heat) and message(heat) == HEATMAP_EMPTY
    as_plotly_figure(empty_figure("t", "why"))


def test_charts_a_job_of_its_shape_cannot_have_say_so() -> None:
    assert "single-GPU job runs no NCCL collectives" in not_applicable(CHART["nccl"], [1])
    assert not_applicable(CHART["nccl"], [1, 1]) == ""  # two GPUs on two nodes all-reduce over the network
    assert "no NVLink peer" in not_applicable(CHART["nvlink"], [1, 1])
    assert not_applicable(CHART["nvlink"], [2]) == "" and not_applicable(CHART["gpu_util"], [1]) == ""


# --- the heatmap -----------------------------------------------------------------------------------


def test_every_heatmap_row_is_labelled_in_full_or_shortened_with_the_whole_name_in_the_hover() -> None:
    rows = gpu_series("gpu_util", "sim-node-008", 0, 8) + gpu_series("gpu_util", "sim-node-009", 1, 8)
    figure = heatmap_figure(rows)
    heat, yaxis = figure["data"][0], figure["layout"]["yaxis"]
    assert heat["y"][0] == "rank 0 · sim-node-008 · GPU 0"  # what the hover shows
    # Every row has its tick, not every other one as Plotly's automatic ticks left it.
    assert yaxis["tickmode"] == "array" and yaxis["tickvals"] == heat["y"]
    assert yaxis["ticktext"][0] == "sim-node-008 · GPU 0" and yaxis["ticktext"][-1] == "sim-node-009 · GPU 7"
    assert yaxis["automargin"] is True  # the margin fits the labels: never cut to "-008 · GPU 0"
    assert figure["layout"]["height"] >= 16 * 16  # rows tall enough for their 11 px labels

    usual = gpu_series("gpu_util", "dgx-h100-rack12-node-008.cluster.example.org", 0, 2) + gpu_series(
        "gpu_util", "dgx-h100-rack12-node-009.cluster.example.org", 1, 2
    )
    text = heatmap_figure(usual)["layout"]["yaxis"]["ticktext"]
    # The shared domain goes; a usual name is left whole.
    assert text[0] == "dgx-h100-rack12-node-008 · GPU 0" and text[2] == "dgx-h100-rack12-node-009 · GPU 0"
    long = gpu_series("gpu_util", "dgx-h100-sxm5-rack12-node-008.cluster.example.org", 0, 2) + gpu_series(
        "gpu_util", "dgx-h100-sxm5-rack12-node-009.cluster.example.org", 1, 2
    )
    text = heatmap_figure(long)["layout"]["yaxis"]["ticktext"]
    # A longer one loses its middle: both ends, which tell nodes apart, stay.
    assert text[0] == "dgx-h100-sx…k12-node-008 · GPU 0" and text[2] == "dgx-h100-sx…k12-node-009 · GPU 0"
    assert heatmap_figure(long)["data"][0]["y"][0] == "rank 0 · dgx-h100-sxm5-rack12-node-008.cluster.example.org · GPU 0"
    # A GPU-slice job's simulated node is named whole: "sim-time…icing-000" was cut mid-word.
    text = heatmap_figure(gpu_series("gpu_util", "sim-time-slicing-000", 0, 1))["layout"]["yaxis"]["ticktext"]
    assert text == ["sim-time-slicing-000 · GPU 0"]


def test_a_heatmap_too_tall_to_label_every_row_labels_every_node() -> None:
    nodes = HEATMAP_LABELLED_ROWS // 8 + 2
    rows = [s for r in range(nodes) for s in gpu_series("gpu_util", f"node-{r:03d}", r, 8)]
    yaxis = heatmap_figure(rows)["layout"]["yaxis"]
    assert yaxis["ticktext"] == [f"node-{r:03d}" for r in range(nodes)]
    assert yaxis["tickvals"] == [f"rank {r} · node-{r:03d} · GPU 0" for r in range(nodes)]


def test_heatmap_columns_cover_their_buckets_from_the_first() -> None:
    figure = heatmap_figure(gpu_series("gpu_util", "n", 0, 2))
    x = figure["data"][0]["x"]
    # Centred on each minute: the first column starts at the first bucket, where the time axis begins.
    assert x[0] - 30_000 == T0 * 1000 and x[1] - x[0] == 60_000
    assert figure["layout"]["height"] >= 220  # room for the colour bar and the time axis with one or two rows


# --- on the job page -------------------------------------------------------------------------------


def figures_of(job: Job, **params: str) -> dict[str, dict[str, Any]]:
    job = Job.objects.prefetch_related("events", "allocations__node").get(pk=job.pk)
    return {f["id"].removeprefix("telemetry-"): f["figure"] for f in job_telemetry_context(job, params)["figures"]}


def test_a_single_gpu_jobs_nccl_and_nvlink_charts_say_why_they_are_empty(submit, sim) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=1, simulate={"duration_seconds": 7200}, ran_for=900)
    figures = figures_of(job)
    assert "network" not in figures  # one node: no inter-node chart at all
    assert is_empty(figures["nccl"]) and "single-GPU job" in message(figures["nccl"])
    assert is_empty(figures["nvlink"]) and "no NVLink peer" in message(figures["nvlink"])
    assert not is_empty(figures["gpu_util"]) and not is_empty(figures["heatmap"])
    for figure in figures.values():
        as_plotly_figure(figure)


def test_a_job_that_has_only_just_started_has_no_nccl_numbers_yet_and_says_so(submit, sim) -> None:
    # A minute in, a 2-node job is still loading: no collectives have run.
    job = start_running(submit, sim, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=60)
    figures = figures_of(job)
    assert is_empty(figures["nccl"]) and message(figures["nccl"]).startswith("NCCL bus bandwidth appears when the job reports it")
    assert not is_empty(figures["gpu_util"])


def test_a_running_jobs_memory_chart_reaches_its_h100s_80_gb(submit, sim) -> None:
    job = start_running(submit, sim, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=900)
    memory = figures_of(job)["memory"]
    as_plotly_figure(memory)
    assert memory["layout"]["title"]["text"].startswith("GPU memory used per GPU (mean of the GPUs")
    assert memory["layout"]["shapes"][0]["y0"] == 80 and "80 GB per GPU (Simulated H100 80GB)" in memory["layout"]["annotations"][0]["text"]
    # Every GPU's samples stay under the line.
    band = memory["data"][0]["y"]
    assert max(v for v in band if v is not None) <= 80


def test_line_charts_start_where_the_run_does(submit, sim) -> None:
    job = start_running(submit, sim, nodes=2, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=1800)
    started = job.events.get(to_state="RUNNING").at.timestamp() * 1000
    figures = figures_of(job)
    for key in ("gpu_util", "pcie", "nvlink", "network", "nccl"):
        x = figures[key]["data"][-1]["x"]
        step = x[1] - x[0]
        assert started - step < x[0] <= started, key  # the bucket the run started in
    heat = figures["heatmap"]["data"][0]["x"]
    assert started - (heat[1] - heat[0]) < heat[0] - (heat[1] - heat[0]) / 2 <= started
    # An hour of a healthy 2-node job: every byte rate in a unit of its own size.
    for key in ("pcie", "nvlink", "network"):
        assert figures[key]["layout"]["yaxis"]["ticksuffix"] in (" MB/s", " GB/s"), key
