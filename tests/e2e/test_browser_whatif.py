"""A what-if run's page in Chromium: its results read at once, and its charts are drawn when plotly.js has come.

Fixtures (Chromium, the live server, signing in) are tests/e2e/test_browser.py's; the held-back plotly.js is
test_browser_charts.py's.
"""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from django.urls import reverse

from tests.accounts.factories import UserFactory
from tests.conftest import session_for
from tests.e2e import test_browser as base
from tests.e2e.test_browser import LogIn, expect, watch_the_network
from tests.e2e.test_browser_charts import charts_drawn, held_back, let_go
from tests.whatif.test_pages import form
from whatif.models import WhatIfRun
from whatif.services import whatif_execute

browser, page, log_in = base.browser, base.page, base.log_in

pytestmark = pytest.mark.browser


def test_a_whatif_runs_results_read_before_plotly_js_comes_and_its_charts_follow(
    page: Any, log_in: LogIn, transactional_db: None, live_server: Any
) -> None:
    """The run's page loaded plotly.js (1.4 MB) as a script of its own before its table could be read, as the job's
    page did before charts.js fetched it after the page was shown."""
    root = UserFactory(username="root", is_staff=True, is_superuser=True)
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        assert session_for(root).post(reverse("whatif:list"), form()).status_code == 302
    run = WhatIfRun.objects.get()
    whatif_execute(run.pk)
    outside, errors = watch_the_network(page, live_server.url)
    held = held_back(page, "**/plotly.min.js")
    log_in(page, root)
    page.goto(reverse("whatif:detail", args=[run.pk]), wait_until="domcontentloaded")
    expect(page.get_by_test_id("whatif-table")).to_contain_text("wait mean, all jobs")
    assert page.evaluate("() => typeof Plotly") == "undefined"
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    boxes = page.evaluate("() => [...document.querySelectorAll('.chart')].map(c => getComputedStyle(c, '::before').content)")
    assert boxes and set(boxes) == {'"Drawing the chart…"'}
    let_go(page, held)
    assert "utilisation" in charts_drawn(page)
    assert outside == [] and errors == []
