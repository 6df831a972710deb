"""The job page and the cluster page show the plan the last cycle stored: position, priority, what an estimate means."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import frontend.views
from jobs.models import Job
from tests.conftest import session_for
from tests.jobs.factories import JobFactory

AT = datetime(2026, 11, 20, 12, 30, tzinfo=UTC)
FACTORS = {"fair_share": [0.5, 500.0], "age": [0.1, 50.0], "class": [0.5, 5000.0], "size": [0.0625, 6.25]}


@pytest.fixture(autouse=True)
def _utc(settings: Any) -> None:
    settings.TIME_ZONE = "UTC"


def planned(**fields: Any) -> dict[str, Any]:
    return {"queue_position": 3, "priority": 5556.25, "priority_factors": FACTORS, "pending_reason_code": "NO_ROOM", **fields}


def page_of(user: Any, job: Job) -> str:
    response = session_for(user).get(f"/jobs/{job.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_a_job_no_cycle_planned_is_new(user: Any) -> None:
    html = page_of(user, JobFactory(owner=user, queued=True))
    assert "new: not yet planned" in html and "Waiting for the next scheduling cycle." in html
    assert 'data-testid="priority"' not in html and 'data-testid="estimated-start"' not in html


def test_a_planned_start_says_it_may_move(user: Any) -> None:
    html = page_of(user, JobFactory(owner=user, **planned(estimated_start=AT, estimate_kind="planned")))
    assert "Queued, position 3." in html
    assert "Planned start about 2026-11-20 12:30 UTC (moves if higher-priority work arrives)." in html
    assert 'data-testid="priority-total">5556.2<' in html or 'data-testid="priority-total">5556.3<' in html
    assert "<td>Priority class</td><td>0.500</td><td>5000.0</td>" in html.replace("\n", "")


def test_a_reservation_says_by_when_and_where(user: Any) -> None:
    job = JobFactory(
        owner=user,
        **planned(estimated_start=AT, estimate_kind="reserved", reserved_nodes=["n1", "n2"], reserved_start=AT, promised_start=AT),
    )
    html = page_of(user, job)
    assert 'data-estimate="reserved">Reserved: starts by 2026-11-20 12:30 UTC on n1, n2.' in html
    assert 'data-testid="promised-start"' not in html

    # The reservation moved later (capacity was lost): the page says what was promised first.
    Job.objects.filter(pk=job.pk).update(reserved_start=AT + timedelta(hours=1), estimated_start=AT + timedelta(hours=1))
    html = page_of(user, job)
    assert "Reserved: starts by 2026-11-20 13:30 UTC on n1, n2." in html
    assert "Promised a start by 2026-11-20 12:30 UTC when first reserved; now by 2026-11-20 13:30 UTC." in html


def test_a_reservation_expected_before_its_promise_says_both(user: Any) -> None:
    early = AT - timedelta(minutes=40)
    job = JobFactory(
        owner=user,
        **planned(estimated_start=early, estimate_kind="reserved", reserved_nodes=["n1"], reserved_start=AT, promised_start=AT),
    )
    html = page_of(user, job)
    assert (
        "Reserved: starts by 2026-11-20 12:30 UTC on n1; expected about 2026-11-20 11:50 UTC, when the jobs there are expected to end."
        in html
    )


def test_an_estimate_past_the_plan_is_a_lower_bound(user: Any) -> None:
    html = page_of(user, JobFactory(owner=user, **planned(estimated_start=AT, estimate_kind="after", queue_position=900)))
    assert "Queued, position 900." in html and 'data-estimate="after">Not before 2026-11-20 12:30 UTC.' in html


def test_nothing_known_shows_no_estimate(user: Any) -> None:
    html = page_of(user, JobFactory(owner=user, **planned(pending_reason_code="BUDGET", pending_reason="No budget left.")))
    assert "Queued, position 3." in html and "No budget left." in html
    assert 'data-testid="estimated-start"' not in html


def test_a_job_only_an_admin_or_a_release_can_start_shows_no_place_in_the_queue(user: Any) -> None:
    """ "Queued, position 1" read as next, of a job a lowered wall-time limit keeps from ever starting."""
    limit = "Its wall time of 2 h is beyond the 1 h per job your quota (user alice) allows now; it waits until an admin raises the limit."
    job = JobFactory(owner=user, **planned(pending_reason_code="JOB_LIMIT", pending_reason=limit, queue_position=1))
    html = re.sub(r"<[^>]+>", "", page_of(user, job))
    assert "Queued, not started until an admin raises the limit." in html and "position 1" not in html
    held = JobFactory(owner=user, **planned(pending_reason_code="HELD", pending_reason="Held by its owner.", queue_position=1))
    text = re.sub(r"<[^>]+>", "", page_of(user, held))
    assert "Queued, held." in text and "position 1" not in text


def test_the_job_page_reads_one_job_whatever_the_queue(user: Any) -> None:
    job = JobFactory(owner=user, **planned())

    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            page_of(user, job)
        return len(ctx.captured_queries)

    few = queries()
    for position in range(4, 40):
        JobFactory(owner=user, **planned(queue_position=position))
    assert queries() == few


def test_the_cluster_page_lists_the_stored_queue_a_page_at_a_time(user: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frontend.views, "QUEUE_PAGE_SIZE", 2)
    second = JobFactory(owner=user, **planned(queue_position=2, estimated_start=AT, estimate_kind="after"))
    first = JobFactory(owner=user, **planned(queue_position=1, reserved_nodes=["n1"], reserved_start=AT, estimate_kind="reserved"))
    new = JobFactory(owner=user, queued=True)
    JobFactory(owner=user, running=True)
    client = session_for(user)

    html = client.get("/cluster/").content.decode()
    assert "3 pending jobs; 1 job running within quota" in html
    assert html.index(f"{first.pk} train") < html.index(f"{second.pk} train")
    assert 'by 2026-11-20 12:30 <span class="muted">(reserved)</span>' in html and "not before 2026-11-20 12:30" in html
    assert f"{new.pk} train" not in html and "Page 1 of 2" in html

    html = client.get("/cluster/", {"page": 2}).content.decode()
    assert f"{new.pk} train" in html and ">new</span>" in html


def test_the_cluster_page_names_the_jobs_holding_each_node_and_shows_priority_factors(user: Any, other_user: Any, sim: Any) -> None:
    mine = JobFactory(owner=user, name="mine", nodes=1, gpus_per_node=8, running=True, held=[(_node("sim-node-000"), 8)])
    theirs = JobFactory(owner=other_user, name="theirs", nodes=1, gpus_per_node=8, running=True, held=[(_node("sim-node-001"), 8)])
    JobFactory(
        owner=user, name="waiting", priority_class="preemptible", preemptible=True, priority=1234.5,
        priority_factors={"age": [0.5, 250.0], "fair_share": [0.9, 900.0]}, queue_position=1,
    )  # fmt: skip
    page = session_for(user).get("/cluster/").content.decode()
    assert f'<a href="/jobs/{mine.pk}/">job {mine.pk}</a>' in page
    assert f"job {theirs.pk}" in page and f'href="/jobs/{theirs.pk}/"' not in page  # named, but not a link: not yours
    factors = page.split('data-testid="priority-factors">', 1)[1].split("</small>", 1)[0]
    assert re.sub("<[^>]+>", "", factors) == "Fair share 900.0, Age 250.0"  # on the page, not only on hover
    assert '<span class="factor">Fair share 900.0</span>' in factors  # broken between factors, never inside one
    assert "preemptible, preemptible" not in page and "preemptible, may borrow" not in page


def test_the_cluster_page_shows_gpus_held_by_pods_muster_did_not_start(user: Any, sim: Any) -> None:
    from jobs.models import Node

    Node.objects.filter(name="sim-node-000").update(gpus_foreign=3)
    JobFactory(owner=user, nodes=1, gpus_per_node=2, running=True, held=[(_node("sim-node-000"), 2)])
    page = session_for(user).get("/cluster/").content.decode()
    card = page.split("<strong>sim-node-000</strong>", 1)[1].split('<div class="node-card', 1)[0]
    cells = card.split('<div class="gpus" aria-hidden="true">', 1)[1].split("</div>", 1)[0]
    assert cells == '<span class="used"></span>' * 2 + '<span class="other"></span>' * 3 + '<span class="free"></span>' * 3
    assert "3 / 8 GPUs free" in card and "3 held by other pods" in card


def _node(name: str) -> Any:
    from jobs.models import Node

    return Node.objects.get(name=name)


def test_the_free_gpus_summed_are_those_new_work_may_take(user: Any) -> None:
    from jobs.models import NodeState
    from tests.jobs.factories import NodeFactory

    NodeFactory(name="ready")
    NodeFactory(name="cordoned", state=NodeState.CORDONED)
    NodeFactory(name="held", held=True)
    # As `muster nodes` counts them: a cordoned or held node's idle GPUs take no new work.
    for url in ("/cluster/", "/dashboard/"):
        assert "3 nodes, 8 of 24 GPUs free." in session_for(user).get(url).content.decode(), url


def test_an_account_above_a_lowered_quota_is_said_on_every_page_that_counts_quota_standing(
    user: Any, admin_user: Any, admin_api: Any
) -> None:
    """An admin lowered team research to 8 GPUs while it held 16: the dashboard, the cluster page and /metrics went on
    counting its jobs "within quota" (as they were placed), and only the Usage page showed the account over."""
    from telemetry.exporter import metrics_text
    from tests.quotas.factories import QuotaFactory, TeamFactory

    research = TeamFactory(name="research")
    research.members.add(user)
    JobFactory(owner=user, team=research, running=True, nodes=2)
    JobFactory(owner=user, running=True, gpus_per_node=1)  # the user's other job, in no team: within its quota
    QuotaFactory(team=research, max_gpus=8)
    said = "team research holds 16 GPUs of its quota of 8"

    cluster = session_for(admin_user).get("/cluster/").content.decode()
    assert f"Above a quota lowered under their running jobs (not stopped; nothing new of theirs starts until under it): {said}." in cluster
    assert said in session_for(admin_user).get("/dashboard/").content.decode()
    assert said in session_for(user).get("/dashboard/").content.decode()  # the viewer's own team
    assert re.search(r'muster_accounts_above_quota\{kind="team"\} 1\.0', metrics_text().decode())
    assert re.search(r'muster_accounts_above_quota\{kind="user"\} 0\.0', metrics_text().decode())
    summary = admin_api.get("/api/v1/queue/").json()["summary"]
    assert summary["accounts_above_quota"] == [{"kind": "team", "name": "research", "gpus": 16, "max_gpus": 8}]
    usage = session_for(user).get("/usage/").content.decode()
    assert "above the quota, lowered under its running jobs" in usage


def test_a_jobs_priority_reads_the_same_on_every_page(user: Any) -> None:
    """The job list said 8003 where the job page and the queue said 8002.8: one priority read as two."""
    job = JobFactory(owner=user, **planned(priority=8002.79, queue_position=1))
    client = session_for(user)
    row = client.get("/").content.decode().split(f'<tr data-job="{job.pk}">', 1)[1].split("</tr>", 1)[0]
    assert re.search(r"<td class=\"job-priority\" title=\"normal\">8002\.8 <span", row), row
    assert 'data-testid="priority-total">8002.8<' in page_of(user, job)
    queue = client.get("/cluster/").content.decode().split(f'<tr data-job="{job.pk}">', 1)[1].split("</tr>", 1)[0]
    assert "<td>8002.8<small" in queue
    assert "8003" not in row + queue
