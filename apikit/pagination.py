from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import remove_query_param, replace_query_param


class Pagination(LimitOffsetPagination):
    """?limit= and ?offset=, with a ceiling so one request cannot pull a whole table.

    DRF reads a limit of 0, -1 or `abc` as no limit given, and an offset it cannot read as 0: a script with a typo
    would get the first page and take it for what it asked. Those are 400s here, naming the parameter; a limit above
    the ceiling is still cut to it (documented), not refused.
    """

    default_limit = 50
    max_limit = 500

    def get_limit(self, request: Request) -> int | None:
        text = request.query_params.get(self.limit_query_param)
        if text is not None and not _whole_number(text, least=1):
            most = self.max_limit
            raise ValidationError({self.limit_query_param: [f"A whole number from 1 to {most} (more is cut to {most})."]})
        return super().get_limit(request)

    def get_offset(self, request: Request) -> int:
        text = request.query_params.get(self.offset_query_param)
        if text is not None and not _whole_number(text, least=0):
            raise ValidationError({self.offset_query_param: ["A whole number, 0 or more."]})
        return super().get_offset(request)

    def get_previous_link(self) -> str | None:
        # A page past the end is an empty page (a list that shrank under a script is no error), but DRF's `previous`
        # then stepped back one limit at a time through more empty pages: ?offset=1000&limit=2 of 6 jobs led to
        # offset 998. It leads to the last page that has results instead.
        count, offset, limit, request = self.count, self.offset, self.limit, self.request
        if count and offset is not None and limit is not None and request is not None and offset >= count:
            last = max(count - limit, 0)
            url = replace_query_param(request.build_absolute_uri(), self.limit_query_param, limit)
            return replace_query_param(url, self.offset_query_param, last) if last else remove_query_param(url, self.offset_query_param)
        return super().get_previous_link()

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        # DRF documents both as any integer: a client generated from the schema sent limit=0 or offset=-1, which
        # get_limit and get_offset above refuse. A limit above the ceiling is cut, not refused: no maximum.
        least = {self.limit_query_param: 1, self.offset_query_param: 0}
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] in least:
                parameter["schema"]["minimum"] = least[parameter["name"]]
            if parameter["name"] == self.limit_query_param:
                most, default = self.max_limit, self.default_limit
                parameter["description"] = f"How many results a page holds: 1 to {most} ({default} if left out; more is cut to {most})."
            else:
                parameter["description"] = "How many results to skip before the page's first: 0 or more."
        return parameters


def _whole_number(text: str, *, least: int) -> bool:
    # isdecimal, not isdigit: "²" is a digit that int() cannot read (a 500, not a 400).
    return text.strip().isdecimal() and int(text) >= least


class SummaryPagination(Pagination):
    """Pages that also carry one object about the whole list under `summary_key` (set by the view before paginating)."""

    summary_key = "summary"
    summary: dict[str, Any] = {}

    def get_paginated_response(self, data: Any) -> Response:
        response = super().get_paginated_response(data)
        response.data[self.summary_key] = self.summary
        return response

    def get_paginated_response_schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        from drf_spectacular.plumbing import build_basic_type
        from drf_spectacular.types import OpenApiTypes

        paginated = super().get_paginated_response_schema(schema)
        paginated["properties"][self.summary_key] = build_basic_type(OpenApiTypes.OBJECT)
        return paginated


class QueuePagination(SummaryPagination):
    """The queue's pages also carry a summary of the whole queue."""

    # The queue's length as the summary counted it (set by the view): `count` then costs no count of the queue.
    total: int | None = None

    def get_count(self, queryset: Any) -> int:
        return self.total if self.total is not None else super().get_count(queryset)


class NodePagination(SummaryPagination):
    """The nodes' pages also say whether jobs can start on the cluster, and if not, why."""

    summary_key = "cluster"
