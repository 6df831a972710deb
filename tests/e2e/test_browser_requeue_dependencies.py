"""Requeue and dependencies as a researcher meets them in Chromium: a running job requeued (and held) from its page
after one question, the jobs a job waits for and those waiting for it, linked, keeping up in place, and the submit
form's Start after with its estimate and its mistakes.

Fixtures and helpers are test_browser.py's (a live server on the test database, cycles run by hand).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job, JobDependency
from jobs.services import job_cancel, job_requeue_by
from jobs.states import JobState
from tests.accounts.factories import UserFactory
from tests.e2e import test_browser as base
from tests.e2e.test_browser import BrowserSim, LogIn, answer_dialogs, expect, expect_state, shoot, submit_job
from tests.e2e.test_browser_submit import error_of, fill_basics

browser, page, sim, alice, log_in = base.browser, base.page, base.sim, base.alice, base.log_in

pytestmark = pytest.mark.browser


def test_requeue_a_running_job_from_its_page_after_one_question(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    job = submit_job(alice, name="flaky-node", nodes=1)
    log_in(page, alice)
    page.goto(f"/jobs/{job.pk}/")
    expect(page.get_by_role("button", name="Hold")).to_be_visible()
    expect(page.get_by_test_id("requeue")).to_have_count(0)  # pending: queued already
    sim.cycle()
    sim.advance(2)
    page.reload()
    expect_state(page, "RUNNING")
    # Clone, Requeue (its reason, its box, its button) and Cancel stand on one line.
    requeue = page.get_by_role("button", name="Requeue")
    rows = [
        page.get_by_test_id("clone").bounding_box(),
        requeue.bounding_box(),
        page.get_by_role("button", name="Cancel job").bounding_box(),
    ]
    assert all(abs(b["y"] - rows[0]["y"]) < 1 for b in rows), rows
    shoot(page, "job-detail-requeue")

    # Saying no changes nothing.
    page.get_by_test_id("requeue-reason").fill("node-07 flaps")
    asked = answer_dialogs(page, accept=False)
    requeue.click()
    expect(requeue).to_be_visible()
    assert asked == [
        f"Requeue job {job.pk} (flaky-node)? Its attempt 1 is stopped now (what it ran is charged; no restart is spent) and it "
        "waits in the queue again, in its place.\nIts reason says: node-07 flaps"
    ]
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING

    # Yes, with "and hold it": the question says so too; the page says what happened and offers Release.
    page.get_by_label("and hold it").check()
    asked = answer_dialogs(page, accept=True)
    requeue.click()
    expect(
        page.get_by_text(f"Job {job.pk} requeued and held: its attempt 1 was stopped; it is not started until released.")
    ).to_be_visible()
    assert asked[0].endswith("\nIts reason says: node-07 flaps\nIt is held too: not started until released.")
    expect_state(page, "PENDING")
    expect(page.get_by_role("button", name="Release")).to_be_visible()
    expect(page.get_by_test_id("requeue")).to_have_count(0)
    expect(page.locator("table.events")).to_contain_text("Requeued by alice: node-07 flaps.")
    assert sim.cycle().placed == []
    page.get_by_role("button", name="Release").click()
    expect(page.get_by_text(f"Job {job.pk} released")).to_be_visible()
    sim.cycle()
    sim.advance(2)
    page.reload()
    expect_state(page, "RUNNING")
    expect(page.locator(".facts")).to_contain_text("2 (restarts 0 of 0 allowed)")

    # A page left open while someone else requeued it: the page says why not, in the API's words.
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    job_requeue_by(job=Job.objects.get(pk=job.pk), by=root)
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Requeue").click()
    expect(
        page.get_by_text(f"Job {job.pk} is PENDING: only a placed or running job can be requeued; it is queued already.")
    ).to_be_visible()


def test_a_jobs_page_shows_what_it_waits_for_and_who_waits_for_it_and_keeps_up(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim, settings: Any
) -> None:
    settings.MUSTER_LIVE_REFRESH_SECONDS = 1
    prep = submit_job(alice, name="prep-data", nodes=1)
    evaluate = submit_job(alice, name="eval", nodes=1)
    train = submit_job(alice, name="train", nodes=1)
    JobDependency.objects.create(job=train, on=prep, kind="afterok")
    JobDependency.objects.create(job=train, on=evaluate, kind="afterany")
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=train.pk).pending_reason_code == "DEPENDENCY"
    log_in(page, alice)
    page.goto(f"/jobs/{train.pk}/")
    page.evaluate("window.__notReloaded = true")
    deps = page.get_by_test_id("dependencies")
    expect(deps.locator("li")).to_have_text(
        [
            f"job {prep.pk} (prep-data), once it has succeeded (afterok): not met yet: it is RUNNING",
            f"job {evaluate.pk} (eval), once it has ended, whatever way (afterany): not met yet: it is RUNNING",
        ]
    )
    expect(page.get_by_test_id("dependencies-summary")).to_have_text("0 of 2 met, 2 not yet.")
    expect(page.get_by_test_id("pending-reason")).to_contain_text(
        f"Waits for job {prep.pk} to succeed (afterok; it is RUNNING) and job {evaluate.pk} to end (afterany; it is RUNNING)."
    )
    shoot(page, "job-detail-dependencies")

    # eval ends (cancelled: afterany is met by any end): the list says so in place, no reload.
    job_cancel(job=Job.objects.get(pk=evaluate.pk), by=alice)
    expect(deps.locator(f'li[data-job="{evaluate.pk}"]')).to_have_text(
        f"job {evaluate.pk} (eval), once it has ended, whatever way (afterany): met: it ended CANCELLED"
    )
    expect(page.get_by_test_id("dependencies-summary")).to_have_text("1 of 2 met, 1 not yet.")
    assert page.evaluate("window.__notReloaded") is True

    # The links go both ways.
    deps.get_by_role("link", name=f"job {prep.pk}").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{prep.pk}/$"))
    expect(page.get_by_test_id("dependents")).to_have_text(f"job {train.pk} (train, afterok, PENDING)")
    page.get_by_test_id("dependents").get_by_role("link", name=f"job {train.pk}").click()
    expect(page).to_have_url(re.compile(rf"/jobs/{train.pk}/$"))

    # The job list says the reason as it says others.
    page.goto("/")
    expect(page.locator(f'tr[data-job="{train.pk}"] td.why')).to_contain_text(f"Waits for job {prep.pk} to succeed")


def test_the_submit_forms_start_after_estimates_refuses_in_its_words_and_clones(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim
) -> None:
    prep = submit_job(alice, name="prep-data", nodes=1)
    sim.cycle()
    sim.advance(2)
    log_in(page, alice)
    page.goto("/jobs/new/")
    fill_basics(page, name="train")
    page.get_by_label("Nodes", exact=True).fill("1")
    head = page.get_by_test_id("estimate-start")
    expect(head).to_have_attribute("data-kind", "now")
    # Waiting for a running job: not "now" any more, and the panel says why.
    page.get_by_label("Start after").fill(f"afterok:{prep.pk}")
    expect(page.get_by_test_id("estimate-reason")).to_have_text(f"Waits for job {prep.pk} to succeed (afterok; it is RUNNING).")
    assert head.get_attribute("data-kind") != "now"

    # Slurm's syntax it does not take, and a job there is none of: said on the field, in the form's words.
    page.get_by_label("Start after").fill("after:12,afterok")
    expect(head).to_have_attribute("data-kind", "refused")
    page.get_by_role("button", name="Submit").click()
    expect(error_of(page, "Start after")).to_have_text(
        [
            "'after:12': the types are afterok, afterany, afternotok, as TYPE:ID[:ID...] (e.g. afterok:12); Slurm's after, "
            "aftercorr and singleton are not supported.",
            "'afterok': give job ids after the type, as afterok:12, afterok:12:13 or afterok:12_1 (an array's element).",
        ]
    )
    page.get_by_label("Start after").fill("afterok:99999")
    page.get_by_role("button", name="Submit").click()
    expect(error_of(page, "Start after")).to_have_text("No job 99999 (or none that you may see).")
    assert not Job.objects.filter(name="train").exists()

    page.get_by_label("Start after").fill(f"afterok:{prep.pk}")
    page.get_by_role("button", name="Submit").click()
    train = Job.objects.get(name="train")
    expect(page).to_have_url(re.compile(rf"/jobs/{train.pk}/$"))
    expect(page.get_by_test_id("dependencies")).to_contain_text(f"job {prep.pk} (prep-data), once it has succeeded (afterok)")

    # Clone carries it.
    page.get_by_test_id("clone").click()
    expect(page.get_by_label("Start after")).to_have_value(f"afterok:{prep.pk}")
    expect(page.get_by_test_id("estimate-reason")).to_contain_text(f"Waits for job {prep.pk} to succeed")
