"""`POST /api/v1/jobs/estimate/` and `scheduler.estimate.job_estimate`: a submit's what-if, the cycle's own plan, nothing written."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs.models import Job
from jobs.states import JobState
from quotas.models import Team
from scheduler.estimate import job_estimate
from tests.conftest import SimHarness, job_payload
from tests.quotas.factories import QuotaFactory

pytestmark = pytest.mark.django_db

ESTIMATE = "/api/v1/jobs/estimate/"


def estimate(api: APIClient, **overrides: Any) -> dict[str, Any]:
    response = api.post(ESTIMATE, job_payload(**overrides), format="json")
    assert response.status_code == 200, response.content
    return response.json()


def statuses(body: dict[str, Any]) -> dict[str, str]:
    return {check["name"]: check["status"] for check in body["limits"]}


def test_on_an_empty_cluster_it_starts_now_and_nothing_is_written(api: APIClient, sim: SimHarness) -> None:
    with CaptureQueriesContext(connection) as queries:
        body = estimate(api)
    writes = [q["sql"] for q in queries if q["sql"].split()[0].upper() in ("INSERT", "UPDATE", "DELETE")]
    assert writes == []
    assert not Job.objects.exists()
    assert body["accepted"] is True and body["fits_limits"] is True and body["problems"] == {}
    assert body["start"]["kind"] == "now" and body["start"]["preempts"] == 0
    assert statuses(body) == {"cluster": "ok", "wall_time": "ok"}


def test_an_array_is_estimated_by_its_first_element_as_sbatch_test_only_array(api: APIClient, sim: SimHarness) -> None:
    """It was refused, sending the client to /jobs/array/, which does not estimate, while validate took the array."""
    body = estimate(api, nodes=1, gpus_per_node=1, array="3-9:2")
    assert (body["count"], body["array_index"]) == (4, 3)
    assert body["accepted"] is True and body["start"]["kind"] == "now"
    assert not Job.objects.exists()
    assert (estimate(api)["count"], estimate(api)["array_index"]) == (1, None)
    refused = api.post(ESTIMATE, job_payload(array="3-1"), format="json")
    assert refused.status_code == 400 and "ends before it starts" in " ".join(refused.json()["array"])


def test_an_elastic_job_is_told_how_many_of_its_nodes_it_would_start_on_now(api: APIClient, sim: SimHarness, submit: Any) -> None:
    submit(nodes=13, gpus_per_node=8, simulate={"duration_seconds": 3600})
    sim.cycle()
    body = estimate(api, nodes=None, min_nodes=2, max_nodes=8)
    assert body["start"]["kind"] == "now"
    assert (body["start"]["nodes"], body["start"]["min_nodes"], body["start"]["max_nodes"]) == (3, 2, 8)  # 3 nodes are free
    fixed = estimate(api, nodes=2)["start"]
    assert (fixed["nodes"], fixed["min_nodes"], fixed["max_nodes"]) == (2, None, None)
    waits = estimate(api, nodes=None, min_nodes=4, max_nodes=8)["start"]
    assert waits["kind"] != "now" and (waits["nodes"], waits["min_nodes"], waits["max_nodes"]) == (None, None, None)


def test_each_limit_it_breaks_is_named_at_once(api: APIClient, user: Any, sim: SimHarness) -> None:
    QuotaFactory(user=user, max_gpus=8, max_wall_time_seconds=3600, max_node_hours_per_job=1.5)
    body = estimate(api, nodes=2, wall_time_seconds=7200)
    assert body["accepted"] is False and body["start"]["kind"] == "unknown"
    # GPUs, wall time and node-hours per job, all in one answer.
    assert "allows at most 8 at once" in body["problems"]["nodes"][0]
    assert "allows at most 1.5 node-hours per job" in body["problems"]["nodes"][1]
    assert "allows at most 3600 s (1 h) per job" in body["problems"]["wall_time_seconds"][0]
    assert statuses(body) == {"cluster": "ok", "wall_time": "refused", "gpus": "refused", "node_hours": "refused"}
    texts = " ".join(check["text"] for check in body["limits"])
    assert "GPUs: 16 at once; your quota (user alice) allows 8" in texts.replace(user.username, "alice")

    # Preemptible, it may borrow beyond the quota: accepted, and it waits for nothing on an idle cluster.
    body = estimate(api, nodes=2, wall_time_seconds=1800, preemptible=True)
    assert body["accepted"] is True and body["start"]["kind"] == "now"
    assert statuses(body)["gpus"] == "waits"


def test_larger_than_the_cluster_is_refused_with_the_cluster_named(api: APIClient, sim: SimHarness) -> None:
    body = estimate(api, nodes=17)
    assert body["accepted"] is False
    assert "the whole cluster has 16 such nodes" in body["problems"]["nodes"][0]
    assert statuses(body)["cluster"] == "refused"


def test_gpus_in_use_and_a_spent_budget_make_it_wait_with_the_policys_reason(
    api: APIClient, user: Any, sim: SimHarness, submit: Any
) -> None:
    QuotaFactory(user=user, max_gpus=16, node_hours_per_period=100)
    submit(nodes=2, simulate={"duration_seconds": 3000})
    sim.cycle()
    body = estimate(api, nodes=1)
    assert body["accepted"] is True and body["fits_limits"] is False
    assert statuses(body)["gpus"] == "waits"
    assert body["start"]["reason_code"] == "QUOTA_GPUS"
    assert body["start"]["kind"] == "planned"  # when its owner's running job ends by its wall time

    # More than is left beside the running job, within a whole period's budget: it waits for the budget, not refused.
    body = estimate(api, nodes=1, wall_time_seconds=99 * 3600)
    assert body["accepted"] is True and statuses(body)["budget"] == "waits"


def test_a_test_only_job_the_grant_made_room_for_says_what_to_submit_not_which_job_to_update(
    api: APIClient, admin_api: APIClient, user: Any, sim: SimHarness, submit: Any
) -> None:
    # Past the quota's budget of 1, within it with 1.5 added for this period: the reason named `muster update 78 -t 30m`
    # (78: the id the job would get, nothing that exists) and said to cancel it.
    QuotaFactory(user=user, node_hours_per_period=1)
    grant = {"node_hours": 1.5, "reason": "one big run"}
    assert admin_api.post(f"/api/v1/quotas/users/{user.username}/grant/", grant, format="json").status_code == 201
    submit(nodes=1, wall_time_seconds=3600, simulate={"duration_seconds": 3000})
    sim.cycle()
    body = estimate(api, nodes=2, wall_time_seconds=3600)
    reason = body["start"]["reason"]
    assert body["start"]["reason_code"] == "BUDGET"
    assert "Only the 1.5 node-hours added for this period fit it" in reason
    assert reason.endswith("To be sure it runs, submit it shorter (-t 30m fits a period's budget), or smaller.")
    assert "muster update" not in reason and "cancel" not in reason


def test_a_job_needing_more_than_a_whole_budget_reads_refused_on_the_budget_line_as_in_the_answer(
    api: APIClient, user: Any, sim: SimHarness
) -> None:
    # The walk's case: a budget of 6 node-hours, `muster submit -N 2 -G 8 -t 4h --test-only` (8 node-hours).
    QuotaFactory(user=user, node_hours_per_period=6)
    body = estimate(api, nodes=2, gpus_per_node=8, wall_time_seconds=4 * 3600)
    assert body["accepted"] is False and "could never start" in " ".join(body["problems"]["wall_time_seconds"])
    assert statuses(body)["budget"] == "refused"  # not "waits": it would never run
    line = next(check["text"] for check in body["limits"] if check["name"] == "budget")
    assert "6 node-hours a" in line and "could never start" in line
    # Within the whole budget it is not refused.
    body = estimate(api, nodes=1, gpus_per_node=8, wall_time_seconds=4 * 3600)
    assert body["accepted"] is True and statuses(body)["budget"] == "ok"


def test_gpus_borrowed_beyond_the_quota_do_not_count_against_it(api: APIClient, user: Any, sim: SimHarness, submit: Any) -> None:
    # 16 GPUs borrowed by a preemptible job beyond a quota of 8: the quota itself is free, as the cycle counts it.
    QuotaFactory(user=user, max_gpus=8)
    submit(nodes=2, preemptible=True, priority_class="preemptible", simulate={"duration_seconds": 3000})
    sim.cycle()
    assert Job.objects.get(nodes=2).over_quota
    body = estimate(api, nodes=1)
    assert statuses(body)["gpus"] == "ok" and body["start"]["kind"] == "now"
    (line,) = [c["text"] for c in body["limits"] if c["name"] == "gpus"]
    assert line.endswith("allows 8, 0 in use now (and 16 borrowed beyond it).")


def test_a_full_cluster_gives_the_start_the_cycle_then_stores(api: APIClient, user: Any, other_user: Any, sim: SimHarness) -> None:
    other = APIClient()
    other.force_authenticate(other_user)
    whole = other.post("/api/v1/jobs/", job_payload(nodes=16, wall_time_seconds=5400, simulate={"duration_seconds": 9000}), format="json")
    assert whole.status_code == 201
    sim.cycle()
    sim.advance(5)
    # Two more wait ahead of ours: one as large as the cluster, one small.
    for nodes in (16, 3):
        assert other.post("/api/v1/jobs/", job_payload(nodes=nodes, wall_time_seconds=3600), format="json").status_code == 201
    sim.cycle()

    spec_payload = job_payload(nodes=4, wall_time_seconds=1800)
    body = estimate(api, nodes=4, wall_time_seconds=1800)
    assert body["accepted"] is True and body["start"]["kind"] == "planned"
    assert body["start"]["reason_code"] in ("NO_ROOM", "RESERVATION")

    # Submitted for real and planned by a cycle at the same instant, it gets the start the estimate gave.
    response = api.post("/api/v1/jobs/", spec_payload, format="json")
    assert response.status_code == 201
    sim.cycle()
    job = Job.objects.get(pk=response.json()["id"])
    assert job.state == JobState.PENDING
    assert job.estimate_kind == body["start"]["kind"]
    assert job.estimated_start is not None
    assert job.estimated_start.isoformat().replace("+00:00", "Z") == body["start"]["at"]
    assert job.queue_position == body["start"]["position"]


def test_the_service_matches_the_cycle_at_the_same_instant(user: Any, sim: SimHarness, submit: Any) -> None:
    submit(nodes=16, simulate={"duration_seconds": 9000})
    sim.cycle()
    sim.advance(60)
    spec = {**job_payload(nodes=2), "priority_class": "normal", "team": None}
    spec.pop("name"), spec.pop("image"), spec.pop("command")
    result = job_estimate(owner=user, spec=spec, now=sim.clock.now)
    # The running job holds every node until its wall time (an hour from its placement).
    placed = Job.objects.get().scheduled_at
    assert result.start.kind == "planned" and result.start.at == placed + timedelta(hours=1)


def test_the_estimate_validates_like_a_submit(api: APIClient, sim: SimHarness) -> None:
    bad = job_payload(image="Not A Ref", nodes=0, wall_time_seconds=10**9, surprise=1)
    response = api.post(ESTIMATE, bad, format="json")
    assert response.status_code == 400
    # Every mistake at once: the unknown field does not hide the others' (nor turn nodes=0 into "required").
    assert set(response.json()) == {"image", "nodes", "wall_time_seconds", "surprise"}
    assert "required" not in str(response.json()["nodes"])
    # The very answer a submit of the same body gets: one serializer, not a copy.
    assert api.post("/api/v1/jobs/", bad, format="json").json() == response.json()
    assert not Job.objects.exists()


def test_a_team_the_user_is_not_in_is_refused(api: APIClient, sim: SimHarness) -> None:
    Team.objects.create(name="vision")
    response = api.post(ESTIMATE, job_payload(team="vision"), format="json")
    assert response.status_code == 400


def test_the_budget_line_agrees_with_the_cycle_on_committed_hours_and_on_a_share_of_a_node(
    api: APIClient, user: Any, sim: SimHarness, submit: Any
) -> None:
    # 30 node-hours a period; a running 2-node job may still use 29 of them by its wall time.
    QuotaFactory(user=user, node_hours_per_period=30)
    submit(nodes=2, wall_time_seconds=52200, simulate={"duration_seconds": 52200})
    sim.cycle()
    # A whole node for 2 hours needs 2.0 node-hours: 1 is left beyond what is committed, so it waits for
    # the budget, in the limit's line as in the start the cycle gives it.
    body = estimate(api, nodes=1, gpus_per_node=8, wall_time_seconds=7200)
    assert statuses(body)["budget"] == "waits" and body["fits_limits"] is False
    assert body["start"]["reason_code"] == "BUDGET"
    line = next(check["text"] for check in body["limits"] if check["name"] == "budget")
    assert "may use 2.0 node-hours (1 node x 2.00 h)" in line and "29.0 of it committed to running jobs, 1.0 for new jobs" in line
    # One GPU of eight for 2 hours is charged a quarter of a node-hour (the ledger's share): it fits, and starts now.
    body = estimate(api, nodes=1, gpus_per_node=1, wall_time_seconds=7200)
    assert statuses(body)["budget"] == "ok" and body["start"]["kind"] == "now"
    assert "(1 of a node's 8 GPUs x 2.00 h)" in next(c["text"] for c in body["limits"] if c["name"] == "budget")


def test_a_job_that_would_shrink_an_elastic_job_once_other_work_ends_expects_to_start_then(
    api: APIClient, sim: SimHarness, submit: Any, classes_open: None
) -> None:
    """--test-only of a production job needing 12 of the 16 nodes, beside a production job on 10 that ends in an hour
    and an elastic job of a lower class on 6 (least 2): the cycle shrinks the elastic job for the 2 still short then,
    but the estimate read the elastic job's end at full size, 5 hours on."""
    plain = submit(nodes=10, priority_class="production", wall_time_seconds=3600, simulate={"duration_seconds": 3600})["id"]
    flexible = submit(nodes=None, min_nodes=2, max_nodes=6, wall_time_seconds=5 * 3600, simulate={"duration_seconds": 5 * 3600})["id"]
    sim.cycle()
    sim.advance(700)  # both running, the elastic job past the minimum run time
    assert {Job.objects.get(pk=pk).state for pk in (plain, flexible)} == {JobState.RUNNING}
    plain_ends = Job.objects.get(pk=plain).started_at + timedelta(seconds=3600)
    body = estimate(api, nodes=12, priority_class="production", wall_time_seconds=3600)
    start = body["start"]
    assert start["kind"] == "planned", start
    assert abs(datetime.fromisoformat(start["at"]) - plain_ends) <= timedelta(seconds=60), (start["at"], plain_ends)
    assert f"It may shrink elastic job {flexible} for the nodes it lacks from " in start["reason"]
