"""A new user's walk through the pages in Chromium, where a page said one thing and meant another: an empty filter read
"No jobs yet", a sort or a rank it could not show was quietly replaced, a cancel named ids the list does not show.

Fixtures (Chromium, the live server, the simulated cluster, signing in) are tests/e2e/test_browser.py's.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job
from tests.e2e import test_browser as base
from tests.e2e.test_browser import BrowserSim, LogIn, answer_dialogs, expect, expect_state, shoot, submit_job

# test_browser.py's fixtures, shared by name: Chromium, its page at 1440 px, the simulated cluster, alice, signing in.
browser = base.browser
page = base.page
sim = base.sim
alice = base.alice
log_in = base.log_in

pytestmark = pytest.mark.browser


def test_the_job_list_and_a_jobs_page_say_what_they_cannot_show(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    running_job = submit_job(alice, name="zeta-run", nodes=4)
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=running_job.pk).state == "RUNNING"
    first = submit_job(alice, name="sweep", nodes=1, gpus_per_node=1, array_index=0)
    Job.objects.filter(pk=first.pk).update(array_id=first.pk)
    elements = [Job.objects.get(pk=first.pk)] + [
        submit_job(alice, name="sweep", nodes=1, gpus_per_node=1, array_id=first.pk, array_index=i) for i in (7, 14)
    ]
    log_in(page, alice)

    # A filter that matched nothing is named, not "No jobs yet" to someone with jobs.
    page.goto("/?held=true")
    expect(page.get_by_test_id("nothing-listed")).to_have_text("No held jobs. Show all.")
    page.goto("/?array=999")
    expect(page.get_by_test_id("nothing-listed")).to_have_text("No array 999 (or none that you may see). Show all.")
    expect(page.get_by_test_id("array-note")).to_have_count(0)
    shoot(page, "job-list-no-such-array")
    page.get_by_role("link", name="Show all").click()
    expect(page.locator("table.jobs tbody tr")).to_have_count(4)

    # One sort, applied whichever name it comes by, and one it does not take is said.
    page.goto("/?ordering=name")
    expect(page.locator("table.jobs tbody td.name > a:first-child")).to_have_text(["sweep", "sweep", "sweep", "zeta-run"])
    response = page.goto("/?sort=bogus")
    assert response is not None and response.status == 400
    expect(page.get_by_test_id("filter-errors")).to_contain_text("Sort: Cannot sort by bogus; sort by id, name, owner, state")
    response = page.goto("/cluster/?sort=bogus")
    assert response is not None and response.status == 400
    expect(page.get_by_test_id("query-errors")).to_contain_text("?sort=: Cannot sort by bogus; sort by position, id")

    # Cancel selected names an array's elements as the list does.
    page.goto(f"/?array={first.pk}")
    expect(page.get_by_test_id("array-note")).to_contain_text(f"The elements of array {first.pk}.")
    expect(page.locator("table.jobs td.name .mono")).to_have_text([f"{first.pk}_14", f"{first.pk}_7", f"{first.pk}_0"])
    for element in elements[1:]:
        page.get_by_label(f"Select job {element.pk}").check()
    answer_dialogs(page, accept=True)
    page.get_by_test_id("bulk-cancel").get_by_role("button").click()
    ids = f"{elements[1].pk}-{elements[2].pk}"
    expect(page.get_by_role("status").filter(has_text="Cancelled")).to_have_text(f"Cancelled 2 jobs: {first.pk}_[7,14] (jobs {ids}).")

    # A rank the attempt did not have is said, with the way back to the page as it can be shown.
    response = page.goto(f"/jobs/{running_job.pk}/?rank=7")
    assert response is not None and response.status == 400
    expect(page.get_by_test_id("query-errors")).to_have_text('?rank=: "7" is not a rank of it; attempt 1 of the job had ranks 0 to 3.')
    page.get_by_test_id("query-back").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{running_job.pk}/$"))
    expect_state(page, "RUNNING")
    # Its notifications: none asked, by its submit or by alice's default.
    expect(page.get_by_test_id("notifications")).to_contain_text("none: its submit asked nothing of its own")

    # The usage page refuses a report it cannot read as the job list refuses a filter.
    response = page.goto("/usage/?start=bad")
    assert response is not None and response.status == 400
    expect(page.get_by_test_id("report-errors")).to_contain_text("From: Enter a valid date.")
    expect(page.get_by_test_id("report")).to_have_count(0)


def test_a_wide_jobs_ranks_and_nodes_stay_readable_at_390_px(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    """ "rank 10: sim-node-011" broke after "sim-node-", so a rank's node read as two; the attempt's 12 nodes took 12
    lines."""
    job = submit_job(alice, name="wide", nodes=12)
    sim.cycle()
    sim.advance(2)
    log_in(page, alice)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"/jobs/{job.pk}/")
    expect_state(page, "RUNNING")
    chips = page.get_by_test_id("assigned-nodes").locator(".node")
    expect(chips).to_have_count(12)
    line = chips.first.bounding_box()["height"]
    assert all(box["height"] == line for box in (chips.nth(i).bounding_box() for i in range(12))), "a rank wrapped"
    # Its attempt's nodes and the job list's, as `muster queue` writes them, whole on one line; each name on hover.
    nodes = page.get_by_test_id("attempts").locator("td.mono")
    expect(nodes).to_have_text("sim-node-[000-011]")
    expect(nodes).to_have_attribute("title", ", ".join(f"sim-node-{n:03d}" for n in range(12)))
    shoot(page, "job-page-ranks-390")
    # Another rank's output opens at the logs, the charts' options kept: it came back at the page's top.
    page.goto(f"/jobs/{job.pk}/?view=node#job-logs")
    page.get_by_test_id("log-ranks").get_by_role("link", name="rank 3", exact=True).click()
    expect(page).to_have_url(re.compile(r"\?view=node&attempt=1&rank=3#job-logs$"))
    expect(page.get_by_test_id("logs")).to_contain_text(f"job {job.pk} attempt 1 rank 3")
    expect(page.locator("#job-logs h2")).to_be_in_viewport()
    page.goto("/")
    expect(page.locator(f'tr[data-job="{job.pk}"] td.why')).to_have_text("sim-node-[000-011]")
