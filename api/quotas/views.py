"""Quotas of users and teams, a user's usage, and usage reports. Thin: check, call a selector or service, serialize."""

from __future__ import annotations

from datetime import date
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Model
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.requests import api_user
from api.jobs.filters import named
from api.quotas.renderers import ReportCSVRenderer
from api.quotas.serializers import (
    GrantInputSerializer,
    GrantRevokeInputSerializer,
    GrantSerializer,
    QuotaInputSerializer,
    QuotaSavedSerializer,
    QuotaSerializer,
    ReportQuerySerializer,
    ReportSerializer,
    UsageSummarySerializer,
)
from apikit.renderers import JsonErrorsMixin
from apikit.serializers import refuse_a_body
from apikit.viewsets import VisibleViewSet
from quotas.grants import grants_of
from quotas.models import BudgetGrant, Team
from quotas.periods import day_range, local_today, period_bounds
from quotas.selectors import account_usages, teams_visible_to, usage_report, usage_summary, users_visible_to
from quotas.services import budget_grant, budget_grant_revoke, quota_reset, quota_save


class ReadOwnWriteAdmin(BasePermission):
    """Anyone signed in may read the quotas they can see; only admins list every account or change one."""

    def has_permission(self, request: Request, view: Any) -> bool:
        if not request.user or not request.user.is_authenticated:
            return False
        if getattr(view, "action", None) is None:
            return True  # a method the endpoint does not have (POST to the list): DRF's 405, for admins and others alike
        if request.method in SAFE_METHODS and getattr(view, "action", None) != "list":
            return True
        # DRF's "You do not have permission to perform this action." said nothing of what one may read instead.
        self.message = (
            "Only admins list every account's quota and usage; your own and your teams': GET /api/v1/usage/ (muster usage)."
            if getattr(view, "action", None) == "list"
            else "Only admins change quotas and budgets."
        )
        return bool(request.user.is_staff)


class _AccountQuotaViewSet(VisibleViewSet):
    """GET (list: admins), GET/PUT/PATCH/DELETE one account's quota. Others' accounts are 404, not 403."""

    permission_classes = [ReadOwnWriteAdmin]
    serializer_class = QuotaSerializer
    filter_backends: list[type] = []
    lookup_value_regex = "[^/]+"
    kind = ""

    def _usages(self, accounts: list[Any]) -> list[Any]:
        return account_usages(users=accounts) if self.kind == "user" else account_usages(teams=accounts)

    def _account_kwargs(self, account: Model) -> dict[str, Any]:
        return {self.kind: account}

    def _detail(self, account: Model) -> Response:
        return Response(QuotaSerializer(self._usages([account])[0]).data)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "team",
                str,
                description="Only this team's accounts: its members (users) or the team itself (teams), as "
                "`muster usage --all --team NAME` reads them.",
            )
        ],
        description="Admins: every account's limits and usage this budget period (Slurm's sreport AccountUtilizationByUser "
        "for the current period), by name, paged; each as that account's own GET /api/v1/usage/ gives it.",
    )
    def list(self, request: Request) -> Response:
        accounts = self.get_queryset()
        team_name = request.query_params.get("team")
        # An empty one is no team asked, as on the job list (django-filter's rule): it read "Unknown team ; the teams are".
        if team_name:
            team = Team.objects.filter(name=team_name).first()
            if team is None:
                teams = list(Team.objects.order_by("name").values_list("name", flat=True))
                there = f"the teams are {named(teams)}" if teams else "there are no teams"
                raise ValidationError({"team": [f"Unknown team {team_name}; {there}."]})
            accounts = accounts.filter(teams=team) if self.kind == "user" else accounts.filter(pk=team.pk)
        page = self.paginate_queryset(accounts)
        return self.get_paginated_response(QuotaSerializer(self._usages(list(page or [])), many=True).data)

    def retrieve(self, request: Request, **kwargs: str) -> Response:
        return self._detail(self.get_object())

    @extend_schema(request=QuotaInputSerializer, responses={200: QuotaSavedSerializer})
    def update(self, request: Request, **kwargs: str) -> Response:
        return self._save(request, partial=False)

    @extend_schema(request=QuotaInputSerializer, responses={200: QuotaSavedSerializer})
    def partial_update(self, request: Request, **kwargs: str) -> Response:
        return self._save(request, partial=True)

    @extend_schema(
        responses={204: None, 400: OpenApiResponse(description="A body was sent (it takes none, or `{}`): nothing was changed")},
        description="Drop the account's own quota: a user gets the site default, a team none.",
    )
    def destroy(self, request: Request, **kwargs: str) -> Response:
        refuse_a_body(request.data)  # as cancel, hold and release do: a limit sent is said to be unread, not ignored
        quota_reset(**self._account_kwargs(self.get_object()), actor=api_user(request), request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        request=GrantInputSerializer,
        responses={201: QuotaSerializer, 400: OpenApiResponse(description="Field by field: no budget to add to, an amount or a reason")},
        description="Add node-hours to the account's budget for the current budget period only (a deadline, a failed run "
        "given back), on the audit trail as quota.grant; the next period starts from the quota's budget. Admins only.",
    )
    @action(detail=True, methods=["post"])
    def grant(self, request: Request, **kwargs: str) -> Response:
        account = self.get_object()
        serializer = GrantInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            budget_grant(**self._account_kwargs(account), **serializer.validated_data, actor=api_user(request), request=request)
        except DjangoValidationError as e:
            raise ValidationError(e.message_dict) from None
        return Response(QuotaSerializer(self._usages([account])[0]).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        responses={200: GrantSerializer(many=True)},
        description="The node-hours added to the account's budget for the current budget period, oldest first: who added "
        "how much, when and why, and which were revoked (they add nothing). Whoever may read the quota may read them.",
    )
    # One period's grants of one account are a few: listed whole, not paged.
    @action(detail=True, methods=["get"], pagination_class=None)
    def grants(self, request: Request, **kwargs: str) -> Response:
        account = self.get_object()
        period_start = period_bounds(timezone.now())[0]
        return Response(GrantSerializer(grants_of(period_start=period_start, **self._account_kwargs(account)), many=True).data)

    @extend_schema(
        parameters=[OpenApiParameter("grant_id", int, OpenApiParameter.PATH, description="The grant's `id`, as .../grants/ lists it.")],
        request=GrantRevokeInputSerializer,
        responses={
            200: QuotaSavedSerializer,
            400: OpenApiResponse(description="No reason, or a grant revoked already or of an earlier period"),
            404: OpenApiResponse(description="No such grant of this account"),
        },
        description="Take back node-hours added to the current period's budget (one added by mistake): the grant stays "
        "listed, revoked, and adds nothing to the budget from now on; on the audit trail as quota.revoke. Running jobs are "
        "not stopped; new jobs start only in what is left (`warnings` says when the budget is now over-used). Admins only.",
    )
    @action(detail=True, methods=["post"], url_path=r"grants/(?P<grant_id>[0-9]+)/revoke", url_name="grant-revoke")
    def revoke_grant(self, request: Request, grant_id: str, **kwargs: str) -> Response:
        account = self.get_object()
        grant = BudgetGrant.objects.filter(pk=int(grant_id), **self._account_kwargs(account)).first()
        if grant is None:
            raise NotFound(f"No grant {grant_id} of {self.kind} {kwargs.get(self.lookup_field, '')}.")
        serializer = GrantRevokeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            revoked = budget_grant_revoke(grant=grant, **serializer.validated_data, actor=api_user(request), request=request)
        except DjangoValidationError as e:
            raise ValidationError(e.message_dict) from None
        return Response({**QuotaSerializer(self._usages([account])[0]).data, "warnings": revoked.warnings})

    def _save(self, request: Request, *, partial: bool) -> Response:
        account = self.get_object()
        serializer = QuotaInputSerializer(data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        saved = quota_save(**self._account_kwargs(account), values=serializer.validated_data, actor=api_user(request), request=request)
        return Response({**QuotaSerializer(self._usages([account])[0]).data, "warnings": saved.warnings})


@extend_schema(tags=["quotas"])
class UserQuotaViewSet(_AccountQuotaViewSet):
    lookup_field = "username"
    kind = "user"
    visible_to = staticmethod(users_visible_to)


@extend_schema(tags=["quotas"])
class TeamQuotaViewSet(_AccountQuotaViewSet):
    lookup_field = "name"
    kind = "team"
    visible_to = staticmethod(teams_visible_to)


@extend_schema(tags=["usage"])
class UsageView(APIView):
    """Your limits and usage now and this budget period, yours and each of your teams'."""

    @extend_schema(
        parameters=[OpenApiParameter("user", str, description="Admins: another user's usage.")],
        responses={200: UsageSummarySerializer},
    )
    def get(self, request: Request) -> Response:
        user = api_user(request)
        username = request.query_params.get("user")
        if username and username != user.get_username():
            found = users_visible_to(user).filter(username=username).first()
            if found is None:  # in the API's words, the same whether there is no such user or it is another's usage
                raise NotFound(f"No user {username} (or none that you may see).")
            user = found
        return Response(UsageSummarySerializer(usage_summary(user)).data)


@extend_schema(tags=["usage"])
class UsageReportView(JsonErrorsMixin, APIView):
    """Jobs, GPU-hours and node-hours per user or team over a date range, as JSON or CSV (like Slurm's sreport).

    Admins see every account; others their own user row, or their teams.
    """

    # JSON and CSV only, the two `format` documents: not the browsable API (`?format=api`), which a report never was.
    renderer_classes = [JSONRenderer, ReportCSVRenderer]

    @extend_schema(
        parameters=[ReportQuerySerializer],
        responses={
            (200, "application/json"): ReportSerializer,
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="A header row, then one row per account."),
        },
    )
    def get(self, request: Request) -> Response:
        query = ReportQuerySerializer(data=request.query_params.dict())
        query.is_valid(raise_exception=True)
        first = query.validated_data.get("start") or local_today(period_bounds(timezone.now())[0])
        last = query.validated_data.get("end") or local_today()
        if last < first:
            raise ValidationError(_backwards(first, last, sent=query.validated_data))
        group_by = query.validated_data["group_by"]
        start, end = day_range(first, last)
        rows = usage_report(start=start, end=end, group_by=group_by, viewer=api_user(request))
        data = ReportSerializer({"start": first, "end": last, "group_by": group_by, "rows": rows}).data
        response = Response(data)
        if request.accepted_renderer.format == "csv":
            response["Content-Disposition"] = f'attachment; filename="muster-usage-by-{group_by}-{first}-to-{last}.csv"'
        return response


def _backwards(first: date, last: date, *, sent: dict[str, Any]) -> dict[str, list[str]]:
    """A range that ends before it starts, said of the date the client sent and naming the one it left to its default:
    `?start=2026-11-30` alone (a future start) blamed `end`, which was never sent."""
    if "end" not in sent:
        return {"start": [f"The start date is after the end date, which defaults to today ({last}): give an end on or after {first}."]}
    if "start" not in sent:
        why = f"the current budget period's first day ({first})"
        return {"end": [f"The end date is before the start date, which defaults to {why}: give a start on or before {last}."]}
    return {"end": ["The end date is before the start date."]}
