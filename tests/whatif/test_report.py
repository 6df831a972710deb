"""replay/report.py: the self-contained report, its table and charts, from a fake result (no simulation)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from replay.report import headline_text, report_figures, size_class, step_means, summary_table, write_report
from tests.whatif.fakes import FakeAssumptions, fake_result, fake_summary


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


def test_charts_cdf_by_size_and_time_weighted_series() -> None:
    figures = {f["id"]: f["figure"] for f in report_figures([fake_result("fifo", 600.0)])}
    gang = figures["cdf-wait-gang"]["data"][0]
    assert gang["x"] == [pytest.approx(600 / 3600, abs=1e-3)] and gang["y"] == [1.0]
    assert figures["cdf-wait-whole_node"]["data"][0]["x"] == [pytest.approx(1200 / 3600, abs=1e-3)]
    assert figures["cdf-wait-sub_node"]["data"][0]["x"] == [pytest.approx(1 / 3600, abs=1e-6)]  # waited 0 s: at 1 s on the log axis
    util = figures["utilisation"]["data"][0]["y"]
    assert util[0] == 1.0 and util[-1] == 0.5  # 16 of 16 GPUs in the first half, 8 in the second
    shares = {trace["name"]: trace["y"] for trace in figures["share-fifo"]["data"]}
    assert shares["a"][0] == 1.0 and shares["b"][-1] == 0.25


def test_step_means_weigh_by_time() -> None:
    assert step_means([0.0, 5.0], [1.0, 3.0], 0.0, 10.0, 1) == [2.0]
    assert step_means([0.0, 5.0], [1.0, 3.0], 0.0, 10.0, 2) == [1.0, 3.0]
    assert step_means([0.0, 2.5], [0.0, 4.0], 0.0, 10.0, 2) == [2.0, 4.0]


def test_size_classes() -> None:
    assert [size_class(2, 16, 8), size_class(1, 8, 8), size_class(1, 3, 8)] == ["gang", "whole_node", "sub_node"]
