"""/whatif/: admins only; a run starts from a validated trace (nothing queued otherwise), is audited, and shows its report."""

from __future__ import annotations

import re
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from audit.models import AuditEntry
from tests.conftest import session_for
from tests.jobs.factories import JobFactory, NodeFactory
from tests.whatif.traces import BAD_LINE_3, TINY
from whatif.models import WhatIfRun
from whatif.services import whatif_execute

pytestmark = pytest.mark.django_db

LIST = reverse("whatif:list")


def form(trace: str | None = TINY, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "source": "upload",
        "nodes": "2",
        "gpus_per_node": "8",
        "policies": ["fifo", "muster"],
        "settings": "",
        "wall_round_seconds": "3600",
        "runtime_cap_seconds": "604800",
        "resume": "restart",
    }
    if trace is not None:
        data["trace_file"] = SimpleUploadedFile("tiny.csv", trace.encode(), content_type="text/csv")
    data.update(changes)
    return data


@pytest.fixture
def admin(admin_user):
    return session_for(admin_user)


def start(admin, trace: str | None = TINY, **changes: object) -> tuple[WhatIfRun, mock.MagicMock]:
    with mock.patch("whatif.tasks.whatif_run.publish_quietly") as publish:
        response = admin.post(LIST, form(trace, **changes))
    assert response.status_code == 302, response.content.decode()[:3000]
    run = WhatIfRun.objects.get()
    assert response["Location"] == reverse("whatif:detail", args=[run.pk])
    return run, publish


def test_only_admins_see_the_pages(client, user, admin) -> None:
    run = WhatIfRun.objects.create(source="upload", trace_name="t", parameters={})
    urls = [
        LIST,
        reverse("whatif:detail", args=[run.pk]),
        reverse("whatif:progress", args=[run.pk]),
        reverse("whatif:report", args=[run.pk]),
        reverse("whatif:compare") + "?run=1&run=2",
    ]
    for url in urls:
        assert client.get(url).status_code == 302  # to the sign-in page
        assert session_for(user).get(url).status_code == 403
    assert session_for(user).post(LIST, form()).status_code == 403
    assert WhatIfRun.objects.count() == 1
    assert "What-if" not in session_for(user).get(reverse("frontend:job-list")).content.decode()
    assert 'href="/whatif/"' in admin.get(reverse("frontend:job-list")).content.decode()


def test_a_bad_row_is_shown_with_its_line_and_nothing_is_queued(admin) -> None:
    with mock.patch("whatif.tasks.whatif_run.publish_quietly") as publish:
        response = admin.post(LIST, form(BAD_LINE_3))
    assert response.status_code == 200
    assert "line 3: num_gpus &#x27;two&#x27; is not a number" in response.content.decode()
    assert not WhatIfRun.objects.exists() and not AuditEntry.objects.exists()
    publish.assert_not_called()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"settings": "starvation=60"}, "Line 1: Unknown setting &#x27;starvation&#x27;."),
        ({"settings": "preemption=maybe"}, "Line 1: preemption: &#x27;maybe&#x27; is not true or false."),
        ({"nodes": ""}, "Give either the number of nodes or the offered load."),
        ({"nodes": "1"}, "more than the cluster&#x27;s 1"),
        ({"trace": None}, "Choose the trace file to replay."),
        ({"policies": ["sjf"]}, "Select a valid choice"),
    ],
)
def test_bad_settings_are_refused_before_anything_runs(admin, changes: dict[str, object], message: str) -> None:
    trace = changes.pop("trace", TINY)
    response = admin.post(LIST, form(trace, **changes))  # type: ignore[arg-type]
    assert response.status_code == 200 and message in response.content.decode()
    assert not WhatIfRun.objects.exists()


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        # The day after the last overflowed Python's dates: a 500 (OverflowError), not a form error.
        ({"source": "history", "start": "2026-11-01", "end": "9999-12-31"}, "end", "A date between 1970-01-01 and 2999-12-31."),
        ({"source": "history", "start": "0001-01-01", "end": "2026-11-01"}, "start", "A date between 1970-01-01 and 2999-12-31."),
        # It ran, "rounded up to 2.77778e+304 hours".
        ({"wall_round_seconds": "1e308"}, "wall_round_seconds", "At most the site&#x27;s longest wall time, 1209600 s (14 d"),
        ({"wall_round_seconds": "nan"}, "wall_round_seconds", "Enter a number."),
        ({"runtime_cap_seconds": "1e308"}, "runtime_cap_seconds", "less than or equal to 31622400"),
        ({"runtime_cap_seconds": "inf"}, "runtime_cap_seconds", "Enter a number."),
        # 0 was taken for no cap, silently: blank is that.
        ({"runtime_cap_seconds": "0"}, "runtime_cap_seconds", "A runtime cap must be above 0 s: 0 would cut every run to nothing. Leave"),
        ({"runtime_cap_seconds": "-1"}, "runtime_cap_seconds", "A runtime cap must be above 0 s"),
        ({"nodes": "1e9"}, "nodes", "Enter a whole number."),
        ({"nodes": "100001"}, "nodes", "less than or equal to 100000"),
        ({"nodes": "", "load": "inf"}, "load", "Enter a number."),
        ({"nodes": "", "load": "11"}, "load", "less than or equal to 10"),
        ({"gpus_per_node": "65"}, "gpus_per_node", "less than or equal to 64"),
    ],
)
def test_every_number_and_date_is_bounded(admin, settings, changes: dict[str, str], field: str, message: str) -> None:
    settings.MUSTER_MAX_WALL_TIME_SECONDS = 14 * 24 * 3600
    trace = None if changes.get("source") == "history" else TINY
    response = admin.post(LIST, form(trace, **changes))
    assert response.status_code == 200
    assert field in response.context["form"].errors, response.context["form"].errors
    assert message in response.content.decode()
    assert not WhatIfRun.objects.exists()


def test_the_wall_time_rounding_may_be_the_sites_longest_wall_time(admin, settings) -> None:
    settings.MUSTER_MAX_WALL_TIME_SECONDS = 7200
    assert 'max="7200"' in admin.get(LIST).content.decode()
    run, _ = start(admin, wall_round_seconds="7200")
    assert run.parameters["assumptions"]["wall_round_seconds"] == 7200


def test_a_blank_runtime_cap_is_no_cap(admin) -> None:
    run, _ = start(admin, runtime_cap_seconds="")
    assert run.parameters["assumptions"]["runtime_cap_seconds"] is None
    assert "blank = no cap" in admin.get(LIST).content.decode()


def test_every_bad_setting_line_is_shown_at_once(admin) -> None:
    page = admin.post(LIST, form(settings="not_a_knob=1\npreemption=maybe")).content.decode()
    errors = re.findall(r'<p class="error">(.*?)</p>', page)
    assert errors[:2] == ["Line 1: Unknown setting &#x27;not_a_knob&#x27;.", "Line 2: preemption: &#x27;maybe&#x27; is not true or false."]
    assert errors[2].startswith("Valid names: weight_fair_share")
    assert not WhatIfRun.objects.exists()


def test_a_big_upload_is_refused(admin) -> None:
    with mock.patch("whatif.forms.MAX_TRACE_BYTES", 100):
        response = admin.post(LIST, form(TINY))
    assert "The file is too big: 261 bytes; the limit is 100 bytes." in response.content.decode()
    assert not WhatIfRun.objects.exists()


def test_a_run_is_audited_queued_after_commit_and_shows_its_report(admin, admin_user, django_capture_on_commit_callbacks) -> None:
    with django_capture_on_commit_callbacks(execute=True):
        run, publish = start(admin, settings="starvation_seconds=600")
    publish.assert_called_once_with(run.pk)
    assert run.status == "queued" and run.trace_jobs == 6 and run.created_by == admin_user
    assert run.parameters["changes"] == {"starvation_seconds": 600.0} and run.parameters["config"]["starvation_seconds"] == 600.0
    entry = AuditEntry.objects.get(action="whatif.run")
    assert entry.actor == admin_user and entry.target_id == str(run.pk)
    assert entry.changes["setting.starvation_seconds"][1] == 600.0 and entry.changes["jobs"] == [None, 6]

    page = admin.get(reverse("whatif:detail", args=[run.pk])).content.decode()
    assert 'id="whatif-live"' in page and "whatif_live.js" in page and "<script>" not in page  # CSP: no inline script
    assert admin.get(reverse("whatif:progress", args=[run.pk])).json() == {"status": "queued", "progress": 0.0, "error": ""}

    whatif_execute(run.pk)
    run.refresh_from_db()
    assert run.status == "done" and run.progress == 1.0 and run.finished_at is not None
    assert [p["policy"] for p in run.policy_summaries] == ["fifo", "muster"]
    whatif_execute(run.pk)  # a second delivery of the task does nothing
    assert WhatIfRun.objects.get().finished_at == run.finished_at

    page = admin.get(reverse("whatif:detail", args=[run.pk])).content.decode()
    assert 'data-testid="whatif-table"' in page and "wait mean, all jobs" in page and 'id="utilisation"' in page
    assert 'id="telemetry-figures"' in page and "plotly.min.js" in page
    report = admin.get(reverse("whatif:report", args=[run.pk]))
    assert report["Content-Disposition"] == f'attachment; filename="whatif-{run.pk}-report.html"'
    assert not re.search(r"<script[^>]+src=", report.content.decode()) and "Plotly.newPlot" in report.content.decode()
    assert admin.get(reverse("whatif:summary", args=[run.pk])).json()["policies"][0]["policy"] == "fifo"
    listing = admin.get(LIST).content.decode()
    assert f'value="{run.pk}"' in listing and "starvation_seconds=600.0" in listing


def test_runs_compare_side_by_side(admin) -> None:
    with mock.patch("whatif.tasks.whatif_run.publish_quietly"):
        for settings in ("", "preemption=false"):
            admin.post(LIST, form(settings=settings, policies=["fifo"]))
    first, second = WhatIfRun.objects.order_by("pk")
    for run in (first, second):
        whatif_execute(run.pk)
    page = admin.get(reverse("whatif:compare") + f"?run={first.pk}&run={second.pk}").content.decode()
    assert f"run {first.pk}: fifo" in page and f"run {second.pk}: fifo" in page and "preemption=False" in page
    response = admin.get(reverse("whatif:compare") + f"?run={first.pk}", follow=True)
    assert "Choose two or more finished runs" in response.content.decode()


def test_a_failure_is_stored_with_its_error(admin) -> None:
    run, _ = start(admin)
    WhatIfRun.objects.filter(pk=run.pk).update(trace="not,a,trace\n")
    whatif_execute(run.pk)
    run.refresh_from_db()
    assert run.status == "failed" and "TraceError: line 1: unknown header" in run.error
    page = admin.get(reverse("whatif:detail", args=[run.pk])).content.decode()
    assert "The run failed: TraceError: line 1" in page


def test_the_sites_history_is_a_source(admin, user) -> None:
    NodeFactory(name="n1"), NodeFactory(name="n2")
    NodeFactory(name="shared-ts", sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25)
    for hours in (1, 2, 3):
        JobFactory(owner=user, finished=True, nodes=1, gpus_per_node=4, wall_time_seconds=3600 * hours, held=[])
    # The site's own size, to start from: its nodes of whole GPUs (a shared node's take slices only).
    form = admin.get(LIST).content.decode()
    assert 'name="nodes" value="2"' in form and 'value="3600"' in form and 'value="604800"' in form
    run, _ = start(admin, source="history", trace=None)
    assert run.source == "history" and run.trace_jobs == 3 and run.trace.startswith("submitted_at,started_at")
    whatif_execute(run.pk)
    assert WhatIfRun.objects.get().status == "done"


def test_a_site_with_no_finished_job_is_told_there_is_no_history_to_replay(admin) -> None:
    """It read "the trace has no jobs in that range", though no trace was given."""
    with mock.patch("whatif.tasks.whatif_run.publish_quietly") as publish:
        response = admin.post(LIST, form(None, source="history"))
    assert response.status_code == 200 and not WhatIfRun.objects.exists() and not publish.called
    assert "No job has run to an end on this site in that range, so there is no history to replay" in response.content.decode()


def test_one_job_has_no_offered_load_not_a_load_of_0_beside_its_utilisation(admin, user) -> None:
    """/whatif/1/ of a one-job history read "offered load 0.00" next to "GPU utilisation 1.6%": the load is the trace's
    work over its submit window, and one submit has none."""
    NodeFactory(name="n1"), NodeFactory(name="n2")
    JobFactory(owner=user, finished=True, nodes=1, gpus_per_node=2, wall_time_seconds=3600, held=[])
    run, _ = start(admin, source="history", trace=None, nodes="16")
    whatif_execute(run.pk)
    page = admin.get(reverse("whatif:detail", args=[run.pk])).content.decode()
    load = re.search(r"<th>offered load</th>(.*?)</tr>", page, re.S)
    utilisation = re.search(r"<th>GPU utilisation</th>(.*?)</tr>", page, re.S)
    assert load and utilisation
    assert re.findall(r"<td[^>]*>(.*?)</td>", load.group(1)) == ["\u2013", "\u2013"]
    assert all(cell != "0.0%" for cell in re.findall(r"<td[^>]*>(.*?)</td>", utilisation.group(1)))
    assert 'data-testid="whatif-no-load"' in page and "every job was submitted at the same moment" in page
    assert WhatIfRun.objects.get().summary["policies"][0]["load"] is None


def test_a_trace_with_a_submit_window_keeps_its_offered_load(admin) -> None:
    run, _ = start(admin)
    whatif_execute(run.pk)
    assert all(p["load"] > 0 for p in WhatIfRun.objects.get().summary["policies"])
    assert 'data-testid="whatif-no-load"' not in admin.get(reverse("whatif:detail", args=[run.pk])).content.decode()
