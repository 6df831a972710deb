"""The submit form and the job list by keyboard alone and as a screen reader reads them: a way past the header, a
focus ring that shows on it, every field's help and errors read with it, a refused submit's errors linked to their
fields, and a group of boxes named as a group.

Fixtures (Chromium, the live server, the simulated cluster, signing in) are tests/e2e/test_browser.py's.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from jobs.models import Job
from tests.e2e import test_browser as base
from tests.e2e.test_browser import BrowserSim, LogIn, expect, shoot, submit_job

browser, page, sim, alice, log_in = base.browser, base.page, base.sim, base.alice, base.log_in

pytestmark = pytest.mark.browser


def focused(page: Any) -> str:
    """The focused element as a reader would name it: its id, else its text."""
    return page.evaluate("() => document.activeElement.id || document.activeElement.textContent.trim()")


def test_the_job_list_is_reached_past_the_header_and_its_focus_shows(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    submit_job(alice, name="train-llm")
    log_in(page, alice)
    page.goto("/")
    # The first Tab offers to skip the header's dozen links; taking it, the next Tab is the page's first field.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    expect(skip).to_be_in_viewport()
    shoot(page, "keyboard-skip-link")
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    expect(page.get_by_label("Name")).to_be_focused()
    # On the dark header the browser's own ring (dark blue) did not show: a white one does.
    page.goto("/")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs")).to_be_focused()
    outline = page.evaluate("() => getComputedStyle(document.activeElement).outline")
    assert "rgb(255, 255, 255)" in outline and "2px" in outline, outline
    expect(page.get_by_role("heading", level=1)).to_have_text("Your jobs")


def test_a_refused_submit_is_fixed_by_keyboard_from_its_summary_and_each_error_is_read_with_its_field(
    page: Any, log_in: LogIn, alice: Any, sim: BrowserSim
) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    page.get_by_label("Name").fill("kb")
    page.get_by_label("Command").fill("python train.py")
    page.get_by_label("Nodes", exact=True).fill("0")
    page.get_by_role("button", name="Submit", exact=True).click()

    summary = page.get_by_test_id("form-errors")
    expect(summary).to_contain_text("Fix the 2 marked fields")
    # Each marked field is named in the summary, a link that takes the focus there.
    expect(summary.get_by_role("link")).to_have_text(["Image", "Nodes"])
    summary.get_by_role("link", name="Nodes").click()
    nodes = page.get_by_label("Nodes", exact=True)
    expect(nodes).to_be_focused()
    # A screen reader reads the field's help and its error with it: aria-describedby named an error id no element had.
    expect(nodes).to_have_attribute("aria-invalid", "true")
    expect(nodes).to_have_accessible_description("A multi-node job takes whole nodes. A job needs at least 1 node.")
    expect(page.get_by_label("Image")).to_have_accessible_description(
        "e.g. nvcr.io/nvidia/pytorch:24.05-py3 Give the container image to run, e.g. nvcr.io/nvidia/pytorch:24.05-py3."
    )
    shoot(page, "keyboard-refused-submit")

    # Tell me when is one group of boxes, named as such (its label was for no element).
    group = page.get_by_role("group", name="Tell me when")
    expect(group.get_by_role("checkbox")).to_have_count(4)
    expect(group).to_have_accessible_description(re.compile(r"^Nothing can be sent now: your account has no e-mail address"))

    # Fixed and submitted without the mouse: the typed fields were kept.
    nodes.focus()
    page.keyboard.press("Control+a")
    page.keyboard.type("1")
    page.get_by_label("Image").focus()
    page.keyboard.type("nvcr.io/nvidia/pytorch:24.05-py3")
    page.get_by_role("button", name="Submit", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))
    job = Job.objects.get()
    assert (job.name, job.nodes, job.command) == ("kb", 1, ["python", "train.py"])
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"Job {job.pk}: kb")
