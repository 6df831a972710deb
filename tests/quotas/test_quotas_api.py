"""Quotas over REST (permissions, validation, defaults), submit-time quota checks, usage and usage reports."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditEntry
from jobs.models import Allocation, Job, JobEvent, Node
from jobs.states import ACTIVE_STATES, JobState
from quotas.models import Quota
from quotas.periods import local_today, overlap_seconds, period_bounds
from quotas.services import ledger_charge
from tests.conftest import job_payload
from tests.jobs.factories import JobFactory, NodeFactory
from tests.quotas.factories import TeamFactory

USERS = "/api/v1/quotas/users/"
TEAMS = "/api/v1/quotas/teams/"
USAGE = "/api/v1/usage/"
REPORT = "/api/v1/usage/report/"
FULL = {
    "max_gpus": 16,
    "max_wall_time_seconds": 7200,
    "max_node_hours_per_job": 32.0,
    "node_hours_per_period": 500.0,
    "fair_share_weight": 2.0,
}


@pytest.fixture
def vision(user: Any) -> Any:
    team = TeamFactory(name="vision")
    team.members.add(user)
    return team


# --- permissions ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,url",
    [
        ("get", USERS),
        ("get", f"{USERS}alice/"),
        ("put", f"{USERS}alice/"),
        ("patch", f"{TEAMS}vision/"),
        ("get", USAGE),
        ("get", REPORT),
    ],
)
def test_anonymous_requests_are_unauthorized(vision: Any, method: str, url: str) -> None:
    response = getattr(APIClient(), method)(url, {}, format="json")
    assert response.status_code == 401


def test_a_user_reads_their_own_quota_with_the_site_default(api: APIClient, settings: Any) -> None:
    settings.MUSTER_DEFAULT_MAX_GPUS = 16
    settings.MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS = 86400
    response = api.get(f"{USERS}alice/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["account"] == "user" and body["name"] == "alice"
    assert body["is_default"] is True
    assert (body["max_gpus"], body["max_wall_time_seconds"], body["node_hours_per_period"], body["fair_share_weight"]) == (
        16,
        86400,
        None,
        1.0,
    )
    assert body["usage"]["gpus_in_use"] == 0
    assert body["usage"]["node_hours_left"] is None


def test_another_users_quota_is_not_found(api: APIClient, other_user: Any) -> None:
    assert api.get(f"{USERS}bob/").status_code == 404


def test_a_member_reads_their_team_but_not_others(api: APIClient, vision: Any) -> None:
    TeamFactory(name="nlp")
    response = api.get(f"{TEAMS}vision/")
    assert response.status_code == 200
    assert response.json()["is_default"] is True and response.json()["max_gpus"] is None  # teams without a quota are unlimited
    assert api.get(f"{TEAMS}nlp/").status_code == 404


@pytest.mark.parametrize(
    "method,url",
    [
        ("put", f"{USERS}alice/"),
        ("patch", f"{USERS}alice/"),
        ("patch", f"{USERS}bob/"),
        ("put", f"{TEAMS}vision/"),
        ("delete", f"{USERS}alice/"),
    ],
)
def test_non_admins_cannot_change_quotas(api: APIClient, other_user: Any, vision: Any, method: str, url: str) -> None:
    response = getattr(api, method)(url, FULL, format="json")
    assert response.status_code == 403
    assert not Quota.objects.exists()


@pytest.mark.parametrize(
    "method,url",
    [("post", USERS), ("post", f"{USERS}alice/"), ("delete", TEAMS), ("put", USERS), ("post", f"{TEAMS}vision/")],
)
def test_a_method_the_endpoint_lacks_is_405_for_everyone(api: APIClient, admin_api: APIClient, vision: Any, method: str, url: str) -> None:
    """A non-admin's POST to the list was a 403 "You do not have permission", as if an admin could."""
    for client in (api, admin_api):
        response = getattr(client, method)(url, FULL, format="json")
        assert response.status_code == 405, response.content
        # Naming what the endpoint takes (DRF's 'Method "POST" not allowed.' named none).
        takes = "GET." if url in (USERS, TEAMS) else "GET, PUT, PATCH or DELETE."
        assert response.json() == {"detail": f"{method.upper()} is not taken here; {url} takes {takes}"}
    assert api.options(url).status_code == 200
    assert not Quota.objects.exists()


def test_lists_are_for_admins(
    api: APIClient, admin_api: APIClient, other_user: Any, vision: Any, django_assert_max_num_queries: Any
) -> None:
    assert api.get(USERS).status_code == 403
    assert api.get(TEAMS).status_code == 403
    with django_assert_max_num_queries(8):
        response = admin_api.get(USERS, {"limit": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 3 and [r["name"] for r in body["results"]] == ["alice", "bob"]
    assert admin_api.get(TEAMS).json()["results"][0]["name"] == "vision"


def test_unknown_accounts_are_not_found_for_admins(admin_api: APIClient) -> None:
    assert admin_api.get(f"{USERS}nobody/").status_code == 404
    assert admin_api.put(f"{TEAMS}nobody/", FULL, format="json").status_code == 404


# --- writes --------------------------------------------------------------------------------------


def test_admin_puts_a_quota_and_the_user_sees_it(admin_api: APIClient, api: APIClient) -> None:
    response = admin_api.put(f"{USERS}alice/", FULL, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["is_default"] is False
    body = api.get(f"{USERS}alice/").json()
    assert {k: body[k] for k in FULL} == FULL
    assert body["usage"]["node_hours_left"] == 500.0


def test_a_wall_time_limit_is_at_most_the_sites_longest_wall_time(admin_api: APIClient, user: Any, settings: Any) -> None:
    settings.MUSTER_MAX_WALL_TIME_SECONDS = 14 * 86400
    refused = admin_api.patch(f"{USERS}alice/", {"max_wall_time_seconds": 14 * 86400 + 1}, format="json")
    assert refused.status_code == 400 and refused.json()["max_wall_time_seconds"] == [
        "At most the site's longest wall time, 1209600 s (14 days: MUSTER_MAX_WALL_TIME_SECONDS); leave it empty for no limit of its own."
    ]
    assert admin_api.patch(f"{USERS}alice/", {"max_wall_time_seconds": 14 * 86400}, format="json").status_code == 200


def test_put_needs_every_limit(admin_api: APIClient, user: Any) -> None:
    response = admin_api.put(f"{USERS}alice/", {"max_gpus": 8}, format="json")
    assert response.status_code == 400
    assert "fair_share_weight" in response.json()
    assert not Quota.objects.exists()


def test_patch_changes_one_limit_and_keeps_the_defaults(admin_api: APIClient, user: Any, settings: Any) -> None:
    settings.MUSTER_DEFAULT_MAX_WALL_TIME_SECONDS = 3600
    response = admin_api.patch(f"{USERS}alice/", {"max_gpus": 4}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["max_gpus"], body["max_wall_time_seconds"], body["is_default"]) == (4, 3600, False)
    response = admin_api.patch(f"{USERS}alice/", {"max_gpus": None}, format="json")
    assert response.json()["max_gpus"] is None  # null is unlimited


def test_an_empty_patch_changes_nothing_and_the_user_keeps_the_site_default(
    admin_api: APIClient, user: Any, vision: Any, settings: Any
) -> None:
    """`PATCH {}` gave the user a quota of their own (a copy of today's default, is_default true -> false), audited."""
    read = admin_api.get(f"{USERS}alice/").json()
    response = admin_api.patch(f"{USERS}alice/", {}, format="json")
    assert response.status_code == 200, response.content
    assert response.json() == {**read, "warnings": []}
    assert admin_api.patch(f"{TEAMS}vision/", {}, format="json").json()["is_default"] is True
    assert not Quota.objects.exists() and not AuditEntry.objects.exists()
    settings.MUSTER_DEFAULT_MAX_GPUS = 3  # the default still applies to her
    assert admin_api.get(f"{USERS}alice/").json()["max_gpus"] == 3


def test_resetting_a_quota_refuses_a_body_as_cancel_does(admin_api: APIClient, user: Any) -> None:
    admin_api.put(f"{USERS}alice/", FULL, format="json")
    refused = admin_api.delete(f"{USERS}alice/", {"max_gpus": 4}, format="json")
    assert (refused.status_code, refused.json()) == (400, {"max_gpus": ["Unknown field."]})
    assert Quota.objects.filter(user=user).exists()
    assert admin_api.delete(f"{USERS}alice/").status_code == 204
    assert not Quota.objects.exists()


def test_team_quota_round_trip_and_reset(admin_api: APIClient, vision: Any) -> None:
    assert admin_api.put(f"{TEAMS}vision/", FULL, format="json").status_code == 200
    assert Quota.objects.get(team=vision).node_hours_per_period == 500.0
    assert admin_api.delete(f"{TEAMS}vision/").status_code == 204
    body = admin_api.get(f"{TEAMS}vision/").json()
    assert body["is_default"] is True and body["max_gpus"] is None


@pytest.mark.parametrize(
    "change,field",
    [
        ({"max_gpus": -1}, "max_gpus"),
        ({"max_gpus": 1.5}, "max_gpus"),
        ({"max_wall_time_seconds": 0}, "max_wall_time_seconds"),
        ({"max_node_hours_per_job": -0.5}, "max_node_hours_per_job"),
        ({"node_hours_per_period": -10}, "node_hours_per_period"),
        ({"fair_share_weight": 0}, "fair_share_weight"),
        ({"fair_share_weight": -2}, "fair_share_weight"),
        ({"fair_share_weight": None}, "fair_share_weight"),
        ({"max_gpu": 4}, "max_gpu"),
        # Past any meaning: stored, they read as 106751991167300 days.
        ({"max_wall_time_seconds": 9223372036854775800}, "max_wall_time_seconds"),
        ({"max_node_hours_per_job": 1e308}, "max_node_hours_per_job"),
        ({"node_hours_per_period": 1e300}, "node_hours_per_period"),
        ({"max_gpus": 10**12}, "max_gpus"),
        # A number sent as a string is a client's mistake, not a limit.
        ({"max_gpus": "8"}, "max_gpus"),
        ({"fair_share_weight": "2"}, "fair_share_weight"),
        ({"node_hours_per_period": True}, "node_hours_per_period"),
    ],
)
def test_bad_quota_values_are_rejected_naming_the_field(admin_api: APIClient, user: Any, change: dict[str, Any], field: str) -> None:
    for method, body in (("patch", change), ("put", {**FULL, **change})):
        response = getattr(admin_api, method)(f"{USERS}alice/", body, format="json")
        assert response.status_code == 400, (method, response.content)
        assert field in response.json(), response.json()
    assert not Quota.objects.exists()


# --- submit-time rejections --------------------------------------------------------------------


@pytest.fixture
def nothing_written(sim: Any) -> Iterator[None]:
    before = (Job.objects.count(), JobEvent.objects.count(), Allocation.objects.count())
    yield
    assert (Job.objects.count(), JobEvent.objects.count(), Allocation.objects.count()) == before


def rejected(response: Any, field: str, *words: str) -> None:
    assert response.status_code == 400, response.content
    text = " ".join(response.json()[field])
    for word in words:
        assert word in text, (word, text)


def test_a_job_bigger_than_the_users_gpu_quota_is_rejected(api: APIClient, user: Any, nothing_written: None) -> None:
    Quota.objects.create(user=user, max_gpus=8)
    response = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=8), format="json")
    rejected(response, "nodes", "16 GPUs", "your quota (user alice)", "at most 8")


def test_a_gang_counts_the_whole_nodes_it_will_hold_against_the_quota(api: APIClient, user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8)
    before = Job.objects.count()
    # 2 x 4 GPUs asks 8, but on 8-GPU nodes it would hold 16: it could never run within the quota.
    response = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=4), format="json")
    rejected(response, "nodes", "16 GPUs", "holds them whole: 2 x 8", "at most 8")
    assert Job.objects.count() == before
    assert api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=8), format="json").status_code == 201


def test_a_gpu_quota_refusal_names_the_field_to_change(api: APIClient, user: Any, nothing_written: None) -> None:
    """A 1-node x 8-GPU job over max_gpus 4 was refused on `nodes`, which it cannot have fewer of."""
    Quota.objects.create(user=user, max_gpus=4)
    one_node = api.post("/api/v1/jobs/validate/", job_payload(nodes=1, gpus_per_node=8), format="json").json()
    assert one_node == {
        "gpus_per_node": [
            "The job needs 8 GPUs; your quota (user alice) allows at most 4 at once. A preemptible job may borrow idle GPUs beyond it."
        ]
    }
    # A gang holds its nodes whole: fewer GPUs per node would not help, fewer nodes would.
    gang = api.post("/api/v1/jobs/validate/", job_payload(nodes=2, gpus_per_node=2), format="json").json()
    assert list(gang) == ["nodes"] and "holds them whole: 2 x 8" in gang["nodes"][0]


def test_a_preemptible_job_may_exceed_the_gpu_quota(api: APIClient, user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=8)
    response = api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=8, preemptible=True), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["preemptible"] is True and body["over_quota"] is False and body["estimated_start"] is None


def test_the_site_default_applies_to_users_without_a_quota(api: APIClient, settings: Any, nothing_written: None) -> None:
    settings.MUSTER_DEFAULT_MAX_GPUS = 4
    rejected(api.post("/api/v1/jobs/", job_payload(nodes=1, gpus_per_node=8), format="json"), "gpus_per_node", "8 GPUs", "at most 4")


def test_wall_time_over_the_quota_is_rejected(api: APIClient, user: Any, nothing_written: None) -> None:
    Quota.objects.create(user=user, max_wall_time_seconds=1800)
    rejected(api.post("/api/v1/jobs/", job_payload(wall_time_seconds=3600), format="json"), "wall_time_seconds", "3600 s", "at most 1800 s")


def test_node_hours_per_job_over_the_quota_is_rejected(api: APIClient, user: Any, nothing_written: None) -> None:
    Quota.objects.create(user=user, max_node_hours_per_job=16)
    payload = job_payload(nodes=4, wall_time_seconds=8 * 3600)
    rejected(api.post("/api/v1/jobs/", payload, format="json"), "nodes", "32 node-hours", "at most 16 node-hours per job")


def test_a_job_needing_more_than_a_whole_periods_budget_is_rejected(api: APIClient, vision: Any, sim: Any) -> None:
    """It was accepted and waited for good: `--test-only` said "[waits] ... It renews 2026-12-01", and at the renewal
    it did not fit either."""
    Quota.objects.create(team=vision, node_hours_per_period=4)
    before = Job.objects.count()
    response = api.post("/api/v1/jobs/", job_payload(team="vision", nodes=2, wall_time_seconds=3 * 3600), format="json")
    rejected(response, "wall_time_seconds", "at least 6 node-hours", "team vision gives 4 node-hours a month in all", "never start")
    # A single-node job is counted by its share of the largest node: 4 of 8 GPUs for 6 h is 3 node-hours.
    response = api.post("/api/v1/jobs/", job_payload(team="vision", nodes=1, gpus_per_node=4, wall_time_seconds=6 * 3600), format="json")
    assert response.status_code == 201, response.content
    rejected(
        api.post("/api/v1/jobs/", job_payload(team="vision", nodes=1, gpus_per_node=8, wall_time_seconds=5 * 3600), format="json"),
        "wall_time_seconds",
        "at least 5 node-hours",
    )
    assert Job.objects.count() == before + 1


def test_the_teams_limits_apply_too(api: APIClient, vision: Any, nothing_written: None) -> None:
    Quota.objects.create(team=vision, max_gpus=8, max_wall_time_seconds=600)
    response = api.post("/api/v1/jobs/", job_payload(team="vision", nodes=2, gpus_per_node=8), format="json")
    rejected(response, "nodes", "16 GPUs", "team vision", "at most 8")
    rejected(response, "wall_time_seconds", "team vision", "600 s")


def test_a_job_within_its_limits_is_accepted(api: APIClient, user: Any, sim: Any) -> None:
    Quota.objects.create(user=user, max_gpus=16, max_wall_time_seconds=3600, max_node_hours_per_job=2)
    assert api.post("/api/v1/jobs/", job_payload(nodes=2, gpus_per_node=8, wall_time_seconds=3600), format="json").status_code == 201


# --- usage after a job runs ------------------------------------------------------------------


def charge_running(sim: Any) -> None:
    # The cycle charges running jobs itself; charging again up to the same instant adds nothing.
    for job in Job.objects.filter(state__in=ACTIVE_STATES):
        ledger_charge(job=job, until=sim.clock())


def test_usage_after_a_job_runs(api: APIClient, user: Any, vision: Any, submit: Any, sim: Any) -> None:
    Quota.objects.create(user=user, node_hours_per_period=100.0)
    submit(nodes=1, gpus_per_node=2, team="vision", wall_time_seconds=4 * 3600, simulate={"duration_seconds": 7200})
    sim.cycle()
    sim.advance(3600)
    charge_running(sim)
    job = Job.objects.get()
    assert job.state == JobState.RUNNING
    allocated_at = Allocation.objects.get(job=job).allocated_at
    # The usage endpoint's period is that of the real clock; the sim clock is an hour ahead of it.
    held = overlap_seconds(allocated_at, sim.clock(), *period_bounds(timezone.now()))

    body = api.get(USAGE).json()
    assert body["username"] == "alice"
    mine = body["user"]
    assert mine["usage"]["gpus_in_use"] == 2
    assert mine["usage"]["gpu_hours_used"] == pytest.approx(2 * held / 3600)
    assert mine["usage"]["node_hours_used"] == pytest.approx(0.25 * held / 3600)
    assert mine["usage"]["node_hours_left"] == pytest.approx(100 - 0.25 * held / 3600)
    (team,) = body["teams"]
    assert team["name"] == "vision" and team["usage"]["gpus_in_use"] == 2
    assert team["usage"]["node_hours_used"] == pytest.approx(0.25 * held / 3600)
    assert team["usage"]["node_hours_left"] is None


def test_admins_read_anyones_usage_others_only_their_own(api: APIClient, admin_api: APIClient, other_user: Any) -> None:
    assert admin_api.get(USAGE, {"user": "alice"}).json()["username"] == "alice"
    assert api.get(USAGE, {"user": "alice"}).status_code == 200
    # Another's usage reads as the API's every 404 does ("Not found." said nothing), and as an unknown user's does.
    theirs = api.get(USAGE, {"user": "bob"})
    assert theirs.status_code == 404 and theirs.json() == {"detail": "No user bob (or none that you may see)."}
    assert api.get(USAGE, {"user": "nobody"}).json() == {"detail": "No user nobody (or none that you may see)."}
    missing = admin_api.get(USAGE, {"user": "nobody"})
    assert missing.status_code == 404 and missing.json() == {"detail": "No user nobody (or none that you may see)."}


# --- reports -------------------------------------------------------------------------------------


@pytest.fixture
def history(user: Any, other_user: Any, vision: Any) -> None:
    """Known allocations in November 2026 (UTC): alice 2 whole-node hours + a quarter node; bob 1 node, no team."""
    n1, n2 = NodeFactory(name="n1"), NodeFactory(name="n2")

    def ran(owner: Any, team: Any, held: list[tuple[Node, int]], start: datetime, end: datetime | None) -> None:
        JobFactory(
            owner=owner,
            team=team,
            state=JobState.SUCCEEDED,
            attempt=1,
            submitted_at=start,
            nodes=len(held),
            held=held,
            held__released_at=end,
        )

    day = datetime(2026, 11, 10, tzinfo=UTC)
    # alice/vision: a 2-node gang for 1 h across midnight into the 10th: half of it before the range.
    ran(user, vision, [(n1, 8), (n2, 8)], day - timedelta(minutes=30), day + timedelta(minutes=30))
    # alice/vision: 2 GPUs for 4 h on the 12th.
    ran(user, vision, [(n1, 2)], day + timedelta(days=2), day + timedelta(days=2, hours=4))
    # bob, no team: 8 GPUs for 3 h on the 11th; and once after the range.
    ran(other_user, None, [(n2, 8)], day + timedelta(days=1), day + timedelta(days=1, hours=3))
    ran(other_user, None, [(n2, 8)], day + timedelta(days=30), day + timedelta(days=30, hours=3))


RANGE = {"start": "2026-11-10", "end": "2026-11-20"}


def test_report_by_user_counts_only_time_inside_the_range(admin_api: APIClient, history: None, settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    response = admin_api.get(REPORT, {**RANGE, "group_by": "user"})
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["start"], body["end"], body["group_by"]) == ("2026-11-10", "2026-11-20", "user")
    alice, bob = body["rows"]
    assert alice == {
        "name": "alice",
        "jobs": 2,
        "gpu_hours": pytest.approx(16 * 0.5 + 2 * 4),
        "node_hours": pytest.approx(2 * 0.5 + 0.25 * 4),
    }
    assert bob == {"name": "bob", "jobs": 1, "gpu_hours": pytest.approx(24.0), "node_hours": pytest.approx(3.0)}


def test_report_csv_download(admin_api: APIClient, history: None, settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    # ?format= wins over an Accept header many clients send on every call (it was a 406).
    response = admin_api.get(REPORT, {**RANGE, "group_by": "team", "format": "csv"}, HTTP_ACCEPT="application/json")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == 'attachment; filename="muster-usage-by-team-2026-11-10-to-2026-11-20.csv"'
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    # The jobs of no team too, last: the two reports add up to the same use of the cluster.
    assert rows == [["team", "jobs", "gpu_hours", "node_hours"], ["vision", "2", "16.0", "2.0"], ["(no team)", "1", "24.0", "3.0"]]


def test_non_admins_see_only_their_own_rows(api: APIClient, other_api: APIClient, history: None, settings: Any) -> None:
    settings.TIME_ZONE = "UTC"
    assert [r["name"] for r in api.get(REPORT, {**RANGE, "group_by": "user"}).json()["rows"]] == ["alice"]
    assert [r["name"] for r in api.get(REPORT, {**RANGE, "group_by": "team"}).json()["rows"]] == ["vision"]
    assert [r["name"] for r in other_api.get(REPORT, {**RANGE, "group_by": "user"}).json()["rows"]] == ["bob"]
    assert other_api.get(REPORT, {**RANGE, "group_by": "team"}).json()["rows"] == []


@pytest.mark.parametrize(
    "query,field",
    [
        ({"start": "2026-13-01", "end": "2026-11-20"}, "start"),
        ({"start": "yesterday", "end": "2026-11-20"}, "start"),
        ({"start": "2026-11-20", "end": "2026-11-10"}, "end"),
        ({"start": "2026-11-10", "end": "2026-11-20", "group_by": "node"}, "group_by"),
        ({"start": "2000-01-01", "end": "2026-11-20"}, "end"),
        ({"start": "2026-11-10", "end": "2026-11-20", "format": "xml"}, "format"),
        ({"start": "2026-11-10", "end": "2026-11-20", "until": "x"}, "until"),
    ],
)
def test_bad_report_queries_are_400(api: APIClient, query: dict[str, str], field: str) -> None:
    for fmt in ({}, {"format": "csv"}) if "format" not in query else ({},):
        response = api.get(REPORT, {**query, **fmt})
        assert response.status_code == 400, (response.status_code, response.content)
        assert response["Content-Type"].startswith("application/json")
        assert field in response.json()


def test_an_unknown_choice_names_the_choices(api: APIClient) -> None:
    """DRF said '"Team" is not a valid choice.' of `?group_by=Team`, naming neither the choices nor their case."""
    response = api.get(REPORT, {**RANGE, "group_by": "Team"})
    assert response.json() == {"group_by": ["Unknown group_by 'Team'; choose user or team."]}


def test_a_range_reversed_by_a_default_names_the_date_sent_and_the_default(api: APIClient) -> None:
    """`?start=<tomorrow>` alone was refused as {"end": ["The end date is before the start date."]}: end was not sent."""
    today = local_today()
    tomorrow = today + timedelta(days=1)
    refused = api.get(REPORT, {"start": tomorrow.isoformat()})
    assert refused.status_code == 400
    assert refused.json() == {
        "start": [f"The start date is after the end date, which defaults to today ({today}): give an end on or after {tomorrow}."]
    }
    first = local_today(period_bounds(timezone.now())[0])
    before = first - timedelta(days=1)
    refused = api.get(REPORT, {"end": before.isoformat()})
    assert refused.json() == {
        "end": [
            f"The end date is before the start date, which defaults to the current budget period's first day ({first}): "
            f"give a start on or before {before}."
        ]
    }


def test_the_report_answers_json_or_csv_and_refuses_any_other_format_in_words(api: APIClient) -> None:
    """?format=api answered the browsable API's HTML, which the report does not document."""
    for asked in ("api", "xml"):
        refused = api.get(REPORT, {"format": asked})
        assert refused.status_code == 400 and refused["Content-Type"].startswith("application/json")
        assert refused.json() == {"format": [f"Unknown format {asked!r}: this endpoint answers json or csv."]}
    assert api.get(REPORT, {"format": "csv"})["Content-Type"].startswith("text/csv")
    assert api.get(REPORT, {"format": "json"}).json()["group_by"] == "user"


def test_report_defaults_to_this_period(api: APIClient) -> None:
    body = api.get(REPORT).json()
    assert body["start"] == period_bounds(timezone.now())[0].date().isoformat()
    assert body["group_by"] == "user" and body["rows"] == []


def test_schema_describes_quotas_and_usage(db: None) -> None:
    paths = APIClient().get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in ("/api/v1/quotas/users/{username}/", "/api/v1/quotas/teams/{name}/", "/api/v1/usage/", "/api/v1/usage/report/"):
        assert path in paths
    assert set(paths["/api/v1/quotas/users/{username}/"]) >= {"get", "put", "patch"}


def test_the_schema_gives_the_fair_share_weights_bounds(admin_api: APIClient, user: Any) -> None:
    """Both bounds, as the model enforces them, in the schema, the help and every refusal: the help said "greater than 0"
    and 1e-300 was refused in Django's words, "Ensure this value is greater than or equal to 0.001."."""
    schemas = APIClient().get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    for name in ("QuotaInputRequest", "PatchedQuotaInputRequest"):
        weight = schemas[name]["properties"]["fair_share_weight"]
        assert (weight["minimum"], weight["maximum"]) == (0.001, 1_000_000) and "exclusiveMinimum" not in weight
        assert weight["description"] == "Shares in the fair-share priority; from 0.001 to 1,000,000."
    for weight in (0, 1e-300, 0.0009, 1_000_001):
        refused = admin_api.patch(f"{USERS}alice/", {"fair_share_weight": weight}, format="json")
        assert refused.status_code == 400
        assert refused.json() == {"fair_share_weight": ["The fair-share weight must be from 0.001 to 1,000,000."]}
    for weight in (0.001, 1_000_000):
        assert admin_api.patch(f"{USERS}alice/", {"fair_share_weight": weight}, format="json").status_code == 200


def test_a_quota_sent_back_as_it_was_read_says_which_fields_are_read_only(admin_api: APIClient, user: Any) -> None:
    """`{"is_default": false}` answered "Unknown field." though the GET answer has it."""
    read = admin_api.get(f"{USERS}alice/").json()
    refused = admin_api.put(f"{USERS}alice/", read, format="json")
    assert refused.status_code == 400
    body = refused.json()
    assert body["is_default"] == body["usage"] == ["Read-only: it is in the answer, and no request sets it."]
    assert admin_api.patch(f"{USERS}alice/", {"max_gpu": 4}, format="json").json() == {"max_gpu": ["Unknown field."]}
    assert not Quota.objects.exists()


def test_a_report_day_that_does_not_exist_is_said_so_not_a_wrong_format(api: APIClient) -> None:
    body = api.get(REPORT, {"start": "2026-13-01", "end": "2026-11-20"}).json()
    assert body == {"start": ["Not a day: write it as YYYY-MM-DD (2026-11-01), a date that exists."]}


def test_one_node_hour_is_said_in_the_singular(api: APIClient, vision: Any, sim: Any) -> None:
    """It read "at least 1 node-hours of its budget" and "at most 1 node-hours per job"."""
    Quota.objects.create(team=vision, node_hours_per_period=1, max_node_hours_per_job=1)
    response = api.post("/api/v1/jobs/", job_payload(team="vision", nodes=2, wall_time_seconds=3600), format="json")
    rejected(response, "wall_time_seconds", "at least 2 node-hours of its budget", "team vision gives 1 node-hour a month in all")
    rejected(response, "nodes", ": 2 node-hours;", "at most 1 node-hour per job")


def test_a_lowered_limits_warning_names_jobs_as_jobs(admin_api: APIClient, user: Any) -> None:
    """It listed them as a bare "(5)", which read as a count."""
    first, second = JobFactory(owner=user), JobFactory(owner=user)
    Job.objects.filter(pk__in=[first.pk, second.pk]).update(nodes=2)
    (one,) = admin_api.patch(f"{USERS}alice/", {"max_gpus": 8}, format="json").json()["warnings"]
    assert f"need more than 8 GPUs on their own (jobs {first.pk}, {second.pk}):" in one
    (budget,) = admin_api.patch(f"{USERS}alice/", {"node_hours_per_period": 1}, format="json").json()["warnings"]
    assert f"more than the whole budget of 1 node-hour (jobs {first.pk}, {second.pk}):" in budget
