"""The submit form as a researcher meets it in Chromium: every mistake at once, a live estimate of the start beside
Submit, one preemptible control, and what was typed kept through Back and through an expired session.

Fixtures and helpers are test_browser.py's (a live server on the test database, cycles run by hand).
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings as django_settings

from jobs.models import Job
from jobs.states import JobState
from quotas.models import Quota
from tests.conftest import PASSWORD
from tests.e2e import test_browser as base
from tests.e2e.test_browser import WIDTH, BrowserSim, LogIn, expect, shoot, submit_job

# test_browser.py's fixtures (Chromium, a page on the live server, the simulated cluster, a user, a signed-in session).
browser, page, sim, alice, log_in = base.browser, base.page, base.sim, base.alice, base.log_in

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def fill_basics(page: Any, name: str = "train-llm", command: str = "torchrun --nproc-per-node 8 train.py") -> None:
    page.get_by_label("Name").fill(name)
    page.get_by_label("Image").fill(IMAGE)
    page.get_by_label("Command").fill(command)


def error_of(page: Any, label: str) -> Any:
    return page.locator(".field", has=page.get_by_label(label, exact=True)).locator(".error")


def test_every_mistake_is_shown_at_once_in_the_forms_units(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    Quota.objects.create(user=alice, max_gpus=8, max_wall_time_seconds=3600)
    log_in(page, alice)
    page.goto("/jobs/new/")
    page.get_by_label("Name").fill("too-much")
    page.get_by_label("Image").fill("Not A Valid Ref")
    page.get_by_label("Command").fill("python train.py")
    page.get_by_label("Environment").fill("1BAD=x")
    page.get_by_label("Nodes", exact=True).fill("4")
    page.get_by_label("Wall time (minutes)").fill("120")
    page.get_by_role("button", name="Submit").click()

    # A field's own mistake, another field's, the quota on GPUs and on wall time: one round, not four.
    expect(page.locator(".field.has-error")).to_have_count(4)
    expect(page.get_by_test_id("form-errors")).to_contain_text("Fix the 4 marked fields")
    expect(error_of(page, "Image")).to_contain_text("is not a valid container image reference")
    expect(error_of(page, "Environment")).to_contain_text("'1BAD' is not a valid variable name")
    expect(error_of(page, "Nodes")).to_contain_text("The job needs 32 GPUs; your quota (user alice) allows at most 8 at once.")
    # Asked in minutes, answered in minutes.
    expect(error_of(page, "Wall time (minutes)")).to_have_text(
        "Your quota (user alice) allows at most 60 minutes (1 h) per job; you asked for 120."
    )
    assert not Job.objects.exists()

    # Larger than the whole cluster and too long for the site, also in one round.
    page.get_by_label("Image").fill(IMAGE)
    page.get_by_label("Environment").fill("")
    page.get_by_label("Nodes", exact=True).fill("17")
    page.get_by_label("Wall time (minutes)").fill("30000")
    page.get_by_role("button", name="Submit").click()
    expect(page.locator(".field.has-error")).to_have_count(2)
    expect(error_of(page, "Nodes")).to_contain_text("the whole cluster has 16 such nodes")
    expect(error_of(page, "Wall time (minutes)")).to_contain_text("The site maximum is 20160 minutes")
    assert not Job.objects.exists()


def test_the_estimate_beside_submit_follows_the_fields_without_a_reload(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    page.evaluate("window.__notReloaded = true")
    fill_basics(page)
    page.get_by_label("Nodes", exact=True).fill("2")
    head = page.get_by_test_id("estimate-start")
    # An idle cluster: it would start at once, within every limit.
    expect(head).to_have_attribute("data-kind", "now")
    expect(head).to_contain_text("Would start now")
    expect(page.locator("[data-limit=cluster]")).to_have_class("ok")

    # Someone takes the whole cluster for an hour: the same form now says when, as the cycle would plan it.
    running = submit_job(alice, name="whole-cluster", nodes=16, wall_time_seconds=3600)
    sim.cycle()
    assert Job.objects.get(pk=running.pk).state == JobState.SCHEDULED
    page.get_by_label("Wall time (minutes)").fill("45")
    expect(head).to_have_attribute("data-kind", "planned")
    expect(head).to_contain_text("Would start about")
    expect(page.get_by_test_id("estimate-reason")).to_be_visible()
    page.set_viewport_size({"width": WIDTH, "height": 900})
    shoot(page, "submit-form-estimate")
    # At 1440 px it stands beside the fields and stays in view while they are filled in, from Nodes at the top to the
    # simulated exit code at the foot (at the foot of one column, changing Nodes meant scrolling down to see it).
    estimate, nodes = page.get_by_test_id("estimate"), page.get_by_label("Nodes", exact=True)
    assert estimate.bounding_box()["x"] > nodes.bounding_box()["x"] + nodes.bounding_box()["width"]
    for field in (nodes, page.get_by_label("Simulated exit code")):
        field.scroll_into_view_if_needed()
        box = estimate.bounding_box()
        assert 0 <= box["y"] and box["y"] + 40 <= 900, box  # its heading on screen

    # Too large for the cluster: the panel says so before Submit is pressed.
    page.get_by_label("Nodes", exact=True).fill("17")
    expect(head).to_have_attribute("data-kind", "refused")
    expect(page.get_by_test_id("estimate")).to_contain_text("the whole cluster has 16 such nodes")
    assert page.evaluate("window.__notReloaded") is True
    assert Job.objects.count() == 1  # the estimates created nothing


def test_one_preemptible_control_and_back_keeps_what_was_typed(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    expect(page.get_by_label("Preemptible")).to_have_count(0)  # the priority class says it
    # production is kept for admins: a researcher is not offered it (docs/admin.md, "Who may use a priority class").
    expect(page.locator("select[name=priority_class] option")).to_have_text(["normal", "preemptible"])
    fill_basics(page, name="come-back", command="python train.py --config 'my run.yaml'")
    page.get_by_label("Environment").fill("RUN=1")
    page.get_by_role("link", name="Cluster & queue").click()
    expect(page).to_have_url(re.compile(r"/cluster/$"))
    page.go_back()
    expect(page.get_by_label("Name")).to_have_value("come-back")
    expect(page.get_by_label("Image")).to_have_value(IMAGE)
    expect(page.get_by_label("Command")).to_have_value("python train.py --config 'my run.yaml'")
    expect(page.get_by_label("Environment")).to_have_value("RUN=1")
    expect(page.get_by_test_id("estimate-start")).to_have_attribute("data-kind", "now")  # and its estimate with them
    page.go_forward()
    page.go_back()
    expect(page.get_by_label("Command")).to_have_value("python train.py --config 'my run.yaml'")

    page.get_by_label("Nodes", exact=True).fill("1")
    page.get_by_label("Priority class").select_option("preemptible")
    page.get_by_role("button", name="Submit").click()
    job = Job.objects.get()
    expect(page).to_have_url(re.compile(rf"/jobs/{job.pk}/$"))
    assert (job.priority_class, job.preemptible) == ("preemptible", True)


def sign_in_again(page: Any) -> None:
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/jobs/new/$"))
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()


def test_an_expired_session_keeps_the_form_through_the_sign_in(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    alice.email = "alice@example.org"  # "it fails" is told by e-mail: an account without an address is refused that
    alice.save(update_fields=["email"])
    log_in(page, alice)
    page.goto("/jobs/new/")
    fill_basics(page, name="kept-through-expiry", command="python train.py --epochs 3")
    page.get_by_label("Nodes", exact=True).fill("1")
    page.get_by_label("GPUs per node").fill("2")
    page.get_by_label("Wall time (minutes)").fill("30")
    page.get_by_label("it fails").check()
    # The session expires while the form is open (its cookie goes; the CSRF cookie stays).
    session = [c for c in page.context.cookies() if c["name"] == django_settings.SESSION_COOKIE_NAME]
    page.context.clear_cookies(name=django_settings.SESSION_COOKIE_NAME)
    assert session
    page.get_by_role("button", name="Submit").click()

    sign_in_again(page)
    expect(page).to_have_url(re.compile(r"/jobs/new/$"))
    expect(page.get_by_test_id("form-restored")).to_contain_text("nothing was submitted")
    expect(page.get_by_label("Name")).to_have_value("kept-through-expiry")
    expect(page.get_by_label("Command")).to_have_value("python train.py --epochs 3")
    expect(page.get_by_label("GPUs per node")).to_have_value("2")
    expect(page.get_by_label("Wall time (minutes)")).to_have_value("30")
    expect(page.get_by_label("it fails")).to_be_checked()
    assert not Job.objects.exists()  # not until Submit is pressed again
    page.get_by_role("button", name="Submit").click()
    expect(page).to_have_url(re.compile(r"/jobs/\d+/$"))  # the submit answered: the job exists now
    job = Job.objects.get()
    expect(page).to_have_url(re.compile(rf"/jobs/{job.pk}/$"))
    assert (job.name, job.command) == ("kept-through-expiry", ["python", "train.py", "--epochs", "3"])
    assert (job.gpus_per_node, job.wall_time_seconds) == (2, 1800)
    # Kept once: the next form is blank.
    page.goto("/jobs/new/")
    expect(page.get_by_label("Name")).to_have_value("")


def test_a_form_whose_cookies_all_went_is_kept_through_the_stale_form_page(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    fill_basics(page, name="kept-without-cookies")
    page.context.clear_cookies()
    page.get_by_role("button", name="Submit").click()
    expect(page.get_by_test_id("csrf-failure")).to_contain_text("what you entered is kept")
    page.get_by_role("link", name="Sign in").click()
    sign_in_again(page)
    expect(page.get_by_label("Name")).to_have_value("kept-without-cookies")
    expect(page.get_by_label("Image")).to_have_value(IMAGE)
    assert not Job.objects.exists()


def test_the_resource_fields_keep_their_words_at_390_px(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    # Three columns of 100 px cut the Priority class to "norma" and ran the elastic range's help to eleven lines.
    log_in(page, alice)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto("/jobs/new/")
    assert base.page_width(page) <= 390
    select = page.get_by_label("Priority class")
    text_width = select.evaluate(
        "s => { const c = document.createElement('canvas').getContext('2d'); c.font = getComputedStyle(s).font;"
        " return c.measureText(s.options[s.selectedIndex].text).width; }"
    )
    assert select.bounding_box()["width"] > text_width + 30  # the word and the arrow
    nodes, low = page.get_by_label("Nodes", exact=True).bounding_box(), page.get_by_label("Elastic: at least").bounding_box()
    assert nodes["y"] == low["y"] and nodes["width"] >= 150  # the range's two ends side by side
    shoot(page, "submit-390px")


def test_an_array_is_submitted_from_the_form_as_sbatch_array_takes_it(page: Any, log_in: LogIn, alice: Any, sim: BrowserSim) -> None:
    log_in(page, alice)
    page.goto("/jobs/new/")
    fill_basics(page, name="sweep")
    page.get_by_label("Nodes", exact=True).fill("1")
    page.get_by_label("GPUs per node").fill("1")

    # Indices it cannot read are said on the field, and nothing typed is lost.
    page.get_by_label("Array indices").fill("7-2")
    page.get_by_role("button", name="Submit").click()
    expect(error_of(page, "Array indices")).to_have_text("'7-2' ends before it starts.")
    expect(page.get_by_label("Name")).to_have_value("sweep")
    expect(page.get_by_label("Array indices")).to_have_value("7-2")
    assert not Job.objects.exists()

    # The estimate is the first element's, and says how many there would be.
    page.get_by_label("Array indices").fill("0-4:2,9")
    expect(page.get_by_test_id("estimate-array")).to_have_text(
        "The array's first element (index 0) of 4: every element asks the same, and the others queue behind it."
    )
    shoot(page, "submit-form-array")
    page.get_by_role("button", name="Submit").click()

    # One job per index, the array's list shown, as `muster submit --array 0-4:2,9` would have made them.
    jobs = list(Job.objects.order_by("array_index"))
    assert [job.array_index for job in jobs] == [0, 2, 4, 9]
    array_id = jobs[0].pk
    assert {job.array_id for job in jobs} == {array_id} and {job.name for job in jobs} == {"sweep"}
    expect(page).to_have_url(re.compile(rf"/\?array={array_id}$"))
    expect(page.get_by_role("status").filter(has_text="Array")).to_have_text(f"Array {array_id} submitted: 4 jobs, {array_id}_[0,2,4,9].")
    expect(page.locator("table.jobs td.name .mono")).to_have_text([f"{array_id}_9", f"{array_id}_4", f"{array_id}_2", f"{array_id}_0"])

    # Left empty, the form submits one job, as before.
    page.goto("/jobs/new/")
    fill_basics(page, name="single")
    page.get_by_label("Nodes", exact=True).fill("1")
    page.get_by_role("button", name="Submit").click()
    single = Job.objects.get(name="single")
    expect(page).to_have_url(re.compile(rf"/jobs/{single.pk}/$"))
    assert single.array_id is None
