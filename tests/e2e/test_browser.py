"""What a researcher does in the browser, and what they see: Chromium driven by Playwright.

The pages are served by pytest-django's live server (a thread of this process), so
the database is shared with the test through committed transactions
(`transactional_db`). Scheduling cycles never run in the background here: the
after-commit trigger is switched off and the test runs each cycle in-process on a
clock it moves by hand, so every page shows exactly what the test made happen.

Chromium comes from the system (MUSTER_CHROMIUM, default /usr/bin/chromium); without
it these tests skip, or fail when MUSTER_REQUIRE_SERVICES=1. Screenshots of the main pages at
1440 px go to test-artifacts/screenshots/ (MUSTER_SCREENSHOTS names another folder; empty: none),
which the README names for reviewers and CI keeps.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.db.models import F
from django.test import Client
from django.utils import timezone

from jobs.hooks import job_hooks
from jobs.models import Job, JobEvent
from jobs.states import JobState
from scheduler.cycle import CycleReport
from tests.accounts.factories import UserFactory
from tests.conftest import PASSWORD, REQUIRE_SERVICES, SimHarness, make_sim, need_service
from tests.jobs.factories import JobFactory
from tests.telemetry.helpers import store_runs_when_they_end

try:
    from playwright import sync_api
except ImportError:  # it is in requirements-dev.txt; without it these tests skip, or fail in CI
    sync_api = None

pytestmark = pytest.mark.browser

CHROMIUM = os.environ.get("MUSTER_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
LogIn = Callable[[Any, Any], None]
SHOTS = os.environ.get("MUSTER_SCREENSHOTS", str(Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"))
WIDTH = 1440
BANNER = "Simulated cluster"


# --- fixtures -------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser(django_db_setup: None) -> Iterator[Any]:
    """One Chromium for this module, closed at its end.

    Playwright's sync API keeps an event loop running in this thread while it is started,
    and Django's ORM refuses to run beside one unless told that it is safe. It is: the loop
    only works inside Playwright's calls. The test database is created before the loop
    starts, and the permission ends with the browser, so the rest of the suite keeps the check.
    """
    found = sync_api is not None and os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)
    if not found and not REQUIRE_SERVICES:
        pytest.skip(f"needs Playwright and Chromium at {CHROMIUM} (set MUSTER_CHROMIUM; scripts/test-services.sh installs it)")
    need_service(found, f"Playwright with Chromium at {CHROMIUM}")
    with pytest.MonkeyPatch.context() as mp, sync_api.sync_playwright() as playwright:
        mp.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any, live_server: Any) -> Iterator[Any]:
    context = browser.new_context(base_url=live_server.url, viewport={"width": WIDTH, "height": 900})
    context.set_default_timeout(10_000)
    tab = context.new_page()
    yield tab
    context.close()


class BrowserSim(SimHarness):
    """The conftest harness, with a clock that never falls behind the wall clock.

    Jobs submitted through the live server are stamped with the real time, so the
    cycle's clock is moved up to it first: history timestamps then read in order.
    """

    def cycle(self) -> CycleReport:
        self.clock.now = max(self.clock.now, timezone.now())
        return super().cycle()


@pytest.fixture
def sim(transactional_db: None, settings: Any, monkeypatch: pytest.MonkeyPatch) -> BrowserSim:
    """16 nodes x 8 GPUs in 2 racks, cycles run only when the test says so."""
    settings.MUSTER_CLUSTER = "simulated"
    # No Celery message per submit/cancel: the test runs the cycles itself.
    monkeypatch.setattr(job_hooks, "queue_changed", [])
    harness = make_sim(settings)
    return BrowserSim(clock=harness.clock, cluster=harness.cluster)


@pytest.fixture
def alice(sim: BrowserSim) -> Any:
    u = UserFactory(username="alice")
    u.save()
    return u


@pytest.fixture
def bob(sim: BrowserSim) -> Any:
    u = UserFactory(username="bob")
    u.save()
    return u


@pytest.fixture
def log_in(live_server: Any) -> LogIn:
    """Give the page a session made server-side: the login form itself is tested once, below."""

    def _log_in(page: Any, user: Any) -> None:
        client = Client()
        client.force_login(user)
        cookie = client.cookies[django_settings.SESSION_COOKIE_NAME]
        page.context.add_cookies([{"name": cookie.key, "value": cookie.value, "url": live_server.url}])

    return _log_in


def shoot(page: Any, name: str) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


def answer_dialogs(page: Any, *, accept: bool, every: bool = False) -> list[str]:
    """Answer the page's next confirm() (`every`: each one) with yes or no; returns the questions asked, as they come."""
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    (page.on if every else page.once)("dialog", answer)
    return asked


def submit_job(owner: Any, **overrides: Any) -> Job:
    """A job as a fresh submit leaves it (PENDING, its first event written), built without the form."""
    fields: dict[str, Any] = {
        "name": "train-llm",
        "image": "nvcr.io/nvidia/pytorch:24.05-py3",
        "command": ["torchrun", "train.py"],
        "nodes": 2,
        "simulate": {"duration_seconds": 600},
    }
    return JobFactory(owner=owner, queued=True, history=True, **{**fields, **overrides})


def expect(target: Any) -> Any:
    return sync_api.expect(target)


def expect_state(page: Any, state: str) -> None:
    expect(page.locator("h1 .state")).to_have_text(state)


def expect_history(page: Any, *states: str) -> None:
    """The job's history table lists exactly these states, in order."""
    expect(page.locator("table.events tbody tr td:nth-child(3)")).to_have_text(list(states))


# --- the tests ------------------------------------------------------------------


def test_log_in_with_the_form(page: Any, alice: Any) -> None:
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/$"))
    expect(page.get_by_test_id("simulated-banner")).to_contain_text(BANNER)

    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("Please enter a correct username and password")
    expect(page.get_by_label("Username")).to_have_value("alice")
    shoot(page, "login-error")

    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(r"/$"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Your jobs")
    expect(page.locator(".empty")).to_contain_text("No jobs yet")
    expect(page.get_by_role("link", name="Submit your first job")).to_be_visible()
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    shoot(page, "job-list-empty")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile(r"/accounts/login/$"))
    page.goto("/")
    expect(page).to_have_url(re.compile(r"/accounts/login/"))


def test_submit_run_and_cancel_a_two_node_job(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    log_in(page, alice)
    page.goto("/")
    page.get_by_role("link", name="Submit a job").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Submit a job")
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    shoot(page, "submit-form")

    page.get_by_label("Name").fill("train-llm")
    page.get_by_label("Image").fill("nvcr.io/nvidia/pytorch:24.05-py3")
    page.get_by_label("Command").fill("torchrun --nproc-per-node 8 train.py --config 'configs/big run.yaml'")
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("GPUs per node").fill("8")
    page.get_by_label("Wall time (minutes)").fill("90")
    page.get_by_label("Environment").fill("NCCL_DEBUG=INFO\nRUN_NAME=first try")
    page.get_by_label("Simulated run time (seconds)").fill("600")
    page.get_by_role("button", name="Submit").click()

    job = Job.objects.get()
    expect(page).to_have_url(re.compile(rf"/jobs/{job.pk}/$"))
    expect(page.get_by_text(f"Job {job.pk} submitted.")).to_be_visible()
    expect_state(page, "PENDING")
    expect(page.get_by_test_id("pending-reason")).to_contain_text("Waiting for the next scheduling cycle.")
    expect(page.get_by_test_id("assigned-nodes")).to_contain_text("not placed yet")
    # Clone (a link), Hold and Cancel (buttons) stand on one line, top and bottom.
    boxes = [page.get_by_test_id("clone").bounding_box(), page.get_by_role("button", name="Hold").bounding_box()]
    boxes.append(page.get_by_role("button", name="Cancel job").bounding_box())
    assert all(abs(b["y"] - boxes[0]["y"]) < 1 and abs(b["height"] - boxes[0]["height"]) < 1 for b in boxes), boxes
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    expect(page.get_by_test_id("command")).to_have_text("torchrun --nproc-per-node 8 train.py --config 'configs/big run.yaml'")
    expect(page.locator(".facts")).to_contain_text("NCCL_DEBUG=INFO")
    expect(page.locator(".facts")).to_contain_text("1 h 30 min")
    shoot(page, "job-detail-pending")
    # The shell line was split like a shell would, and the form's units became the API's.
    assert job.command == ["torchrun", "--nproc-per-node", "8", "train.py", "--config", "configs/big run.yaml"]
    assert job.env == {"NCCL_DEBUG": "INFO", "RUN_NAME": "first try"}
    assert (job.nodes, job.gpus_per_node, job.wall_time_seconds) == (2, 8, 5400)
    assert job.simulate == {"duration_seconds": 600.0}
    assert job.owner == alice

    report = sim.cycle()
    assert report.placed == [job.pk]
    sim.advance(5)
    page.reload()
    expect_state(page, "RUNNING")
    expect(page.get_by_test_id("pending-reason")).to_have_count(0)
    nodes = page.get_by_test_id("assigned-nodes")
    placed = [a.node.name for a in job.allocations.order_by("rank")]
    assert len(placed) == 2 and all(name.startswith("sim-node-") for name in placed)
    for rank, name in enumerate(placed):
        expect(nodes).to_contain_text(f"rank {rank}: {name}")
    expect_history(page, "PENDING", "SCHEDULED", "RUNNING")
    expect(page.locator("table.events")).to_contain_text("Submitted by alice.")
    expect(page.locator("table.events")).to_contain_text(f"Placed on {placed[0]}, {placed[1]}.")
    shoot(page, "job-detail-running")

    # Saying no to the confirmation changes nothing.
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.get_by_role("button", name="Cancel job").click()
    expect_state(page, "RUNNING")
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING

    messages = answer_dialogs(page, accept=True)
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_text(f"Job {job.pk} cancelled.")).to_be_visible()
    expect_state(page, "CANCELLED")
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    assert messages and str(job.pk) in messages[0]
    expect_history(page, "PENDING", "SCHEDULED", "RUNNING", "CANCELLED")
    expect(page.locator("table.events")).to_contain_text("Cancelled by alice.")
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    # The GPUs came back: the next cycle sees every node free.
    sim.cycle()
    page.goto("/cluster/")
    expect(page.get_by_test_id("cluster-summary")).to_contain_text("16 nodes, 128 of 128 GPUs free.")


def test_the_form_explains_bad_input_and_creates_nothing(page: Any, log_in: LogIn, alice: Any) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    page.get_by_label("Name").fill("broken")
    page.get_by_label("Image").fill("Not A Valid Ref")
    page.get_by_label("Command").fill("python train.py")
    page.get_by_label("Nodes").fill("2")
    page.get_by_label("GPUs per node").fill("9")
    page.get_by_label("Environment").fill("GOOD=1\n1BAD=x")
    page.get_by_role("button", name="Submit").click()

    expect(page).to_have_url(re.compile(r"/jobs/new/$"))
    expect(page.locator(".field.has-error")).to_have_count(3)
    expect(page.get_by_test_id("form-errors")).to_contain_text("The job was not submitted.")
    image = page.locator(".field", has=page.get_by_label("Image"))
    expect(image.locator(".error")).to_contain_text("'Not A Valid Ref' is not a valid container image reference")
    gpus = page.locator(".field", has=page.get_by_label("GPUs per node"))
    expect(gpus.locator(".error")).to_contain_text("No node has 9 GPUs; the largest node has 8.")
    env = page.locator(".field", has=page.get_by_label("Environment"))
    expect(env.locator(".error")).to_contain_text("'1BAD' is not a valid variable name")
    # What was typed is kept, so it can be corrected in place.
    expect(page.get_by_label("Image")).to_have_value("Not A Valid Ref")
    expect(page.get_by_label("Environment")).to_have_value("GOOD=1\n1BAD=x")
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    shoot(page, "submit-form-errors")
    assert not Job.objects.exists()

    # Errors the form itself finds: an unsplittable command, an env line without '=', nodes < 1.
    page.get_by_label("Image").fill("nvcr.io/nvidia/pytorch:24.05-py3")
    page.get_by_label("GPUs per node").fill("8")
    page.get_by_label("Command").fill("python -c 'print(1)")
    page.get_by_label("Nodes").fill("0")
    page.get_by_label("Environment").fill("JUSTANAME")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".field.has-error")).to_have_count(3)
    expect(page.locator(".field", has=page.get_by_label("Command")).locator(".error")).to_contain_text("Cannot split the command")
    expect(page.locator(".field", has=page.get_by_label("Nodes")).locator(".error")).to_contain_text("A job needs at least 1 node.")
    expect(page.locator(".field", has=page.get_by_label("Environment")).locator(".error")).to_contain_text("Line 1 has no '='")

    # A job larger than the whole cluster says why.
    page.get_by_label("Command").fill("python train.py")
    page.get_by_label("Nodes").fill("17")
    page.get_by_label("Environment").fill("")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".field.has-error")).to_have_count(1)
    expect(page.locator(".field", has=page.get_by_label("Nodes")).locator(".error")).to_contain_text("the whole cluster has 16 such nodes")
    assert not Job.objects.exists()


def test_job_list_filters_by_state_and_cluster_page_shows_nodes_and_queue(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    running = submit_job(alice, name="small-run")
    sim.cycle()
    sim.advance(5)
    waiting = submit_job(alice, name="whole-cluster", nodes=16)
    sim.cycle()
    tiny = submit_job(alice, name="quick-one", nodes=1, gpus_per_node=1, simulate={"duration_seconds": 1})
    waiting.refresh_from_db()
    assert Job.objects.get(pk=running.pk).state == JobState.RUNNING
    assert waiting.state == JobState.PENDING and waiting.pending_reason

    log_in(page, alice)
    page.goto("/")
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(3)
    for job, state in ((running, "RUNNING"), (waiting, "PENDING"), (tiny, "PENDING")):
        row = rows.filter(has=page.get_by_role("link", name=job.name, exact=True))
        expect(row.locator(".state")).to_have_text(state)
    expect(rows.filter(has_text="whole-cluster")).to_contain_text(waiting.pending_reason)
    shoot(page, "job-list")

    page.get_by_label("State").select_option("RUNNING")
    expect(page).to_have_url(re.compile(r"[?&]state=RUNNING(&|$)"))
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("small-run")
    page.get_by_label("State").select_option("PENDING")
    expect(page).to_have_url(re.compile(r"[?&]state=PENDING(&|$)"))
    expect(rows).to_have_count(2)
    expect(rows.filter(has_text="small-run")).to_have_count(0)
    page.get_by_label("State").select_option("SUCCEEDED")
    expect(page.locator(".empty")).to_contain_text("No SUCCEEDED jobs.")
    page.get_by_label("State").select_option("")
    expect(rows).to_have_count(3)

    page.get_by_role("link", name="small-run", exact=True).click()
    expect(page).to_have_url(re.compile(rf"/jobs/{running.pk}/$"))
    expect_state(page, "RUNNING")

    page.get_by_role("link", name="Cluster & queue").click()
    expect(page).to_have_url(re.compile(r"/cluster/$"))
    expect(page.locator(".node-card")).to_have_count(16)
    expect(page.get_by_test_id("cluster-summary")).to_contain_text("16 nodes, 112 of 128 GPUs free.")
    busy = [a.node.name for a in running.allocations.all()]
    for name in busy:
        expect(page.locator(".node-card", has_text=name)).to_contain_text("0 / 8 GPUs free")
    expect(page.locator(".node-card", has_text="0 / 8 GPUs free")).to_have_count(2)
    queue = page.locator("table.jobs tbody tr")
    expect(queue).to_have_count(2)
    expect(queue.filter(has_text="whole-cluster")).to_contain_text("16 nodes \N{MULTIPLICATION SIGN} 8 GPUs")
    expect(queue.filter(has_text="whole-cluster")).to_contain_text(waiting.pending_reason)
    expect(queue.filter(has_text="quick-one")).to_contain_text("alice")
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    shoot(page, "cluster")


def test_another_users_job_is_not_found(page: Any, log_in: LogIn, alice: Any, bob: Any) -> None:
    theirs = submit_job(bob, name="bobs-secret-run")
    mine = submit_job(alice, name="mine")
    log_in(page, alice)

    response = page.goto(f"/jobs/{theirs.pk}/")
    assert response is not None and response.status == 404
    expect(page.get_by_role("heading", level=1)).to_have_text("Not found")
    expect(page.get_by_text("bobs-secret-run")).to_have_count(0)
    expect(page.get_by_test_id("simulated-banner")).to_be_visible()
    shoot(page, "not-found")

    page.goto("/")
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    expect(page.get_by_role("link", name="mine", exact=True)).to_be_visible()
    expect(page.get_by_text("bobs-secret-run")).to_have_count(0)
    assert page.goto(f"/jobs/{mine.pk}/").status == 200


def watch_the_network(page: Any, origin: str) -> tuple[list[str], list[str]]:
    """Refuse every request that leaves Muster (the pages must work offline) and collect script errors."""
    outside: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        if r.request.url.startswith(origin):
            r.continue_()
        else:
            outside.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return outside, errors


def plot_js(page: Any, chart: str, expression: str) -> Any:
    """Evaluate `expression` over the Plotly graph div `gd` of a chart."""
    return page.evaluate(f"() => {{ const gd = document.getElementById('{chart}'); return {expression}; }}")


def test_a_running_jobs_charts_draw_offline_and_update_in_place(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any, monkeypatch: pytest.MonkeyPatch, live_server: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    settings.MUSTER_TELEMETRY_SIM_INTERVAL_SECONDS = 1
    store_runs_when_they_end(monkeypatch)
    job = submit_job(alice, name="watch-me", simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    # Telemetry is read up to the real now: give the run a minute of history to chart.
    started = JobEvent.objects.get(job=job, to_state=JobState.RUNNING).at
    JobEvent.objects.filter(job=job).update(at=F("at") - (started - timezone.now()) - timedelta(seconds=60))

    outside, errors = watch_the_network(page, live_server.url)
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    expect_state(page, "RUNNING")
    expect(page.get_by_test_id("live-note")).to_contain_text("update every 1 seconds")
    figures = page.evaluate("() => JSON.parse(document.getElementById('telemetry-figures').textContent).map(f => f.id)")
    assert figures[:2] == ["telemetry-heatmap", "telemetry-gpu_util"] and "telemetry-network" in figures
    # Every chart was drawn by plotly.js, served by Muster itself.
    expect(page.locator("#telemetry .chart .main-svg").first).to_be_visible()
    expect(page.locator("#telemetry .js-plotly-plot")).to_have_count(len(figures))
    assert plot_js(page, "telemetry-heatmap", "gd.data[0].z.length") == 16  # 2 nodes x 8 GPUs
    expect(page.get_by_test_id("efficiency-flags")).to_be_visible()
    shoot(page, "job-telemetry-running")

    # The reader zooms into the utilisation chart with the mouse...
    drag = page.locator("#telemetry-gpu_util .nsewdrag")
    drag.scroll_into_view_if_needed()
    box = drag.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.2, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, y, steps=8)
    page.mouse.up()
    page.wait_for_function("() => document.getElementById('telemetry-gpu_util').layout.xaxis.autorange === false")
    zoomed = plot_js(page, "telemetry-gpu_util", "gd.layout.xaxis.range")
    columns = plot_js(page, "telemetry-heatmap", "gd.data[0].x.length")
    last_x = plot_js(page, "telemetry-heatmap", "gd.data[0].x[gd.data[0].x.length - 1]")

    # ...and the charts keep growing in place, without a reload, and without undoing the zoom.
    page.evaluate("() => { window.notReloaded = true; }")
    page.wait_for_function(f"() => document.getElementById('telemetry-heatmap').data[0].x.slice(-1)[0] > {last_x}", timeout=15_000)
    assert plot_js(page, "telemetry-heatmap", "gd.data[0].x.length") >= columns
    assert page.evaluate("() => window.notReloaded") is True
    assert plot_js(page, "telemetry-gpu_util", "gd.layout.xaxis.range") == zoomed

    # When the job ends, the page reloads once to show it, with the run's stored summary.
    sim.advance(600)
    sim.cycle()
    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED
    expect_state(page, "SUCCEEDED")
    expect(page.get_by_test_id("live-note")).to_have_count(0)
    expect(page.get_by_test_id("telemetry-summary")).to_be_visible()
    expect(page.locator("#telemetry .js-plotly-plot").first).to_be_visible()
    assert outside == [] and errors == []


def test_a_running_jobs_output_streams_into_its_page_when_followed(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    job = submit_job(alice, name="follow-me", nodes=1, simulate={"duration_seconds": 12})
    sim.cycle()
    sim.advance(1)
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    logs = page.get_by_test_id("logs")
    expect(logs).to_contain_text(f"no container runs: job {job.pk} attempt 1 rank 0")
    page.get_by_test_id("logs-follow").click()
    expect(page.get_by_test_id("logs-follow")).to_have_text("Following the output as it is written…")
    # Lines arrive as the pod writes them (the page's poll, every second, leaves the followed output alone)...
    expect(logs).to_contain_text("step 100 (10 s of 12 s)", timeout=20_000)
    expect(page.get_by_test_id("logs-follow")).to_have_text("Following the output as it is written…")
    # ...until the attempt ends, with how it ended.
    expect(logs).to_contain_text("[simulated cluster] exited with code 0 after 12 s", timeout=15_000)
    expect(page.get_by_test_id("logs-follow")).to_have_text("The attempt has ended: its output is kept.")


def test_the_dashboard_draws_its_charts_offline(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, live_server: Any) -> None:
    running = submit_job(alice, name="holds-gpus")
    sim.cycle()
    sim.advance(5)
    submit_job(alice, name="waits", nodes=16)
    sim.cycle()
    assert Job.objects.get(pk=running.pk).state == JobState.RUNNING
    # The harness' clock runs a little ahead of the real one, which the dashboard reads: move the history back.
    ago = timedelta(minutes=10)
    Job.objects.update(submitted_at=F("submitted_at") - ago, scheduled_at=F("scheduled_at") - ago, started_at=F("started_at") - ago)
    JobEvent.objects.update(at=F("at") - ago)

    outside, errors = watch_the_network(page, live_server.url)
    log_in(page, alice)
    page.goto("/dashboard/")
    expect(page.get_by_role("heading", level=1)).to_have_text("Cluster and scheduler dashboard")
    figures = page.evaluate("() => JSON.parse(document.getElementById('telemetry-figures').textContent).map(f => f.id)")
    assert {"dashboard-queue", "dashboard-latency", "dashboard-starvation", "dashboard-quota", "dashboard-allocation"} <= set(figures)
    expect(page.locator(".js-plotly-plot")).to_have_count(len(figures))
    for chart in figures:
        expect(page.locator(f"#{chart} .main-svg").first).to_be_visible()
    # Queue depth ends with what is queued now: one job pending, one holding GPUs.
    expect(page.get_by_test_id("dashboard-summary")).to_contain_text("1 / 1")
    shoot(page, "dashboard")
    assert outside == [] and errors == []


def page_width(page: Any) -> int:
    return int(page.evaluate("document.documentElement.scrollWidth"))


def test_a_long_job_name_never_widens_the_job_list_at_1440_or_390_px(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    long_name = "a-very-long-experiment-name-" + "x" * 72
    submit_job(alice, name=long_name, nodes=16)
    sim.cycle()
    log_in(page, alice)
    page.goto("/")
    expect(page.get_by_role("link", name=long_name)).to_have_attribute("title", long_name)
    assert page_width(page) <= WIDTH
    why = page.locator("table.jobs td.why").first
    # "Why waiting" keeps a column wide enough to read, not a word a line.
    assert why.bounding_box()["width"] >= 200
    shoot(page, "job-list-long-name")
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    assert page_width(page) <= 390  # the table scrolls inside its own box; the page does not widen
    shoot(page, "job-list-390px")
    page.goto(f"/jobs/{Job.objects.get().pk}/")
    assert page_width(page) <= 390


def test_a_stale_submit_form_is_sent_again_as_it_was_in_the_browser(page: Any, log_in: LogIn, alice: Any, live_server: Any) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    page.get_by_label("Name").fill("kept-through-a-sign-in")
    page.get_by_label("Image").fill("nvcr.io/nvidia/pytorch:24.05-py3")
    page.get_by_label("Command").fill("python train.py --epochs 3")
    page.get_by_label("Nodes", exact=True).fill("1")
    page.get_by_label("GPUs per node").fill("1")
    # Another tab signed in again meanwhile: the CSRF secret this form was rendered with is gone.
    page.context.add_cookies([{"name": django_settings.CSRF_COOKIE_NAME, "value": "f" * 32, "url": live_server.url}])
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_test_id("csrf-failure")).to_contain_text("What you entered is kept")
    assert not Job.objects.exists()
    shoot(page, "stale-form")
    page.get_by_test_id("resubmit").click()
    expect(page.get_by_role("heading", level=1)).to_contain_text("kept-through-a-sign-in")
    job = Job.objects.get()
    assert (job.name, job.command) == ("kept-through-a-sign-in", ["python", "train.py", "--epochs", "3"])


def test_the_error_pages_are_the_sites_own(page: Any, log_in: LogIn, alice: Any) -> None:
    log_in(page, alice)
    assert page.goto("/quotas/").status == 403
    expect(page.get_by_test_id("forbidden")).to_be_visible()
    expect(page.locator("header.top")).to_be_visible()
    shoot(page, "forbidden")
    assert page.goto("/no/such/page/").status == 404
    expect(page.get_by_test_id("not-found")).to_contain_text("There is no page at /no/such/page/.")
    assert page.goto("/favicon.ico").status == 200


def test_the_job_list_keeps_up_in_place_and_filters_by_name(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    queued = submit_job(alice, name="sweep-a", nodes=1, gpus_per_node=1)
    submit_job(alice, name="other", nodes=1, gpus_per_node=1)
    log_in(page, alice)
    page.goto("/")
    row = page.locator(f'tr[data-job="{queued.pk}"]')
    expect(row.locator(".state")).to_have_text("PENDING")
    page.evaluate("window.__notReloaded = true")
    sim.cycle()
    sim.advance(2)
    # The row moves on by itself: no reload (the marker survives), the scroll and the filters stay.
    expect(row.locator(".state")).to_have_text("RUNNING", timeout=10_000)
    assert page.evaluate("window.__notReloaded") is True
    expect(row.locator("[data-testid=job-time]")).to_contain_text("left")
    expect(page.get_by_test_id("rows-updated")).to_contain_text("Updated in place every 1 s")
    page.get_by_label("Name").fill("sweep")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(1)
    expect(page.locator("table.jobs tbody tr")).to_contain_text("sweep-a")


def test_cancel_selected_jobs_from_the_list_with_one_question(
    page: Any, browser: Any, log_in: LogIn, alice: Any, bob: Any, sim: BrowserSim, settings: Any, live_server: Any
) -> None:
    """A quota lowered under a sweep: its queued jobs are cancelled from the list in one go, as `scancel -u`, not one
    page and one dialog each."""
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    sweep = [submit_job(alice, name=f"sweep-{i}", nodes=1, gpus_per_node=1) for i in range(5)]
    done = submit_job(alice, name="finished-one", nodes=1, gpus_per_node=1)
    Job.objects.filter(pk=done.pk).update(state=JobState.SUCCEEDED, finished_at=timezone.now())
    theirs = submit_job(bob, name="bobs-run", nodes=1, gpus_per_node=1)
    log_in(page, alice)
    page.goto("/jobs/?state=PENDING")
    expect(page).to_have_url(re.compile(r"/\?state=PENDING$"))
    rows = page.locator("table.jobs tbody tr")
    expect(rows).to_have_count(5)
    expect(page.get_by_test_id("total")).to_have_text("5 jobs")
    button = page.get_by_test_id("bulk-cancel").get_by_role("button")
    expect(button).to_have_text("Cancel selected")
    expect(button).to_be_disabled()

    # Two ticked; their ticks outlive the rows being redrawn in place.
    page.get_by_label(f"Select job {sweep[0].pk}").check()
    page.get_by_label(f"Select job {sweep[1].pk}").check()
    expect(button).to_have_text("Cancel 2 jobs")
    expect(page.get_by_label("Select all on this page")).not_to_be_checked()
    drawn = page.evaluate("document.body.dataset.liveUpdated || ''")
    expect(page.locator("body")).not_to_have_attribute("data-live-updated", drawn)
    expect(page.get_by_label(f"Select job {sweep[0].pk}")).to_be_checked()
    expect(button).to_have_text("Cancel 2 jobs")

    # Saying no changes nothing; yes cancels both in one POST and comes back to the same filtered list.
    page.once("dialog", lambda dialog: dialog.dismiss())
    button.click()
    assert Job.objects.filter(state=JobState.CANCELLED).count() == 0
    asked = answer_dialogs(page, accept=True)
    button.click()
    expect(page.get_by_role("status").filter(has_text="Cancelled 2 jobs")).to_have_text(f"Cancelled 2 jobs: {sweep[0].pk}-{sweep[1].pk}.")
    assert asked and asked[0].startswith("Cancel 2 jobs?")
    expect(page).to_have_url(re.compile(r"/\?state=PENDING$"))
    expect(rows).to_have_count(3)

    # The whole page: one box for it, one question with the number.
    page.get_by_label("Select all on this page").check()
    for job in sweep[2:]:
        expect(page.get_by_label(f"Select job {job.pk}")).to_be_checked()
    expect(button).to_have_text("Cancel 3 jobs")
    page.get_by_label(f"Select job {sweep[2].pk}").uncheck()
    expect(page.get_by_label("Select all on this page")).not_to_be_checked()
    page.get_by_label("Select all on this page").check()
    asked = answer_dialogs(page, accept=True)
    button.click()
    expect(page.get_by_role("status").filter(has_text="Cancelled 3 jobs")).to_be_visible()
    assert asked[0].startswith("Cancel 3 jobs?")
    expect(page.locator(".empty")).to_contain_text("No PENDING jobs.")
    assert {j.state for j in Job.objects.filter(pk__in=[j.pk for j in sweep])} == {JobState.CANCELLED}
    assert Job.objects.get(pk=done.pk).state == JobState.SUCCEEDED and Job.objects.get(pk=theirs.pk).state == JobState.PENDING
    page.goto("/")
    expect(page.locator(f'tr[data-job="{done.pk}"] input[type="checkbox"]')).to_have_count(0)  # ended: no box

    # Without script: a plain form, and the question is a page naming the jobs.
    more = [submit_job(alice, name=f"again-{i}", nodes=1, gpus_per_node=1) for i in range(2)]
    context = browser.new_context(base_url=live_server.url, viewport={"width": 390, "height": 844}, java_script_enabled=False)
    try:
        plain = context.new_page()
        log_in(plain, alice)
        plain.goto("/?state=PENDING")
        plain.get_by_label("Select all on this page").check()
        plain.get_by_role("button", name="Cancel selected").click()
        expect(plain.get_by_role("heading", level=1)).to_have_text("Cancel 2 jobs?")
        expect(plain.locator("table.jobs tbody tr")).to_have_count(2)
        plain.get_by_role("button", name="Cancel 2 jobs").click()
        expect(plain.get_by_role("status").filter(has_text="Cancelled 2 jobs")).to_be_visible()
        expect(plain).to_have_url(re.compile(r"/\?state=PENDING$"))
        assert {j.state for j in Job.objects.filter(pk__in=[j.pk for j in more])} == {JobState.CANCELLED}
    finally:
        context.close()


def test_the_job_list_at_390_px_keeps_labels_by_their_fields_and_rows_short(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    running = submit_job(alice, name="holds-the-cluster", nodes=16)
    sim.cycle()
    waiting = submit_job(alice, name="long-wall-time", nodes=1)
    # What the cycle writes on a job whose wall time an admin's lowered quota no longer allows (policy/schedule.py).
    reason = (
        "Its wall time of 240 min is beyond the 120 min per job alice allows now (lowered since it was submitted): it waits "
        f"until an admin raises the limit. To run sooner, shorten it: muster update {waiting.pk} -t 2h."
    )
    Job.objects.filter(pk=waiting.pk).update(pending_reason_code="JOB_LIMIT", pending_reason=reason)
    waiting.refresh_from_db()
    assert Job.objects.get(pk=running.pk).state in (JobState.SCHEDULED, JobState.RUNNING)
    log_in(page, alice)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    assert page_width(page) <= 390
    # "State" on the line of its select, not ending one line with the select starting the next.
    for label, field in (("State", "#state-filter"), ("Name", "#name-filter"), ("Since (UTC)", "#after-filter")):
        text, box = page.locator(f'.filters label:text-is("{label}")').bounding_box(), page.locator(field).bounding_box()
        assert text and box and abs((text["y"] + text["height"] / 2) - (box["y"] + box["height"] / 2)) < 8, label
    # The waiting job's long reason, and the gang's 16 nodes, take two lines at most, their whole text on hover: each
    # card stays short (its first line, size and time, and the reason's two lines).
    expect(page.locator(f'tr[data-job="{waiting.pk}"] td.why')).to_have_attribute("title", reason)
    expect(page.locator(f'tr[data-job="{running.pk}"] td.why span')).to_have_attribute("title", re.compile(r"(, .*){15}"))
    for job in (waiting, running):
        height = page.locator(f'tr[data-job="{job.pk}"]').bounding_box()["height"]
        assert height <= 140, (job.name, height)
    shoot(page, "job-list-390px-waiting")


def test_the_job_list_at_390_px_is_a_card_a_job_with_every_field_on_the_screen(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim
) -> None:
    """At 390 px the list was a 1,076 px table in a box scrolled sideways: ID, Name and State in sight, each row 100 px
    tall for the columns out of it. Each job is a card now, all of it on the screen; at 1440 px it is the table still."""
    gang = submit_job(alice, name="pretrain-7b-all-nodes", nodes=8)
    running = [submit_job(alice, name=name, nodes=1, gpus_per_node=8) for name in ("diffusion-sdxl", "eval", "rlhf-ppo")]
    sim.cycle()
    sim.advance(2)
    waiting = [
        submit_job(alice, name="sweep-lr=3e-4,bs=1024-warmup-cosine-schedule-with-a-long-name", nodes=16),
        submit_job(alice, name="tokenizer-bpe", nodes=16),
        submit_job(alice, name="llama-70b-finetune-lora-r64", nodes=16),
    ]
    ended = submit_job(alice, name="quick-test", nodes=1, gpus_per_node=1)
    Job.objects.filter(pk=ended.pk).update(state=JobState.CANCELLED)
    jobs = [gang, *running, *waiting, ended]
    assert {Job.objects.get(pk=job.pk).state for job in [gang, *running]} == {JobState.RUNNING}
    log_in(page, alice)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/")
    assert page_width(page) <= 390
    table = page.locator("table.job-list")
    assert table.evaluate("t => t.scrollWidth <= t.clientWidth")  # nothing to scroll sideways in its box
    for job in jobs:
        card = page.locator(f'tr[data-job="{job.pk}"]')
        box = card.bounding_box()
        assert box and box["height"] <= 140, (job.name, box)
        # Every field it shows is on the screen, the state on the line of the id.
        for cell in card.locator("td:visible").all():
            edge = cell.bounding_box()
            assert edge and edge["x"] >= 0 and edge["x"] + edge["width"] <= 390, (job.name, cell.inner_text())
        first, state = card.locator("td.job-id").bounding_box(), card.locator("td.job-state").bounding_box()
        assert first and state and abs(first["y"] - state["y"]) < 8, job.name
        expect(card.locator("td.job-time")).to_be_visible()
        expect(card.locator("td.size")).to_be_visible()
    expect(page.locator(f'tr[data-job="{waiting[0].pk}"] td.why')).to_be_visible()
    # The header is the line of sort links.
    expect(page.locator("table.job-list thead").get_by_role("link", name=re.compile("^Submitted"))).to_be_visible()
    shoot(page, "job-list-390px-cards")
    # On a wide screen the list is the table it was: a row a job, every column with its header.
    page.set_viewport_size({"width": WIDTH, "height": 900})
    page.reload()
    assert table.evaluate("t => getComputedStyle(t).display") == "table"
    expect(page.locator("table.job-list thead th:visible")).to_have_count(9)
    heights = [page.locator(f'tr[data-job="{job.pk}"]').bounding_box()["height"] for job in running]
    assert max(heights) <= 60, heights


def test_an_admin_cancelling_someone_elses_job_confirms_the_reason_its_owner_will_read(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim
) -> None:
    job = submit_job(alice, name="stuck-run", nodes=1)
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    log_in(page, root)
    page.goto(f"/jobs/{job.pk}/")
    page.get_by_test_id("cancel-reason").fill("node-07 goes into maintenance")
    asked = answer_dialogs(page, accept=True)
    page.get_by_role("button", name="Cancel job").click()
    expect(page.get_by_text(f"Job {job.pk} cancelled.")).to_be_visible()
    assert asked == [f"Cancel job {job.pk} (stuck-run)?\nIts owner reads: node-07 goes into maintenance"]
    assert Job.objects.get(pk=job.pk).state_reason == "Cancelled by root: node-07 goes into maintenance."


def test_removing_a_teams_quota_asks_first(page: Any, log_in: LogIn, sim: BrowserSim) -> None:
    """It acted at once, while cancelling a job asked."""
    from quotas.models import Quota, Team

    team = Team.objects.create(name="vision")
    Quota.objects.create(team=team, max_gpus=64)
    log_in(page, UserFactory(username="root", is_staff=True, is_superuser=True))
    page.goto("/quotas/teams/vision/")
    asked = answer_dialogs(page, accept=False)
    page.get_by_role("button", name="Remove the team's quota").click()
    assert asked == ["Remove the quota of team vision? The team has no limits from then on."]
    expect(page.get_by_role("button", name="Remove the team's quota")).to_be_visible()
    assert Quota.objects.filter(team=team).exists()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Remove the team's quota").click()
    expect(page.get_by_text("The quota of team vision is back to no limits.")).to_be_visible()
    assert not Quota.objects.filter(team=team).exists()


def test_an_admins_cancel_selected_says_how_many_are_other_users_jobs(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    theirs = [submit_job(alice, name=f"sweep-{i}", nodes=1, gpus_per_node=1) for i in range(2)]
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    own = submit_job(root, name="root-run", nodes=1, gpus_per_node=1)
    log_in(page, root)
    page.goto("/")
    asked = answer_dialogs(page, accept=False, every=True)
    button = page.get_by_test_id("bulk-cancel").get_by_role("button")
    page.get_by_label(f"Select job {own.pk}").check()
    button.click()
    page.get_by_label(f"Select job {theirs[0].pk}").check()
    page.get_by_label(f"Select job {theirs[1].pk}").check()
    button.click()
    page.get_by_label(f"Select job {own.pk}").uncheck()
    page.get_by_label(f"Select job {theirs[1].pk}").uncheck()
    button.click()
    tail = " Their queued or running work stops; this cannot be undone."
    assert asked == [
        "Cancel 1 job?" + tail,
        "Cancel 3 jobs? 2 of them are other users' jobs." + tail,
        "Cancel 1 job? It is another user's job." + tail,
    ]
    assert Job.objects.filter(state=JobState.CANCELLED).count() == 0
