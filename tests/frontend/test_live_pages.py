"""The pages people keep open: the job list and the cluster page sort by any column and keep up in place (?parts=1,
frontend.live), and a queued job's page updates in place instead of reloading."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs

import pytest
from django.test import override_settings
from django.utils import timezone

from jobs.models import Job
from jobs.sorting import Sorting, job_columns, queue_columns
from jobs.states import JobState
from tests.conftest import session_for
from tests.jobs.factories import JobFactory

NOW = timezone.now()


def ids(html: str, attribute: str = "data-job") -> list[int]:
    return [int(i) for i in re.findall(rf'<tr {attribute}="(\d+)"', html)]


def header(html: str, label: str) -> str:
    """The <th> of a sortable column, by its label."""
    found = re.search(rf'<th class="sortable"[^>]*><a href="[^"]*"[^>]*>{re.escape(label)}(?:<span[^>]*>.</span>)?</a></th>', html)
    assert found, f"no sortable header {label!r}"
    return found.group(0)


def link(th: str) -> dict[str, list[str]]:
    href = re.search(r'href="\?([^"]*)"', th)
    assert href
    return parse_qs(href.group(1).replace("&amp;", "&"))


@pytest.fixture
def jobs(user: Any) -> dict[str, Job]:
    """Four of alice's jobs: names, sizes, states and submit times that each sort differently."""
    return {
        "bert": JobFactory(owner=user, name="bert", nodes=2, submitted_at=NOW - timedelta(hours=3), queued=True),
        "Alpha": JobFactory(owner=user, name="Alpha", nodes=4, running=True, submitted_at=NOW - timedelta(hours=2)),
        "cifar": JobFactory(owner=user, name="cifar", nodes=1, finished=True, submitted_at=NOW - timedelta(hours=5)),
        "delta": JobFactory(owner=user, name="delta", nodes=8, submitted_at=NOW - timedelta(hours=1), queued=True),
    }


def test_the_job_list_sorts_by_a_column_and_back(user: Any, jobs: dict[str, Job]) -> None:
    page = session_for(user)
    by = {name: job.pk for name, job in jobs.items()}
    default = page.get("/").content.decode()
    assert ids(default) == [by["delta"], by["Alpha"], by["bert"], by["cifar"]]  # newest first
    assert 'aria-sort="descending"' in header(default, "Submitted")
    assert default.count("aria-sort=") == 1

    # A first click on Name sorts A to Z (whatever the case), a second Z to A.
    assert link(header(default, "Name"))["sort"] == ["name"]
    by_name = page.get("/?sort=name").content.decode()
    assert ids(by_name) == [by["Alpha"], by["bert"], by["cifar"], by["delta"]]
    assert 'aria-sort="ascending"' in header(by_name, "Name") and "aria-sort" not in header(by_name, "Submitted")
    assert link(header(by_name, "Name"))["sort"] == ["-name"]
    assert ids(page.get("/?sort=-name").content.decode()) == [by["delta"], by["cifar"], by["bert"], by["Alpha"]]

    # Sizes and times start with the largest; the state in a job's life order.
    assert link(header(default, "Size"))["sort"] == ["-size"]
    assert ids(page.get("/?sort=-size").content.decode()) == [by["delta"], by["Alpha"], by["bert"], by["cifar"]]
    assert ids(page.get("/?sort=state").content.decode())[-2:] == [by["Alpha"], by["cifar"]]
    timed = ids(page.get("/?sort=-time").content.decode())
    assert timed[:2] == [by["Alpha"], by["cifar"]]  # ran 2 h, then 1 h; the queued have no time and go last


@pytest.mark.parametrize("key", [c.key for c in job_columns()])
def test_every_job_list_column_sorts_both_ways_on_this_database(admin_user: Any, jobs: dict[str, Job], key: str) -> None:
    page = session_for(admin_user)
    for value in (key, f"-{key}"):
        html = page.get("/", {"sort": value}).content.decode()
        assert sorted(ids(html)) == sorted(j.pk for j in jobs.values()), value
        assert html.count("aria-sort=") == 1


JOB_SORTS = "sort by id, name, owner, state, size, time, priority, submitted, each reversed with a leading -."


def sort_refused(html: str) -> list[str]:
    said = re.search(r'data-testid="(?:filter|query)-errors">(.*?)</div>', html, re.S)
    assert said, "the page does not say why it is not sorted"
    return [re.sub(r"<[^>]+>", "", line) for line in re.findall(r'<p class="error">(.*?)</p>', said.group(1))]


@pytest.mark.parametrize("asked", ["bogus", "-", "--id", "name;drop", "owner__password", "-priority_factors"])
def test_a_sort_the_list_does_not_take_is_a_400_in_the_apis_words(user: Any, api: Any, jobs: dict[str, Job], asked: str) -> None:
    """?sort=bogus listed the default order as if it were the one asked; the API refuses ?ordering=bogus with a 400."""
    for name in ("sort", "ordering"):
        response = session_for(user).get("/", {name: asked})
        assert response.status_code == 400, name
        html = response.content.decode()
        assert ids(html) == [] and sort_refused(html) == [f"Sort: Cannot sort by {asked}; {JOB_SORTS}"], name
    answer = api.get("/api/v1/jobs/", {"ordering": asked})
    assert answer.status_code == 400 and answer.json()["ordering"] == [f"Cannot sort by {asked}; {JOB_SORTS}"]
    assert Sorting(job_columns(), asked, default="-submitted").value == "-submitted"


def test_the_apis_ordering_sorts_the_page_as_its_sort_does(user: Any, jobs: dict[str, Job]) -> None:
    """?ordering=name was checked and then not applied: the list stayed newest first."""
    page = session_for(user)
    by_name = ids(page.get("/", {"sort": "name"}).content.decode())
    assert by_name == [jobs[name].pk for name in ("Alpha", "bert", "cifar", "delta")]
    assert ids(page.get("/", {"ordering": "name"}).content.decode()) == by_name
    assert 'aria-sort="ascending"' in header(page.get("/", {"ordering": "name"}).content.decode(), "Name")
    assert ids(page.get("/", {"sort": "-name", "ordering": "-name"}).content.decode()) == by_name[::-1]
    # Two different orders at once are one too many, said rather than one of them picked.
    both = page.get("/", {"sort": "name", "ordering": "-size"})
    assert both.status_code == 400 and sort_refused(both.content.decode()) == [
        "Sort: Sort by one order: ?sort=name and ?ordering=-size differ."
    ]
    # No sort asked (the form's empty field) is the default order.
    assert page.get("/", {"sort": ""}).status_code == 200


def test_the_sort_holds_across_pages_filters_and_the_live_rows(user: Any) -> None:
    for i in range(30):
        JobFactory(owner=user, name=f"sweep-{i:02d}", queued=True, submitted_at=NOW - timedelta(minutes=i))
    page = session_for(user)
    first = page.get("/", {"sort": "name", "name": "sweep"}).content.decode()
    assert [int(n) for n in re.findall(r">sweep-(\d\d)<", first)] == list(range(25))
    # The next page's link keeps the sort and the filter; the filter form keeps the sort; a header starts at page 1.
    # Sorted by name it is "Next", not "older" (the default order's word).
    older = re.search(r'<a href="\?([^"]*)">Next', first)
    assert older and parse_qs(older.group(1).replace("&amp;", "&")) == {"sort": ["name"], "name": ["sweep"], "page": ["2"]}
    assert "older →" not in first
    assert '<input type="hidden" name="sort" value="name">' in first
    second = page.get("/", {"sort": "name", "name": "sweep", "page": "2"}).content.decode()
    assert "page" not in link(header(second, "Name")) and link(header(second, "Name"))["name"] == ["sweep"]

    # The rows the page polls for come in the same order, and their links are the page's own, not the poll's.
    live = page.get("/", {"sort": "-name", "name": "sweep", "parts": "1"})
    body = live.json()
    assert set(body) == {"parts", "live", "updated"} and body["live"] is True
    rows = body["parts"]["job-rows"]
    assert [int(n) for n in re.findall(r">sweep-(\d\d)<", rows)] == list(range(29, 4, -1))
    assert "parts=1" not in rows


def test_the_job_list_polls_only_while_something_on_it_can_change(user: Any) -> None:
    JobFactory(owner=user, finished=True)
    page = session_for(user)
    html = page.get("/").content.decode()
    assert "data-live " not in html and "live_parts.js" not in html
    assert page.get("/", {"parts": "1"}).json()["live"] is False
    JobFactory(owner=user, queued=True)
    html = page.get("/").content.decode()
    assert "data-live" in html and "frontend/live_parts.js" in html and "frontend/poll.js" in html


# --- the cluster page ------------------------------------------------------------------------------


def queued(user: Any, position: int | None, **fields: Any) -> Job:
    return JobFactory(owner=user, queued=True, queue_position=position, **fields)


def test_the_cluster_page_updates_in_place_and_sorts_its_queue(user: Any, other_user: Any) -> None:
    first = queued(other_user, 1, priority=7000.0, nodes=1, priority_class="production")
    second = queued(user, 2, priority=6500.0, nodes=4, priority_factors={"age": [0.5, 5.0]})
    new = queued(user, None, nodes=2)
    page = session_for(user)
    html = page.get("/cluster/").content.decode()
    # No whole-page refresh (it lost the reader's scroll every 5 s); without JavaScript it still reloads.
    assert '<meta http-equiv="refresh"' not in html.replace('<noscript><meta http-equiv="refresh"', "")
    assert "data-live" in html and "frontend/live_parts.js" in html and 'data-testid="live-updated"' in html
    assert ids(html) == [first.pk, second.pk, new.pk]  # the queue's own order
    assert 'aria-sort="ascending"' in header(html, "#")
    assert 'data-testid="priority-factors"><span class="factor">Age 5.0</span><' in html  # the factors stay on the page, not in a tooltip

    body = page.get("/cluster/", {"parts": "1"}).json()
    assert set(body["parts"]) == {"cluster-nodes", "queue"} and body["live"] is True
    assert ids(body["parts"]["queue"]) == [first.pk, second.pk, new.pk]
    assert "GPUs free" in body["parts"]["cluster-nodes"]

    by_size = page.get("/cluster/", {"sort": "-size"}).content.decode()
    assert ids(by_size) == [second.pk, new.pk, first.pk] and 'aria-sort="descending"' in header(by_size, "Size")
    assert "back to queue order" in by_size
    assert ids(page.get("/cluster/", {"sort": "-size", "parts": "1"}).json()["parts"]["queue"]) == [second.pk, new.pk, first.pk]
    assert ids(page.get("/cluster/", {"sort": "owner"}).content.decode())[0] == second.pk  # alice before bob


@pytest.mark.parametrize("key", [c.key for c in queue_columns()])
def test_every_queue_column_sorts_both_ways_on_this_database(user: Any, key: str) -> None:
    jobs = [queued(user, 1, priority=2.0, estimated_start=NOW), queued(user, 2, priority=1.0), queued(user, None)]
    for value in (key, f"-{key}"):
        response = session_for(user).get("/cluster/", {"sort": value})
        assert response.status_code == 200
        assert sorted(ids(response.content.decode())) == sorted(j.pk for j in jobs)


def test_a_sort_the_queue_does_not_take_is_a_400_naming_its_sorts(user: Any) -> None:
    queued(user, 1)
    response = session_for(user).get("/cluster/", {"sort": "nonsense", "page": "1"})
    assert response.status_code == 400
    html = response.content.decode()
    sorts = "sort by position, id, owner, size, class, priority, submitted, start, each reversed with a leading -."
    assert sort_refused(html) == [f"?sort=: Cannot sort by nonsense; {sorts}"]
    assert '<a class="button" href="/cluster/?page=1" data-testid="query-back">The cluster page in queue order</a>' in html


# --- a queued job's page ---------------------------------------------------------------------------


def test_a_queued_jobs_page_updates_in_place_and_reloads_only_for_a_new_state(user: Any) -> None:
    job = queued(user, 4, pending_reason_code="NO_ROOM", pending_reason="Needs 4 whole nodes with 8 GPUs; 2 are free.")
    page = session_for(user)
    html = page.get(f"/jobs/{job.pk}/").content.decode()
    assert '<meta http-equiv="refresh" content="3">' not in html and "<noscript><meta" in html
    assert "frontend/job_live.js" in html and "updates in place every 10 seconds while the job is queued" in html
    Job.objects.filter(pk=job.pk).update(queue_position=2, estimated_start=NOW + timedelta(hours=1), estimate_kind="planned")
    body = page.get(f"/jobs/{job.pk}/live/").json()
    assert (body["state"], body["attempt"]) == ("PENDING", 0)
    status = body["parts"]["job-status"]
    assert "Queued, position 2." in status and "Needs 4 whole nodes" in status and 'data-estimate="planned"' in status

    # Starting: its run time counts in place too.
    Job.objects.filter(pk=job.pk).update(state=JobState.SCHEDULED, attempt=1, scheduled_at=timezone.now() - timedelta(seconds=90))
    body = page.get(f"/jobs/{job.pk}/live/").json()
    assert body["state"] == "SCHEDULED" and body["parts"]["run-time"].startswith("1 min 30 s of its 1 d wall time; 23 h 58 min")


def test_a_preemptible_jobs_class_is_said_once(user: Any) -> None:
    both = JobFactory(owner=user, priority_class="preemptible", preemptible=True)
    flag = JobFactory(owner=user, priority_class="normal", preemptible=True)
    page = session_for(user)
    assert re.search(r'data-testid="priority-class">preemptible \(may borrow', page.get(f"/jobs/{both.pk}/").content.decode())
    assert 'data-testid="priority-class">normal, preemptible (may borrow' in page.get(f"/jobs/{flag.pk}/").content.decode()
    assert "fair share" not in page.get(f"/jobs/{flag.pk}/").content.decode()
    with override_settings(MUSTER_FAIR_SHARE_PREEMPTION=True):
        html = page.get(f"/jobs/{flag.pk}/").content.decode()
    assert "preempted first; while its owners have no GPU quota and have used more than their fair share, it may also be stopped" in html


def test_the_live_answers_of_other_users_jobs_are_not_found(user: Any, other_user: Any) -> None:
    theirs = queued(other_user, 1)
    assert session_for(user).get(f"/jobs/{theirs.pk}/live/").status_code == 404
    rows = session_for(user).get("/", {"parts": "1"}).json()["parts"]["job-rows"]
    assert str(theirs.pk) not in re.findall(r'data-job="(\d+)"', rows)
