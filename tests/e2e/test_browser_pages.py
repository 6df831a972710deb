"""The pages people keep open, in Chromium: they keep up in place, sort, and say one budget figure.

The same harness as tests/e2e/test_browser.py (its fixtures are imported): pytest-django's live server, cycles run
by the test on a clock it moves, screenshots at 1440 px in the same folder. "In place" is checked the way a reader
would notice a reload: a marker set on `window` survives only if the page was not loaded again.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job
from jobs.states import JobState
from quotas.models import Quota
from quotas.selectors import account_usages
from tests.e2e import test_browser as harness
from tests.e2e.test_browser import BrowserSim, LogIn, expect, expect_state, shoot, submit_job

# The harness' fixtures, found by pytest under these names.
browser, page, sim, alice, bob, log_in = harness.browser, harness.page, harness.sim, harness.alice, harness.bob, harness.log_in

pytestmark = pytest.mark.browser


def mark(page: Any) -> None:
    page.evaluate("() => { window.__notReloaded = true; }")


def not_reloaded(page: Any) -> bool:
    return page.evaluate("() => window.__notReloaded === true")


def row_ids(page: Any, table: str) -> list[int]:
    return [int(i) for i in page.locator(f"{table} tbody tr").evaluate_all("rows => rows.map(r => r.dataset.job)")]


def test_the_cluster_page_updates_in_place_keeping_the_scroll(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    holder = submit_job(alice, name="holds-two", simulate={"duration_seconds": 3600})
    sim.cycle()
    sim.advance(2)
    waiting = submit_job(alice, name="whole-cluster", nodes=16)
    sim.cycle()
    log_in(page, alice)
    page.set_viewport_size({"width": 1440, "height": 600})
    page.goto("/cluster/")
    expect(page.get_by_test_id("cluster-summary")).to_contain_text("112 of 128 GPUs free")
    expect(page.get_by_test_id("live-note")).to_contain_text("Updated in place every 1 s; last at")
    # Each waiting job's priority factors are on the page, not only in a tooltip.
    expect(page.locator(f'table.queue tr[data-job="{waiting.pk}"] [data-testid="priority-factors"]')).to_contain_text("Fair share")
    page.mouse.wheel(0, 300)
    page.wait_for_function("() => window.scrollY >= 200")
    scrolled = page.evaluate("() => window.scrollY")
    stamp = page.get_by_test_id("live-updated").text_content()
    mark(page)

    # A job is submitted server-side: it joins the queue as new, without a reload...
    small = submit_job(alice, name="small-one", nodes=1, gpus_per_node=1)
    expect(page.locator(f'table.queue tr[data-job="{small.pk}"]')).to_contain_text("new", timeout=10_000)
    # ...then starts: its node fills and the queue loses it, still without a reload or a jump.
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=small.pk).state == JobState.RUNNING
    expect(page.get_by_test_id("cluster-summary")).to_contain_text("111 of 128 GPUs free", timeout=10_000)
    expect(page.locator(f'table.queue tr[data-job="{small.pk}"]')).to_have_count(0)
    expect(page.get_by_test_id("node-jobs").filter(has_text=re.compile(rf"\bjob {small.pk}\b"))).to_have_count(1)
    expect(page.get_by_test_id("node-jobs").filter(has_text=re.compile(rf"\bjob {holder.pk}\b"))).to_have_count(2)
    expect(page.get_by_test_id("live-updated")).not_to_have_text(stamp or "")
    assert not_reloaded(page)
    assert page.evaluate("() => window.scrollY") == scrolled
    page.set_viewport_size({"width": 1440, "height": 900})
    page.evaluate("() => window.scrollTo(0, 0)")
    shoot(page, "cluster-live")


def test_a_queued_jobs_page_updates_in_place_and_reloads_when_it_starts(
    page: Any, log_in: LogIn, alice: Any, bob: Any, sim: BrowserSim, settings: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    submit_job(bob, name="all-of-it", nodes=16, simulate={"duration_seconds": 30})
    sim.cycle()
    sim.advance(2)
    job = submit_job(alice, name="waits-its-turn", nodes=2)
    sim.cycle()
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    expect_state(page, "PENDING")
    reason = page.get_by_test_id("pending-reason")
    expect(reason).to_contain_text("Queued, position 1.")
    expect(page.get_by_test_id("live-note")).to_contain_text("updates in place every 1 seconds while the job is queued")
    mark(page)

    # A production job arrives ahead of it: its place changes in the page, which is not loaded again.
    submit_job(bob, name="urgent", nodes=4, priority_class="production")
    sim.cycle()
    expect(reason).to_contain_text("Queued, position 2.", timeout=10_000)
    assert not_reloaded(page)

    # The blocker ends and the queue moves on: a new state is a new page (its run time, nodes and attempts).
    sim.advance(30)
    sim.cycle()
    assert Job.objects.get(pk=job.pk).state in (JobState.SCHEDULED, JobState.RUNNING)
    expect(page.get_by_test_id("attempts")).to_be_visible(timeout=10_000)
    assert not not_reloaded(page)
    expect(page.get_by_test_id("run-time")).to_contain_text("of its 1 d wall time")


def test_the_job_list_sorts_by_a_column_and_keeps_it_through_the_live_refresh(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    names = ["charlie", "alpha", "delta", "bravo"]
    jobs = {name: submit_job(alice, name=name, nodes=1, gpus_per_node=1) for name in names}
    log_in(page, alice)
    page.goto("/")
    assert row_ids(page, "table.jobs") == [jobs[n].pk for n in reversed(names)]  # newest first
    expect(page.locator("th[aria-sort]")).to_have_text(re.compile("^Submitted"))

    page.get_by_role("link", name="Name", exact=True).click()
    expect(page).to_have_url(re.compile(r"[?&]sort=name(&|$)"))
    expect(page.locator("th[aria-sort]")).to_have_attribute("aria-sort", "ascending")
    assert row_ids(page, "table.jobs") == [jobs[n].pk for n in sorted(names)]
    page.locator("th[aria-sort] a").click()
    expect(page).to_have_url(re.compile(r"[?&]sort=-name(&|$)"))
    expect(page.locator("th[aria-sort]")).to_have_attribute("aria-sort", "descending")
    expect(page.locator("th[aria-sort]")).to_have_text(re.compile("^Name"))
    assert row_ids(page, "table.jobs") == [jobs[n].pk for n in sorted(names, reverse=True)]

    # The jobs start server-side; the rows change in place, in the order the reader chose.
    mark(page)
    sim.cycle()
    sim.advance(2)
    expect(page.locator(f'tr[data-job="{jobs["alpha"].pk}"] .state')).to_have_text("RUNNING", timeout=10_000)
    assert row_ids(page, "table.jobs") == [jobs[n].pk for n in sorted(names, reverse=True)]
    expect(page.locator("th[aria-sort]")).to_have_attribute("aria-sort", "descending")
    assert not_reloaded(page)
    # The filter form keeps the order too.
    page.get_by_label("Name").fill("l")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"sort=-name"))
    assert row_ids(page, "table.jobs") == [jobs[n].pk for n in ["delta", "charlie", "alpha"]]


def test_the_usage_page_and_the_queue_state_the_same_budget_figure(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any
) -> None:
    Quota.objects.create(user=alice, node_hours_per_period=30.0)
    submit_job(alice, name="long-run", nodes=4, wall_time_seconds=5 * 3600, simulate={"duration_seconds": 5 * 3600})
    sim.cycle()
    sim.advance(2)
    held = submit_job(alice, name="one-more", nodes=2, wall_time_seconds=6 * 3600)
    sim.cycle()
    held.refresh_from_db()
    assert held.pending_reason_code == "BUDGET"
    (usage,) = account_usages(users=[alice])
    words = str(usage.budget)
    assert words.startswith("30.0 node-hours left, 20.0 of it committed to running jobs, 10.0 for new jobs")

    log_in(page, alice)
    page.goto("/usage/")
    # The page states the same figure to the places of the account's smallest, the few seconds its job has run: its use
    # is not 0.0, and used and left add up to 30 as written (the reason keeps one place). The page reads the clock: what
    # is committed is a few seconds less there than a moment before.
    left = page.get_by_test_id("budget-left")
    expect(left).to_have_text(
        re.compile(r"^29\.99\d\d node-hours left, 19\.99\d\d of it committed to running jobs, 9\.99\d\d for new jobs$")
    )
    used = float(page.get_by_test_id("node-hours-used").first.inner_text())
    assert used > 0 and used + float(left.inner_text().split()[0]) == pytest.approx(30)
    page.goto("/cluster/")
    expect(page.locator(f'table.queue tr[data-job="{held.pk}"]')).to_contain_text(f"The budget of user alice has {words}")
    page.goto(f"/jobs/{held.pk}/")
    expect(page.get_by_test_id("pending-reason")).to_contain_text(f"The budget of user alice has {words}; this job may use 12.0")


def test_a_job_preempted_then_succeeded_shows_both_attempts_with_their_output(
    page: Any, log_in: LogIn, alice: Any, bob: Any, sim: BrowserSim, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    sweep = submit_job(alice, name="sweep", nodes=16, priority_class="preemptible", simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    sim.clock.advance(300)
    urgent = submit_job(bob, name="urgent-eval", nodes=4, priority_class="production", simulate={"duration_seconds": 60})
    sim.cycle()
    assert Job.objects.get(pk=sweep.pk).state == JobState.PENDING
    sim.advance(2)
    sim.advance(60)  # the production job ends; the sweep runs again...
    sim.advance(2)
    sim.advance(600)  # ...and succeeds
    assert Job.objects.get(pk=sweep.pk).state == JobState.SUCCEEDED

    log_in(page, alice)
    page.goto(f"/jobs/{sweep.pk}/")
    expect_state(page, "SUCCEEDED")
    table = page.get_by_test_id("attempts")
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(2)
    expect(rows.nth(0).get_by_test_id("attempt-outcome")).to_contain_text(f"preempted:Preempted for job {urgent.pk}")
    expect(rows.nth(1).get_by_test_id("attempt-outcome")).to_contain_text("succeeded")
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")
    shoot(page, "job-attempts")

    # Each attempt's output is a click away: the logs (and telemetry) of the preempted attempt.
    rows.nth(0).get_by_role("link", name="logs").click()
    expect(page).to_have_url(re.compile(r"[?&]attempt=1&run=1#job-logs$"))
    expect(page.locator("#job-logs h2")).to_contain_text("attempt 1")
    expect(page.get_by_test_id("logs")).to_contain_text(f"job {sweep.pk} attempt 1 rank 0")
    expect(page.get_by_test_id("attempts").locator("tbody tr").nth(0)).to_have_attribute("aria-current", "true")
