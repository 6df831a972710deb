"""The compare page shows what each run assumed and marks what differs: two runs of one trace on one cluster read the
same in their headers otherwise, though their runtime cap, resume mode, quotas and settings differ."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.urls import reverse

from replay.trace import Assumptions
from tests.conftest import session_for
from tests.whatif.traces import TINY
from whatif.models import WhatIfRun
from whatif.services import RunRequest, whatif_execute, whatif_start

pytestmark = pytest.mark.django_db


def _done(assumptions: Assumptions, changes: dict[str, object] | None = None) -> WhatIfRun:
    request = RunRequest(
        source="upload", trace_name="tiny.csv", trace=TINY, policies=("fifo",), nodes=2, assumptions=assumptions, changes=changes or {}
    )
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        run = whatif_start(request, actor=None)
    whatif_execute(run.pk)
    return run


def _rows(page: str) -> dict[str, tuple[bool, list[str]]]:
    """The assumptions table as {label: (marked as differing, [one value per run])}."""
    table = page.split('data-testid="whatif-assumptions"')[1].split("</table>")[0]
    rows = {}
    for attrs, label, cells in re.findall(r"<tr([^>]*)><th>(.*?)</th>(.*?)</tr>", table, re.S):
        label = re.sub(r"<[^>]+>", "", label).replace(" differs", "").strip()
        rows[label] = ("differs" in attrs, re.findall(r"<td>(.*?)</td>", cells))
    return rows


def test_each_runs_assumptions_are_shown_and_those_that_differ_are_marked(admin_user) -> None:
    first = _done(Assumptions(runtime_cap_seconds=7 * 24 * 3600.0))
    second = _done(
        Assumptions(runtime_cap_seconds=None, wall_round_seconds=1800.0, resume="checkpoint", tenant_quotas=True, all_preemptible=True),
        changes={"preemption": False},
    )
    page = session_for(admin_user).get(reverse("whatif:compare") + f"?run={first.pk}&run={second.pk}").content.decode()
    rows = _rows(page)
    assert rows["runtime cap"] == (True, ["7 d (604800 s)", "none"])
    assert rows["wall time rounding"] == (True, ["1 h (3600 s)", "30 min (1800 s)"])
    assert rows["a preempted job"] == (True, ["restart from zero", "resume from the last checkpoint"])
    assert rows["quotas and borrowing"] == (True, ["no", "yes"])
    assert rows["every job preemptible"] == (True, ["no", "yes"])
    assert rows["changed settings"] == (True, ["none (the site&#x27;s)", "preemption=False"])
    assert rows["setting preemption"] == (True, ["True", "False"])  # the full settings used, not only the changes
    # What they share is shown, unmarked.
    assert rows["trace"] == (False, ["tiny.csv", "tiny.csv"]) and rows["cluster"] == (False, ["2 nodes \u00d7 8 GPUs"] * 2)
    assert rows["policies"] == (False, ["fifo", "fifo"])
    assert not any(label.startswith("setting ") for label in rows if label != "setting preemption")
    assert f"run {first.pk}: fifo" in page and f"run {second.pk}: fifo" in page  # the results below


def test_a_site_setting_changed_between_two_runs_is_marked(admin_user, settings) -> None:
    first = _done(Assumptions())
    WhatIfRun.objects.filter(pk=first.pk).update(
        parameters={**first.parameters, "config": {**first.parameters["config"], "starvation_seconds": 60.0}}
    )
    second = _done(Assumptions())
    page = session_for(admin_user).get(reverse("whatif:compare") + f"?run={first.pk}&run={second.pk}").content.decode()
    rows = _rows(page)
    assert rows["changed settings"][0] is False  # neither changed one of its own...
    assert rows["setting starvation_seconds"][0] is True  # ...but the site's differed
