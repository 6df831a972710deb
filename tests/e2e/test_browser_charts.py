"""The charts as a reader sees them in Chromium at 1440 px: units, ranges and labels read off the drawn SVG,
empty states, and the dashboard updating in place under a zoom.

Fixtures (Chromium, the live server, the simulated cluster, signing in) are tests/e2e/test_browser.py's.
Screenshots of the job's telemetry and of the dashboard go to its screenshots folder (SHOTS).
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from jobs.models import Allocation, Job, JobEvent
from jobs.states import JobState
from tests.e2e import test_browser as base
from tests.e2e.test_browser import SHOTS, WIDTH, BrowserSim, LogIn, expect, expect_state, plot_js, submit_job, watch_the_network

# test_browser.py's fixtures, shared by name: Chromium, its page at 1440 px, the simulated cluster, alice, signing in.
browser = base.browser
page = base.page
sim = base.sim
alice = base.alice
log_in = base.log_in

pytestmark = pytest.mark.browser

# A byte-rate tick as the charts write it: a plain number and a decimal unit, never "200mB/s" nor "0.2B/s".
BYTE_TICK = re.compile(r"^\d[\d,]*(\.\d+)? (kB|MB|GB|TB)/s$")
BYTE_CHARTS = ("telemetry-pcie", "telemetry-nvlink", "telemetry-network", "telemetry-nccl")

# Boxes of what Plotly drew in one chart, in page pixels.
BOXES = """(id) => {
  const gd = document.getElementById(id);
  const box = (el) => { const r = el.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height}; };
  const all = (sel) => Array.from(gd.querySelectorAll(sel)).filter((el) => el.getBoundingClientRect().width > 0).map(box);
  return {chart: box(gd), xtitle: all('.g-xtitle text'), ytitle: all('.g-ytitle text'), legend: all('.legend .bg'),
          xticks: all('.xtick text'), yticks: all('.ytick text'), annotations: all('.annotation')};
}"""


def overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]


def inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return inner["x"] >= outer["x"] - 0.5 and inner["x"] + inner["w"] <= outer["x"] + outer["w"] + 0.5


def assert_nothing_overlaps(page: Any, chart: str) -> None:
    """No text of the chart is drawn over another, and none is cut at its edges."""
    boxes = page.evaluate(BOXES, chart)
    for title in boxes["xtitle"]:
        assert not any(overlap(title, legend) for legend in boxes["legend"]), f"{chart}: the time axis' title under the legend"
        assert not any(overlap(title, tick) for tick in boxes["xticks"]), f"{chart}: the time axis' title over its ticks"
    for title in boxes["ytitle"]:
        assert not any(overlap(title, tick) for tick in boxes["yticks"]), f"{chart}: the y axis' title over its ticks"
    for tick in boxes["xticks"]:
        assert not any(overlap(tick, legend) for legend in boxes["legend"]), f"{chart}: a tick under the legend"
        assert not any(overlap(tick, other) for other in boxes["yticks"]), f"{chart}: a time label over a y label"
    for tick in boxes["yticks"]:
        assert inside(tick, boxes["chart"]), f"{chart}: a tick label cut at the chart's edge"


def ticks(page: Any, chart: str, axis: str) -> list[str]:
    return page.evaluate(f"() => Array.from(document.querySelectorAll('#{chart} .{axis}tick text')).map(t => t.textContent)")


def range_start(page: Any, chart: str) -> datetime:
    """Where a chart's drawn time axis begins (Plotly's range of a date axis, in UTC)."""
    start = plot_js(page, chart, "gd._fullLayout.xaxis.range[0]")
    return datetime.fromisoformat(start).replace(tzinfo=UTC)


def shoot_page(page: Any, name: str) -> None:
    """A screenshot of the whole page at 1440 px: the viewport made as tall as the page first (a full-page capture
    resizes it midway, and Plotly redraws its responsive charts while it does)."""
    if not SHOTS:
        return
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    page.set_viewport_size({"width": WIDTH, "height": height})
    page.wait_for_timeout(500)
    Path(SHOTS).mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(Path(SHOTS) / f"{name}.png"))
    page.set_viewport_size({"width": WIDTH, "height": 900})


def running(sim: BrowserSim, owner: Any, *, ran_for: timedelta, **job: Any) -> Job:
    """A job running on the simulated cluster whose run started `ran_for` ago by the real clock."""
    submitted = submit_job(owner, **job)
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=submitted.pk).state == JobState.RUNNING
    # Its whole history moved back: events (what the job page reads), times and allocations (the dashboard's).
    back = JobEvent.objects.get(job=submitted, to_state=JobState.RUNNING).at - timezone.now() + ran_for
    JobEvent.objects.filter(job=submitted).update(at=F("at") - back)
    Job.objects.filter(pk=submitted.pk).update(
        submitted_at=F("submitted_at") - back, scheduled_at=F("scheduled_at") - back, started_at=F("started_at") - back
    )
    Allocation.objects.filter(job=submitted).update(allocated_at=F("allocated_at") - back)
    return Job.objects.get(pk=submitted.pk)


# A chart's x range in milliseconds, whether Plotly holds it as numbers or date strings.
ZOOM_MS = "gd.layout.xaxis.range.map(v => gd._fullLayout.xaxis.r2l(v))"


def charts_drawn(page: Any) -> list[str]:
    figures = page.evaluate("() => JSON.parse(document.getElementById('telemetry-figures').textContent).map(f => f.id)")
    expect(page.locator(".js-plotly-plot")).to_have_count(len(figures))
    for chart in figures:
        expect(page.locator(f"#{chart} .main-svg").first).to_be_visible()
    return figures


# --- the job page ----------------------------------------------------------------------------------


def test_a_jobs_charts_read_in_sensible_units_from_the_runs_start_with_every_gpu_labelled(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, live_server: Any
) -> None:
    job = running(sim, alice, ran_for=timedelta(minutes=20), name="train-llm", nodes=2, simulate={"duration_seconds": 7200})
    started = JobEvent.objects.get(job=job, to_state=JobState.RUNNING).at
    outside, errors = watch_the_network(page, live_server.url)
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    figures = charts_drawn(page)
    assert set(BYTE_CHARTS) <= set(figures)

    # Byte rates: every tick a number in kB/s to TB/s (no millibytes, no fractions of a byte), from zero up.
    for chart in BYTE_CHARTS:
        labels = ticks(page, chart, "y")
        assert labels and all(BYTE_TICK.match(t) for t in labels), (chart, labels)
        assert labels[0].startswith("0 "), (chart, labels)
    assert ticks(page, "telemetry-gpu_util", "y")[-1] == "100%"

    # Time axes begin where the run did (within the first bucket), not a day or a year earlier.
    for chart in ("telemetry-heatmap", "telemetry-gpu_util", "telemetry-nvlink", "telemetry-nccl"):
        step = plot_js(page, chart, "(gd.data[gd.data.length - 1].x[1] - gd.data[gd.data.length - 1].x[0]) / 1000")
        assert abs((range_start(page, chart) - started).total_seconds()) <= step, chart
    assert not any("2000" in t for t in ticks(page, "telemetry-nccl", "x"))

    # The heatmap labels every one of the 16 GPUs, in full, within the chart.
    rows = ticks(page, "telemetry-heatmap", "y")
    nodes = list(job.allocations.order_by("rank").values_list("node__name", flat=True))
    assert rows == [f"{node} · GPU {g}" for node in nodes for g in range(8)]
    for chart in figures:
        assert_nothing_overlaps(page, chart)
    # TX and RX both show: RX dashed over TX.
    dashes = plot_js(page, "telemetry-network", "gd._fullData.filter(t => t.showlegend !== false).map(t => t.line.dash)")
    assert dashes == ["solid", "dash"]
    shoot_page(page, "charts-job-telemetry")

    # Per GPU: 16 lines on the PCIe chart, their legend below the time axis' title, never over it.
    page.goto(f"/jobs/{job.pk}/?view=gpu&node={nodes[1]}#telemetry")
    charts_drawn(page)
    names = plot_js(page, "telemetry-pcie", "gd._fullData.map(t => t.name)")
    assert names == [f"TX GPU {g}" for g in range(8)] + [f"RX GPU {g}" for g in range(8)]
    assert page.locator("#telemetry-pcie .gtitle").text_content() == f"PCIe TX / RX · {nodes[1]} (rank 1)"
    for chart in figures:
        assert_nothing_overlaps(page, chart)
    shoot_page(page, "charts-job-telemetry-per-gpu")
    assert outside == [] and errors == []


def test_on_a_phone_the_charts_have_no_tool_bar_over_their_titles(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, live_server: Any
) -> None:
    job = running(sim, alice, ran_for=timedelta(minutes=20), name="train-llm", nodes=1, simulate={"duration_seconds": 7200})
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    figures = charts_drawn(page)
    assert page.locator(f"#{figures[0]} .modebar").count() == 1  # at 1440 px, on hover
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/jobs/{job.pk}/")
    figures = charts_drawn(page)
    page.locator(f"#{figures[0]} .main-svg").first.hover()
    assert page.locator(".js-plotly-plot .modebar").count() == 0


def test_a_chart_with_nothing_to_draw_says_why(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, live_server: Any) -> None:
    single = running(sim, alice, ran_for=timedelta(minutes=10), name="one-gpu", nodes=1, gpus_per_node=1)
    just_started = running(
        sim, alice, ran_for=timedelta(seconds=40), name="loading", nodes=2, gpus_per_node=8, simulate={"duration_seconds": 7200}
    )
    outside, errors = watch_the_network(page, live_server.url)
    log_in(page, alice)

    page.goto(f"/jobs/{single.pk}/")
    charts_drawn(page)
    nccl = page.locator("#telemetry-nccl")
    expect(nccl).to_contain_text("A single-GPU job runs no NCCL collectives")
    expect(page.locator("#telemetry-nvlink")).to_contain_text("no NVLink peer")
    # No empty axes: nothing that reads "Jan 2000", no legend with nothing beside it.
    assert ticks(page, "telemetry-nccl", "x") == [] and ticks(page, "telemetry-nccl", "y") == []
    expect(nccl.locator(".legend")).to_have_count(0)
    # The heatmap's one row is labelled, and its axis and colour bar have room.
    assert ticks(page, "telemetry-heatmap", "y") == [f"{single.allocations.get().node.name} · GPU 0"]
    assert_nothing_overlaps(page, "telemetry-heatmap")
    shoot_page(page, "charts-job-telemetry-one-gpu")

    # Forty seconds into a two-hour run, the job is still loading: no collectives, no NCCL numbers yet.
    page.goto(f"/jobs/{just_started.pk}/")
    charts_drawn(page)
    expect(page.locator("#telemetry-nccl")).to_contain_text("NCCL bus bandwidth appears when the job reports it")
    assert outside == [] and errors == []


# --- the dashboard ---------------------------------------------------------------------------------


def test_the_dashboard_starts_at_the_first_data_and_updates_in_place_keeping_a_zoom(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any, live_server: Any
) -> None:
    settings.MUSTER_DASHBOARD_REFRESH_SECONDS = 1
    # A new install: its first job was submitted 40 minutes ago and runs; nothing happened before.
    first_job = running(sim, alice, ran_for=timedelta(minutes=40), name="first-job", nodes=2)
    first = JobEvent.objects.order_by("at").first().at
    outside, errors = watch_the_network(page, live_server.url)
    navigations: list[str] = []
    page.on("framenavigated", lambda frame: navigations.append(frame.url) if frame == page.main_frame else None)
    log_in(page, alice)
    page.goto("/dashboard/")
    figures = charts_drawn(page)
    assert {"dashboard-queue", "dashboard-latency", "dashboard-allocation"} <= set(figures)
    expect(page.get_by_test_id("dashboard-summary")).to_contain_text("0 / 1")
    expect(page.get_by_test_id("dashboard-updated")).to_contain_text("updates in place every 1 s")

    # The time axes run from the first data to now: not 24 hours with everything in the last pixel.
    for chart in ("dashboard-queue", "dashboard-allocation", "dashboard-latency"):
        assert abs((range_start(page, chart) - first).total_seconds()) <= 60, chart
        assert_nothing_overlaps(page, chart)
    shoot_page(page, "charts-dashboard")

    # The reader zooms into the queue and hides a series of the allocation chart...
    page.evaluate("() => { window.notReloaded = true; document.getElementById('dashboard-queue').dataset.kept = 'yes'; }")
    zoom = [int((first + timedelta(minutes=5)).timestamp() * 1000), int((first + timedelta(minutes=15)).timestamp() * 1000)]
    page.evaluate(f"() => Plotly.relayout('dashboard-queue', {{'xaxis.range': {zoom}}})")
    page.locator("#dashboard-allocation .legend .traces .legendtoggle").nth(1).click(force=True)  # hides the total
    page.wait_for_function("() => document.getElementById('dashboard-allocation')._fullData[1].visible === 'legendonly'")
    # The range as instants: Plotly keeps a range set in milliseconds as it was, or as date strings once a redraw has
    # passed over it (which one depends on how many polls came between: the same zoom either way).
    zoomed = plot_js(page, "dashboard-queue", ZOOM_MS)
    stamp = page.get_by_test_id("dashboard-updated").text_content()
    navigations.clear()

    # ...a job is queued meanwhile, and the page shows it at its next poll, without a reload.
    submit_job(alice, name="second-job", nodes=16)
    expect(page.get_by_test_id("dashboard-summary")).to_contain_text("1 / 1", timeout=15_000)
    expect(page.get_by_test_id("dashboard-updated")).not_to_have_text(stamp)
    assert page.evaluate("() => window.notReloaded") is True and navigations == []
    assert plot_js(page, "dashboard-queue", "gd.dataset.kept") == "yes"  # the same chart, redrawn in place
    assert plot_js(page, "dashboard-queue", ZOOM_MS) == zoomed
    assert plot_js(page, "dashboard-allocation", "gd._fullData[1].visible") == "legendonly"
    # A chart that had nothing to show appears in place: the new job waits, so the starvation chart is drawn.
    expect(page.locator("#dashboard-starvation .main-svg").first).to_be_visible(timeout=15_000)
    assert page.evaluate("() => window.notReloaded") is True and navigations == []
    assert Job.objects.get(pk=first_job.pk).state == JobState.RUNNING
    assert outside == [] and errors == []


# --- plotly.js after the page's text --------------------------------------------------------------


def held_back(page: Any, pattern: str) -> list[Any]:
    """Requests for `pattern` held unanswered until the test lets them go (`.continue_()`): a slow network, on cue."""
    held: list[Any] = []
    page.route(pattern, lambda route: held.append(route))
    return held


def let_go(page: Any, held: list[Any]) -> None:
    """Wait for the held request to be asked for (the page's script asks after it is shown), then answer it."""
    deadline = time.monotonic() + 10
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(50)
    assert held, "the page never asked for plotly.js"
    held.pop().continue_()


def drawing(page: Any) -> list[str]:
    """What each chart's box says while plotly.js has not come (its ::before)."""
    return page.evaluate(
        "() => [...document.querySelectorAll('#telemetry .chart, .telemetry .chart')].map(c => getComputedStyle(c, '::before').content)"
    )


def test_a_pages_text_is_shown_before_plotly_js_comes_and_the_charts_are_drawn_after(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, live_server: Any
) -> None:
    """A running job's page took 4-5 s to DOMContentLoaded though the server answered in 0.1 s: plotly.js and every chart
    came first. With plotly.js held back by the network, the page is there and readable; the charts follow it."""
    job = running(sim, alice, ran_for=timedelta(minutes=5), name="watch-me", nodes=2)
    outside, errors = watch_the_network(page, live_server.url)
    held = held_back(page, "**/plotly.min.js")
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/", wait_until="domcontentloaded")  # would wait for plotly.js while it was a page's script
    expect_state(page, "RUNNING")
    expect(page.get_by_test_id("command")).to_have_text("torchrun train.py")
    assert page.evaluate("() => document.readyState") != "loading" and page.evaluate("() => typeof Plotly") == "undefined"
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    assert drawing(page) and set(drawing(page)) == {'"Drawing the chart…"'}
    let_go(page, held)
    figures = charts_drawn(page)
    assert figures[:2] == ["telemetry-heatmap", "telemetry-gpu_util"]

    # The dashboard alike.
    page.goto("/dashboard/", wait_until="domcontentloaded")
    expect(page.get_by_role("heading", level=1)).to_have_text("Cluster and scheduler dashboard")
    expect(page.get_by_test_id("dashboard-summary")).to_be_visible()
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    let_go(page, held)
    assert {"dashboard-queue", "dashboard-allocation"} <= set(charts_drawn(page))
    assert outside == [] and errors == []
