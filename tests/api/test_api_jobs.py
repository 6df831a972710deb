"""The REST resource contract: auth, jobs (create, list, detail, cancel), nodes, queue, schema."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs.models import Job, JobEvent
from tests.conftest import PASSWORD, job_payload
from tests.jobs.factories import NodeFactory
from tests.quotas.factories import TeamFactory

JOBS = "/api/v1/jobs/"
NODES = "/api/v1/nodes/"
QUEUE = "/api/v1/queue/"


def job_url(job_id: int, suffix: str = "") -> str:
    return f"{JOBS}{job_id}/{suffix}"


def nodes_by_name(client: APIClient) -> dict[str, dict[str, Any]]:
    response = client.get(NODES, {"limit": 100})
    assert response.status_code == 200, response.content
    return {n["name"]: n for n in response.json()["results"]}


def transitions(job: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["from_state"], e["to_state"]) for e in job["events"]]


# --- auth --------------------------------------------------------------------------------------


def test_token_login_returns_a_token_that_authenticates(user: Any, sim: Any) -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": PASSWORD}, format="json")
    assert response.status_code == 200, response.content
    token = response.json()["token"]
    assert token

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get(JOBS).status_code == 200
    created = client.post(JOBS, job_payload(), format="json")
    assert created.status_code == 201, created.content
    assert created.json()["owner"] == "alice"


def test_token_login_with_a_bad_password_is_refused(user: Any) -> None:
    response = APIClient().post("/api/v1/auth/token/", {"username": "alice", "password": "wrong"}, format="json")
    assert response.status_code == 401
    assert response.json() == {"detail": "Wrong username or password."}


def test_a_bad_token_is_refused(user: Any) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert client.get(JOBS).status_code == 401


@pytest.mark.parametrize("method,url", [("get", JOBS), ("post", JOBS), ("get", NODES), ("get", QUEUE), ("get", f"{JOBS}1/")])
def test_anonymous_requests_are_unauthorized(db: None, method: str, url: str) -> None:
    response = getattr(APIClient(), method)(url)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


# --- create ------------------------------------------------------------------------------------


def test_create_returns_the_pending_job_with_its_submit_event(api: APIClient, sim: Any) -> None:
    response = api.post(JOBS, job_payload(env={"NCCL_DEBUG": "INFO"}), format="json")
    assert response.status_code == 201, response.content
    job = response.json()
    assert isinstance(job["id"], int)
    assert job["state"] == "PENDING"
    assert job["owner"] == "alice"
    assert job["nodes"] == 2 and job["gpus_per_node"] == 8 and job["gpus"] == 16
    assert job["priority_class"] == "normal"
    assert job["env"] == {"NCCL_DEBUG": "INFO"}
    assert job["assigned_nodes"] == []
    assert set(job["pending_reason"]) == {"code", "message"}
    assert job["pending_reason"]["message"]
    assert len(job["events"]) == 1
    assert job["events"][0]["from_state"] == "" and job["events"][0]["to_state"] == "PENDING"
    assert "alice" in job["events"][0]["reason"]

    assert Job.objects.filter(pk=job["id"], owner__username="alice", state="PENDING").count() == 1
    assert JobEvent.objects.filter(job_id=job["id"]).count() == 1
    assert JobEvent.objects.count() == 1


def test_create_submits_for_a_named_team(api: APIClient, user: Any, submit: Any) -> None:
    TeamFactory(name="vision").members.add(user)
    TeamFactory(name="speech").members.add(user)
    job = submit(team="speech")
    assert job["team"] == "speech"
    # A member of several teams names one: a job of none escaped both teams' quotas and budgets.
    response = api.post(JOBS, job_payload(), format="json")
    assert response.status_code == 400
    assert response.json()["team"] == [
        "You are in teams speech, vision: say which this job is for (team; muster submit --team), so its quota and budget apply."
    ]


# --- list --------------------------------------------------------------------------------------


def test_list_is_paginated(api: APIClient, submit: Any) -> None:
    ids = [submit(name=f"job-{i}")["id"] for i in range(5)]
    page = api.get(JOBS, {"limit": 2}).json()
    assert page["count"] == 5
    assert len(page["results"]) == 2
    assert page["next"] and "offset=2" in page["next"]
    assert page["previous"] is None
    # Newest first, and the pages together list every job once.
    seen = [j["id"] for j in page["results"]]
    while page["next"]:
        page = api.get(page["next"]).json()
        seen += [j["id"] for j in page["results"]]
    assert seen == sorted(ids, reverse=True)


@pytest.mark.parametrize("url", [JOBS, QUEUE, NODES])
def test_a_page_size_or_offset_that_is_not_one_is_refused_not_read_as_the_first_page(api: APIClient, url: str) -> None:
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": "abc"}, "limit"),
        ({"limit": "²"}, "limit"),
        ({"offset": "x"}, "offset"),
    ):
        response = api.get(url, params)
        assert response.status_code == 400, (params, response.content)
        assert list(response.json()) == [field]
    assert "from 1 to 500" in api.get(url, {"limit": 0}).json()["limit"][0]
    # Above the ceiling it is cut to it, as documented.
    assert api.get(url, {"limit": 10_000}).status_code == 200


def test_list_filters_by_state(api: APIClient, submit: Any, sim: Any) -> None:
    first = submit()
    sim.cycle()
    sim.advance(2)  # the first job's pods start: RUNNING
    second = submit()

    running = api.get(JOBS, {"state": "RUNNING"}).json()
    assert [j["id"] for j in running["results"]] == [first["id"]]
    assert running["results"][0]["state"] == "RUNNING"
    pending = api.get(JOBS, {"state": "PENDING"}).json()
    assert [j["id"] for j in pending["results"]] == [second["id"]]
    both = api.get(f"{JOBS}?state=PENDING&state=RUNNING").json()
    assert both["count"] == 2
    # In any case, as the CLI takes them; an unknown state is answered with the states there are.
    assert [j["id"] for j in api.get(f"{JOBS}?state=pending&state=Running").json()["results"]] == [second["id"], first["id"]]
    refused = api.get(JOBS, {"state": "NOT_A_STATE"})
    assert refused.status_code == 400
    assert refused.json()["state"] == [
        "Unknown state NOT_A_STATE; the states are PENDING, SCHEDULED, RUNNING, SUCCEEDED, FAILED, CANCELLED, TIMED_OUT, PREEMPTED."
    ]


def test_list_sorts_as_the_job_list_pages_columns_do(api: APIClient, submit: Any, sim: Any) -> None:
    small = submit(name="b-small", nodes=1)
    sim.cycle()
    sim.advance(2)  # RUNNING: it has a run time
    big = submit(name="A-big", nodes=2)
    mid = submit(name="c-mid", nodes=2, gpus_per_node=4)

    def order(ordering: str) -> list[int]:
        response = api.get(JOBS, {"ordering": ordering})
        assert response.status_code == 200, response.content
        return [job["id"] for job in response.json()["results"]]

    assert order("name") == [big["id"], small["id"], mid["id"]]  # in any case, as the page sorts it
    assert order("-size") == [big["id"], mid["id"], small["id"]]
    # The jobs with no run time come after the one that has one, in either direction; ties go by id, the same way.
    assert order("time") == [small["id"], big["id"], mid["id"]]
    assert order("-time") == [small["id"], mid["id"], big["id"]]
    assert order("id") == [small["id"], big["id"], mid["id"]]
    assert order("") == order("-submitted") == [mid["id"], big["id"], small["id"]]

    refused = api.get(JOBS, {"ordering": "wall_time"})
    assert refused.status_code == 400
    assert refused.json()["ordering"] == [
        "Cannot sort by wall_time; sort by id, name, owner, state, size, time, priority, submitted, each reversed with a leading -."
    ]


def test_users_see_only_their_own_jobs_and_admins_see_all(api: APIClient, other_api: APIClient, admin_api: APIClient, submit: Any) -> None:
    mine = submit()
    theirs = submit(client=other_api)

    assert [j["id"] for j in api.get(JOBS).json()["results"]] == [mine["id"]]
    assert [j["id"] for j in other_api.get(JOBS).json()["results"]] == [theirs["id"]]
    everyone = admin_api.get(JOBS).json()
    assert {j["id"] for j in everyone["results"]} == {mine["id"], theirs["id"]}
    assert admin_api.get(JOBS, {"owner": "bob"}).json()["results"][0]["id"] == theirs["id"]
    assert admin_api.get(job_url(mine["id"])).status_code == 200


def test_another_users_job_cannot_be_read_or_cancelled(api: APIClient, other_api: APIClient, submit: Any) -> None:
    theirs = submit(client=other_api)

    assert api.get(job_url(theirs["id"])).status_code == 404
    assert api.post(job_url(theirs["id"], "cancel/")).status_code == 404
    assert Job.objects.get(pk=theirs["id"]).state == "PENDING"
    assert JobEvent.objects.filter(job_id=theirs["id"]).count() == 1
    assert api.get(job_url(999_999)).status_code == 404
    # Whether it does not exist or is someone else's, the answer reads the same, and names what was asked for.
    assert api.get(job_url(999_999)).json() == {"detail": "No job 999999 (or none that you may see)."}
    assert api.get(job_url(theirs["id"])).json() == {"detail": f"No job {theirs['id']} (or none that you may see)."}


# --- detail ------------------------------------------------------------------------------------


def test_detail_follows_the_job_through_scheduled_and_running(api: APIClient, submit: Any, sim: Any) -> None:
    job = submit()
    sim.cycle()
    detail = api.get(job_url(job["id"])).json()
    assert detail["state"] == "SCHEDULED"
    assert detail["pending_reason"] is None
    assert detail["scheduled_at"]
    nodes = detail["assigned_nodes"]
    assert len(nodes) == 2 and len(set(nodes)) == 2
    assert set(nodes) <= set(nodes_by_name(api))

    sim.advance(2)
    detail = api.get(job_url(job["id"])).json()
    assert detail["state"] == "RUNNING"
    assert detail["started_at"]
    assert detail["assigned_nodes"] == nodes
    assert transitions(detail) == [("", "PENDING"), ("PENDING", "SCHEDULED"), ("SCHEDULED", "RUNNING")]
    assert all(e["reason"] for e in detail["events"])

    sim.advance(31)  # the simulated duration is 30 s
    detail = api.get(job_url(job["id"])).json()
    assert detail["state"] == "SUCCEEDED"
    assert detail["exit_code"] == 0
    assert transitions(detail)[-1] == ("RUNNING", "SUCCEEDED")


# --- cancel ------------------------------------------------------------------------------------


def test_cancel_a_pending_job(api: APIClient, submit: Any) -> None:
    job = submit()
    response = api.post(job_url(job["id"], "cancel/"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "CANCELLED"
    assert body["finished_at"]
    assert transitions(body) == [("", "PENDING"), ("PENDING", "CANCELLED")]
    assert "alice" in body["events"][-1]["reason"]
    assert Job.objects.get(pk=job["id"]).state == "CANCELLED"


def test_cancel_a_running_job_frees_its_gpus(api: APIClient, submit: Any, sim: Any) -> None:
    job = submit()
    sim.cycle()
    sim.advance(2)
    assert api.get(job_url(job["id"])).json()["state"] == "RUNNING"
    assert sum(n["gpus_free"] for n in nodes_by_name(api).values()) == 16 * 8 - 16

    response = api.post(job_url(job["id"], "cancel/"))
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "CANCELLED"
    assert transitions(response.json())[-1] == ("RUNNING", "CANCELLED")
    assert all(n["gpus_free"] == n["gpus_total"] == 8 for n in nodes_by_name(api).values())

    # The next cycle removes the pods and leaves the job cancelled.
    report = sim.advance(1)
    assert report.orphans_removed == [(job["id"], 1)]
    assert not sim.cluster.observe_gangs()
    assert api.get(job_url(job["id"])).json()["state"] == "CANCELLED"


@pytest.mark.parametrize("how", ["succeeded", "cancelled"])
def test_cancelling_a_finished_job_is_a_conflict(api: APIClient, submit: Any, sim: Any, how: str) -> None:
    job = submit()
    if how == "succeeded":
        sim.cycle()
        sim.advance(2)
        sim.advance(31)
    else:
        assert api.post(job_url(job["id"], "cancel/")).status_code == 200
    final = Job.objects.get(pk=job["id"]).state
    assert final == how.upper()
    events = JobEvent.objects.filter(job_id=job["id"]).count()

    response = api.post(job_url(job["id"], "cancel/"))
    assert response.status_code == 409
    assert final in response.json()["detail"]
    assert "nothing to cancel" in response.json()["detail"]
    assert Job.objects.get(pk=job["id"]).state == final
    assert JobEvent.objects.filter(job_id=job["id"]).count() == events


def test_cancel_only_accepts_post(api: APIClient, submit: Any) -> None:
    job = submit()
    assert api.get(job_url(job["id"], "cancel/")).status_code == 405
    assert api.delete(job_url(job["id"])).status_code == 405
    assert Job.objects.get(pk=job["id"]).state == "PENDING"


# --- nodes -------------------------------------------------------------------------------------


def test_nodes_lists_the_cluster(api: APIClient, sim: Any) -> None:
    response = api.get(NODES, {"limit": 100})
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 16
    nodes = body["results"]
    assert len({n["name"] for n in nodes}) == 16
    for node in nodes:
        assert {"name", "gpus_total", "gpus_free", "rack", "state"} <= set(node)
        assert node["gpus_total"] == 8
        assert node["gpus_free"] == 8
        assert node["rack"]
        assert node["state"] == "READY"
    assert len({n["rack"] for n in nodes}) == 2


def test_node_gpus_free_drop_on_the_nodes_a_job_runs_on(api: APIClient, submit: Any, sim: Any) -> None:
    job = submit(nodes=2, gpus_per_node=8)
    sim.cycle()
    sim.advance(2)
    placed = api.get(job_url(job["id"])).json()["assigned_nodes"]
    nodes = nodes_by_name(api)
    for name, node in nodes.items():
        assert node["gpus_free"] == (0 if name in placed else 8), name
    assert api.get(f"{NODES}{placed[0]}/").json()["gpus_free"] == 0

    single = submit(nodes=1, gpus_per_node=3)
    sim.cycle()
    (host,) = api.get(job_url(single["id"])).json()["assigned_nodes"]
    assert host not in placed
    assert nodes_by_name(api)[host]["gpus_free"] == 5


def test_a_shared_nodes_free_gpus_leave_out_the_slices_other_pods_hold(api: APIClient, db: None) -> None:
    """30 quarter-GPU slices of pods Muster did not start on an 8-GPU time-sliced node read 7.5 GPUs free."""
    NodeFactory(name="ts-00", gpus_total=8, sharing="time-slicing", slices_per_gpu=4, slice_gpus=0.25, slices_foreign=30)
    node = api.get(f"{NODES}ts-00/").json()
    assert (node["gpus_free"], node["slices_free"]) == (0.5, 2)


# --- queue -------------------------------------------------------------------------------------


@pytest.mark.usefixtures("classes_open")
def test_queue_lists_pending_jobs_in_scheduling_order(api: APIClient, other_api: APIClient, submit: Any, sim: Any) -> None:
    blocker = submit(nodes=16, gpus_per_node=8)
    sim.cycle()  # the whole cluster is taken
    assert api.get(job_url(blocker["id"])).json()["state"] == "SCHEDULED"

    pre = submit(name="pre", priority_class="preemptible", nodes=1, gpus_per_node=1)
    normal_old = submit(name="normal-old", nodes=1, gpus_per_node=1)
    prod = submit(client=other_api, name="prod", priority_class="production")
    normal_new = submit(name="normal-new", nodes=1, gpus_per_node=1)
    sim.cycle()

    response = api.get(QUEUE)
    assert response.status_code == 200
    body = response.json()
    entries = body["results"]
    assert body["count"] == 4
    assert [e["id"] for e in entries] == [prod["id"], normal_old["id"], normal_new["id"], pre["id"]]
    assert [e["position"] for e in entries] == [1, 2, 3, 4]
    assert entries[0]["owner"] == "bob" and entries[0]["priority_class"] == "production"
    for entry in entries:
        assert entry["pending_reason"]["code"] == "NO_ROOM"
        assert entry["pending_reason"]["message"]
    assert blocker["id"] not in [e["id"] for e in entries]
    # Each entry shows its priority and the parts it is made of, highest first.
    totals = [e["priority"]["total"] for e in entries]
    assert totals == sorted(totals, reverse=True)
    for entry in entries:
        factors = entry["priority"]["factors"]
        assert set(factors) == {"fair_share", "age", "class", "size", "short"}
        assert entry["priority"]["total"] == pytest.approx(sum(f["weighted"] for f in factors.values()), abs=0.01)
    assert entries[0]["priority"]["factors"]["class"]["value"] == 1.0
    assert entries[-1]["priority"]["factors"]["class"]["value"] == 0.0
    # The whole queue is counted, with what holds GPUs within and beyond quotas.
    cluster = body["summary"].pop("cluster")
    assert body["summary"] == {
        "pending": 4,
        "pending_by_reason": {"NO_ROOM": 4},
        "running_within_quota": 1,
        "running_over_quota": 0,
        "gpus_over_quota": 0,
        "accounts_above_quota": [],
    }
    # Whether jobs can start now, as the nodes' list says it: the estimates are the last cycle's.
    assert cluster == {**api.get(NODES).json()["cluster"], "last_cycle_at": cluster["last_cycle_at"]} and cluster["usable"] is True

    # Positions count over the whole queue, not within a page.
    page = api.get(QUEUE, {"limit": 2, "offset": 2}).json()
    assert [(e["position"], e["id"]) for e in page["results"]] == [(3, normal_new["id"]), (4, pre["id"])]

    # The job that waits shows the same reason on its own page.
    detail = api.get(job_url(normal_new["id"])).json()
    assert detail["pending_reason"] == entries[2]["pending_reason"]
    assert detail["queue_position"] == 3
    assert detail["priority"]["factors"]["class"] == entries[2]["priority"]["factors"]["class"]
    listed = {j["id"]: j for j in api.get(JOBS).json()["results"]}
    assert listed[normal_new["id"]]["queue_position"] == 3
    assert listed[blocker["id"]]["queue_position"] is None and listed[blocker["id"]]["priority"] is None


@pytest.mark.usefixtures("classes_open")
def test_reads_show_what_the_last_cycle_stored(api: APIClient, submit: Any, sim: Any) -> None:
    blocker = submit(nodes=16, gpus_per_node=8)
    sim.cycle()
    planned = [submit(name="old", nodes=1, gpus_per_node=1)["id"], submit(name="prod", priority_class="production")["id"]]
    sim.cycle()
    before = {pk: api.get(job_url(pk)).json() for pk in planned}
    assert sorted(b["queue_position"] for b in before.values()) == [1, 2]
    assert all(b["priority"]["total"] > 0 for b in before.values())

    # Jobs submitted after the cycle: no cycle planned them, so they have no position, no priority, no estimate.
    fresh = submit(name="fresh", priority_class="production")
    assert (fresh["queue_position"], fresh["priority"], fresh["estimated_start"]) == (None, None, None)
    assert (fresh["estimate_kind"], fresh["reserved_nodes"], fresh["promised_start"]) == ("", [], None)
    assert fresh["pending_reason"]["code"] == "NEW"
    newer = submit(name="newer", nodes=1, gpus_per_node=1)

    # What the cycle stored is what every read shows, until the next cycle: nothing is worked out on a read.
    after = {pk: api.get(job_url(pk)).json() for pk in planned}
    assert after == before
    body = api.get(QUEUE).json()
    order = sorted(planned, key=lambda pk: before[pk]["queue_position"])
    assert [(e["id"], e["position"]) for e in body["results"]] == [(order[0], 1), (order[1], 2), (fresh["id"], None), (newer["id"], None)]
    for entry in body["results"][:2]:
        assert entry["priority"] == before[entry["id"]]["priority"]
        assert entry["estimate_kind"] == before[entry["id"]]["estimate_kind"]
    assert [e["priority"] for e in body["results"][2:]] == [None, None]
    assert body["summary"]["pending"] == 4 and body["summary"]["pending_by_reason"]["NEW"] == 2
    assert api.get(job_url(blocker["id"])).json()["queue_position"] is None

    sim.cycle()  # the next cycle plans them: the production job goes ahead of the normal ones
    positions = {e["id"]: e["position"] for e in api.get(QUEUE).json()["results"]}
    assert sorted(positions.values()) == [1, 2, 3, 4]
    assert positions[fresh["id"]] < positions[newer["id"]]
    assert api.get(job_url(fresh["id"])).json()["priority"]["factors"]["class"]["value"] == 1.0


def test_one_jobs_reads_do_not_grow_with_the_queue(api: APIClient, submit: Any, sim: Any) -> None:
    submit(nodes=16, gpus_per_node=8)
    sim.cycle()
    mine = submit(nodes=1, gpus_per_node=1)["id"]
    sim.cycle()
    short = count_queries(api, job_url(mine))
    for _ in range(30):
        submit(nodes=1, gpus_per_node=1)
    sim.cycle()
    assert count_queries(api, job_url(mine)) == short
    with CaptureQueriesContext(connection) as ctx:
        assert api.get(job_url(mine)).status_code == 200
    # Only the job's own row is read, never the queue.
    assert not [q for q in ctx.captured_queries if '"jobs_job"."state" = ' in q["sql"]]


def test_the_schema_names_what_an_estimate_means(db: None) -> None:
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    assert schema["EstimateKindEnum"]["enum"] == ["reserved", "planned", "after"]
    for name in ("Job", "JobDetail", "QueueEntry"):
        properties = schema[name]["properties"]
        assert {"estimate_kind", "reserved_nodes", "promised_start", "estimated_start"} <= set(properties), name
    assert schema["QueueEntry"]["properties"]["position"]["nullable"] is True


def test_queue_entries_say_what_an_elastic_job_or_a_gpu_slice_asks(api: APIClient, submit: Any, sim: Any) -> None:
    submit(nodes=16, gpus_per_node=8)
    sim.cycle()
    elastic = submit(name="elastic", nodes=None, min_nodes=2, max_nodes=4, gpus_per_node=8)
    whole = submit(name="whole", nodes=1, gpus_per_node=8)
    sim.cycle()
    entries = {e["id"]: e for e in api.get(QUEUE).json()["results"]}
    assert {k: entries[elastic["id"]][k] for k in ("nodes", "min_nodes", "max_nodes", "gpus_per_node")} == {
        "nodes": 4,
        "min_nodes": 2,
        "max_nodes": 4,
        "gpus_per_node": 8,
    }
    assert {k: entries[whole["id"]][k] for k in ("min_nodes", "max_nodes", "gpu_fraction", "gpu_memory_gb", "gpu_isolation")} == {
        "min_nodes": None,
        "max_nodes": None,
        "gpu_fraction": None,
        "gpu_memory_gb": None,
        "gpu_isolation": False,
    }


def test_queue_is_empty_when_nothing_waits(api: APIClient, submit: Any, sim: Any) -> None:
    submit()
    sim.cycle()
    assert api.get(QUEUE).json()["count"] == 0


# --- query counts ------------------------------------------------------------------------------


def count_queries(client: APIClient, url: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    return len(ctx.captured_queries)


@pytest.mark.parametrize("url", [JOBS + "?limit=100", QUEUE + "?limit=100", NODES + "?limit=100"])
def test_list_queries_do_not_grow_with_the_number_of_jobs(api: APIClient, submit: Any, sim: Any, url: str) -> None:
    def add(n: int) -> None:
        for _ in range(n):
            submit(nodes=1, gpus_per_node=8)

    add(2)
    sim.cycle()  # some jobs now hold allocations on nodes
    add(2)
    few = count_queries(api, url)
    add(16)
    sim.cycle()
    add(4)
    many = count_queries(api, url)
    assert many == few, f"{url}: {few} queries for 4 jobs, {many} for 24"


def test_detail_queries_are_bounded(api: APIClient, submit: Any, sim: Any, django_assert_max_num_queries: Any) -> None:
    job = submit()
    sim.cycle()
    sim.advance(2)
    # The token, the job with its owner and team, its events, its dependencies, the attempts whose output was kept, the
    # telemetry summary.
    with django_assert_max_num_queries(6):
        assert api.get(job_url(job["id"])).status_code == 200


# --- schema and docs ---------------------------------------------------------------------------


def test_openapi_schema_describes_the_api(db: None) -> None:
    response = APIClient().get("/api/schema/", {"format": "json"})
    assert response.status_code == 200
    schema = response.json()
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for path in ("/api/v1/jobs/", "/api/v1/jobs/{id}/", "/api/v1/jobs/{id}/cancel/", "/api/v1/nodes/", "/api/v1/queue/"):
        assert path in paths, path
    assert "post" in paths["/api/v1/jobs/"]
    submit_schema = schema["components"]["schemas"]["JobSubmitRequest"]
    assert {"name", "image", "command", "wall_time_seconds"} <= set(submit_schema["required"])
    # `nodes` is required unless an elastic job gives max_nodes (then it is max_nodes), and with gpus_per_node unless a
    # GPU slice is asked (then 1, their only value): the schema says so in words.
    assert "required unless max_nodes is given, or a GPU slice is asked" in submit_schema["properties"]["nodes"]["description"]
    assert "required unless a GPU slice is asked" in submit_schema["properties"]["gpus_per_node"]["description"]
    assert not {"nodes", "gpus_per_node"} & set(submit_schema["required"])
    assert {"min_nodes", "max_nodes", "gpu_fraction", "gpu_memory_gb", "gpu_isolation"} <= set(submit_schema["properties"])


def test_api_docs_render_for_a_logged_in_user(user: Any) -> None:
    client = APIClient()
    client.force_login(user)
    response = client.get("/api/docs/")
    assert response.status_code == 200
    assert b"swagger" in response.content.lower()


# --- logs --------------------------------------------------------------------------------------


def test_logs_of_a_rank(api: APIClient, other_api: APIClient, submit: Any, sim: Any) -> None:
    job = submit(nodes=2)
    url = job_url(job["id"]) + "logs/"
    response = api.get(url)
    assert response.status_code == 409 and "has not started" in response.json()["detail"]
    sim.cycle()
    node = api.get(job_url(job["id"])).json()["assigned_nodes"][1]
    body = api.get(url, {"rank": 1, "tail": 5}).json()
    assert body["rank"] == 1 and body["attempt"] == 1
    assert f"rank 1 on {node}" in body["logs"]
    assert api.get(url, {"tail": 1}).json()["logs"].count("\n") == 1
    bad = api.get(url, {"rank": 2})
    assert bad.status_code == 400 and "0 to 1" in bad.json()["rank"][0]
    assert api.get(url, {"tail": 0}).json() == {"tail": ["At least the last line (1); leave tail out for the last 500."]}
    assert api.get(url, {"tail": 100_001}).json() == {"tail": ["At most the last 100,000 lines; leave tail out and follow to read it all."]}
    takes = "Unknown query parameter; GET /api/v1/jobs/{id}/logs/ takes attempt, follow, format, rank, tail."
    assert api.get(url, {"lines": 3}).json() == {"lines": [takes]}
    assert other_api.get(url).status_code == 404


def test_logs_as_text_for_a_client_that_accepts_text(api: APIClient, submit: Any, sim: Any) -> None:
    """`Accept: text/plain` (curl's -H, a streaming client) was a 406, though text is what `follow` sends."""
    job = submit(nodes=2)
    url = job_url(job["id"]) + "logs/"
    refused = api.get(url, HTTP_ACCEPT="text/plain")
    assert refused.status_code == 409 and refused["Content-Type"] == "application/json"  # an error is JSON
    assert "has not started" in refused.json()["detail"]
    sim.cycle()
    text = api.get(url, {"rank": 1}, HTTP_ACCEPT="text/plain")
    assert text.status_code == 200 and text["Content-Type"] == "text/plain; charset=utf-8"
    assert text.content.decode() == api.get(url, {"rank": 1}).json()["logs"]
    assert api.get(url, {"rank": 1, "format": "text"}, HTTP_ACCEPT="application/json").content == text.content
    followed = api.get(url, {"follow": "true"}, HTTP_ACCEPT="text/plain")
    assert followed.status_code == 200 and followed["Content-Type"] == "text/plain; charset=utf-8"
    bad = api.get(url, {"rank": 5}, HTTP_ACCEPT="text/plain")
    assert bad.status_code == 400 and "0 to 1" in bad.json()["rank"][0]


def test_the_logs_of_an_ended_attempt_say_how_it_ended_as_slurms_last_line_does(api: APIClient, submit: Any, sim: Any) -> None:
    """A timed-out job's output stopped mid-epoch with nothing to say why."""
    job = submit(nodes=1, wall_time_seconds=60, simulate={"duration_seconds": 600})
    url = job_url(job["id"]) + "logs/"
    sim.cycle()
    sim.advance(2)
    assert api.get(url).json()["ended"] == ""  # it runs
    sim.advance(70)
    sim.cycle()
    detail = api.get(job_url(job["id"])).json()
    assert detail["state"] == "TIMED_OUT"
    ended = api.get(url).json()["ended"]
    assert ended.startswith("timed out at 20") and ended.endswith(" UTC: Stopped: wall time of 1 min reached."), ended
    # The text alone stays the job's own output.
    assert "timed out" not in api.get(url, HTTP_ACCEPT="text/plain").content.decode()


def test_the_logs_of_a_job_cancelled_before_it_ran_say_it_never_started(api: APIClient, submit: Any, sim: Any) -> None:
    """It read "has not started yet", as if it still might."""
    job = submit(nodes=2)
    assert api.post(job_url(job["id"]) + "cancel/").status_code == 200
    for query in ({}, {"follow": "true"}):
        response = api.get(job_url(job["id"]) + "logs/", query)
        assert response.status_code == 409
        assert response.json()["detail"] == f"Job {job['id']} never started (cancelled before it ran): it has no logs."


def test_the_api_root_lists_every_resource_and_each_link_answers(api: APIClient, admin_api: APIClient) -> None:
    """It listed jobs and nodes alone, hiding the queue, usage, quotas, tokens and the audit trail."""
    root = api.get("/api/v1/")
    assert root.status_code == 200
    links = root.json()
    assert set(links) >= {"jobs", "nodes", "queue", "notifications", "usage", "usage/report", "quotas/users", "tokens", "audit", "schema"}
    assert links["queue"] == "http://testserver/api/v1/queue/" and links["docs"] == "http://testserver/api/docs/"
    for name, url in links.items():
        if name != "auth/token":  # POST only: it exchanges a password for a token
            assert admin_api.get(url).status_code == 200, name


def test_a_submit_with_fields_of_the_answer_says_they_are_read_only(api: APIClient, sim: Any) -> None:
    refused = api.post("/api/v1/jobs/", job_payload(state="RUNNING", id=7, colour="red"), format="json")
    assert refused.status_code == 400
    assert refused.json() == {
        "colour": ["Unknown field."],
        "id": ["Read-only: it is in the answer, and no request sets it."],
        "state": ["Read-only: it is in the answer, and no request sets it."],
    }
    assert not Job.objects.exists()


def test_a_submit_to_the_url_without_its_slash_is_redirected_as_the_same_post(api: APIClient, sim: Any) -> None:
    """A 301 is followed as a GET: `requests.post(".../api/v1/jobs", json=job)` got the job list (200) and queued nothing."""
    answer = api.post("/api/v1/jobs", job_payload(name="no-slash"), format="json")
    assert (answer.status_code, answer["Location"]) == (308, "/api/v1/jobs/")
    followed = api.post("/api/v1/jobs", job_payload(name="no-slash"), format="json", follow=True)
    assert followed.status_code == 201 and followed.json()["name"] == "no-slash"
    assert Job.objects.filter(name="no-slash").count() == 1
    # A read is redirected alike, with its query.
    assert api.get("/api/v1/jobs?name=no-slash")["Location"] == "/api/v1/jobs/?name=no-slash"
