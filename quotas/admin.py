from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import unquote
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html

from accounts.admin_access import MusterAdminAccess
from audit.services import audit_changes, audit_record
from jobs.amounts import plural
from jobs.models import Job
from jobs.states import TERMINAL_STATES
from policy.budget import node_hours_words
from quotas.limits import limits_of
from quotas.membership import team_members_left
from quotas.models import BudgetGrant, Quota, Team, TeamVolume, UsageCharge
from quotas.periods import period_words

# Team fields whose changes go on the audit trail (membership is recorded on its own, as team.members).
AUDITED_FIELDS = (
    "name", "description", "allow_host_network", "allow_run_as_root", "allow_writable_root_filesystem", "image_pull_secrets",
)  # fmt: skip


def _fields(team: Team) -> dict[str, Any]:
    return {name: getattr(team, name) for name in AUDITED_FIELDS}


class TeamVolumeInline(MusterAdminAccess, admin.TabularInline):
    """The PersistentVolumeClaims (in the jobs' namespace) the team's jobs may mount."""

    model = TeamVolume
    extra = 0


# What to do with a team that is done with, since one that jobs or the ledger name cannot be deleted (docs/admin.md).
RETIRE_INSTEAD = (
    "Nothing was deleted. To retire a team instead, remove its members (Members, on the team's page: their jobs queued "
    "for it are cancelled, their running ones run to their end), so that no one can submit for it, and set its GPU "
    "quota to 0 (Quotas). The team stays, with its jobs' history and what they were charged."
)


def team_delete_refusals(teams: Sequence[Team]) -> list[str]:
    """Why each of these teams cannot be deleted (the jobs and ledger charges that name it: protected), one sentence a
    team; empty when none is named. Django admin said "your account doesn't have permission to delete ... job" instead,
    as deleting a team would delete jobs and no one may delete a running one."""
    ids = [team.pk for team in teams]
    jobs = dict.fromkeys(ids, (0, 0))
    counted = (
        Job.objects.filter(team_id__in=ids)
        .values("team_id")
        .annotate(total=Count("id"), done=Count("id", filter=Q(state__in=TERMINAL_STATES)))
    )
    for row in counted:
        jobs[row["team_id"]] = (row["total"], row["done"])
    charged_to = UsageCharge.objects.filter(team_id__in=ids).values("team_id").annotate(n=Count("id"))
    charges = dict(charged_to.values_list("team_id", "n"))
    refusals = []
    for team in teams:
        (total, done), charged = jobs[team.pk], charges.get(team.pk, 0)
        if not total and not charged:
            continue
        said = []
        if total:
            refer = "refers" if total == 1 else "refer"
            said.append(f"{plural(total, 'job')} {refer} to it ({total - done} queued or running, {done} ended)")
        if charged:
            said.append(f"the ledger keeps {plural(charged, 'charge')} to it")
        refusals.append(f"Team {team.name} cannot be deleted: {' and '.join(said)}.")
    return refusals


def quota_words(quota: Quota | None) -> str:
    """A team's quota in a few words, as Django admin's team list and page show it beside the link to its quota page:
    "32 GPUs, 100 node-hours each calendar month (from the 1st, 00:00 UTC)", "none: unlimited"."""
    if quota is None:
        return "none: unlimited"
    limits = limits_of("team", "", quota)
    said = []
    if limits.max_gpus is not None:
        said.append(plural(limits.max_gpus, "GPU"))
    if limits.node_hours_per_period is not None:
        said.append(f"{node_hours_words(limits.node_hours_per_period)} {period_words()}")
    if limits.max_wall_time_seconds is not None or limits.max_node_hours_per_job is not None:
        said.append("limits per job")
    if limits.fair_share_weight != 1:
        said.append(f"fair-share weight {limits.fair_share_weight:g}")
    return ", ".join(said) or "a quota that limits nothing"


def _quota_of(team: Team) -> Quota | None:
    try:
        return team.quota
    except Quota.DoesNotExist:  # the reverse one-to-one without a row (select_related caches that: no query)
        return None


@admin.register(Team)
class TeamAdmin(MusterAdminAccess, admin.ModelAdmin):
    list_display = [
        "name", "description", "member_count", "quota_link", "allow_host_network", "allow_run_as_root",
        "allow_writable_root_filesystem", "created_at",
    ]  # fmt: skip
    list_select_related = ["quota"]
    # Onboarding a team is this page and its quota page (/quotas/teams/<name>/, whose form sets it): each links the other.
    readonly_fields = ["quota_link"]

    @admin.display(description="quota")
    def quota_link(self, obj: Team) -> str:
        if obj.pk is None:
            return "Set on its quota page (Quotas) once the team is saved: a team without one is unlimited."
        url = reverse("frontend:quota-team", args=[obj.name])
        return format_html('<a href="{}">{}</a>', url, quota_words(_quota_of(obj)))

    list_filter = ["allow_host_network", "allow_run_as_root", "allow_writable_root_filesystem"]
    search_fields = ["name", "description", "members__username"]
    filter_horizontal = ["members"]
    inlines = [TeamVolumeInline]
    delete_confirmation_template = "admin/quotas/team/delete_confirmation.html"
    delete_selected_confirmation_template = "admin/quotas/team/delete_selected_confirmation.html"

    @admin.display(description="members")
    def member_count(self, obj: Team) -> int:
        return obj.members.count()

    # Django admin saves in one transaction (save_model, then save_related), so the entries commit with the change.

    def save_model(self, request: HttpRequest, obj: Team, form: Any, change: bool) -> None:
        before = _fields(Team.objects.get(pk=obj.pk)) if change else dict.fromkeys(AUDITED_FIELDS)
        super().save_model(request, obj, form, change)
        changes = audit_changes(before, _fields(obj))
        if changes or not change:
            action = "team.update" if change else "team.create"
            audit_record(actor=request.user, action=action, target=obj, changes=changes, request=request)

    def formfield_for_manytomany(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        field = super().formfield_for_manytomany(db_field, request, **kwargs)
        if db_field.name == "members" and field is not None:
            field.help_text = (
                "Removing a member cancels their jobs queued for this team (a job is charged to a team its owner is in); "
                "their running jobs run to their end. The page then lists the jobs."
            )
        return field

    def save_related(self, request: HttpRequest, form: Any, formsets: Any, change: bool) -> None:
        team = form.instance
        # Members this change removes: their jobs queued for the team are cancelled as the admin's doing, and said.
        leaving = []
        if change and "members" in form.cleaned_data:
            staying = {user.pk for user in form.cleaned_data["members"]}
            leaving = [user for user in team.members.all() if user.pk not in staying]
        by = request.user if isinstance(request.user, User) else None
        left = team_members_left(team=team, users=leaving, by=by, request=request) if leaving else None
        super().save_related(request, form, formsets, change)
        for warning in left.warnings() if left is not None else []:
            messages.warning(request, warning)
        # The form's initial members are the team's as the request found them, before save_related replaced them.
        before = sorted(user.get_username() for user in form.initial.get("members", []))
        after = sorted(team.members.values_list("username", flat=True))
        if before != after:
            audit_record(actor=request.user, action="team.members", target=team, changes={"members": [before, after]}, request=request)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[Any, Any, Any, Any]:
        """A team that jobs or the ledger name is protected: the page says so plainly, and what to do instead, rather
        than list them (or ask for a permission to delete jobs no one has). A non-empty `protected` deletes nothing."""
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        refusals = team_delete_refusals(list(objs))
        if refusals:
            return deleted, counts, set(), [*refusals, RETIRE_INSTEAD]
        return deleted, counts, perms_needed, protected

    def delete_model(self, request: HttpRequest, obj: Team) -> None:
        _record_team_delete(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for team in queryset:
            _record_team_delete(request, team)
        super().delete_queryset(request, queryset)


@admin.register(BudgetGrant)
class BudgetGrantAdmin(MusterAdminAccess, admin.ModelAdmin):
    """Node-hours added to one period's budget, to read only: a grant is made and revoked on the account's quota page
    (or the API), each on the audit trail with its reason; an edit or a deletion here would change a budget unrecorded."""

    list_display = ["granted_at", "account", "node_hours", "period_start", "granted_by_username", "reason", "revoked_at"]
    list_filter = ["period_start", ("revoked_at", admin.EmptyFieldListFilter)]
    search_fields = ["user__username", "team__name", "reason", "granted_by_username", "revoke_reason"]
    list_select_related = ["user", "team"]
    date_hierarchy = "granted_at"

    @admin.display(description="account")
    def account(self, obj: BudgetGrant) -> str:
        return f"team {obj.team.name}" if obj.team is not None else f"user {obj.user}"

    def has_add_permission(self, request: HttpRequest, *args: Any) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def _record_team_delete(request: HttpRequest, team: Team) -> None:
    audit_record(
        actor=request.user,
        action="team.delete",
        target=team,
        changes={name: [value, None] for name, value in _fields(team).items()},
        request=request,
    )


# The people Muster serves: who they are and what they may do. Audited here, the layer above both accounts and audit.
USER_FIELDS = ("username", "email", "first_name", "last_name", "is_active", "is_staff", "is_superuser")


def _user_fields(user: Any) -> dict[str, Any]:
    return {name: getattr(user, name) for name in USER_FIELDS}


class AuditedUserAdmin(UserAdmin):
    """Django's user admin, with each account made, changed (an admin made, a user deactivated, a password set) or
    deleted on the audit trail: docs/admin.md says every change an admin makes is, and these were not. (Groups and
    permissions Muster does not use.)"""

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        before = _user_fields(type(obj).objects.get(pk=obj.pk)) if change else dict.fromkeys(USER_FIELDS)
        super().save_model(request, obj, form, change)
        changes = audit_changes(before, _user_fields(obj))
        if "password" in form.changed_data and change:
            changes["password"] = ["(set)", "(changed)"]  # that it changed, never what to
        if changes or not change:
            action = "user.update" if change else "user.create"
            audit_record(actor=request.user, action=action, target=obj, changes=changes, request=request)

    def user_change_password(self, request: HttpRequest, id: str, form_url: str = "") -> HttpResponse:  # noqa: A002 (Django's name)
        """The user's *Set password* page, which saves without save_model: that a password was set (or password sign-in
        disabled) goes on the trail too, in the same transaction, never what it was set to."""
        users = get_user_model().objects.filter(pk=unquote(id))
        with transaction.atomic():
            before = users.values_list("password", flat=True).first()
            response = super().user_change_password(request, id, form_url)
            user = users.first()
            if user is not None and user.password != before:
                after = "(changed)" if user.has_usable_password() else "(unusable: password sign-in disabled)"
                audit_record(actor=request.user, action="user.update", target=user, changes={"password": ["(set)", after]}, request=request)
        return response

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        _record_user_delete(request, obj)
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: Any) -> None:
        for user in queryset:
            _record_user_delete(request, user)
        super().delete_queryset(request, queryset)


def _record_user_delete(request: HttpRequest, user: Any) -> None:
    changes = {name: [value, None] for name, value in _user_fields(user).items()}
    audit_record(actor=request.user, action="user.delete", target=user, changes=changes, request=request)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), AuditedUserAdmin)
