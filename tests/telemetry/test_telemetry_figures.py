"""The job page's charts: their data match the stored series, stay within the point budget, and load offline."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.core.cache import cache
from django.test import Client

from jobs.models import Job
from telemetry.catalogue import Level
from telemetry.downsampling import coarsen
from telemetry.figures import band_outline, max_points
from telemetry.models import JobSeries
from telemetry.page import job_telemetry_context
from telemetry.staticfiles import PLOTLY_JS
from tests.conftest import session_for
from tests.telemetry.helpers import as_plotly_figure, start_running, stored_run


@pytest.fixture
def finished(user) -> Job:
    """A 2-node x 8-GPU job that ran an hour and was stored when it ended."""
    return stored_run(user, nodes=2, gpus_per_node=8, seconds=3600)


def context(job: Job, **params: str) -> dict[str, Any]:
    job = Job.objects.prefetch_related("events", "allocations__node").get(pk=job.pk)
    return job_telemetry_context(job, params)


def figure(ctx: dict[str, Any], key: str) -> dict[str, Any]:
    return next(f["figure"] for f in ctx["figures"] if f["id"] == f"telemetry-{key}")


def present(values: list[float], counts: list[int], decimals: int) -> list[float | None]:
    return [(round(v, decimals) if decimals else round(v)) if c else None for v, c in zip(values, counts, strict=True)]


def test_the_heatmap_is_every_gpu_of_the_stored_run(finished) -> None:
    ctx = context(finished)
    assert ctx["origin"] == "stored"
    heat = figure(ctx, "heatmap")["data"][0]
    rows = list(JobSeries.objects.filter(job=finished, metric="gpu_util", level=Level.GPU).order_by("rank", "gpu"))
    assert len(heat["z"]) == len(rows) == 16
    assert heat["y"][0] == f"rank 0 · {rows[0].node} · GPU 0" and heat["y"][-1] == f"rank 1 · {rows[-1].node} · GPU 7"
    step = (heat["x"][1] - heat["x"][0]) // 1000
    first = heat["x"][0] - step * 500  # each column is centred on its bucket
    for z, row in zip(heat["z"], rows, strict=True):
        coarse = coarsen(row.buckets(), step)
        start = (coarse.first * step * 1000 - first) // (step * 1000)
        assert z[start : start + len(coarse)] == present(coarse.mean, coarse.count, 1)


def test_job_lines_are_the_stored_mean_min_and_max(finished) -> None:
    ctx = context(finished)
    traces = figure(ctx, "gpu_util")["data"]
    band, mean = traces
    row = JobSeries.objects.get(job=finished, metric="gpu_util", level=Level.JOB).buckets()
    assert mean["y"] == present(row.mean, row.count, 1)
    # The band: the highest samples forwards and the lowest back, closed on itself.
    assert band["fill"] == "toself"
    assert (band["x"], band["y"]) == band_outline(mean["x"], present(row.min, row.count, 1), present(row.max, row.count, 1))
    assert mean["x"][0] == row.first * row.step * 1000
    activity = figure(ctx, "activity")["data"]
    assert [t["name"] for t in activity if t.get("showlegend") is not False] == ["SM activity", "Tensor-core activity"]
    tensor = JobSeries.objects.get(job=finished, metric="tensor_active", level=Level.JOB).buckets()
    assert activity[-1]["y"] == present(tensor.mean, tensor.count, 4)


def test_per_node_and_per_gpu_lines(finished) -> None:
    per_node = context(finished, view="node")
    names = [t["name"] for t in figure(per_node, "gpu_util")["data"]]
    assert len(names) == 2 and names[0].startswith("rank 0 · ")
    node = JobSeries.objects.filter(job=finished, level=Level.NODE, rank=1).values_list("node", flat=True).first()
    per_gpu = context(finished, view="gpu", node=node)
    util = figure(per_gpu, "gpu_util")
    traces = util["data"]
    # One node's GPUs: the title names the node, the legend only the GPUs (short enough to stay off the plot).
    assert util["layout"]["title"]["text"] == f"GPU utilisation · {node} (rank 1)"
    assert [t["name"] for t in traces] == [f"GPU {g}" for g in range(8)]
    row = JobSeries.objects.get(job=finished, metric="gpu_util", node=node, gpu=5).buckets()
    assert traces[5]["y"] == present(row.mean, row.count, 1)
    pcie = figure(per_gpu, "pcie")["data"]
    assert pcie[0]["name"] == "TX GPU 0" and pcie[-1]["name"] == "RX GPU 7"
    # One GPU's TX and RX share a colour; RX is dashed, so it shows even where it lies on TX.
    assert pcie[0]["line"]["color"] == pcie[8]["line"]["color"] and pcie[0]["line"]["dash"] == "solid" and pcie[8]["line"]["dash"] == "dash"
    # NCCL bandwidth is job-wide: it shows whichever node's GPUs are picked.
    assert len(figure(per_gpu, "nccl")["data"]) == 2  # its band and mean line
    # The section itself falls back to the defaults; the page refuses a range or view it does not offer before
    # (tests/frontend/test_job_pages_and_errors.py), and a run or node another run has falls back as here.
    assert context(finished, view="rack", range="1y", node="nope", run="9")["options"].view == "job"


def test_every_figure_is_valid_plotly(finished) -> None:
    for view in ("job", "node", "gpu"):
        for entry in context(finished, view=view)["figures"]:
            as_plotly_figure(entry["figure"])  # raises on a property Plotly does not know


def test_no_trace_exceeds_the_point_budget_and_spikes_survive(finished, settings) -> None:
    settings.MUSTER_TELEMETRY_MAX_POINTS = 20
    settings.MUSTER_TELEMETRY_HEATMAP_COLUMNS = 10
    ctx = context(finished)
    assert ctx["max_points"] <= 20
    assert max_points(figure(ctx, "heatmap")) <= 10
    # The checkpoint's PCIe TX burst lasts a minute; at ~3-minute points it still shows in the band's maximum.
    pcie = figure(ctx, "pcie")
    stored = JobSeries.objects.get(job=finished, metric="pcie_tx", level=Level.JOB).buckets()
    peak = max(v for v, c in zip(stored.max, stored.count, strict=True) if c)
    assert pcie["layout"]["yaxis"]["ticksuffix"] == " GB/s"  # ~10 GB/s at the peak: shown in GB/s
    assert max(v for v in pcie["data"][0]["y"] if v is not None) == round(peak / 1e9, 3)  # the band's top


def test_a_time_range_shows_the_end_of_the_run(finished) -> None:
    ctx = context(finished, range="15m")
    x = figure(ctx, "gpu_util")["data"][1]["x"]  # the mean line
    end = ctx["run"].ended.timestamp() * 1000
    assert end - 16 * 60 * 1000 <= x[0] and x[-1] < end


def test_the_job_page_draws_the_charts_with_plotly_served_by_muster(finished, user) -> None:
    page = session_for(user)
    html = page.get(f"/jobs/{finished.pk}/").content.decode()
    # charts.js fetches it once the page's text is shown (a page's own tag held DOMContentLoaded back for 1.4 MB).
    script = re.search(r'<script src="[^"]*/telemetry/charts\.js" data-plotly="([^"]*plotly[^"]*\.min\.js)" defer>', html)
    assert script and script.group(1).endswith(PLOTLY_JS) and "cdn" not in script.group(1)
    assert not re.search(r'<script src="[^"]*plotly', html)
    figures = json.loads(re.search(r'<script id="telemetry-figures" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert [f["id"] for f in figures][:2] == ["telemetry-heatmap", "telemetry-gpu_util"]
    assert all(f'id="{f["id"]}"' in html for f in figures)
    assert 'data-testid="telemetry-summary"' in html and 'data-testid="efficiency-flags"' in html
    # Stored, its samples are still the simulated source's, not a real GPU's: the page keeps saying so.
    assert "stored when it ended: simulated series (no real GPUs)" in html
    js = page.get(script.group(1))
    assert js.status_code == 200 and b"plotly.js v" in b"".join(js.streaming_content)[:200]


def test_flags_show_on_the_page(submit, sim, monkeypatch, user) -> None:
    from telemetry.sources.simulated import Profile, SimulatedTelemetry

    monkeypatch.setattr("telemetry.page.get_source", lambda: SimulatedTelemetry(interval=5, profile_for=lambda job_id: Profile.IDLE_RANK))
    job = start_running(submit, sim, nodes=3, gpus_per_node=8, simulate={"duration_seconds": 7200})
    page = session_for(user)
    html = page.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-code="IDLE_RANK"' in html and "Rank 2 (" in html


def test_a_job_30_s_into_its_run_is_not_yet_judged_idle(submit, sim, monkeypatch, user) -> None:
    # Its warm-up loads data with the GPUs near idle: the page flagged them as idle 30 s after the start.
    from telemetry.sources.simulated import Profile, SimulatedTelemetry

    monkeypatch.setattr("telemetry.page.get_source", lambda: SimulatedTelemetry(interval=5, profile_for=lambda job_id: Profile.IDLE_GPUS))
    job = start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=30)
    html = session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-code="IDLE_GPUS"' not in html
    assert "Not enough samples to judge its efficiency: nothing is flagged before the GPUs have reported for 5 min" in html
    # An hour in, its two idle GPUs are named as one range on their node.
    later = start_running(submit, sim, nodes=1, gpus_per_node=8, simulate={"duration_seconds": 7200}, ran_for=3600)
    html = session_for(user).get(f"/jobs/{later.pk}/").content.decode()
    assert 'data-code="IDLE_GPUS"' in html and re.search(r"2 of 8 GPUs sat idle [^<]*\(rank 0\) GPUs 6-7\.", html)


def test_a_running_job_is_charted_live(submit, sim, user) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=4, simulate={"duration_seconds": 7200}, ran_for=600)
    ctx = context(job)
    assert ctx["origin"] == "simulated" and ctx["running"]
    assert len(figure(ctx, "heatmap")["data"][0]["z"]) == 4
    assert "telemetry-network" not in [f["id"] for f in ctx["figures"]]  # one node: no inter-node chart


def test_a_job_that_has_not_run_says_so(submit, user) -> None:
    job_id = submit()["id"]
    page = session_for(user)
    html = page.get(f"/jobs/{job_id}/").content.decode()
    assert 'data-testid="telemetry-empty"' in html and "has not started running" in html
    assert "telemetry-figures" not in html


def test_the_page_still_renders_when_the_source_is_down(submit, sim, user, settings) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=8)
    settings.MUSTER_TELEMETRY_SOURCE = "prometheus"
    page = session_for(user)
    response = page.get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    assert 'data-testid="telemetry-error"' in response.content.decode() and "Telemetry is unavailable" in response.content.decode()


def live(client: Client, job: Job, query: str = "") -> Any:
    return client.get(f"/jobs/{job.pk}/live/{query}")


def test_a_running_jobs_page_redraws_in_place_from_the_live_view(submit, sim, user) -> None:
    job = start_running(submit, sim, nodes=2, gpus_per_node=4, simulate={"duration_seconds": 7200}, ran_for=600)
    page = session_for(user)
    html = page.get(f"/jobs/{job.pk}/").content.decode()
    # No whole-page refresh while it runs (it would lose the reader's zoom); the page script polls instead.
    assert '<meta http-equiv="refresh" content="3">' not in html
    config = json.loads(re.search(r'<script id="job-live" type="application/json">(.*?)</script>', html, re.S).group(1))
    assert config == {"url": f"/jobs/{job.pk}/live/", "state": "RUNNING", "attempt": 1, "refresh_ms": 10_000}
    assert "frontend/job_live.js" in html and 'data-testid="live-note"' in html

    body = live(page, job, "?view=node&range=15m").json()
    assert body["state"] == "RUNNING" and body["attempt"] == 1
    # The same figures, for the same options, as the page itself would draw.
    expected = context(job, view="node", range="15m")
    assert [f["id"] for f in body["figures"]] == [f["id"] for f in expected["figures"]]
    node_lines = figure({"figures": body["figures"]}, "gpu_util")["data"]
    assert {t["name"] for t in node_lines} == {f"rank {r} · {a.node.name}" for r, a in enumerate(job.allocations.order_by("rank"))}
    assert 'data-testid="efficiency-flags"' in body["parts"]["telemetry-status"]
    assert "Logs" in body["parts"]["job-logs"] and "attempt 1" in body["parts"]["job-logs"]
    # With the parts every live job page redraws: its status line, run time and attempts.
    assert "of its 1 h wall time" in body["parts"]["run-time"] and 'data-attempt="1"' in body["parts"]["job-attempts"]


def test_the_live_view_of_a_job_that_is_not_running_has_its_state_and_status_but_no_telemetry(submit, sim, user) -> None:
    job_id = submit(nodes=1, gpus_per_node=1)["id"]
    page = session_for(user)
    job = Job.objects.get(pk=job_id)
    body = live(page, job).json()
    assert (body["state"], body["attempt"]) == ("PENDING", 0) and "figures" not in body
    # Its dependencies too (none here: an empty part), which the page redraws as the jobs it waits for move on.
    assert set(body["parts"]) == {"job-status", "run-time", "job-attempts", "job-dependencies"}
    assert "Queued" in body["parts"]["job-status"] and body["parts"]["run-time"] == body["parts"]["job-attempts"].strip() == ""
    assert body["parts"]["job-dependencies"].strip() == ""
    # The queued job's page updates in place too (no whole-page refresh, except without JavaScript).
    html = page.get(f"/jobs/{job_id}/").content.decode()
    assert '<noscript><meta http-equiv="refresh"' in html and "frontend/job_live.js" in html


def test_the_live_view_is_private_and_read_only(submit, sim, user, other_user) -> None:
    job = start_running(submit, sim, nodes=1, gpus_per_node=1)
    stranger = session_for(other_user)
    assert live(stranger, job).status_code == 404
    assert live(Client(), job).status_code == 302  # to the login page
    owner = session_for(user)
    assert owner.post(f"/jobs/{job.pk}/live/").status_code == 405


def test_viewers_of_a_running_job_share_one_render_per_half_interval(submit, sim, user, other_user, monkeypatch, settings) -> None:
    from frontend import views

    cache.clear()
    renders: list[str] = []
    real = views.job_telemetry_context
    monkeypatch.setattr(views, "job_telemetry_context", lambda job, params: (renders.append(params.urlencode()), real(job, params))[1])
    other_user.is_staff = True
    other_user.save()
    job = start_running(submit, sim, nodes=1, gpus_per_node=2, simulate={"duration_seconds": 7200}, ran_for=600)
    owner, admin = session_for(user), session_for(other_user)
    first = live(owner, job).json()
    second = live(admin, job).json()

    def rendered(body: dict[str, Any]) -> list[Any]:
        """What is rendered once per interval (the job's status and run time are drawn for every poll)."""
        return [body["figures"], body["flags"], body["parts"]["telemetry-status"], body["parts"]["job-logs"]]

    assert rendered(second) == rendered(first)  # another viewer, within the interval: the same render
    live(owner, job, "?view=gpu")  # other options are another render
    assert renders == ["", "view=gpu"]
    cache.clear()  # the interval has passed
    live(owner, job)
    assert renders == ["", "view=gpu", ""]


def test_the_page_says_what_the_lines_and_the_shaded_band_are(finished, user) -> None:
    """The whole job's band (lowest to highest GPU) was in no legend: a reader could not tell what it spanned."""
    page = html.unescape(session_for(user).get(f"/jobs/{finished.pk}/").content.decode())
    assert (
        "Each line is the mean of the job's 16 GPUs; the shaded band around it spans the lowest to the highest GPU at "
        "each point, so one GPU that lags or spikes shows." in page
    )
    assert context(finished, view="node")["lines_note"] == "One line per node (2): the mean of that node's GPUs."
    node = context(finished, view="gpu")["options"].node
    assert context(finished, view="gpu")["lines_note"] == f"One line per GPU of {node}; Node picks another node."
    one_gpu = stored_run(user, nodes=1, gpus_per_node=1, seconds=600)
    assert context(one_gpu)["lines_note"] == "Each line is the job's one GPU."


def test_a_one_node_jobs_summary_says_it_has_no_inter_node_traffic_rather_than_0_b(finished, user) -> None:
    """It read "Inter-node TX / RX 0 B / 0 B", as if its network had been measured idle; the chart is left out for it."""
    client = session_for(user)
    one_node = stored_run(user, nodes=1, gpus_per_node=8, seconds=600)
    page = html.unescape(client.get(f"/jobs/{one_node.pk}/").content.decode())
    assert "none: a job on one node sends nothing between nodes" in page and "0 B / 0 B" not in page
    page = html.unescape(client.get(f"/jobs/{finished.pk}/").content.decode())
    assert "a job on one node" not in page
    assert re.search(r'data-testid="summary-inter-node">[\d.]+ [kMGT]?B / [\d.]+ [kMGT]?B<', page)


def test_a_time_range_longer_than_the_run_is_not_offered_as_another_view(finished) -> None:
    """A 1-hour run offered "last hour" and "last 6 h" and "last 24 h" as links that all drew the whole run."""
    ranges = {r["label"]: r for r in context(finished)["ranges"]}
    assert [label for label, r in ranges.items() if not r["whole_run"]] == ["last 15 min", "whole run"]
    assert ranges["whole run"]["current"] and ranges["last hour"]["whole_run"]
    page = session_for(finished.owner).get(f"/jobs/{finished.pk}/").content.decode()
    shown = page.split('data-testid="telemetry-ranges"', 1)[1].split("</span>\n", 1)[0]
    assert ">last 15 min</a>" in shown and 'aria-disabled="true"' in shown and ">last hour</a>" not in shown
