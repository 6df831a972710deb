"""The Python client on its own: errors as a person reads them, retries that never make a second job, pagination."""

from __future__ import annotations

from typing import Any

import pytest
import requests
from muster_client import ApiError, AuthError, Client, MusterError, Unreachable
from muster_client.client import server_url
from muster_client.errors import error_message, flatten_errors

from tests.client.fakes import FakeSession, response, stream

URL = "http://muster.test:8000"
SPEC = {"name": "a", "image": "img", "command": ["x"], "nodes": 1, "gpus_per_node": 8, "wall_time_seconds": 60}


def client(*answers: requests.Response | Exception) -> tuple[Client, FakeSession, list[float]]:
    session, slept = FakeSession(*answers), []
    return Client(URL, "secret", session=session, sleep=slept.append), session, slept  # type: ignore[arg-type]


def test_drf_errors_are_flattened_field_by_field() -> None:
    body = {
        "gpus_per_node": ["Ensure this value is less than or equal to 8."],
        "simulate": {"exit_code": ["Ensure this value is less than or equal to 255."]},
        "command": {"1": ["An argument may not contain NUL."]},
        "env": [{}, {"name": ["Not an identifier."]}],
        "non_field_errors": ["The job is larger than the cluster."],
    }
    assert flatten_errors(body) == [
        "gpus_per_node: Ensure this value is less than or equal to 8.",
        "simulate.exit_code: Ensure this value is less than or equal to 255.",
        "command.1: An argument may not contain NUL.",
        "env.1.name: Not an identifier.",
        "The job is larger than the cluster.",
    ]
    assert error_message(409, {"detail": "Job 3 has already ended."}) == "Job 3 has already ended."
    assert error_message(502, None, "Bad Gateway") == "HTTP 502 Bad Gateway"


def test_a_refused_request_raises_the_servers_reasons_in_one_line() -> None:
    c, _, _ = client(response(400, {"gpus_per_node": ["No node has 99 GPUs; the largest node has 8."], "nodes": ["Too big."]}))
    with pytest.raises(ApiError) as caught:
        c.validate(SPEC)
    assert caught.value.status == 400
    assert str(caught.value) == "gpus_per_node: No node has 99 GPUs; the largest node has 8; nodes: Too big."


def test_401_says_how_to_log_in_again_and_a_proxys_html_page_is_not_quoted() -> None:
    c, _, _ = client(response(401, {"detail": "The token has expired."}), response(502, text="<html><body>nginx</body></html>"))
    with pytest.raises(
        AuthError, match=r"the server refused the token: The token has expired — run `muster login http://muster.test:8000`"
    ):
        c.job(1)
    with pytest.raises(ApiError, match=r"failed the request: HTTP 502 Bad Gateway$"):
        c.job(1)


def test_a_connection_failure_names_the_server_and_why() -> None:
    refused = requests.ConnectionError("HTTPConnectionPool: Max retries exceeded ([Errno 111] Connection refused)")
    c, _, _ = client(refused, requests.ConnectTimeout("slow"))
    with pytest.raises(Unreachable, match=r"^cannot reach the Muster server at http://muster.test:8000 \(connection refused\)$"):
        c.usage()
    with pytest.raises(Unreachable, match=r"\(no answer in time\)$"):
        c.usage()


def test_a_submit_is_retried_with_the_same_idempotency_key_after_a_lost_answer() -> None:
    job = {"id": 7, "state": "PENDING"}
    c, session, slept = client(
        requests.ConnectionError("reset"), response(502), response(201, job, headers={"Idempotent-Replayed": "true"})
    )
    assert c.submit(SPEC) == job
    keys = {sent["headers"]["Idempotency-Key"] for sent in session.sent}
    assert len(session.sent) == 3 and len(keys) == 1
    assert len(next(iter(keys))) == 36  # a UUID
    assert slept == [0.5, 1.0]  # backing off between tries


def test_each_submit_gets_its_own_key_unless_given_one() -> None:
    c, session, _ = client(response(201, {"id": 1}), response(201, {"id": 2}), response(201, {"id": 2}))
    c.submit(SPEC)
    c.submit(SPEC, idempotency_key="ci-run-42")
    c.submit(SPEC, idempotency_key="ci-run-42")
    keys = [sent["headers"]["Idempotency-Key"] for sent in session.sent]
    assert keys[0] != keys[1] and keys[1:] == ["ci-run-42", "ci-run-42"]


def test_a_submit_gives_up_after_a_few_tries_and_a_refusal_is_never_retried() -> None:
    c, session, _ = client(*[requests.ConnectionError("Connection refused")] * 4)
    with pytest.raises(Unreachable):
        c.submit(SPEC)
    assert len(session.sent) == 4
    c, session, _ = client(response(400, {"name": ["This field is required."]}))
    with pytest.raises(ApiError):
        c.submit(SPEC)
    assert len(session.sent) == 1


def test_reads_are_not_retried() -> None:
    c, session, _ = client(response(503, {"detail": "The database cannot be reached right now"}))
    with pytest.raises(ApiError, match="database cannot be reached"):
        c.job(3)
    assert len(session.sent) == 1


def page(results: list[Any], next_url: str | None) -> requests.Response:
    return response(200, {"count": 3, "next": next_url, "previous": None, "results": results})


def test_jobs_follow_every_page_with_the_filters() -> None:
    c, session, _ = client(page([{"id": 3}, {"id": 2}], f"{URL}/api/v1/jobs/?limit=2&offset=2&state=FAILED"), page([{"id": 1}], None))
    assert [j["id"] for j in c.jobs(state=["FAILED"], name=None, limit=2)] == [3, 2, 1]
    assert session.sent[0]["params"] == {"state": ["FAILED"], "limit": 2}
    assert session.sent[1]["url"] == f"{URL}/api/v1/jobs/?limit=2&offset=2&state=FAILED"
    assert session.sent[0]["headers"]["Authorization"] == "Bearer secret"


@pytest.mark.parametrize("given", ["muster.test:8000", "http://muster.test:8000/", "http://muster.test:8000/api/v1/"])
def test_the_server_url_can_be_given_as_people_copy_it(given: str) -> None:
    assert server_url(given) == URL


def test_following_logs_reconnects_while_the_attempt_runs_and_never_repeats_a_line() -> None:
    running = response(200, {"id": 4, "state": "RUNNING", "attempt": 2})
    c, session, slept = client(
        running,  # which attempt to follow: the current one
        stream("step 1\nstep 2\n"),  # the server closed the follow after MUSTER_LOG_FOLLOW_SECONDS
        running,
        stream("step 1\nstep 2\nstep 3\n"),  # its last lines: those yielded, and one written meanwhile
        response(200, {"id": 4, "state": "SUCCEEDED", "attempt": 2}),
        stream("step 1\nstep 2\nstep 3\nstep 4 done\n"),  # the ended attempt's, what it wrote since included
    )
    assert "".join(c.follow_logs(4)) == "step 1\nstep 2\nstep 3\nstep 4 done\n"
    follows = [sent["params"] for sent in session.sent if sent["params"]]
    follow = {"rank": 0, "follow": "true", "attempt": 2}
    # Again from the last lines: those it yielded, one not ended yet, and as many as may have come meanwhile.
    assert follows == [follow, {**follow, "tail": 2 + 1 + 10_000}, {**follow, "tail": 3 + 1 + 10_000}]
    assert slept == []


def test_following_from_the_last_lines_resumes_where_it_was_after_a_server_restart() -> None:
    """`muster logs -f --tail 2`: the server restarts while lines are written. It read the whole log again, or lost
    the lines written meanwhile (it counted what it had yielded from the log's start)."""
    running = response(200, {"id": 4, "state": "RUNNING", "attempt": 1})
    c, session, slept = client(
        running,
        stream("step 8\nstep 9\nstep 1"),  # its last 2 lines, and half of the next when the server went away
        requests.ConnectionError("Connection refused"),  # the job's state: the server restarts
        response(502),
        running,
        stream("step 7\nstep 8\nstep 9\nstep 10\nstep 11\n"),
        response(200, {"id": 4, "state": "FAILED", "attempt": 1}),
        stream("step 10\nstep 11\nTraceback: out of memory\n"),  # kept, its start cut to the size limit
    )
    assert "".join(c.follow_logs(4, tail=2)) == "step 8\nstep 9\nstep 10\nstep 11\nTraceback: out of memory\n"
    assert [sent["params"].get("tail") for sent in session.sent if sent["params"] and "follow" in sent["params"]] == [
        2,
        3 + 10_000,
        5 + 10_000,
    ]
    assert len(slept) == 2  # once for the refused connection, once for the 502


def test_following_logs_stops_when_the_job_is_requeued() -> None:
    c, _, _ = client(
        response(200, {"id": 4, "state": "RUNNING", "attempt": 1}),
        stream("step 1\n"),
        response(200, {"id": 4, "state": "PENDING", "attempt": 1}),
        stream("step 1\nstep 2\nrequeued\n"),  # the attempt's end, written before the follow came back
    )
    assert list(c.follow_logs(4)) == ["step 1\n", "step 2\nrequeued\n"]


def test_wait_rides_out_a_server_restart_but_not_a_refusal() -> None:
    c, _, slept = client(
        response(200, {"id": 5, "state": "RUNNING"}),
        requests.ConnectionError("Connection refused"),  # the server restarts
        response(502),
        response(200, {"id": 5, "state": "FAILED"}),
    )
    seen: list[str] = []
    assert c.wait(5, poll=0.1, on_update=lambda job: seen.append(job["state"]))["state"] == "FAILED"
    assert seen == ["RUNNING", "FAILED"] and len(slept) == 3
    c, _, _ = client(response(404, {"detail": "No job 5 (or none that you may see)."}))
    with pytest.raises(ApiError, match=r"No job 5 \(or none"):
        c.wait(5)
    c, _, _ = client(requests.ConnectionError("Connection refused"))
    with pytest.raises(Unreachable):
        c.wait(5, patience=0)  # out of patience: the error is the caller's


def test_an_answer_that_is_not_json_says_the_url_may_be_wrong() -> None:
    c, _, _ = client(response(200, text="<html>a login portal</html>"))
    with pytest.raises(MusterError, match=r"with something other than JSON: is it a Muster server\?"):
        c.usage()
