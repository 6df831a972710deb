"""Usage (every user) and quota administration (admins) pages, over the quotas selectors and services."""

from __future__ import annotations

from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.db.models import Model
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.requests import AuthenticatedHttpRequest
from api.quotas.serializers import QuotaInputSerializer
from frontend.quota_forms import QuotaForm, UsageReportForm
from policy.budget import node_hours_words
from quotas.grants import grants_of
from quotas.limits import effective_limits
from quotas.models import BudgetGrant, Team
from quotas.periods import day_range, local_today, period_bounds
from quotas.selectors import account_usages, usage_report, usage_summary, users_visible_to
from quotas.services import budget_grant, budget_grant_revoke, quota_reset, quota_save


def _staff_only(request: HttpRequest) -> None:
    if not request.user.is_staff:
        raise PermissionDenied("Only admins manage quotas.")


@login_required
def usage_view(request: AuthenticatedHttpRequest) -> HttpResponse:
    """The user's limits and usage (an admin's: anyone's, ?user=, as GET /api/v1/usage/?user=) and the usage report."""
    whose = request.user
    asked = request.GET.get("user", "").strip()
    if asked and asked != request.user.get_username():
        found = users_visible_to(request.user).filter(username=asked).first()
        if found is None:
            # The API's 404 in its words, the same whether there is no such user or it is another's usage: never the
            # viewer's own usage under another's name in the address.
            why = f"No user {asked} (or none that you may see)."
            return render(request, "404.html", {"request_path": request.path, "why": why}, status=404)
        whose = found
    summary = usage_summary(whose)
    context: dict[str, Any] = {"summary": summary, "shown_user": asked if whose != request.user else ""}
    # This period so far by user unless the query says otherwise: `?group_by=team` alone is this period by team.
    defaults = {"start": local_today(summary.period_start).isoformat(), "end": local_today().isoformat(), "group_by": "user"}
    if defaults.keys() & request.GET.keys():
        form = UsageReportForm({**defaults, **request.GET.dict()})
    else:
        form = UsageReportForm(initial=defaults)
    if form.is_bound and form.is_valid():
        first, last, group_by = form.cleaned_data["start"], form.cleaned_data["end"], form.cleaned_data["group_by"]
        start, end = day_range(first, last)
        context["report"] = usage_report(start=start, end=end, group_by=group_by, viewer=request.user)
        context["report_group_by"] = group_by
        query = urlencode({"start": first.isoformat(), "end": last.isoformat(), "group_by": group_by, "format": "csv"})
        context["csv_url"] = f"{reverse('usage-report')}?{query}"
    context["form"] = form
    # A report it cannot read is a 400, as the job list answers a filter it cannot read and the report API a bad range:
    # the page says why beside each field, with no report.
    refused = form.is_bound and not form.is_valid()
    if refused:
        labels = {name: str(field.label) for name, field in form.fields.items()}
        context["report_errors"] = [(labels.get(name, ""), message) for name, messages in form.errors.items() for message in messages]
    return render(request, "frontend/usage.html", context, status=400 if refused else 200)


@login_required
def quotas_view(request: HttpRequest) -> HttpResponse:
    """Every account's limits and its use this budget period (sreport's AccountUtilizationByUser), users then teams;
    `?team=` one team and its members (GET /api/v1/quotas/users/?team=, `muster usage --all --team`)."""
    _staff_only(request)
    users, teams = get_user_model().objects.order_by("username"), Team.objects.order_by("name")
    team_names = list(teams.values_list("name", flat=True))
    shown_team = request.GET.get("team", "").strip()
    if shown_team:
        if shown_team not in team_names:
            why = f"No team {shown_team}: the teams are {', '.join(team_names) or 'none yet'}."
            return render(request, "404.html", {"request_path": request.path, "why": why}, status=404)
        users, teams = users.filter(teams__name=shown_team), teams.filter(name=shown_team)
    users_page = Paginator(users, 50).get_page(request.GET.get("users_page"))
    teams_page = Paginator(teams, 50).get_page(request.GET.get("teams_page"))
    period_start, period_end = period_bounds(timezone.now())
    return render(
        request,
        "frontend/quotas.html",
        {
            "team_names": team_names,
            "shown_team": shown_team,
            "users_page": users_page,
            "teams_page": teams_page,
            "user_usages": account_usages(users=list(users_page)),
            "team_usages": account_usages(teams=list(teams_page)),
            "period_start": period_start,
            "period_last_day": local_today(period_end - timedelta(microseconds=1)),
        },
    )


def _account(kind: str, name: str) -> Model:
    if kind == "user":
        return get_object_or_404(get_user_model(), username=name)
    return get_object_or_404(Team, name=name)


@login_required
def quota_edit(request: AuthenticatedHttpRequest, kind: str, name: str) -> HttpResponse:
    _staff_only(request)
    account = _account(kind, name)
    of_account: dict[str, Any] = {kind: account}  # user= or team=
    limits = effective_limits(**of_account)
    if request.method == "POST":
        form = QuotaForm(request.POST)
        form.is_valid()
        serializer = QuotaInputSerializer(data=form.api_payload(limits))
        # Both run, so every mistake is shown at once, each beside its field.
        form.add_api_errors({} if serializer.is_valid() else dict(serializer.errors))
        if form.is_valid():
            try:
                saved = quota_save(**of_account, values=serializer.validated_data, actor=request.user, request=request)
            except DjangoValidationError as exc:
                form.add_api_errors(exc.message_dict)
            else:
                messages.success(request, f"Saved the quota of {kind} {name}. It applies from the next scheduling cycle.")
                for warning in saved.warnings:
                    messages.warning(request, warning)
                return redirect("frontend:quotas")
    else:
        form = QuotaForm(initial=QuotaForm.initial_from(limits))
    of_accounts: dict[str, Any] = {f"{kind}s": [account]}  # users= or teams=
    usage = account_usages(**of_accounts)[0]
    context = {
        "form": form,
        "kind": kind,
        "name": name,
        "limits": limits,
        "usage": usage,
        "grants": grants_of(period_start=usage.period_start, **of_account),
        "period_last_day": local_today(usage.period_end - timedelta(microseconds=1)),
        # The account's other half (a team's members, volumes and security settings; a user's account): onboarding a
        # team took both places, and neither led to the other.
        "admin_url": reverse(f"admin:{account._meta.app_label}_{account._meta.model_name}_change", args=[account.pk]),
    }
    return render(request, "frontend/quota_edit.html", context)


@login_required
@require_POST
def quota_grant_view(request: AuthenticatedHttpRequest, kind: str, name: str) -> HttpResponse:
    """Add node-hours to the account's budget for this period only (quotas.services.budget_grant), from its quota page."""
    _staff_only(request)
    of_account: dict[str, Any] = {kind: _account(kind, name)}  # user= or team=
    here = reverse(f"frontend:quota-{kind}", args=[name])
    try:
        node_hours = float(request.POST.get("node_hours", ""))
    except ValueError:
        messages.error(request, "Nothing was added: give the node-hours to add as a number (e.g. 20 or 2.5).")
        return redirect(here)
    try:
        grant = budget_grant(
            **of_account, node_hours=node_hours, reason=request.POST.get("reason", ""), actor=request.user, request=request
        )
    except DjangoValidationError as exc:
        for problems in exc.message_dict.values():
            for problem in problems:
                messages.error(request, f"Nothing was added: {problem}")
        return redirect(here)
    of_accounts: dict[str, Any] = {f"{kind}s": [of_account[kind]]}  # users= or teams=
    usage = account_usages(**of_accounts)[0]
    end = timezone.localtime(usage.period_end).strftime("%Y-%m-%d %H:%M %Z")
    messages.success(
        request,
        f"Added {node_hours_words(grant.node_hours)} to the budget of {kind} {name} for this period: {usage.budget_text}. "
        f"Its jobs waiting for the budget may start from the next scheduling cycle; the period renews {end} with the quota's "
        f"{usage.limits.node_hours_per_period:g}.",
    )
    return redirect(here)


@login_required
@require_POST
def quota_grant_revoke_view(request: AuthenticatedHttpRequest, kind: str, name: str, grant_id: int) -> HttpResponse:
    """Take back node-hours added to this period by mistake (quotas.services.budget_grant_revoke), from the quota page."""
    _staff_only(request)
    account = _account(kind, name)
    grant = get_object_or_404(BudgetGrant, pk=grant_id, **{kind: account})
    here = reverse(f"frontend:quota-{kind}", args=[name])
    try:
        revoked = budget_grant_revoke(grant=grant, reason=request.POST.get("reason", ""), actor=request.user, request=request)
    except DjangoValidationError as exc:
        for problems in exc.message_dict.values():
            for problem in problems:
                messages.error(request, f"Nothing was revoked: {problem}")
        return redirect(here)
    of_accounts: dict[str, Any] = {f"{kind}s": [account]}  # users= or teams=
    usage = account_usages(**of_accounts)[0]
    left = f": {usage.budget_text}" if usage.budget is not None else ""
    messages.success(
        request,
        f"Revoked the {node_hours_words(revoked.grant.node_hours)} added to the budget of {kind} {name} for this period{left}. "
        "Running jobs are not stopped; new jobs start only in what is left, from the next scheduling cycle.",
    )
    for warning in revoked.warnings:
        messages.warning(request, warning)
    return redirect(here)


@login_required
@require_POST
def quota_reset_view(request: AuthenticatedHttpRequest, kind: str, name: str) -> HttpResponse:
    _staff_only(request)
    of_account: dict[str, Any] = {kind: _account(kind, name)}  # user= or team=
    reset = quota_reset(**of_account, actor=request.user, request=request)
    fallback = "the site default" if kind == "user" else "no limits"
    messages.success(request, f"The quota of {kind} {name} is back to {fallback}.")
    for warning in reset.warnings:
        messages.warning(request, warning)
    return redirect("frontend:quotas")
