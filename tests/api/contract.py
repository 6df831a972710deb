"""One API contract, checked for every REST resource.

A `Resource` says where a resource lives and how to make rows of it; `ApiContract` holds the
checks, and a test module runs them for a list of resources by parametrising a subclass:

    @pytest.mark.parametrize("resource", RESOURCES, ids=str)
    class TestContract(ApiContract): ...

The checks:
  anonymous       no credentials: 401 with a message saying what is missing, and a WWW-Authenticate challenge
  another_user    another user's object: 404 as if it did not exist (never 403, nor a hint that it does);
                  its owner does see it, so the 404 is about ownership and not a broken URL
  bad_input       bad input: 400 whose body names the field
  flat_queries    a list endpoint's query count is the same at N rows and at 3N rows

A resource that does not fit a check names it in `skip` with the reason; the check then skips
saying so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

CHECKS = ("anonymous", "another_user", "bad_input", "flat_queries")


@dataclass
class People:
    """Who takes part: `user` (alice) asks, `other_user` (bob) owns what alice must not see, `admin_user` (root)."""

    user: Any
    other_user: Any
    admin_user: Any

    def client(self, who: str) -> APIClient:
        client = APIClient()
        client.force_authenticate(getattr(self, who))
        return client


@dataclass(frozen=True)
class BadInput:
    """What bad input is sent and which field the 400 must name. `on`: "url" (the resource) or "detail" (an own object)."""

    data: dict[str, Any]
    field: str
    method: str = "get"
    on: str = "url"
    who: str = "user"


@dataclass(frozen=True)
class Resource:
    name: str
    url: str
    # Methods tried without credentials on `url` (and GET on an object's URL, for resources with `detail`).
    anonymous: tuple[str, ...] = ("get",)
    # owner -> the URL of a new object of that owner (for `another_user`; also what anonymous requests ask for).
    detail: Callable[[Any], str] | None = None
    # How another user's object is asked for, and what its owner gets for it.
    detail_method: str = "get"
    detail_data: dict[str, Any] = field(default_factory=dict)
    owner_status: tuple[int, ...] = (200,)
    bad: BadInput | None = None
    # (people, n) -> make n more rows the list viewer sees (for `flat_queries`).
    rows: Callable[[People, int], None] | None = None
    list_viewer: str = "user"
    list_query: dict[str, Any] = field(default_factory=lambda: {"limit": 100})
    skip: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name

    def applies(self, check: str) -> None:
        assert check in CHECKS
        if check in self.skip:
            pytest.skip(f"{self.name}: {self.skip[check]}")


def call(client: APIClient, method: str, url: str, data: dict[str, Any] | None = None) -> Any:
    if method == "get":
        return client.get(url, data or {})
    return getattr(client, method)(url, data or {}, format="json")


def count_queries(client: APIClient, url: str, query: dict[str, Any]) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url, query)
    assert response.status_code == 200, response.content
    return len(ctx.captured_queries)


class ApiContract:
    """Parametrise a subclass with `resource`; needs the `people` fixture (tests/api/test_contract.py has one)."""

    def test_anonymous_is_401_saying_why(self, resource: Resource, people: People) -> None:
        resource.applies("anonymous")
        asks = [(method, resource.url) for method in resource.anonymous]
        if resource.detail:
            asks.append(("get", resource.detail(people.user)))
        for method, url in asks:
            response = call(APIClient(), method, url)
            assert response.status_code == 401, (method, url, response.status_code, response.content)
            detail = response.json()["detail"].lower()
            assert "credentials" in detail or "authenticat" in detail, (method, url, detail)
            assert response.has_header("WWW-Authenticate"), (method, url)

    def test_another_users_object_is_404(self, resource: Resource, people: People) -> None:
        resource.applies("another_user")
        assert resource.detail, f"{resource.name}: no `detail`, so `another_user` needs a skip reason"
        theirs = resource.detail(people.other_user)
        response = call(people.client("user"), resource.detail_method, theirs, resource.detail_data)
        assert response.status_code == 404, (theirs, response.status_code, response.content)
        detail = response.json()["detail"]
        assert detail and "permission" not in detail.lower(), detail  # says nothing about whose it is
        assert "matches the given query" not in detail, detail  # names what was asked for, not a model class
        owner = call(people.client("other_user"), resource.detail_method, theirs, resource.detail_data)
        assert owner.status_code in resource.owner_status, (theirs, owner.status_code, owner.content)

    def test_bad_input_is_400_naming_the_field(self, resource: Resource, people: People) -> None:
        resource.applies("bad_input")
        bad = resource.bad
        assert bad, f"{resource.name}: no `bad`, so `bad_input` needs a skip reason"
        if bad.on == "detail":
            assert resource.detail
            url = resource.detail(getattr(people, bad.who))
        else:
            url = resource.url
        response = call(people.client(bad.who), bad.method, url, bad.data)
        assert response.status_code == 400, (url, bad, response.status_code, response.content)
        assert bad.field in response.json(), (bad.field, response.json())

    def test_list_query_count_stays_flat_as_rows_grow(self, resource: Resource, people: People) -> None:
        resource.applies("flat_queries")
        assert resource.rows, f"{resource.name}: no `rows`, so `flat_queries` needs a skip reason"
        client = people.client(resource.list_viewer)
        resource.rows(people, 3)
        few = count_queries(client, resource.url, resource.list_query)
        resource.rows(people, 6)
        many = count_queries(client, resource.url, resource.list_query)
        assert many == few, f"{resource.name}: {few} queries at 3 rows, {many} at 9"
