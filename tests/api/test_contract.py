"""The API contract (tests/api/contract.py) for every REST resource under /api/v1/."""

from __future__ import annotations

from itertools import count
from typing import Any

import pytest

from accounts.services import token_create
from tests.api.contract import ApiContract, BadInput, People, Resource
from tests.audit.factories import AuditEntryFactory
from tests.conftest import job_payload
from tests.jobs.factories import JobFactory
from tests.quotas.factories import QuotaFactory, TeamFactory

NOT_A_LIST = "one object, not a list"
NOT_PER_USER = "not per user: every signed-in user sees the same"
names = count()


def job_url(owner: Any, tail: str = "") -> str:
    return f"/api/v1/jobs/{JobFactory(owner=owner).pk}/{tail}"


def some_jobs(people: People, n: int) -> None:
    for i in range(n):
        # Pending and running (with allocations on nodes), so the list has everything it shows to look up.
        JobFactory(owner=people.user, running=i % 2 == 1, nodes=1 + i % 2)


def queued_jobs(people: People, n: int) -> None:
    for i in range(n):
        JobFactory(owner=people.user if i % 2 else people.other_user)
        JobFactory(owner=people.other_user, running=True)


def user_quotas(people: People, n: int) -> None:
    for _ in range(n):
        QuotaFactory(max_gpus=16)


def team_quotas(people: People, n: int) -> None:
    for _ in range(n):
        team = TeamFactory()
        team.members.add(people.user)
        QuotaFactory(team=team, max_gpus=64)


def own_quota(owner: Any) -> str:
    QuotaFactory(user=owner, max_gpus=8)
    return f"/api/v1/quotas/users/{owner.username}/"


def own_team(owner: Any) -> str:
    team = TeamFactory()
    team.members.add(owner)
    QuotaFactory(team=team, max_gpus=8)
    return f"/api/v1/quotas/teams/{team.name}/"


def own_token(owner: Any) -> str:
    return f"/api/v1/tokens/{token_create(user=owner, name=f'token-{next(names)}').token.pk}/"


def tokens(people: People, n: int) -> None:
    for _ in range(n):
        token_create(user=people.user, name=f"token-{next(names)}")


def audit_entry(owner: Any) -> str:
    return f"/api/v1/audit/{AuditEntryFactory(job__owner=owner).pk}/"


def audit_entries(people: People, n: int) -> None:
    for i in range(n):
        AuditEntryFactory(job__owner=people.user if i % 2 else people.other_user, actor=people.admin_user)


def running_jobs(people: People, n: int) -> None:
    for i in range(n):
        JobFactory(owner=people.user, running=True, nodes=1 + i % 2)  # each on new nodes


def usage_rows(people: People, n: int) -> None:
    for i in range(n):
        team = TeamFactory()
        JobFactory(owner=people.user if i % 2 else people.other_user, team=team, finished=True, nodes=2)


RESOURCES = [
    Resource(
        "jobs",
        "/api/v1/jobs/",
        anonymous=("get", "post"),
        detail=job_url,
        bad=BadInput(job_payload(nodes=0), "nodes", method="post"),
        rows=some_jobs,
    ),
    Resource(
        "job logs",
        "/api/v1/jobs/{id}/logs/",
        anonymous=(),
        detail=lambda owner: job_url(owner, "logs/"),
        owner_status=(409,),  # its owner is told it has not started yet
        bad=BadInput({"rank": 5}, "rank", on="detail"),
        skip={"flat_queries": NOT_A_LIST},
    ),
    Resource(
        "job metrics",
        "/api/v1/jobs/{id}/metrics/",
        anonymous=(),
        detail=lambda owner: job_url(owner, "metrics/"),
        detail_data={"metric": "gpu_util"},
        owner_status=(409,),  # its owner is told it has no run yet
        bad=BadInput({"metric": "gpu_utilisation"}, "metric", on="detail"),
        skip={"flat_queries": NOT_A_LIST},
    ),
    Resource(
        "job telemetry push",
        "/api/v1/jobs/1/telemetry/",
        anonymous=("post",),
        skip={
            "another_user": "authenticated by the job's own token, not a user's (tests/telemetry/test_telemetry_push.py)",
            "bad_input": "needs the job's own token; bad bodies are tested in tests/telemetry/test_telemetry_push.py",
            "flat_queries": "write-only",
        },
    ),
    Resource(
        "job checkpoint",
        "/api/v1/jobs/{id}/checkpoint/",
        anonymous=(),
        detail=lambda owner: job_url(owner, "checkpoint/"),
        detail_method="post",
        owner_status=(409,),  # its owner is told only a running job reports checkpoints
        bad=BadInput({"step": -1}, "step", method="post", on="detail"),
        skip={"flat_queries": "write-only"},
    ),
    Resource(
        "job array cancel",
        "/api/v1/jobs/cancel-array/",
        anonymous=("post",),
        bad=BadInput({"array_id": "four"}, "array_id", method="post"),
        skip={
            "another_user": "the array is named in the body, not the URL (tests/api/test_api_array_cancel.py: 404 alike)",
            "flat_queries": "write-only",
        },
    ),
    Resource(
        "nodes",
        "/api/v1/nodes/",
        bad=BadInput({"state": "MELTED"}, "state"),
        rows=running_jobs,
        skip={"another_user": NOT_PER_USER},
    ),
    Resource(
        "queue",
        "/api/v1/queue/",
        rows=queued_jobs,
        skip={
            "another_user": NOT_PER_USER + " (the queue shows everyone's jobs in scheduling order)",
            "bad_input": "takes no parameters but the page's limit and offset, which DRF clamps rather than refuses",
        },
    ),
    Resource(
        "user quotas",
        "/api/v1/quotas/users/",
        detail=own_quota,
        bad=BadInput({"max_gpus": -1}, "max_gpus", method="patch", on="detail", who="admin_user"),
        rows=user_quotas,
        list_viewer="admin_user",
    ),
    Resource(
        "team quotas",
        "/api/v1/quotas/teams/",
        detail=own_team,
        bad=BadInput({"fair_share_weight": 0}, "fair_share_weight", method="patch", on="detail", who="admin_user"),
        rows=team_quotas,
        list_viewer="admin_user",
    ),
    Resource(
        "usage",
        "/api/v1/usage/",
        detail=lambda owner: f"/api/v1/usage/?user={owner.username}",
        skip={
            "bad_input": "its one parameter is ?user=, and an unknown user is 404 like another user's",
            "flat_queries": "one summary (yours and your teams'), not a list",
        },
    ),
    Resource(
        "usage report",
        "/api/v1/usage/report/",
        bad=BadInput({"start": "yesterday"}, "start"),
        rows=usage_rows,
        list_viewer="admin_user",
        list_query={"group_by": "team"},
        skip={"another_user": "rows, not objects: another user's rows are left out, not refused (test_quotas_api.py)"},
    ),
    Resource(
        "tokens",
        "/api/v1/tokens/",
        anonymous=("get", "post"),
        detail=own_token,
        detail_method="delete",  # a token is revoked, never read back
        owner_status=(204,),
        bad=BadInput({"name": ""}, "name", method="post"),
        rows=tokens,
    ),
    Resource(
        "token exchange",
        "/api/v1/auth/token/",
        bad=BadInput({"password": "x"}, "username", method="post"),
        skip={
            "anonymous": "it is how a client without a token signs in",
            "another_user": "no objects: it answers with a new token",
            "flat_queries": "not a list",
        },
    ),
    Resource(
        "audit",
        "/api/v1/audit/",
        detail=audit_entry,
        bad=BadInput({"job": "abc"}, "job"),
        rows=audit_entries,
        list_viewer="admin_user",
    ),
]


@pytest.fixture
def people(user: Any, other_user: Any, admin_user: Any) -> People:
    return People(user, other_user, admin_user)


@pytest.mark.parametrize("resource", RESOURCES, ids=str)
class TestContract(ApiContract):
    pass
