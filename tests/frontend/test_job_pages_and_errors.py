"""Pages people live in: Clone, a job's run time, and pages that never show a developer's error (403/404/500, stale forms)."""

from __future__ import annotations

import html
import logging
import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from tests.conftest import session_for
from tests.frontend.forms import submit_form


def test_a_researcher_opening_the_quotas_page_gets_a_styled_403_and_the_log_has_no_traceback(
    user: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="django.request"):
        response = session_for(user).get("/quotas/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "Not yours to open" in page and 'class="top"' in page  # the site's own page, with its header
    assert "Back to your jobs" in page
    (record,) = [r for r in caplog.records if r.name == "django.request"]
    assert record.getMessage() == "Forbidden (Permission denied): /quotas/"
    # Django logs it with the PermissionDenied's traceback; the console handler's filter (config/logging_filters.py)
    # dropped it from the record every handler sees: a line, not a crash report.
    assert record.exc_info is None and not record.exc_text


def test_a_404_names_the_path_and_speaks_of_jobs_only_under_jobs(user: Any) -> None:
    client = session_for(user)
    other = client.get("/no/such/page/")
    assert other.status_code == 404
    assert "There is no page at <code>/no/such/page/</code>." in other.content.decode()
    job = client.get("/jobs/999999/")
    assert job.status_code == 404 and "a job is visible only to its owner and to admins" in job.content.decode()


def test_a_server_error_shows_the_sites_standalone_500_page(user: Any, settings: Any) -> None:
    from django.urls import path

    def boom(request: Any) -> Any:
        raise RuntimeError("a bug")

    from config import urls

    settings.ROOT_URLCONF = type("urls", (), {"urlpatterns": [path("boom/", boom), *urls.urlpatterns], "handler500": urls.handler500})
    client = session_for(user)
    client.raise_request_exception = False
    response = client.get("/boom/")
    assert response.status_code == 500
    assert "Something went wrong" in response.content.decode() and "a bug" not in response.content.decode()


def test_a_stale_submit_form_is_sent_again_with_what_was_entered(user: Any, sim: Any) -> None:
    """The form was opened before a sign-in in another tab: its token no longer matches. The page keeps the fields."""
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    client.get("/jobs/new/")  # sets the CSRF cookie
    stale = client.post("/jobs/new/", {**submit_form(name="my-run", command="python train.py --lr 3e-4"), "csrfmiddlewaretoken": "x" * 64})
    assert stale.status_code == 403
    page = stale.content.decode()
    assert "That form had gone stale" in page and "CSRF verification failed" not in page and "DEBUG" not in page
    assert '<input type="hidden" name="name" value="my-run">' in page
    assert '<input type="hidden" name="command" value="python train.py --lr 3e-4">' in page
    assert not Job.objects.exists()
    # One click sends it again, under the page's fresh token.
    token = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    fields = {**submit_form(name="my-run", command="python train.py --lr 3e-4"), "csrfmiddlewaretoken": token}
    again = client.post("/jobs/new/", fields)
    assert again.status_code == 302, again.content.decode()[:2000]
    assert Job.objects.get().name == "my-run"


def test_a_stale_form_after_signing_out_asks_to_sign_in_first(db: None) -> None:
    client = Client(enforce_csrf_checks=True)
    response = client.post("/jobs/new/", {"name": "x", "csrfmiddlewaretoken": "y" * 64})
    assert response.status_code == 403
    assert "Sign in" in response.content.decode() and 'name="name"' not in response.content.decode()


def test_the_favicon_is_served(db: None) -> None:
    response = Client().get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain[0][0].endswith(".svg")


def test_clone_fills_the_form_from_a_job_and_only_from_one_the_user_can_see(user: Any, other_user: Any, sim: Any) -> None:
    from tests.jobs.factories import JobFactory

    mine = JobFactory(
        owner=user, name="sweep-7", image="nvcr.io/nvidia/pytorch:24.05-py3", command=["python", "train.py", "--lr", "3e-4"],
        nodes=8, min_nodes=2, max_nodes=8, gpus_per_node=8, wall_time_seconds=5400, env={"SEED": "7"},
        simulate={"duration_seconds": 5.0, "exit_code": 0},
    )  # fmt: skip
    theirs = JobFactory(owner=other_user, name="secret")
    client = session_for(user)
    page = client.get(f"/jobs/{mine.pk}/").content.decode()
    assert f'href="/jobs/new/?clone={mine.pk}"' in page
    form = client.get(f"/jobs/new/?clone={mine.pk}").content.decode()
    assert f'Filled in from <a href="/jobs/{mine.pk}/">job {mine.pk} (sweep-7)</a>' in form
    assert 'value="sweep-7"' in form and 'value="python train.py --lr 3e-4"' in form
    assert 'name="min_nodes" value="2"' in form and 'name="wall_time_minutes" value="90"' in form and "SEED=7" in form
    assert "rounded up to whole minutes" not in form
    assert 'name="sim_duration_seconds" value="5"' in form  # as typed, not 5.0
    # A wall time of seconds cannot be written in the form's minutes: the page says it rounds it up.
    short = JobFactory(owner=user, name="smoke", wall_time_seconds=30)
    form = client.get(f"/jobs/new/?clone={short.pk}").content.decode()
    assert 'name="wall_time_minutes" value="1"' in form
    assert "Its wall time, 30 s, is rounded up to whole minutes here" in form
    hidden = client.get(f"/jobs/new/?clone={theirs.pk}").content.decode()
    assert "secret" not in hidden and "Filled in from" not in hidden
    # Said, in the API's words, the same for another's job as for none: not an empty form unexplained.
    assert f"No job {theirs.pk} (or none that you may see): the form is empty." in hidden
    assert "No job 999999 (or none that you may see): the form is empty." in client.get("/jobs/new/?clone=999999").content.decode()
    assert "clone-missing" not in form and "clone-missing" not in client.get("/jobs/new/").content.decode()


def test_a_clone_submitted_as_filled_in_carries_every_setting_of_the_job(user: Any, sim: Any) -> None:
    from jobs.services import job_submit

    source = job_submit(
        owner=user, name="ckpt", image="busybox:1", command=["true"], nodes=1, gpus_per_node=8, wall_time_seconds=3600,
        priority_class="normal", preemptible=True, simulate={"duration_seconds": 600.0, "checkpoint_every_seconds": 120.0},
    )  # fmt: skip
    client = session_for(user)
    response = client.get(f"/jobs/new/?clone={source.pk}")
    page = response.content.decode()
    # A preemptible job of the normal class: the tick box is shown, ticked, beside the class it was submitted in.
    assert re.search(r'<input type="checkbox" name="preemptible"[^>]* checked', page), page
    # Submitted as the page filled it in, the new job is the old one again, what no field shows included.
    form = response.context["form"]
    # What the browser posts: each field's value as the page renders it (the hidden carried one, JSON, included).
    data = {name: form[name].value() for name in form.fields}
    data = {name: value for name, value in data.items() if value is not False and value not in (None, "", [])}
    data = {name: ("on" if value is True else value) for name, value in data.items()}
    submitted = client.post("/jobs/new/", data)
    assert submitted.status_code == 302, submitted.context["form"].errors
    clone = Job.objects.exclude(pk=source.pk).get()
    assert (clone.priority_class, clone.preemptible) == ("normal", True)
    assert clone.simulate == {"duration_seconds": 600.0, "checkpoint_every_seconds": 120.0}
    assert (clone.image, clone.command, clone.nodes, clone.gpus_per_node, clone.wall_time_seconds) == ("busybox:1", ["true"], 1, 8, 3600)
    # Unticked, the clone is not preemptible.
    client.post("/jobs/new/", {k: v for k, v in data.items() if k != "preemptible"})
    assert Job.objects.exclude(pk__in=[source.pk, clone.pk]).get().preemptible is False


def test_a_job_cancelled_while_queued_says_it_never_started(user: Any, sim: Any) -> None:
    from tests.jobs.factories import JobFactory

    job = JobFactory(owner=user, state="CANCELLED", attempt=0)
    page = session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    assert "never started: it ended while queued" in page and "No telemetry: the job ended without running." in page
    assert "not started yet" not in page
    # Nor is it waiting for nodes: it never will be placed.
    assert "never placed: it ended while queued" in page and "not placed yet" not in page
    # One that ran, went back to the queue and was cancelled there holds nothing either, and is not "back in the queue".
    requeued = JobFactory(owner=user, state="CANCELLED", attempt=1)
    page = session_for(user).get(f"/jobs/{requeued.pk}/").content.decode()
    assert "none: it ended back in the queue (the attempts below say where it ran)" in page and "none now" not in page


def test_a_running_jobs_page_says_how_long_it_ran_and_what_is_left_of_its_wall_time(user: Any, sim: Any, submit: Any) -> None:
    job = submit(nodes=1, gpus_per_node=1, wall_time_seconds=3600, simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(2)
    # Placed ten minutes ago (the page reads the wall clock, the simulated cluster its own).
    Job.objects.filter(pk=job["id"]).update(scheduled_at=timezone.now() - timedelta(minutes=10, seconds=-30))
    page = session_for(user).get(f"/jobs/{job['id']}/").content.decode()
    run_time = page.split('data-testid="run-time">', 1)[1].split("</dd>", 1)[0]
    assert re.fullmatch(r"9 min 3[0-2] s of its 1 h wall time; 50 min (2[89]|30) s left", run_time), run_time


def test_the_wall_time_error_is_in_the_minutes_the_form_asks_in(user: Any, sim: Any, settings: Any) -> None:
    settings.MUSTER_MAX_WALL_TIME_SECONDS = 14 * 24 * 3600
    page = session_for(user).post("/jobs/new/", submit_form(wall_time_minutes="30000")).content.decode()
    assert "The site maximum is 20160 minutes (14 d); you asked for 30000." in page
    assert "seconds" not in page.split('id="id_wall_time_minutes"', 1)[1].split("</div>", 1)[0]
    assert not Job.objects.exists()


def test_a_gangs_page_names_the_racks_its_ranks_span(user: Any) -> None:
    from tests.jobs.factories import JobFactory, NodeFactory

    nodes = [NodeFactory(name=f"gpu-{i}", rack="rack-a" if i < 3 else "rack-b") for i in range(4)]
    job = JobFactory(owner=user, running=True, nodes=4, held=nodes)
    page = session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    racks = page.split('data-testid="assigned-racks">', 1)[1].split("</dd>", 1)[0]
    assert racks == "rack-a (3 nodes), rack-b (1 node)"
    queued = session_for(user).get(f"/jobs/{JobFactory(owner=user).pk}/").content.decode()
    assert 'data-testid="assigned-racks"' not in queued


def test_jobs_slash_is_the_job_list(user: Any) -> None:
    """/jobs/12/ is a job's page, and /jobs/ was a 404: it is the job list (the home page), filters kept."""
    response = session_for(user).get("/jobs/", {"state": "RUNNING"})
    assert response.status_code == 302 and response["Location"] == "/?state=RUNNING"


def test_the_job_list_shows_a_running_elastic_jobs_nodes_now_with_its_range(user: Any, sim: Any, submit: Any) -> None:
    """As `muster jobs` shows `3(2-4)x8`: the nodes it holds now, not only the range it may hold."""
    submit(nodes=13, gpus_per_node=8, simulate={"duration_seconds": 3600})
    running = submit(nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=8, simulate={"duration_seconds": 3600})
    waiting = submit(nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=8, simulate={"duration_seconds": 3600})
    sim.cycle()
    sim.advance(2)
    assert Job.objects.get(pk=running["id"]).nodes == 3 and Job.objects.get(pk=waiting["id"]).state == "PENDING"
    page = session_for(user).get("/").content.decode()

    def size(job_id: int) -> str:
        row = re.search(rf'<tr data-job="{job_id}">.*?</tr>', page, re.S)
        assert row is not None
        cell = re.search(r'<td class="size">(.*?)</td>', row.group(0))
        assert cell is not None
        return cell.group(1)

    assert size(running["id"]) == "3 (2\u20134) nodes \u00d7 8 GPUs"
    assert size(waiting["id"]) == "2\u20134 nodes \u00d7 8 GPUs"


def test_a_job_whose_launches_did_not_come_up_says_so_beside_its_attempt(user: Any, settings: Any) -> None:
    """An image that could not be pulled read "attempt 2 (restarts 0 of 0)", as if it had run and been restarted."""
    from tests.jobs.factories import JobFactory

    settings.MUSTER_LAUNCH_MAX_FAILURES = 5
    job = JobFactory(owner=user, attempt=2, launch_failures=2)
    page = session_for(user).get(f"/jobs/{job.pk}/").content.decode()
    said = "2 (restarts 0 of 0 allowed); 2 launches in a row did not come up (its code never ran: no restart is spent, and it fails "
    said += "after 5)"
    assert said in re.sub(r"<[^>]+>", "", page)
    fresh = JobFactory(owner=user, attempt=1)
    assert 'data-testid="launch-failures"' not in session_for(user).get(f"/jobs/{fresh.pk}/").content.decode()


def refused(client: Client, job_id: int, query: str) -> tuple[list[str], str]:
    """A job page's 400: what it says, a line per refusal, and its way on (the link and its words)."""
    response = client.get(f"/jobs/{job_id}/?{query}")
    assert response.status_code == 400, query
    page = response.content.decode()
    said = page.split('data-testid="query-errors">', 1)[1].split("</div>", 1)[0]
    lines = [html.unescape(re.sub(r"<[^>]+>", "", line)) for line in re.findall(r'<p class="error">(.*?)</p>', said)]
    back = re.search(r'<a class="button" href="([^"]*)" data-testid="query-back">([^<]*)</a>', page)
    assert back is not None
    return lines, html.unescape(f"{back.group(1)} {back.group(2)}")


def test_an_attempt_range_or_view_the_job_page_does_not_have_is_a_400_naming_what_it_has(user: Any) -> None:
    """?attempt=7 of a job that had 2 showed attempt 2's logs, and ?range=2h the whole run, unsaid: a link mistyped or
    edited by hand read as if obeyed. Now the page says which parameter it cannot show and the values it has."""
    from tests.jobs.factories import JobFactory

    job = JobFactory(owner=user, attempt=2, launch_failures=2)
    client = session_for(user)
    had = f"is not an attempt of job {job.pk}; it has had 2 attempts: 1 to 2."
    assert refused(client, job.pk, "attempt=7") == ([f'?attempt=: "7" {had}'], f"/jobs/{job.pk}/ Job {job.pk} without ?attempt=")
    assert refused(client, job.pk, "attempt=latest")[0] == [f'?attempt=: "latest" {had}']
    assert refused(client, job.pk, "attempt=0")[0] == [f'?attempt=: "0" {had}']
    # The chart options too; the options it has are kept on the way back.
    ranges = "choose one of 15m, 1h, 6h, 24h, all."
    assert refused(client, job.pk, "view=node&range=2h&attempt=1") == (
        [f'?range=: "2h" is not a time range the charts offer; {ranges}'],
        f"/jobs/{job.pk}/?view=node&attempt=1 Job {job.pk} without ?range=",
    )
    assert refused(client, job.pk, "view=rack&range=1y") == (
        [
            f'?range=: "1y" is not a time range the charts offer; {ranges}',
            '?view=: "rack" is not a view the charts offer; choose one of job, node, gpu.',
        ],
        f"/jobs/{job.pk}/ Job {job.pk} without ?range= and ?view=",
    )
    # What it has is shown, and an empty value is no value (as the page's own links leave it out).
    for query in ("attempt=1", "attempt=2&range=1h&view=gpu", "attempt=&range="):
        assert client.get(f"/jobs/{job.pk}/?{query}").status_code == 200, query
    # The page's poller asks with the page's query: refused alike, in the API's shape (it reloads, and the page says it).
    live = client.get(f"/jobs/{job.pk}/live/?attempt=3")
    assert live.status_code == 400 and live.json() == {"attempt": [f'"3" {had}']}
    # A job that has not started has no attempt to pick; one that ended so never will.
    queued = JobFactory(owner=user)
    assert refused(client, queued.pk, "attempt=1")[0] == [f"?attempt=: Job {queued.pk} has not started yet: it has no attempts."]
    cancelled = JobFactory(owner=user, state="CANCELLED")
    assert refused(client, cancelled.pk, "attempt=1")[0] == [f"?attempt=: Job {cancelled.pk} never started: it has no attempts."]


def test_a_job_whose_launches_never_came_up_reads_never_started_not_a_run_time_of_0_s(
    user: Any, sim: Any, submit: Any, api: Any, settings: Any
) -> None:
    """Cancelled after its launches failed, a job that never ran read "Run time 0 s" (the moment each launch held its
    nodes), as if it had run for no time. Its page, the job list and the API say it never started."""
    from jobs.lifecycle import job_launch_failed

    def fail_launch(job_id: int) -> None:
        job_launch_failed(Job.objects.get(pk=job_id), now=sim.clock(), why="The image could not be pulled.")

    cancelled = submit(nodes=1, gpus_per_node=8)["id"]
    sim.cycle()
    fail_launch(cancelled)
    sim.advance(20)  # placed again after its backoff, and failed again
    fail_launch(cancelled)
    assert api.post(f"/api/v1/jobs/{cancelled}/cancel/").status_code == 200
    settings.MUSTER_LAUNCH_MAX_FAILURES = 1
    failed = submit(nodes=1, gpus_per_node=8)["id"]
    sim.cycle()
    fail_launch(failed)
    assert Job.objects.get(pk=failed).state == "FAILED"

    client = session_for(user)
    for job_id, launches in ((cancelled, "its 2 launches"), (failed, "its launch")):
        page = client.get(f"/jobs/{job_id}/").content.decode()
        run_time = re.sub(r"<[^>]+>", "", page.split('data-testid="run-time">', 1)[1].split("</dd>", 1)[0])
        assert run_time == f"never started: {launches} did not come up, so its code never ran"
        attempts = re.findall(r'<tr data-attempt="\d+".*?</tr>', page, re.S)
        assert attempts and all('<span class="muted">never started</span>' in row for row in attempts)
        assert api.get(f"/api/v1/jobs/{job_id}/").json()["run_seconds"] is None
    listed = client.get("/").content.decode()
    for job_id in (cancelled, failed):
        row = listed.split(f'<tr data-job="{job_id}">', 1)[1].split("</tr>", 1)[0]
        assert re.sub(r"<[^>]+>", "", row.split('data-testid="job-time">', 1)[1].split("</td>", 1)[0]) == "never started"


def test_a_job_that_failed_before_the_cycle_saw_it_running_ran_though_a_launch_had_failed(sim: Any, submit: Any, api: Any) -> None:
    """Its pod came up and exited 1 between two cycles, after a failed launch: it ran, and its run time is said."""
    from jobs.lifecycle import job_launch_failed

    job_id = submit(nodes=1, gpus_per_node=8, max_restarts=0, simulate={"duration_seconds": 0.5, "exit_code": 1})["id"]
    sim.cycle()
    job_launch_failed(Job.objects.get(pk=job_id), now=sim.clock(), why="The image could not be pulled.")
    sim.advance(20)  # placed again
    sim.advance(5)  # up at 1 s, exited at 1.5 s: never seen running
    job = Job.objects.get(pk=job_id)
    assert (job.state, job.exit_code, job.started_at, job.launch_failures) == ("FAILED", 1, None, 0)
    assert api.get(f"/api/v1/jobs/{job_id}/").json()["run_seconds"] == 1.5  # until its pod exited, not until the cycle saw it
    page = session_for(job.owner).get(f"/jobs/{job_id}/").content.decode()
    assert "never started" not in page.split('data-testid="run-time">', 1)[1].split("</dd>", 1)[0]


def test_a_rank_the_attempt_did_not_have_is_a_400_as_the_logs_api_answers(user: Any, api: Any) -> None:
    """/jobs/1/?rank=7 of a 4-rank job showed rank 0's output under a page that never said so; the logs API refuses it
    ("Attempt 1 of the job had ranks 0 to 3."). The page says it too, the way it says a bad ?attempt=."""
    from tests.jobs.factories import JobFactory

    job = JobFactory(owner=user, running=True, nodes=4)
    client = session_for(user)
    had = "attempt 1 of the job had ranks 0 to 3."
    assert refused(client, job.pk, "rank=7") == (
        [f'?rank=: "7" is not a rank of it; {had}'],
        f"/jobs/{job.pk}/ Job {job.pk} without ?rank=",
    )
    assert refused(client, job.pk, "rank=last")[0] == [f'?rank=: "last" is not a rank of it; {had}']
    # The attempt asked for is kept on the way back; the logs API says the same of the same rank.
    assert refused(client, job.pk, "attempt=1&rank=4") == (
        [f'?rank=: "4" is not a rank of it; {had}'],
        f"/jobs/{job.pk}/?attempt=1 Job {job.pk} without ?rank=",
    )
    logs = api.get(f"/api/v1/jobs/{job.pk}/logs/", {"rank": 7})
    assert logs.status_code == 400 and logs.json()["rank"] == ["Attempt 1 of the job had ranks 0 to 3."]
    # A rank it had is shown, and the page's poller is refused alike (JSON, as the API answers).
    page = client.get(f"/jobs/{job.pk}/?rank=3")
    assert (
        page.status_code == 200 and '<strong aria-current="true">3</strong>' in page.content.decode().split('data-testid="log-ranks"', 1)[1]
    )
    live = client.get(f"/jobs/{job.pk}/live/?rank=7")
    assert live.status_code == 400 and live.json() == {"rank": [f'"7" is not a rank of it; {had}']}
    # Before its first start a job has the ranks it asked for; an attempt refused is said alone (its ranks are unknown).
    queued = JobFactory(owner=user, nodes=2)
    assert refused(client, queued.pk, "rank=2")[0] == ['?rank=: "2" is not a rank of it; the job has 2 ranks: 0 to 1.']
    assert client.get(f"/jobs/{queued.pk}/?rank=1").status_code == 200
    assert [line.split(":")[0] for line in refused(client, job.pk, "attempt=5&rank=9")[0]] == ["?attempt="]


def test_another_ranks_logs_open_at_the_logs_with_the_charts_options_kept(user: Any) -> None:
    """A rank's link was `?attempt=1&rank=3` alone: the page came back at its top with the charts on their defaults,
    and the reader scrolled past them again for every rank."""
    from tests.jobs.factories import JobFactory

    job = JobFactory(owner=user, running=True, nodes=4)
    page = session_for(user).get(f"/jobs/{job.pk}/?view=node&range=1h&rank=1").content.decode()
    ranks = page.split('data-testid="log-ranks"', 1)[1].split("</p>", 1)[0]
    assert '<a href="?view=node&amp;range=1h&amp;rank=3&amp;attempt=1#job-logs" aria-label="rank 3">3</a>' in ranks
    assert '<strong aria-current="true">1</strong>' in ranks
