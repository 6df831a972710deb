"""The admins' Settings page in Chromium: at a phone's width (390 px) each variable's value is on the screen beside
its name, not scrolled off to the right of a column of names.

Fixtures and helpers are test_browser.py's (a live server on the test database).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e import test_browser as base
from tests.e2e.test_browser import LogIn, page_width, shoot

browser, page, sim, log_in = base.browser, base.page, base.sim, base.log_in

pytestmark = pytest.mark.browser


def test_the_settings_page_shows_each_value_on_a_phone(page: Any, log_in: LogIn, admin_user: Any, sim: Any) -> None:
    page.set_viewport_size({"width": 390, "height": 900})
    log_in(page, admin_user)
    page.goto("/settings/")
    table = page.get_by_test_id("settings-table")
    row = table.locator("tr", has=page.locator("code", has_text="MUSTER_TELEMETRY_PROMETHEUS_URL")).first
    for cell in row.locator("td").all():
        box = cell.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 390, cell.inner_text()
    assert page_width(page) <= 390
    shoot(page, "settings-390px")
