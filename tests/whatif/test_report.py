"""replay/report.py: the self-contained report, its table and charts, from fake results and one short replay."""

from __future__ import annotations

import io
import json
import math
import re
import statistics
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from policy.model import PolicyConfig
from replay.metrics import summarize
from replay.report import fmt_percent, headline_text, report_figures, size_class, step_means, summary_table, write_report
from replay.simulator import ClusterSpec, simulate
from replay.trace import Assumptions, read_trace
from tests.whatif.fakes import T0, FakeAssumptions, FakeJob, FakeRecord, FakeResult, fake_result, fake_summary


def test_write_report_writes_a_self_contained_page_and_the_summary(tmp_path: Path) -> None:
    summaries = [fake_summary("fifo", 600.0), fake_summary("muster", 180.0)]
    results = [fake_result("fifo", 600.0), fake_result("muster", 60.0)]
    summary_path, report_path = write_report(
        summaries, results, out_dir=tmp_path / "out", assumptions=FakeAssumptions(), settings_used={"nodes": 2}, trace_name="tiny.csv"
    )
    document = json.loads(summary_path.read_text())
    assert [p["policy"] for p in document["policies"]] == ["fifo", "muster"]
    assert document["assumptions"][0].startswith("A job asks") and document["settings"] == {"nodes": 2}
    page = report_path.read_text()
    # Offline: no script, style or font fetched from anywhere; plotly.js is inlined.
    assert not re.search(r"<script[^>]+src=", page)
    markup = re.sub(r"(<script[^>]*>).*?</script>", r"\1</script>", page, flags=re.S)  # plotly.js itself names URLs
    assert not re.search(r"""(src|href|url)\s*[=(]\s*["']?(https?:)?//""", markup)
    assert "Plotly.newPlot" in page and len(page) > 1_000_000
    for text in ("Assumptions", "Runtimes above 168 hours", "Settings used", "min tenant share ratio", "per tenant"):
        assert text in page
    assert "10.0 min" in page and "3.0 min" in page  # the two policies' mean waits, side by side
    figures = json.loads(re.search(r'<script type="application/json" id="figures">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert {f["id"] for f in figures} >= {"cdf-wait-gang", "cdf-wait-whole_node", "cdf-wait-sub_node", "utilisation", "queue", "share-fifo"}


def test_the_table_has_every_row_for_every_policy() -> None:
    table = dict(summary_table([fake_summary("fifo", 600.0), fake_summary("easy", 120.0)]))
    rows = {label: cells for section in table.values() for label, cells in section}
    assert rows["wait mean, all jobs"] == ["10.0 min", "2.0 min"]
    assert rows["wait p99, gangs (several nodes)"] == ["30.0 min", "6.0 min"]
    assert rows["GPU utilisation"] == ["50.0%", "50.0%"]
    assert rows["GPUs idle while jobs wait"] == ["2.5%", "2.5%"]
    assert rows["min tenant share ratio (tenant, day)"][0] == "0.80 (b, 2017-07-14)"
    assert rows["reservation slips"][0] == "2 (mean 30 s, max 50 s)"
    assert rows["CPU per decision by queue length"][0] == "0-9 waiting: 0.50 ms; 10-99 waiting: 1.50 ms"
    detailed = fake_summary("muster", 1.0) | {"decision_cpu": {"per_call_ms": {"0-9": {"calls": 10, "mean": 0.04, "p99": 0.07}}}}
    cpu = {label: cells for _, section in summary_table([detailed]) for label, cells in section}["CPU per decision by queue length"]
    assert cpu == ["0-9 waiting: mean 0.04 ms, p99 0.07 ms (10 calls)"]
    assert rows["start-time estimate while waiting"][0] == "\u2013"  # no estimates: a dash, not an error
    assert "simulation wall time" in rows and "JCT median, sub-node jobs" in rows
    text = headline_text([fake_summary("fifo", 600.0), fake_summary("easy", 120.0)])
    assert text.splitlines()[0].split() == ["policy", "fifo", "easy"]


def test_a_summary_missing_numbers_shows_dashes() -> None:
    rows = {label: cells for _, section in summary_table([{"policy": "x"}]) for label, cells in section}
    assert set(rows["JCT p99, all jobs"]) == {"\u2013"}


def test_wait_cdfs_are_steps_in_seconds_with_duration_ticks() -> None:
    figures = {f["id"]: f["figure"] for f in report_figures([fake_result("fifo", 600.0), fake_result("muster", 60.0)])}
    gang = figures["cdf-wait-gang"]
    fifo, muster = gang["data"]
    # A step at each wait (no line between two waits suggests a wait that never happened), from 0 at the axis' start
    # to 100 % at its end.
    assert fifo["line"]["shape"] == "hv" and fifo["mode"] == "lines"
    assert (fifo["x"], fifo["y"]) == ([1.0, 600.0, 1800.0], [0.0, 1.0, 1.0])
    assert (muster["x"], muster["y"]) == ([1.0, 60.0, 1800.0], [0.0, 1.0, 1.0])
    assert fifo["line"]["color"] != muster["line"]["color"]
    xaxis = gang["layout"]["xaxis"]
    # Up to the first tick past the longest wait; past nine ticks, about one a decade.
    assert xaxis["type"] == "log" and xaxis["range"] == [pytest.approx(-0.03), pytest.approx(math.log10(1800) + 0.03)]
    assert xaxis["ticktext"] == ["1 s", "10 s", "1 min", "10 min", "30 min"] and xaxis["tickvals"] == [1, 10, 60, 600, 1800]
    short = figures["cdf-wait-sub_node"]["layout"]["xaxis"]
    assert short["ticktext"] == ["1 s", "2 s", "5 s", "10 s", "30 s", "1 min"] and short["tickvals"] == [1, 2, 5, 10, 30, 60]
    assert gang["layout"]["yaxis"]["range"] == [0, 1.02] and gang["layout"]["yaxis"]["tickformat"] == ".0%"
    # A wait of 0 has no place on a log axis: drawn at 1 s, and the legend says how many started at once.
    sub = figures["cdf-wait-sub_node"]["data"][0]
    assert sub["name"] == "fifo (n=1, 1 started at once)" and (sub["x"], sub["y"]) == ([1.0, 60.0], [1.0, 1.0])
    assert fifo["name"] == "fifo (n=1)"
    for figure in figures.values():
        go.Figure(figure)  # valid Plotly


def test_the_cdf_of_many_waits_has_a_corner_per_distinct_wait() -> None:
    result = FakeResult("fifo", records=[FakeRecord(FakeJob(T0, 1, 8), T0 + wait) for wait in (0, 0, 0, 30, 30, 7200)])
    trace = {f["id"]: f["figure"] for f in report_figures([result])}["cdf-wait-whole_node"]["data"][0]
    assert trace["x"] == [1.0, 30.0, 7200.0, 21600.0] and trace["y"] == [0.5, pytest.approx(5 / 6, abs=1e-5), 1.0, 1.0]
    assert trace["name"] == "fifo (n=6, 3 started at once)"


def test_a_size_with_no_jobs_says_so_instead_of_empty_axes() -> None:
    only_gangs = FakeResult("fifo", records=[FakeRecord(FakeJob(T0, 2, 16), T0 + 5, [(T0 + 5, T0 + 65, 16)])])
    figures = {f["id"]: f["figure"] for f in report_figures([only_gangs])}
    empty = figures["cdf-wait-sub_node"]
    assert empty["data"] == [] and empty["layout"]["xaxis"] == {"visible": False} and empty["layout"]["yaxis"] == {"visible": False}
    assert empty["layout"]["annotations"][0]["text"] == "No sub-node jobs in this trace: no wait to draw."
    assert figures["cdf-wait-gang"]["data"]
    go.Figure(empty)


# Five jobs over ten minutes on two nodes of 8 GPUs: a gang holds both for 5 min while two jobs wait behind it.
SHORT = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-03 10:00:00,300,16,4800,vc1
2017-10-03 10:01:00,240,8,1920,vc2
2017-10-03 10:02:00,120,2,240,vc2
2017-10-03 10:06:00,180,4,720,vc3
2017-10-03 10:07:00,120,1,120,vc1
"""


def _at(figure: dict[str, Any], when: str, trace: int = 0) -> float:
    """The trace's value at a moment of the replay (UTC)."""
    x = [datetime.fromisoformat(t).replace(tzinfo=UTC) for t in figure["data"][trace]["x"]]
    moment = datetime.fromisoformat(when).replace(tzinfo=UTC)
    return float(figure["data"][trace]["y"][min(range(len(x)), key=lambda i: abs(x[i] - moment))])


def test_the_series_of_a_short_replay_follow_its_jobs_and_agree_with_the_table() -> None:
    assumptions, config = Assumptions(), PolicyConfig()
    jobs = read_trace(io.StringIO(SHORT), assumptions=assumptions)
    result = simulate(jobs, cluster=ClusterSpec(nodes=2), policy="fifo", config=config, assumptions=assumptions)
    summary = summarize(result, config=config)
    figures = {f["id"]: f["figure"] for f in report_figures([result])}

    util = figures["utilisation"]
    # Its mean is the table's GPU utilisation (the series spans the makespan), and the legend says so.
    assert statistics.fmean(util["data"][0]["y"]) == pytest.approx(summary["utilisation"], abs=1e-3)
    assert util["data"][0]["name"] == f"fifo (mean over its makespan {fmt_percent(summary['utilisation'])})"
    assert _at(util, "2017-10-03 10:03:00") == 1.0  # the gang holds all 16 GPUs
    assert _at(util, "2017-10-03 10:06:00") == pytest.approx((8 + 2 + 4) / 16)
    assert _at(util, "2017-10-03 10:08:30") == pytest.approx((8 + 4 + 1) / 16)
    assert util["layout"]["yaxis"]["range"] == [0, 1] and util["layout"]["yaxis"]["tickformat"] == ".0%"

    queue = figures["queue"]
    assert _at(queue, "2017-10-03 10:00:30") == 0 and _at(queue, "2017-10-03 10:01:30") == 1 and _at(queue, "2017-10-03 10:03:00") == 2
    assert _at(queue, "2017-10-03 10:06:00") == 0 and min(queue["data"][0]["y"]) == 0
    assert queue["layout"]["yaxis"]["rangemode"] == "tozero"

    share = figures["share-fifo"]
    names = [trace["name"] for trace in share["data"]]
    assert names == ["vc1", "vc2", "vc3"]  # most GPU-seconds first
    assert _at(share, "2017-10-03 10:03:00", names.index("vc1")) == 1.0
    assert _at(share, "2017-10-03 10:06:00", names.index("vc2")) == pytest.approx(10 / 16)
    assert _at(share, "2017-10-03 10:06:00", names.index("vc3")) == pytest.approx(4 / 16)
    assert share["layout"]["yaxis"]["range"] == [0, 1]
    for figure in figures.values():
        go.Figure(figure)


def test_a_queue_that_stayed_empty_is_drawn_from_0_not_around_it() -> None:
    result = FakeResult("fifo", records=[FakeRecord(FakeJob(T0, 1, 8), T0, [(T0, T0 + 600, 8)])])
    queue = {f["id"]: f["figure"] for f in report_figures([result])}["queue"]
    assert set(queue["data"][0]["y"]) == {0.0} and queue["layout"]["yaxis"]["range"] == [0, 1]


def test_every_tenant_series_has_its_own_colour() -> None:
    # Ten tenants: eight by name, the last two summed as "others", in a colour of its own.
    records = [FakeRecord(FakeJob(T0, 1, 1, f"t{k}"), T0, [(T0, T0 + 600 * (10 - k), 1)]) for k in range(10)]
    share = {f["id"]: f["figure"] for f in report_figures([FakeResult("fifo", records=records)])}["share-fifo"]
    names = [trace["name"] for trace in share["data"]]
    colours = [trace["line"]["color"] for trace in share["data"]]
    assert names == [f"t{k}" for k in range(8)] + ["others"]
    assert len(set(colours)) == len(colours) == 9


def test_step_means_weigh_by_time() -> None:
    assert step_means([0.0, 5.0], [1.0, 3.0], 0.0, 10.0, 1) == [2.0]
    assert step_means([0.0, 5.0], [1.0, 3.0], 0.0, 10.0, 2) == [1.0, 3.0]
    assert step_means([0.0, 2.5], [0.0, 4.0], 0.0, 10.0, 2) == [2.0, 4.0]


def test_size_classes() -> None:
    assert [size_class(2, 16, 8), size_class(1, 8, 8), size_class(1, 3, 8)] == ["gang", "whole_node", "sub_node"]
