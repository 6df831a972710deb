"""Queue scenarios end to end: REST API, PostgreSQL, the simulated cluster and a clock the test moves.

Each test tells a story a user would notice: whose jobs start when GPUs free up, when a big
gang starts despite a stream of small jobs, what a preemption looks like, why a job waits
for budget. Everything, submit times included, runs on the harness clock (`timezone.now` is
the sim clock), so what the API shows is what the cycle decided.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.cluster.simulated import SimulatedCluster
from jobs.models import Allocation, Job
from jobs.selectors import job_assigned_nodes
from jobs.services import nodes_sync
from jobs.states import JobState
from quotas.models import Quota, Team
from tests.conftest import Clock, SimHarness, job_payload
from tests.quotas.factories import TeamFactory

JOBS = "/api/v1/jobs/"
QUEUE = "/api/v1/queue/"
# Mid-month, so no test crosses a budget period.
START = datetime(2026, 3, 11, 9, 0, tzinfo=UTC)
# Seconds between cycles where a test steps the clock in a loop.
STEP = 20


@pytest.fixture
def world(require_postgres: None, db: None, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Callable[..., SimHarness]:
    """Builds a simulated cluster of any size on a clock at START; `timezone.now` follows that clock."""
    clock = Clock(START)
    monkeypatch.setattr(timezone, "now", clock)
    settings.TIME_ZONE = "UTC"
    settings.MUSTER_SIM_START_SECONDS = 1.0
    settings.MUSTER_SIM_GPUS_PER_NODE = 8

    def build(nodes: int = 16, racks: int = 2) -> SimHarness:
        settings.MUSTER_SIM_NODES = nodes
        settings.MUSTER_SIM_RACKS = racks
        cluster = SimulatedCluster.from_settings()
        cluster.clock = clock
        nodes_sync(cluster_nodes=cluster.list_nodes())
        return SimHarness(clock=clock, cluster=cluster)

    return build


def post(client: APIClient, **overrides: Any) -> dict[str, Any]:
    response = client.post(JOBS, job_payload(**overrides), format="json")
    assert response.status_code == 201, response.content
    return response.json()


def get(client: APIClient, job_id: int) -> dict[str, Any]:
    response = client.get(f"{JOBS}{job_id}/")
    assert response.status_code == 200, response.content
    return response.json()


def queue(client: APIClient) -> dict[str, Any]:
    response = client.get(QUEUE, {"limit": 500})
    assert response.status_code == 200, response.content
    return response.json()


def transitions(job: dict[str, Any]) -> list[str]:
    return [e["to_state"] for e in job["events"]]


def nodes_held() -> Counter[str]:
    """Whole nodes held by each user's live jobs."""
    held: Counter[str] = Counter()
    for (owner,) in Allocation.objects.filter(released_at__isnull=True).values_list("job__owner__username"):
        held[owner] += 1
    return held


def parse(ts: str | None) -> datetime | None:
    return None if ts is None else datetime.fromisoformat(ts.replace("Z", "+00:00"))


def owners(job_ids: list[int]) -> list[str]:
    by_id = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "owner__username"))
    return [by_id[pk] for pk in job_ids]


def pending_owners() -> Counter[str]:
    return Counter(Job.objects.filter(state=JobState.PENDING).values_list("owner__username", flat=True))


# --- fair share ----------------------------------------------------------------------------------


def test_fair_share_gives_freed_nodes_to_bob_until_he_holds_about_half(
    world: Any, api: APIClient, other_api: APIClient, settings: Any
) -> None:
    # Equal shares (no quota rows: weight 1 each) and the default weights: fair share 1000, age 500 at a
    # week. A half-life short against the jobs' run times makes fair share follow what each user holds
    # now, so the split settles within minutes of simulated time instead of days.
    settings.MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS = 20.0
    sim = world(16)
    for i in range(40):
        post(api, name=f"sweep-{i}", nodes=1, simulate={"duration_seconds": 80 + 10 * (i % 16)})
    sim.cycle()
    assert nodes_held() == {"alice": 16}
    sim.advance(40)
    bob = [post(other_api, name=f"bob-{i}", nodes=1, simulate={"duration_seconds": 120 + 10 * (i % 7)})["id"] for i in range(30)]
    sim.cycle()

    # The cluster is full of alice's jobs. Bob's are behind none of hers, although hers are older:
    # alice has used the whole cluster, bob nothing, and fair share outweighs age.
    entries = queue(other_api)["results"]
    assert [e["owner"] for e in entries] == ["bob"] * 30 + ["alice"] * 24
    first_bob, first_alice = entries[0], entries[30]
    assert first_bob["id"] == bob[0]
    assert first_bob["pending_reason"]["code"] == "NO_ROOM"
    assert first_bob["priority"]["factors"]["fair_share"]["value"] == 1.0
    assert first_alice["priority"]["factors"]["fair_share"]["value"] < 0.5
    assert first_alice["priority"]["factors"]["age"]["weighted"] > first_bob["priority"]["factors"]["age"]["weighted"]
    assert first_bob["priority"]["total"] > first_alice["priority"]["total"]
    assert get(other_api, bob[0])["queue_position"] == 1

    # Alice's jobs end one every ~10 s. Until bob holds half the cluster, every freed node goes to bob.
    reached_half = False
    contended: list[int] = []
    for _ in range(40):
        report = sim.advance(10)
        placed = owners(report.placed)
        held = nodes_held()["bob"]
        if not reached_half:
            assert set(placed) <= {"bob"}, f"alice got a node while bob held {held} and waited"
            reached_half = held >= 8
        elif set(pending_owners()) == {"alice", "bob"}:
            contended.append(held)
    assert reached_half and len(contended) >= 20
    # From then on, while both wait, each holds about half: the nodes go to whoever has used less lately.
    assert min(contended) >= 5 and max(contended) <= 11, contended
    assert 6.5 <= sum(contended) / len(contended) <= 9.5, contended


# --- starvation: a reservation for a big gang ----------------------------------------------------


def test_starving_big_gang_gets_a_reservation_and_starts_by_its_promise(
    world: Any, api: APIClient, other_api: APIClient, settings: Any
) -> None:
    settings.MUSTER_STARVATION_SECONDS = 60
    sim = world(40, racks=4)
    t0 = sim.clock()
    # Bob keeps the 40 nodes busy with 1-node jobs whose wall times end one every 5 s from t0+200 s
    # (each finishes 5 s inside it); four end early. Six long jobs of his wait for nodes.
    fill = [
        post(other_api, name=f"fill-{i}", nodes=1, wall_time_seconds=200 + 5 * i, simulate={"duration_seconds": 195 + 5 * i})["id"]
        for i in range(36)
    ]
    for i in range(4):
        post(other_api, name=f"early-{i}", nodes=1, wall_time_seconds=40, simulate={"duration_seconds": 30})
    backlog = [
        post(other_api, name=f"backlog-{i}", nodes=1, wall_time_seconds=900, simulate={"duration_seconds": 800})["id"] for i in range(6)
    ]
    assert len(sim.cycle().placed) == 40
    sim.advance(1.5)
    sim.clock.advance(3.5)
    big = post(api, name="pretrain", nodes=32, wall_time_seconds=600, simulate={"duration_seconds": 60})["id"]
    sim.cycle()
    job = get(api, big)
    assert job["pending_reason"] == {"code": "NO_ROOM", "message": "Needs 32 whole nodes with 8 GPUs; 0 are free."}
    # Not a promise yet, but the plan of the queue by wall times already gives it an estimate.
    assert job["estimate_kind"] == "planned" and parse(job["estimated_start"]) >= sim.clock()

    # Not yet starving: the four nodes that free up go to bob's waiting jobs, one by one.
    report = sim.advance(35)
    assert sorted(report.placed) == backlog[:4]
    assert get(api, big)["estimate_kind"] == "planned"

    # Past the starvation threshold it gets a reservation: the 32 nodes that free up first by wall time.
    sim.advance(25)
    job = get(api, big)
    assert job["state"] == "PENDING" and job["pending_reason"]["code"] == "NO_ROOM"
    message = job["pending_reason"]["message"]
    assert message.startswith("Needs 32 whole nodes with 8 GPUs; 0 are free. Reserved 32 nodes (sim-node-")
    promise = parse(job["promised_start"])
    # The promise is held by wall times: the 32nd of them ends 200 + 5 x 31 s after the fill jobs were placed (wall time
    # counts from placement).
    assert promise == t0 + timedelta(seconds=355)
    assert message.endswith(f"; starts by {promise:%Y-%m-%d %H:%M} UTC.") and job["estimate_kind"] == "reserved"
    # Bob's jobs that ended ran 30 s, so his fill jobs have outlived what he usually runs: each is expected half-way
    # from now to its wall-time end, and the gang when the last of its nodes is expected to free up.
    now = sim.clock()
    assert parse(job["estimated_start"]) == now + (promise - now) / 2
    assert len(message) <= 500
    reserved = set(Allocation.objects.filter(job_id__in=fill[:32]).values_list("node__name", flat=True))
    named = set(re.findall(r"sim-node-\d{3}\b", message))
    assert len(reserved) == 32 and len(named) == 2 and named <= reserved  # the first and last reserved node
    # The reservation is stored on the job for the next cycles to keep: its nodes, and its start as the promise.
    assert set(job["reserved_nodes"]) == reserved

    # A stream of bob's jobs: long ones would hold a reserved node past the promise, short ones end before it.
    started_before: dict[int, str] = {}
    waited_behind: dict[str, set[int]] = {"long": set(), "short": set()}
    kinds: dict[int, str] = {}
    while sim.clock() + timedelta(seconds=STEP) <= promise:
        kinds[post(other_api, name="long", nodes=1, wall_time_seconds=900, simulate={"duration_seconds": 800})["id"]] = "long"
        kinds[post(other_api, name="short", nodes=1, wall_time_seconds=60, simulate={"duration_seconds": 30})["id"]] = "short"
        report = sim.advance(STEP)
        job = get(api, big)
        assert job["state"] == "PENDING", "started before every reserved node was free"
        # A backfilled job is admitted when now + its wall time <= the start, and its wall time counts
        # from that placement, so it can never move the promise later.
        assert parse(job["estimated_start"]) <= promise
        assert parse(job["promised_start"]) == promise
        for placed in report.placed:
            node = Allocation.objects.get(job_id=placed, released_at__isnull=True).node.name
            started_before[placed] = node
            if node in reserved:
                placed_job = Job.objects.get(pk=placed)
                end = placed_job.scheduled_at + timedelta(seconds=placed_job.wall_time_seconds)
                assert end <= promise, f"job {placed} on reserved {node} would end after the gang starts"
        entries = queue(other_api)["results"]
        # The gang's reservation, or one a starving short job of bob's got meanwhile (a single-node job starves after
        # its own threshold), possibly starting in this very cycle.
        holders = {big, *kinds, *backlog}
        for entry in entries:
            if entry["pending_reason"]["code"] == "RESERVATION" and entry["id"] in kinds:
                named = re.match(r"Behind the reservation for job (\d+), expected to start", entry["pending_reason"]["message"])
                assert named and int(named.group(1)) in holders, entry["pending_reason"]["message"]
                waited_behind[kinds[entry["id"]]].add(entry["id"])
    # Short jobs filled reserved nodes that would otherwise idle. No long job started: the only nodes
    # that freed up before the gang's start were reserved ones.
    backfilled = [pk for pk in started_before if kinds.get(pk) == "short"]
    assert backfilled and all(started_before[pk] in reserved for pk in backfilled)
    assert not [pk for pk in started_before if kinds.get(pk) == "long" or pk in backlog]
    # Both kinds were seen waiting behind the reservation: long ones all along, short ones once they
    # would no longer end before it.
    assert waited_behind["long"] and waited_behind["short"]

    # At the promised start, every reserved node is free and the gang starts.
    sim.clock.now = promise
    report = sim.cycle()
    assert big in report.placed
    job = get(api, big)
    assert job["state"] == "SCHEDULED" and parse(job["scheduled_at"]) <= promise
    assert set(job["assigned_nodes"]) == reserved


def test_a_gang_on_forty_nodes_is_placed_with_a_reason_that_fits(world: Any, api: APIClient) -> None:
    # Regression: "Placed on <40 node names>." is longer than the 500 characters of the reason
    # columns, and on PostgreSQL the failed write stopped every cycle.
    sim = world(40, racks=4)
    job_id = post(api, name="whole-cluster", nodes=40)["id"]
    assert sim.cycle().placed == [job_id]
    reason = get(api, job_id)["events"][1]["reason"]
    assert len(reason) <= 500 and reason.startswith("Placed on sim-node-000, ") and reason.endswith(", sim-node-039.")


# --- preemption ----------------------------------------------------------------------------------


@pytest.mark.usefixtures("classes_open")
def test_production_job_preempts_a_preemptible_class_job_which_then_resumes(
    world: Any, api: APIClient, other_api: APIClient, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    sim = world(16)
    sweep = post(api, name="sweep", nodes=16, priority_class="preemptible", simulate={"duration_seconds": 600})
    sim.cycle()
    sim.advance(1.5)
    sim.clock.advance(58.5)
    prod = post(other_api, name="serve-eval", nodes=4, priority_class="production", simulate={"duration_seconds": 100})["id"]
    # Younger than the minimum run time: not preempted yet, the production job waits.
    report = sim.cycle()
    assert report.preempted == [] and get(api, sweep["id"])["state"] == "RUNNING"
    reason = get(other_api, prod)["pending_reason"]
    assert reason["code"] == "NO_ROOM" and reason["message"].startswith("Needs 4 whole nodes with 8 GPUs; 0 are free. It may preempt")
    assert reason["message"].endswith("when they have run the minimum run time.")  # its estimate: then, not the sweep's end

    report = sim.advance(250)
    assert report.preempted == [sweep["id"]] and report.placed == [prod]
    job = get(api, sweep["id"])
    assert job["state"] == "PENDING" and job["submitted_at"] == sweep["submitted_at"]
    assert transitions(job) == ["PENDING", "SCHEDULED", "RUNNING", "PREEMPTED", "PENDING"]
    assert (
        job["events"][3]["reason"]
        == f"Preempted for job {prod}: it is of a lower priority class. The work since its start is lost (11.0 GPU-hours)."
    )
    assert job["pending_reason"] == {"code": "PREEMPTED", "message": f"Requeued after preemption by job {prod}."}
    assert not set(sim.cluster.observe_gangs()) - {(prod, 1)}, "the preempted gang's pods are gone"
    assert get(other_api, prod)["state"] == "SCHEDULED"

    sim.advance(1.5)
    job = get(api, sweep["id"])
    assert job["pending_reason"] == {"code": "NO_ROOM", "message": "Needs 16 whole nodes with 8 GPUs; 12 are free."}
    # The production job finishes; the preempted job starts again as attempt 2 in the same cycle, and succeeds.
    report = sim.advance(100)
    assert report.ended == {prod: JobState.SUCCEEDED} and report.placed == [sweep["id"]]
    sim.advance(1.5)
    sim.advance(600)
    job = get(api, sweep["id"])
    assert job["state"] == "SUCCEEDED" and job["attempt"] == 2 and job["restarts"] == 0 and job["exit_code"] == 0
    assert transitions(job) == ["PENDING", "SCHEDULED", "RUNNING", "PREEMPTED", "PENDING", "SCHEDULED", "RUNNING", "SUCCEEDED"]
    assert job["submitted_at"] == sweep["submitted_at"]


def test_job_within_quota_preempts_a_borrower_over_quota(
    world: Any, api: APIClient, other_api: APIClient, admin_api: APIClient, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    sim = world(16)
    response = admin_api.patch("/api/v1/quotas/users/alice/", {"max_gpus": 64}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["max_gpus"] == 64
    # Alice runs 8 nodes within her 64-GPU quota, and borrows the other 8 with a preemptible job.
    own = post(api, name="own", nodes=8, simulate={"duration_seconds": 3000})["id"]
    borrower = post(api, name="borrow", nodes=8, preemptible=True, simulate={"duration_seconds": 3000})["id"]
    extra = post(api, name="extra", nodes=1)["id"]
    sim.cycle()
    sim.advance(1.5)
    assert get(api, own)["over_quota"] is False
    job = get(api, borrower)
    assert job["state"] == "RUNNING" and job["over_quota"] is True
    assert job["events"][1]["reason"].endswith("(borrowing idle GPUs beyond its quota).")
    # A job of hers that may not borrow waits for her quota, not for room.
    assert get(api, extra)["pending_reason"] == {
        "code": "QUOTA_GPUS",
        "message": "64 of 64 GPUs of the quota of user alice are in use; this job needs 8.",
    }
    summary = queue(api)["summary"]
    assert (summary["running_within_quota"], summary["running_over_quota"], summary["gpus_over_quota"]) == (1, 1, 64)

    sim.clock.advance(58.5)
    claim = post(other_api, name="claim", nodes=4, simulate={"duration_seconds": 60})["id"]
    report = sim.cycle()
    assert report.preempted == [] and get(other_api, claim)["pending_reason"]["code"] == "NO_ROOM"
    # Past the minimum run time, bob's job (within his quota) takes the borrowed GPUs back.
    report = sim.advance(250)
    assert report.preempted == [borrower] and report.placed == [claim]
    job = get(api, borrower)
    assert transitions(job)[-2:] == ["PREEMPTED", "PENDING"]
    assert job["events"][-2]["reason"].startswith(
        f"Preempted for job {claim}: it runs beyond its owner's quota. The work since its start is lost ("
    )
    assert job["over_quota"] is False and job["pending_reason"]["code"] == "PREEMPTED"
    assert get(api, own)["state"] == "RUNNING" and get(api, own)["attempt"] == 1
    # On the nodes the borrower held (its last attempt's; back in the queue it holds none).
    assert job["assigned_nodes"] == []
    assert set(get(other_api, claim)["assigned_nodes"]) <= set(job_assigned_nodes(Job.objects.get(pk=borrower)))
    summary = queue(api)["summary"]
    assert (summary["running_within_quota"], summary["running_over_quota"], summary["gpus_over_quota"]) == (2, 0, 0)


def test_a_borrower_counts_within_its_owners_quota_once_the_quota_has_room_and_is_no_longer_taken_back(
    world: Any, api: APIClient, other_api: APIClient, admin_api: APIClient, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 0
    sim = world(2)
    assert admin_api.patch("/api/v1/quotas/users/alice/", {"max_gpus": 8}, format="json").status_code == 200
    own = post(api, name="own", nodes=1, simulate={"duration_seconds": 30})["id"]
    borrower = post(api, name="borrow", nodes=1, preemptible=True, simulate={"duration_seconds": 3000})["id"]
    sim.cycle()
    sim.advance(1.5)
    assert get(api, borrower)["over_quota"] is True
    # Her own job ends: her quota has room for the borrower, which is within it from the next cycle on.
    sim.advance(40)
    assert get(api, own)["state"] == "SUCCEEDED"
    job = get(api, borrower)
    assert job["state"] == "RUNNING" and job["over_quota"] is False
    assert job["events"][-1]["reason"] == (
        "Within its owner's quota now (the quota's GPUs came free): no longer taken back for others' jobs."
    )
    summary = queue(api)["summary"]
    assert (summary["running_within_quota"], summary["running_over_quota"]) == (1, 0)
    # Bob, within his quota, finds one node free and the other held within alice's quota: nothing is taken back.
    claim = post(other_api, name="claim", nodes=2, simulate={"duration_seconds": 60})["id"]
    report = sim.advance(5)
    assert report.preempted == [] and get(other_api, claim)["state"] == "PENDING"
    assert get(api, borrower)["attempt"] == 1


def test_with_preemption_for_fair_share_a_newcomer_stops_preemptible_work_of_a_user_far_over_their_share(
    world: Any, api: APIClient, other_api: APIClient, settings: Any
) -> None:
    settings.MUSTER_PREEMPTION_MIN_RUNTIME_SECONDS = 300
    # An hour's half-life, so two hours of the whole cluster put alice 1.5 shares over hers within the test.
    settings.MUSTER_FAIR_SHARE_HALF_LIFE_SECONDS = 3600
    sim = world(4, racks=1)
    hers = [
        post(api, name=f"sweep-{i}", nodes=1, preemptible=True, wall_time_seconds=36000, simulate={"duration_seconds": 36000})["id"]
        for i in range(4)
    ]
    sim.cycle()
    sim.advance(1.5)
    sim.clock.advance(2 * 3600)
    claim = post(other_api, name="eval", nodes=1, simulate={"duration_seconds": 60})["id"]
    # Off (the default): bob waits for room like anyone.
    report = sim.cycle()
    assert report.preempted == [] and get(other_api, claim)["pending_reason"]["code"] == "NO_ROOM"

    settings.MUSTER_FAIR_SHARE_PREEMPTION = True
    report = sim.cycle()
    assert len(report.preempted) == 1 and report.preempted[0] in hers and report.placed == [claim]
    victim = get(api, report.preempted[0])
    assert victim["events"][-2]["reason"].startswith(
        f"Preempted for job {claim}: its owner has used more than its fair share of the cluster, and the job's owner less. "
        "The work since its start is lost ("
    )
    assert victim["state"] == "PENDING" and victim["pending_reason"]["code"] == "PREEMPTED"
    # Her other jobs run on; and nothing of bob's is stopped for her in turn (she is the one over her share).
    assert all(get(api, j)["state"] == "RUNNING" for j in hers if j != victim["id"])
    sim.advance(1.5)
    report = sim.advance(30)
    assert report.preempted == [] and get(api, victim["id"])["state"] == "PENDING"


# --- budget --------------------------------------------------------------------------------------


def test_job_over_the_team_budget_waits_until_an_admin_raises_it(
    world: Any, user: Any, api: APIClient, other_api: APIClient, admin_api: APIClient
) -> None:
    sim = world(16)
    TeamFactory(name="vision").members.add(user)
    limits = {"max_gpus": None, "max_wall_time_seconds": None, "max_node_hours_per_job": None, "fair_share_weight": 1.0}
    response = admin_api.put("/api/v1/quotas/teams/vision/", {**limits, "node_hours_per_period": 0.5}, format="json")
    assert response.status_code == 200, response.content

    # A first job uses about 0.08 of the team's 0.5 node-hours.
    first = post(api, name="probe", nodes=1, wall_time_seconds=600, simulate={"duration_seconds": 300})
    assert first["team"] == "vision"
    sim.cycle()
    sim.advance(1.5)
    sim.advance(300)
    assert get(api, first["id"])["state"] == "SUCCEEDED"
    left = api.get("/api/v1/quotas/teams/vision/").json()["usage"]["node_hours_left"]
    assert left == pytest.approx(0.5 - 301 / 3600)  # placement to its pod's exit (1 s start-up, 300 s run), not to the cycle

    # The next may use 0.5 node-hours (2 nodes x 15 min): the cluster is empty, but the budget is not enough.
    big = post(api, name="finetune", nodes=2, wall_time_seconds=900, simulate={"duration_seconds": 60})["id"]
    small = post(api, name="eval", nodes=1, wall_time_seconds=600, simulate={"duration_seconds": 60})["id"]
    other = post(other_api, name="bob-job", nodes=4)["id"]
    report = sim.cycle()
    job = get(api, big)
    assert job["state"] == "PENDING" and job["pending_reason"]["code"] == "BUDGET"
    assert job["pending_reason"]["message"] == (
        "The budget of team vision has 0.42 node-hours left; this job may use 0.5 (2 nodes x 0.25 h). It renews 2026-04-01 00:00 UTC."
    )
    # It holds up nobody: a smaller job of the team and another user's job start.
    assert sorted(report.placed) == sorted([small, other])

    response = admin_api.patch("/api/v1/quotas/teams/vision/", {"node_hours_per_period": 10}, format="json")
    assert response.status_code == 200, response.content
    report = sim.advance(1)
    assert report.placed == [big]
    assert get(api, big)["state"] == "SCHEDULED"


def test_an_arrays_elements_beyond_a_lowered_limit_name_the_array_to_update(
    world: Any, user: Any, api: APIClient, admin_api: APIClient
) -> None:
    """Each element of an array past a lowered wall time named its own id (muster update 26 -t 4h): a hundred commands
    for a hundred elements. The array's id updates every pending element at once, and the reason says so."""
    sim = world(16)
    TeamFactory(name="vision").members.add(user)
    response = api.post(f"{JOBS}array/", job_payload(name="sweep", nodes=1, wall_time_seconds=8 * 3600, array="0-2"), format="json")
    assert response.status_code == 201, response.content
    array_id, elements = response.json()["array_id"], [job["id"] for job in response.json()["jobs"]]
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"max_wall_time_seconds": 4 * 3600}, format="json").status_code == 200
    sim.cycle()
    for element in elements:
        reason = get(api, element)["pending_reason"]
        assert reason["code"] == "JOB_LIMIT"
        assert reason["message"].endswith(
            f"To run sooner, shorten it: muster update {array_id} -t 4h, for every pending element of array {array_id}."
        )
    # Doing as it says (muster update ARRAY_ID sends this) starts them all in the next cycle.
    update = {"array_id": array_id, "wall_time_seconds": 4 * 3600}
    assert api.post(f"{JOBS}update-array/", update, format="json").status_code == 200
    assert sorted(sim.advance(1).placed) == elements


def test_jobs_alike_past_a_budget_lowered_under_them_each_name_themselves_to_update(
    world: Any, user: Any, api: APIClient, admin_api: APIClient
) -> None:
    """Two jobs of one shape waiting on one budget shared the reason's words, worked out for the first: the second said
    "shorten it (muster update <the first's id> -t 30m fits a period's budget)", which changed the other job."""
    sim = world(16)
    TeamFactory(name="vision").members.add(user)
    Quota.objects.create(team=Team.objects.get(name="vision"), node_hours_per_period=10)
    first = post(api, name="a", nodes=2, wall_time_seconds=4 * 3600)["id"]
    second = post(api, name="b", nodes=2, wall_time_seconds=4 * 3600)["id"]
    assert admin_api.patch("/api/v1/quotas/teams/vision/", {"node_hours_per_period": 1}, format="json").status_code == 200
    sim.cycle()
    for job_id in (first, second):
        message = get(api, job_id)["pending_reason"]["message"]
        assert f"shorten it (muster update {job_id} -t 30m fits a period's budget)" in message, message


def test_a_queued_job_beyond_a_per_job_limit_lowered_since_it_was_submitted_waits_until_it_is_raised(
    world: Any, user: Any, api: APIClient, other_api: APIClient, admin_api: APIClient
) -> None:
    """An admin lowers a team's wall time per job to stop long jobs: the ones queued under the old limit do not start
    (they did, for days, making the new limit a lie), they say why and how to run sooner, and hold up nobody."""
    sim = world(16)
    TeamFactory(name="vision").members.add(user)
    blocker = post(other_api, name="fill", nodes=16, wall_time_seconds=600, simulate={"duration_seconds": 30})["id"]
    sim.cycle()
    long = post(api, name="pretrain", nodes=2, wall_time_seconds=8 * 3600, simulate={"duration_seconds": 60})["id"]
    wide = post(api, name="sweep", nodes=4, wall_time_seconds=3 * 3600, simulate={"duration_seconds": 60})["id"]
    short = post(api, name="eval", nodes=1, wall_time_seconds=3600, simulate={"duration_seconds": 60})["id"]
    response = admin_api.patch(
        "/api/v1/quotas/teams/vision/", {"max_wall_time_seconds": 4 * 3600, "max_node_hours_per_job": 10}, format="json"
    )
    assert response.status_code == 200, response.content
    assert len(response.json()["warnings"]) == 2 and "it waits until the limit is raised again" in response.json()["warnings"][0]
    sim.advance(1.5)
    report = sim.advance(30)  # the filler ends: a whole cluster is free
    assert get(other_api, blocker)["state"] == "SUCCEEDED"
    assert report.placed == [short]
    waiting = get(api, long)
    assert waiting["state"] == "PENDING" and waiting["pending_reason"]["code"] == "JOB_LIMIT"
    assert waiting["pending_reason"]["message"] == (
        "Its wall time of 8 h is beyond the 4 h per job team vision allows now (lowered since it was submitted): it waits "
        f"until an admin raises the limit. To run sooner, shorten it: muster update {long} -t 4h."
    )
    assert waiting["estimated_start"] is None
    sweep = get(api, wide)["pending_reason"]
    assert sweep["code"] == "JOB_LIMIT" and sweep["message"] == (
        "It may use 12 node-hours, beyond the 10 per job team vision allows now (lowered since it was submitted): it waits "
        f"until an admin raises the limit. To run sooner, shorten it (muster update {wide} -t 2h30m fits), or cancel it and "
        "submit it on fewer nodes."
    )
    # Doing as it says (muster update sends this PATCH) starts it in the next cycle, in its place: no resubmit.
    assert api.patch(f"/api/v1/jobs/{wide}/", {"wall_time_seconds": 150 * 60}, format="json").status_code == 200
    assert sim.advance(1).placed == [wide]

    response = admin_api.patch(
        "/api/v1/quotas/teams/vision/", {"max_wall_time_seconds": None, "max_node_hours_per_job": None}, format="json"
    )
    assert response.status_code == 200, response.content
    report = sim.advance(1)
    assert report.placed == [long]
