"""A pending job updated from its page in Chromium, as `muster update`: the Update form folded under the actions, its
mistakes beside its fields in the submit form's words (a quota's wall time in minutes), the page's answer once it is
done, and no form once the job is placed; at a desktop's width and a phone's (390 px: the page never widens).

Fixtures and helpers are test_browser.py's (a live server on the test database, cycles run by hand).
"""

from __future__ import annotations

from typing import Any

import pytest

from jobs.models import Job
from quotas.models import Quota
from tests.e2e import test_browser as base
from tests.e2e.test_browser import WIDTH, BrowserSim, LogIn, expect, expect_state, page_width, shoot, submit_job
from tests.e2e.test_browser_submit import error_of

browser, page, sim, alice, log_in = base.browser, base.page, base.sim, base.alice, base.log_in

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", [WIDTH, 390])
def test_update_a_pending_job_from_its_page(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, width: int) -> None:
    Quota.objects.create(user=alice, max_wall_time_seconds=4 * 3600)
    job = submit_job(alice, name="train-llm", nodes=1, wall_time_seconds=3600)
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    update = page.get_by_test_id("update")
    expect(update.get_by_label("Name")).to_be_hidden()  # folded until asked for
    update.get_by_text("Update it before it starts").click()
    expect(update.get_by_label("Name")).to_have_value("train-llm")
    expect(update.get_by_label("Wall time (minutes)")).to_have_value("60")

    # Mistakes, each beside its field in the submit form's words; the quota's in minutes, as the field asks.
    update.get_by_label("Name").fill("")
    update.get_by_label("Wall time (minutes)").fill("300")
    update.get_by_label("Max restarts").fill("-1")
    update.get_by_role("button", name="Update").click()
    expect(page.get_by_test_id("update-errors")).to_contain_text("The job was not updated. Fix the 3 marked fields and update again.")
    expect(error_of(page, "Name")).to_have_text("Give the job a name: any label of yours.")
    expect(error_of(page, "Wall time (minutes)")).to_have_text(
        "Your quota (user alice) allows at most 240 minutes (4 h) per job; you asked for 300."
    )
    expect(error_of(page, "Max restarts")).to_have_text("Give 0 or more restarts: 0 means a failed job is not started again.")
    assert page_width(page) <= width
    shoot(page, f"job-update-errors-{width}px")
    assert Job.objects.get(pk=job.pk).name == "train-llm"

    # Fixed: updated, said, and the page shows the job as it is now.
    update.get_by_label("Name").fill("train-v2")
    update.get_by_label("Wall time (minutes)").fill("120")
    update.get_by_label("Max restarts").fill("2")
    update.get_by_role("button", name="Update").click()
    expect(
        page.get_by_text(f"Job {job.pk} updated: name train-v2, wall time 2 h, max restarts 2; the next scheduling cycle")
    ).to_be_visible()
    expect(page.locator("h1")).to_contain_text("train-v2")
    expect(page.locator("table.events")).to_contain_text("wall time 1 h -> 2 h")
    expect(page.get_by_test_id("update-errors")).to_have_count(0)
    assert page_width(page) <= width
    shoot(page, f"job-update-done-{width}px")
    assert (Job.objects.get(pk=job.pk).wall_time_seconds, Job.objects.get(pk=job.pk).max_restarts) == (7200, 2)

    # Placed: nothing to update any more.
    sim.cycle()
    page.reload()
    expect_state(page, "SCHEDULED")
    expect(page.get_by_test_id("update")).to_have_count(0)
