"""Jobs push NCCL results with their own token: authenticated per job, bounded, all-or-nothing."""

from __future__ import annotations

import json
import time
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.services import token_create
from jobs.models import Job
from telemetry.models import NcclSample, TelemetryCredential
from telemetry.tokens import telemetry_pod_env, telemetry_token_for_job, telemetry_token_verify
from tests.job_token import pod, running_job

NCCL_TESTS_OUTPUT = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   1201 on sim-node-000 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  8 Group  0 Pid   1377 on sim-node-001 device  0 [0x18] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    37.52    0.00    0.00      0    36.43    0.00    0.00      0
sim-node-000:1201:1201 [0] NCCL INFO comm 0x55d1 rank 0 nranks 16 - Init COMPLETE
     1048576        262144     float     sum      -1    91.25   11.49   21.55      0    90.71   11.56   21.67      0
  8589934592    2147483648     float     sum      -1  24081.5  356.70  668.81      0  24073.5  356.82  669.04      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 230.178
#
"""


def inspector_record(busbw: float = 519.770464, **overrides: Any) -> dict[str, Any]:
    """A record as NCCL Inspector's profiler plugin writes it."""
    perf = {
        "coll": "AllReduce",
        "coll_sn": 1407,
        "coll_msg_size_bytes": 17179869184,
        "coll_exec_time_us": 61974,
        "coll_timing_source": "kernel_gpu",
        "coll_algobw_gbs": 277.210914,
        "coll_busbw_gbs": busbw,
    }
    perf.update(overrides)
    return {
        "header": {"id": "0x7f3a2c", "rank": 3, "n_ranks": 16, "nnodes": 2},
        "metadata": {"inspector_output_format_version": "v4.0", "dump_timestamp_us": int(time.time() * 1e6), "hostname": "sim-node-000"},
        "coll_perf": perf,
    }


@pytest.fixture
def running(submit, sim) -> Job:
    return running_job(submit, sim, seconds=600)


def push(client: APIClient, job: Job | int, body: Any, content_type: str = "application/json", query: str = "") -> Any:
    job_id = job if isinstance(job, int) else job.pk
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(f"/api/v1/jobs/{job_id}/telemetry/{query}", data=data, content_type=content_type)


# --- what is accepted ------------------------------------------------------------------------------


def test_inspector_records_are_stored(running) -> None:
    response = push(pod(running), running, {"records": [inspector_record(500.0), inspector_record(300.0)]})
    assert response.status_code == 201, response.content
    assert response.json() == {"job": running.pk, "stored": 2}
    samples = list(NcclSample.objects.filter(job=running))
    assert [s.busbw_gbs for s in samples] == [500.0, 300.0]
    first = samples[0]
    assert (first.coll, first.msg_size_bytes, first.exec_time_us, first.algbw_gbs, first.rank, first.attempt, first.format) == (
        "AllReduce", 17179869184, 61974.0, 277.210914, 3, 1, "inspector",
    )  # fmt: skip
    assert abs((first.at - timezone.now()).total_seconds()) < 60


def test_flat_records_a_list_and_json_lines_are_accepted(running) -> None:
    flat = {"coll": "AllGather", "coll_msg_size_bytes": 1024, "coll_exec_time_us": 12.5, "coll_algobw_gbs": 1.5, "coll_busbw_gbs": 2.5}
    assert push(pod(running), running, flat).status_code == 201
    assert push(pod(running), running, [flat, flat]).status_code == 201
    lines = "\n".join(json.dumps(inspector_record()) for _ in range(3)) + "\n"
    assert push(pod(running), running, lines, "application/x-ndjson").status_code == 201
    assert NcclSample.objects.filter(job=running).count() == 6


def test_nccl_tests_output_is_parsed(running) -> None:
    response = push(pod(running), running, NCCL_TESTS_OUTPUT, "text/plain")
    assert response.status_code == 201, response.content
    samples = list(NcclSample.objects.filter(job=running).order_by("id"))
    # Three result rows (the NCCL INFO line in between is skipped), out-of-place and in-place each.
    assert [(s.msg_size_bytes, s.in_place, s.busbw_gbs) for s in samples] == [
        (8, False, 0.0), (8, True, 0.0), (1048576, False, 21.55), (1048576, True, 21.67),
        (8589934592, False, 668.81), (8589934592, True, 669.04),
    ]  # fmt: skip
    assert {s.coll for s in samples} == {"all_reduce"} and samples[-1].algbw_gbs == 356.82 and samples[-1].exec_time_us == 24073.5


def test_nccl_tests_collective_from_the_query(running) -> None:
    output = NCCL_TESTS_OUTPUT.replace("# Collective test starting: all_reduce_perf\n", "")
    assert push(pod(running), running, output, "text/plain", "?coll=all_gather").status_code == 201
    assert set(NcclSample.objects.values_list("coll", flat=True)) == {"all_gather"}


# --- who may push -----------------------------------------------------------------------------------


def test_no_token_is_401_with_a_bearer_challenge(running) -> None:
    response = push(APIClient(), running, inspector_record())
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")
    assert not NcclSample.objects.exists()


@pytest.mark.parametrize("token", ["nonsense", "mtt.1.deadbeef", "mtt.x.y", "mtt.99999.00", "mtt.²."])
def test_a_bad_token_is_401(running, token) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert push(client, running, inspector_record()).status_code == 401
    assert not NcclSample.objects.exists()


def test_a_forged_digest_for_the_right_job_is_401(running) -> None:
    real = telemetry_token_for_job(running.pk)
    forged = real[:-4] + ("0000" if not real.endswith("0000") else "1111")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {forged}")
    assert push(client, running, inspector_record()).status_code == 401


def test_a_users_own_login_cannot_push(running, user) -> None:
    # Only the job's token writes telemetry: not the owner's API token, nor their browser session.
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_create(user=user, name='laptop').secret}")
    assert client.get(f"/api/v1/jobs/{running.pk}/").status_code == 200  # the token itself is good
    assert push(client, running, inspector_record()).status_code == 401
    session = APIClient()
    session.force_login(user)
    assert push(session, running, inspector_record()).status_code == 401
    assert not NcclSample.objects.exists()


@pytest.mark.parametrize("scheme", ["Bearer", "Token"])
def test_a_users_api_token_is_told_to_send_the_jobs_token_not_that_it_is_malformed(running, user, scheme) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {token_create(user=user, name='laptop').secret}")
    response = push(client, running, inspector_record())
    assert response.status_code == 401
    assert response.json() == {
        "detail": "A user's API token is not accepted here: push with the job's own token, MUSTER_TELEMETRY_TOKEN in "
        "every pod's environment ('Authorization: Bearer $MUSTER_TELEMETRY_TOKEN')."
    }
    assert not NcclSample.objects.exists()


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
def test_a_method_other_than_post_is_405_and_options_200_whoever_asks(running, user, method) -> None:
    """Every method answered 401 "Malformed telemetry token." to a user's API token, OPTIONS included."""
    with_user_token, with_job_token = APIClient(), APIClient()
    with_user_token.credentials(HTTP_AUTHORIZATION=f"Bearer {token_create(user=user, name='laptop').secret}")
    with_job_token.credentials(HTTP_AUTHORIZATION=f"Bearer {telemetry_token_for_job(running.pk)}")
    url = f"/api/v1/jobs/{running.pk}/telemetry/"
    for client in (with_user_token, with_job_token, APIClient()):
        response = getattr(client, method)(url)
        assert response.status_code == 405, response.content
        assert response.json() == {"detail": f"{method.upper()} is not taken here; {url} takes POST."}
        assert response["Allow"] == "POST, OPTIONS"
        options = client.options(url)
        assert options.status_code == 200 and options.json()["name"]
    assert not NcclSample.objects.exists()


def test_a_jobs_token_cannot_write_another_jobs_telemetry(running, submit, sim) -> None:
    other = Job.objects.get(pk=submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 600})["id"])
    sim.cycle()
    sim.advance(2)
    response = push(pod(running), other, inspector_record())
    assert response.status_code == 403
    assert "another job" in response.json()["detail"]
    assert not NcclSample.objects.exists()
    assert push(pod(other), other, inspector_record()).status_code == 201


def test_the_token_is_stable_and_never_stored(running) -> None:
    token = telemetry_token_for_job(running.pk)
    assert telemetry_token_for_job(running.pk) == token
    assert telemetry_token_verify(token).job_id == running.pk
    assert token.split(".")[2] not in str(list(running.telemetry_credential.__dict__.values()))
    # A new salt (nothing in Muster draws one today) invalidates the old token.
    TelemetryCredential.objects.filter(job_id=running.pk).update(salt="0" * 32)
    assert telemetry_token_for_job(running.pk) != token
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    assert push(client, running, inspector_record()).status_code == 401


def test_pod_environment_carries_the_push_url_when_muster_knows_its_address(running, settings) -> None:
    assert set(telemetry_pod_env(running.pk)) == {"MUSTER_TELEMETRY_TOKEN"}
    settings.MUSTER_PUBLIC_URL = "http://muster-web.muster:8000"
    env = telemetry_pod_env(running.pk)
    assert env["MUSTER_TELEMETRY_URL"] == f"http://muster-web.muster:8000/api/v1/jobs/{running.pk}/telemetry/"


# --- malformed: 400, nothing stored --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ("{not json", "body"),
        ({"coll": "AllReduce"}, "records[0].coll_msg_size_bytes"),
        (inspector_record(coll_busbw_gbs=True), "records[0].coll_perf.coll_busbw_gbs"),
        (inspector_record(coll_busbw_gbs="519"), "records[0].coll_perf.coll_busbw_gbs"),
        (inspector_record(coll_busbw_gbs=-1), "records[0].coll_perf.coll_busbw_gbs"),
        (inspector_record(coll_busbw_gbs=1e9), "records[0].coll_perf.coll_busbw_gbs"),
        (inspector_record(coll_msg_size_bytes=1.5), "records[0].coll_perf.coll_msg_size_bytes"),
        (inspector_record(coll="<script>"), "records[0].coll_perf.coll"),
        ('{"coll": "AllReduce", "coll_msg_size_bytes": 1, "coll_exec_time_us": NaN, "coll_algobw_gbs": 1, "coll_busbw_gbs": 1}', "body"),
        ([inspector_record(), inspector_record(coll_exec_time_us=None)], "records[1].coll_perf.coll_exec_time_us"),
        ({"records": "all of them"}, "records"),
        ([], "records"),
        (42, "body"),
    ],
)
def test_malformed_pushes_are_400_and_store_nothing(running, body, where) -> None:
    response = push(pod(running), running, body)
    assert response.status_code == 400, response.content
    assert where in response.json(), response.json()
    assert not NcclSample.objects.exists()


def test_a_stale_timestamp_is_refused(running) -> None:
    record = inspector_record()
    record["metadata"]["dump_timestamp_us"] = int((time.time() - 30 * 86400) * 1e6)
    response = push(pod(running), running, [inspector_record(), record])
    assert response.status_code == 400 and "records[1].metadata.dump_timestamp_us" in response.json()
    assert not NcclSample.objects.exists()


@pytest.mark.parametrize(
    "text",
    [
        "no results here\n",
        "     1048576        262144     float     sum      -1    91.25   11.49   21.55      0\n",  # a row before any header
        NCCL_TESTS_OUTPUT.replace("668.81", "lots"),
        NCCL_TESTS_OUTPUT.replace("  24073.5  356.82  669.04      0", ""),  # a row with missing columns
        NCCL_TESTS_OUTPUT.replace("669.04", "nan"),
    ],
)
def test_malformed_nccl_tests_output_is_400(running, text) -> None:
    assert push(pod(running), running, text, "text/plain").status_code == 400
    assert not NcclSample.objects.exists()


def test_unsupported_content_type_is_415(running) -> None:
    assert push(pod(running), running, "<xml/>", "application/xml").status_code == 415
    assert not NcclSample.objects.exists()


# --- bounds -----------------------------------------------------------------------------------------------


def test_too_many_records_is_400(running, settings) -> None:
    settings.MUSTER_TELEMETRY_PUSH_MAX_RECORDS = 3
    response = push(pod(running), running, [inspector_record()] * 4)
    assert response.status_code == 400 and "At most 3" in str(response.json())
    assert push(pod(running), running, NCCL_TESTS_OUTPUT, "text/plain").status_code == 400  # 6 samples from 3 rows
    assert not NcclSample.objects.exists()


def test_an_oversized_body_is_413(running, settings) -> None:
    settings.MUSTER_TELEMETRY_PUSH_MAX_BYTES = 2000
    response = push(pod(running), running, [inspector_record()] * 10)
    assert response.status_code == 413
    assert not NcclSample.objects.exists()


def test_pushes_per_minute_are_limited_per_job(running, submit, sim, settings) -> None:
    settings.MUSTER_TELEMETRY_PUSHES_PER_MINUTE = 2
    assert push(pod(running), running, inspector_record()).status_code == 201
    assert push(pod(running), running, "{broken").status_code == 400  # counts too: garbage cannot flood the parser
    refused = push(pod(running), running, inspector_record())
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 61
    assert NcclSample.objects.filter(job=running).count() == 1
    # Another job has its own allowance.
    other = Job.objects.get(pk=submit(nodes=1, gpus_per_node=8, simulate={"duration_seconds": 600})["id"])
    sim.cycle()
    sim.advance(2)
    assert push(pod(other), other, inspector_record()).status_code == 201
    # The window moves on after a minute.
    running.telemetry_credential.__class__.objects.filter(job=running).update(window_start=timezone.now() - timedelta(seconds=61))
    assert push(pod(running), running, inspector_record()).status_code == 201


def test_samples_per_job_are_capped(running, settings) -> None:
    settings.MUSTER_TELEMETRY_MAX_SAMPLES_PER_JOB = 3
    assert push(pod(running), running, [inspector_record()] * 2).status_code == 201
    response = push(pod(running), running, [inspector_record()] * 2)
    assert response.status_code == 429 and "at most 3" in response.json()["detail"]
    assert NcclSample.objects.filter(job=running).count() == 2


# --- when -------------------------------------------------------------------------------------------------


def test_a_job_that_has_not_started_cannot_push(submit) -> None:
    job = Job.objects.get(pk=submit()["id"])
    response = push(pod(job), job, inspector_record())
    assert response.status_code == 409 and "not running" in response.json()["detail"]


def test_pushes_are_accepted_shortly_after_the_job_ends(running, settings) -> None:
    Job.objects.filter(pk=running.pk).update(state="SUCCEEDED", finished_at=timezone.now() - timedelta(seconds=60))
    assert push(pod(running), running, inspector_record()).status_code == 201
    too_late = timezone.now() - timedelta(seconds=settings.MUSTER_TELEMETRY_PUSH_GRACE_SECONDS + 5)
    Job.objects.filter(pk=running.pk).update(finished_at=too_late)
    response = push(pod(running), running, inspector_record())
    assert response.status_code == 409 and "has ended" in response.json()["detail"]
    assert NcclSample.objects.filter(job=running).count() == 1
