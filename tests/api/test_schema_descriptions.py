"""The OpenAPI schema describes components and operations in words for its readers, never with a base class's
internal docstring (SimulateRequest read "Rejects fields it does not know ... `answer_serializer`, when set, ...")."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

from rest_framework.test import APIClient

import apikit.negotiation
import apikit.pagination
import apikit.serializers
import apikit.viewsets


def descriptions(node: Any, where: str = "") -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "description" and isinstance(value, str):
                yield where, value
            else:
                yield from descriptions(value, f"{where}/{key}")
    elif isinstance(node, list):
        for value in node:
            yield from descriptions(value, where)


def test_no_description_is_a_base_classs_docstring(db: None) -> None:
    internal = [
        inspect.cleandoc(cls.__doc__).split("\n")[0]
        for module in (apikit.serializers, apikit.viewsets, apikit.pagination, apikit.negotiation)
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__ and cls.__doc__
    ]
    assert internal  # the scan sees the kit's classes
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()
    leaked = [(where, text[:80]) for where, text in descriptions(schema) if any(text.startswith(doc) for doc in internal)]
    assert "answer_serializer" not in str(schema)
    assert leaked == []


def test_cancel_many_and_cancel_array_each_describe_their_own_request_and_answers(db: None) -> None:
    # Two schema decorators once stacked on cancel-many: it read cancel-array's body (array_id, indices), its 200 and
    # 409, and cancel-array read as taking no body and answering a JobDetail.
    schema = APIClient().get("/api/schema/", {"format": "json"}).json()

    def ref(node: dict[str, Any]) -> str:
        return str(node["content"]["application/json"]["schema"]["$ref"]).rsplit("/", 1)[-1]

    many = schema["paths"]["/api/v1/jobs/cancel-many/"]["post"]
    assert ref(many["requestBody"]) == "JobsCancelRequest"
    assert ref(many["responses"]["200"]) == "JobsCancelled"
    assert "409" not in many["responses"]  # an ended job is listed in `ended`, never a conflict
    assert many["description"].startswith("`scancel 12 13 17`")
    assert set(schema["components"]["schemas"]["JobsCancelRequest"]["properties"]) == {"ids", "reason"}

    array = schema["paths"]["/api/v1/jobs/cancel-array/"]["post"]
    assert ref(array["requestBody"]) == "JobArrayCancelRequest"
    assert ref(array["responses"]["200"]) == "JobArrayCancelled"
    assert ref(array["responses"]["409"]) == "JobArrayEnded"
    assert array["description"].startswith("`scancel 4`")
    assert {"array_id", "indices"} <= set(schema["components"]["schemas"]["JobArrayCancelRequest"]["properties"])


def test_a_list_the_api_refuses_empty_has_min_items_in_the_schema(api: APIClient) -> None:
    """`{"ids": []}` to cancel-many was valid by the schema (no minItems) and a 400 from the API."""
    schemas = api.get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    assert schemas["JobsCancelRequest"]["properties"]["ids"]["minItems"] == 1
    assert schemas["JobArrayCancelRequest"]["properties"]["indices"]["minItems"] == 1
    assert schemas["PatchedJobArrayUpdateRequest"]["properties"]["indices"]["minItems"] == 1
    assert schemas["JobSubmitRequest"]["properties"]["command"]["minItems"] == 1
    assert "minItems" not in schemas["JobsCancelled"]["properties"]["not_found"]  # an answer's list may be empty
    response = api.post("/api/v1/jobs/cancel-many/", {"ids": []}, format="json")
    assert response.status_code == 400 and response.json() == {"ids": ["Give at least one job id."]}
