"""Django admin for jobs and nodes: raw edits, with the guards that keep the cluster and the ledger honest.

A job that holds GPUs (SCHEDULED or RUNNING) cannot be deleted here, and what a job
runs is read-only: it was checked at submit, its pods run it and the ledger charged
it. Only a pending job's priority class may be changed. Admins cancel jobs instead (the
"Cancel selected jobs" action, the job page or the API), which tears the gang down and
charges it properly.
"""

from __future__ import annotations

import copy
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.actions import delete_selected as django_delete_selected
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Count, Model, Q, QuerySet, Sum
from django.db.models.functions import Coalesce
from django.forms.models import construct_instance
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from accounts.admin_access import MusterAdminAccess
from accounts.requests import AuthenticatedHttpRequest
from audit.services import audit_changes, audit_record
from jobs.amounts import gpu_amount, plural
from jobs.errors import JobFinished
from jobs.models import Allocation, Job, JobEvent, Node
from jobs.node_holds import NodesHeld, jobs_running_on, node_hold_write, nodes_hold, nodes_release
from jobs.services import job_cancel
from jobs.states import ACTIVE_STATES, JobState

# Written only by the scheduler, the ledger and the job's own reports, whatever the state.
BOOKKEEPING_FIELDS = (
    "state", "state_reason", "pending_reason_code", "pending_reason", "attempt", "restarts", "exit_code",
    "launch_failures", "launch_not_before", "over_quota", "estimated_start", "estimate_kind", "queue_position", "priority",
    "priority_factors", "reserved_nodes", "reserved_start", "promised_start", "charged_until",
    "checkpointed_at", "checkpoint_step", "checkpoint_attempt",
    "submitted_at", "scheduled_at", "started_at", "finished_at",
)  # fmt: skip

# All an admin may change here: the job's label, and a PENDING job's priority class (raised or lowered).
ADMIN_EDITABLE_FIELDS = ("name", "priority_class")

# What a job asks for, runs as and where: every other column, derived from the model so a field added later is
# read-only until someone decides otherwise. Fixed once it leaves PENDING: changing them under a gang that was placed
# and charged for another shape would lie to the scheduler, the cluster and the ledger; and a PENDING job's were checked
# at submit (the cluster's size, its owner's limits, the site's maxima), which a raw edit would skip.
SHAPE_FIELDS = tuple(
    f.name for f in Job._meta.concrete_fields if f.editable and not f.primary_key and f.name not in BOOKKEEPING_FIELDS and f.name != "name"
)

# Every column the change page shows read-only, whatever the job's state (but for a PENDING job's class).
JOB_READONLY_FIELDS = tuple(
    f.name for f in Job._meta.concrete_fields if f.editable and not f.primary_key and f.name not in ADMIN_EDITABLE_FIELDS
)


def _holds_gpus(job: Job | None) -> bool:
    return job is not None and job.state in ACTIVE_STATES


class JobEventInline(MusterAdminAccess, admin.TabularInline):
    model = JobEvent
    extra = 0
    can_delete = False
    readonly_fields = ["at", "from_state", "to_state", "reason", "attempt"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


class AllocationInline(MusterAdminAccess, admin.TabularInline):
    model = Allocation
    extra = 0
    can_delete = False
    # The scheduler's record of where a job runs (node, GPU slot): every column read-only.
    readonly_fields = [f.name for f in Allocation._meta.concrete_fields if not f.primary_key and f.name != "job"]

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        # Allocations are the scheduler's record of GPUs held; one added by hand would hold GPUs no pod uses.
        return False


class JobAdminForm(forms.ModelForm):
    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        # Django checks only the constraints whose fields are all on the form; the job's others mix edited and read-only
        # columns. Check every one on the job as it would be saved, so an edit that breaks one is an error on the page,
        # never a 500 on the save.
        try:
            construct_instance(self, copy.copy(self.instance)).validate_constraints()
        except ValidationError as e:
            raise ValidationError(e.messages) from e
        return cleaned


# Held now: a live allocation of a placed or running job (what the cluster page counts on a node).
LIVE = Q(allocations__released_at__isnull=True, allocations__job__state__in=ACTIVE_STATES)


class OnNodeFilter(admin.SimpleListFilter):
    """The jobs placed or running on one node now (`?node=gpu-07`), where the node list's *jobs* column links: which
    jobs a hold would leave running there, or a node's trouble would take down."""

    title = "on node now"
    parameter_name = "node"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        # Only nodes that hold jobs now (one query), not every node of the cluster.
        names = Node.objects.filter(LIVE).values_list("name", flat=True).distinct().order_by("name")
        return [(name, name) for name in names]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> QuerySet[Job]:
        if not self.value():
            return queryset
        live = Allocation.objects.filter(node__name=self.value(), released_at__isnull=True).values("job_id")
        return queryset.filter(pk__in=live, state__in=ACTIVE_STATES)


@admin.register(Job)
class JobAdmin(MusterAdminAccess, admin.ModelAdmin):
    form = JobAdminForm
    list_display = ["id", "name", "owner", "team", "state", "nodes", "gpus_per_node", "priority_class", "submitted_at"]
    list_filter = ["state", "priority_class", "team", OnNodeFilter]
    search_fields = ["name", "owner__username", "image"]
    inlines = [AllocationInline, JobEventInline]
    # Our delete_selected replaces the site-wide action of the same name.
    actions = ["cancel_selected", "delete_selected"]

    def get_readonly_fields(self, request: HttpRequest, obj: Job | None = None) -> list[str]:
        # State changes go through services (cancel in the UI/API), never through a raw edit here. What a job runs was
        # checked at submit (the cluster's size, its owner's limits, the site's maxima): a raw edit would skip every
        # check, so a pending job's shape is read-only too, but for its class, which an admin may raise or lower.
        fields = [*JOB_READONLY_FIELDS]
        if obj is None or obj.state != JobState.PENDING:
            fields.append("priority_class")
        return fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # a job is submitted (API, form, CLI), which checks it; never added raw

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "priority_class":
            return forms.ChoiceField(choices=[(c, c) for c in settings.MUSTER_PRIORITY_CLASSES], label="Priority class")
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    def has_delete_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
        if _holds_gpus(obj):
            return False
        return super().has_delete_permission(request, obj)

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        if request.method == "GET":
            job = self.get_object(request, object_id)
            if job is not None and job.state == JobState.PENDING:
                self.message_user(
                    request,
                    f"Job {job.pk} is PENDING: its priority class may be changed here; what it runs was checked at submit and "
                    "is read-only. To run it otherwise, cancel it and submit it again (its page's Clone fills the form).",
                    messages.INFO,
                )
            elif job is not None:
                held = " It holds GPUs, so it cannot be deleted either." if _holds_gpus(job) else ""
                self.message_user(
                    request,
                    f"Job {job.pk} is {job.state}: what it runs and where (owner, team, image, command, nodes, GPUs and "
                    f"their share, volumes, priority class, allocations, ...) is read-only.{held} To stop it, cancel it "
                    "(the 'Cancel selected jobs' action on the list, or the job's page).",
                    messages.WARNING,
                )
        return super().change_view(request, object_id, form_url, extra_context)

    def save_model(self, request: HttpRequest, obj: Job, form: Any, change: bool) -> None:
        if not change:
            super().save_model(request, obj, form, change)
            return
        with transaction.atomic():
            # Locked, and only the edited columns written: a plain save() would write back the state,
            # attempt and allocation bookkeeping read when the form was posted, over the cycle's.
            current = Job.objects.select_for_update().get(pk=obj.pk)
            fields = list(form.changed_data)
            if current.state != JobState.PENDING:
                dropped = [f for f in fields if f in SHAPE_FIELDS]
                stale = [f for f in SHAPE_FIELDS if f in request.POST]
                if dropped or stale:
                    self.message_user(
                        request,
                        f"Job {obj.pk} left PENDING ({current.state}) while you edited it: its shape was not changed. "
                        "Cancel it and submit a new job instead.",
                        messages.ERROR,
                    )
                fields = [f for f in fields if f not in SHAPE_FIELDS]
            if fields:
                obj.save(update_fields=[*fields, "updated_at"])
                changes = audit_changes(_audit_values(current, fields), _audit_values(obj, fields))
                if changes:
                    audit_record(actor=request.user, action="job.admin_edit", target=obj, changes=changes, request=request, job=obj)

    def delete_model(self, request: HttpRequest, obj: Job) -> None:
        with transaction.atomic():
            # Re-read under the lock: the job may have been scheduled since the page was shown.
            if _holds_gpus(Job.objects.select_for_update().filter(pk=obj.pk).first()):
                raise PermissionDenied(f"Job {obj.pk} holds GPUs now; cancel it instead.")
            _audit_delete(request, obj)
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Job]) -> None:
        with transaction.atomic():
            if _locked(queryset).filter(state__in=ACTIVE_STATES).exists():
                raise PermissionDenied("Some of these jobs hold GPUs now; cancel them instead.")
            for job in queryset.select_related(None).order_by("pk"):
                _audit_delete(request, job)
            super().delete_queryset(request, queryset)

    @admin.action(permissions=["delete"], description="Delete selected jobs (not those holding GPUs)")
    def delete_selected(self, request: HttpRequest, queryset: QuerySet[Job]) -> HttpResponse | None:
        with transaction.atomic():
            active = list(_locked(queryset).filter(state__in=ACTIVE_STATES).values_list("pk", "state"))
            if active:
                listed = ", ".join(f"{pk} ({state})" for pk, state in active)
                self.message_user(
                    request,
                    f"Nothing was deleted: job{'s' if len(active) > 1 else ''} {listed} hold{'' if len(active) > 1 else 's'} "
                    "GPUs. Cancel them first (the 'Cancel selected jobs' action); ended jobs can be deleted, and their "
                    "usage stays in the ledger.",
                    messages.ERROR,
                )
                return None
            return django_delete_selected(self, request, queryset)

    @admin.action(permissions=["change"], description="Cancel selected jobs (tear down their pods)")
    def cancel_selected(self, request: AuthenticatedHttpRequest, queryset: QuerySet[Job]) -> None:
        cancelled, ended = [], []
        for job in queryset.order_by("pk"):
            try:
                job_cancel(job=job, by=request.user, request=request)
            except JobFinished:
                ended.append(str(job.pk))
            else:
                cancelled.append(str(job.pk))
        if cancelled:
            self.message_user(request, f"Cancelled job{'s' if len(cancelled) > 1 else ''} {', '.join(cancelled)}.", messages.SUCCESS)
        if ended:
            self.message_user(request, f"Already ended, left as they were: {', '.join(ended)}.", messages.WARNING)


def _audit_values(job: Job, fields: list[str]) -> dict[str, Any]:
    """The fields as the audit trail shows them: related rows by name (an owner's username), the rest as stored."""
    values: dict[str, Any] = {}
    for name in fields:
        value = getattr(job, name)
        values[name] = str(value) if isinstance(value, Model) else value
    return values


def _audit_delete(request: HttpRequest, job: Job) -> None:
    # The entry outlives the job (its link is cleared with it) and keeps what the job was.
    shape = _audit_values(job, ["state", *SHAPE_FIELDS])
    audit_record(
        actor=request.user,
        action="job.admin_delete",
        target=job,
        changes={name: [value, None] for name, value in shape.items()},
        request=request,
    )


def _locked(queryset: QuerySet[Job]) -> QuerySet[Job]:
    """The selected jobs' rows, locked in id order until the transaction ends (no joins: PostgreSQL locks no outer join)."""
    pks = list(queryset.order_by().values_list("pk", flat=True))
    list(Job.objects.select_for_update().filter(pk__in=pks).order_by("pk").values_list("pk", flat=True))
    return Job.objects.filter(pk__in=pks)


# Shown beside HELD on the cluster page and in the reasons of jobs waiting for the node: a line, not a report.
HELD_REASON_MAX_CHARS = 200

HELD_REASON_HELP = (
    'Why, and for how long if known ("GPU 3 replaced, back Friday"). Shown beside HELD on the cluster page and in the '
    "reasons of jobs waiting for it. Cleared when the hold is."
)


class NodeAdminForm(forms.ModelForm):
    """A hold takes a reason, as Slurm's `scontrol update state=drain` takes `reason=`: users waiting for the node read it
    on the cluster page and in their jobs' reasons."""

    held_reason = forms.CharField(
        label="Held reason",
        required=False,
        max_length=HELD_REASON_MAX_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"size": 80}),
        help_text=f"Required to hold the node. {HELD_REASON_HELP}",
    )

    class Meta:
        model = Node
        fields = ["held", "held_reason"]

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if not self.cleaned_data.get("held") or self.cleaned_data.get("held_reason"):
            return cleaned
        if "held_reason" in self.fields:
            self.add_error("held_reason", "Say why the node is held: users waiting for it read this.")
        elif not self.instance.held:  # the node list's column: a new hold needs its reason, on the node's own page
            self.add_error("held", f"A hold takes a reason: hold {self.instance.name} from its own page, which asks for one.")
        return cleaned


class NodesHoldForm(forms.Form):
    """The reason of a hold of several nodes at once (the list's "Hold selected nodes"): required, as on a node's page."""

    held_reason = forms.CharField(
        label="Held reason",
        max_length=HELD_REASON_MAX_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"size": 80, "autofocus": True}),
        error_messages={"required": "Say why the nodes are held: users waiting for them read this."},
        help_text=HELD_REASON_HELP,
    )


def _say_jobs_run_on(model_admin: admin.ModelAdmin[Node], request: HttpRequest, result: NodesHeld) -> None:
    """A hold stops nothing that runs, as Slurm's drain: say which jobs run on to their end on the nodes just held."""
    if result.running:
        model_admin.message_user(
            request,
            f"Jobs keep running there until they end (a hold places nothing new, and stops nothing): {result.running_text()}. "
            f"To free {'the node' if len(result.running) == 1 else 'the nodes'} sooner, cancel those jobs.",
            messages.WARNING,
        )


class NodeChangeListForm(NodeAdminForm):
    """The node list's editable column: release at once (or keep), but hold from the node's page, which asks why."""

    held_reason = None  # type: ignore[assignment]  # not on the list: a new hold is refused there (NodeAdminForm.clean)

    class Meta:
        model = Node
        fields = ["held"]


@admin.register(Node)
class NodeAdmin(MusterAdminAccess, admin.ModelAdmin):
    form = NodeAdminForm
    list_display = [
        "name", "gpus_in_use", "jobs_on_node", "rack", "gpu_model", "state", "held", "held_reason", "failures_in_row", "updated_at",
    ]  # fmt: skip
    list_filter = ["state", "held", "rack"]
    list_editable = ["held"]
    actions = ["hold_selected", "release_selected"]
    # The cluster owns what a node is (the backend's sync writes it back every cycle, so an edit here would be undone
    # within seconds, and a renamed node would be a new one while its jobs stay on the old). Muster's own words are
    # `held` and its reason.
    readonly_fields = [
        f.name for f in Node._meta.get_fields() if f.concrete and not f.auto_created and f.name not in ("held", "held_reason")
    ]

    def get_readonly_fields(self, request: HttpRequest, obj: Node | None = None) -> list[str]:
        return [*self.readonly_fields, "gpus_in_use", "jobs_on_node"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Node]:
        # What each node holds now, summed by the database in the list's own query: an admin choosing which node to
        # hold sees its GPUs in use and its jobs without a query per row.
        return (
            super()
            .get_queryset(request)
            .annotate(
                gpus_held=Coalesce(Sum("allocations__gpus", filter=LIVE), 0.0),
                jobs_held=Count("allocations__job", filter=LIVE, distinct=True),
            )
        )

    @admin.display(description="GPUs in use", ordering="gpus_held")
    def gpus_in_use(self, node: Node) -> str:
        """`6 / 8` (Muster's jobs' GPUs, a slice counting its share), and what pods Muster did not start hold there."""
        text = f"{gpu_amount(node.gpus_held)} / {node.gpus_total}"  # type: ignore[attr-defined]
        if node.gpus_foreign or node.slices_foreign:
            text += f" (+{plural(node.gpus_foreign, 'GPU') if node.gpus_foreign else plural(node.slices_foreign, 'slice')} of other pods)"
        return text

    @admin.display(description="jobs placed or running", ordering="jobs_held")
    def jobs_on_node(self, node: Node) -> str:
        """How many jobs hold GPUs here now, linked to them in the job list (its *on node now* filter)."""
        count: int = node.jobs_held  # type: ignore[attr-defined]
        if not count:
            return "none"
        url = f"{reverse('admin:jobs_job_changelist')}?{urlencode({OnNodeFilter.parameter_name: node.name})}"
        return format_html('<a href="{}">{}</a>', url, plural(count, "job"))

    def get_changelist_form(self, request: HttpRequest, **kwargs: Any) -> Any:
        return super().get_changelist_form(request, form=NodeChangeListForm, **kwargs)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # nodes come from the cluster

    def has_delete_permission(self, request: HttpRequest, obj: Node | None = None) -> bool:
        return False  # the cluster's sync would add it back; a node leaves by leaving the cluster

    def save_model(self, request: Any, obj: Node, form: Any, change: bool) -> None:
        # Django admin saves in one transaction, so the entry commits with the change. The row is locked and only
        # Muster's own columns written (node_hold_write).
        current = Node.objects.select_for_update().get(pk=obj.pk)
        if obj.held and "held_reason" not in form.changed_data:  # the node list's column, or a reason left as it was
            obj.held_reason = current.held_reason
        if node_hold_write(current=current, node=obj, by=request.user, request=request) == "node.hold":
            _say_jobs_run_on(self, request, NodesHeld(held=[obj.name], running=jobs_running_on([obj.name])))

    @admin.action(permissions=["change"], description="Hold selected nodes (asks why)")
    def hold_selected(self, request: HttpRequest, queryset: QuerySet[Node]) -> HttpResponse | None:
        """Many nodes at once, with one reason, as `scontrol update nodename=gpu-[07-08] state=drain reason=...`: a page
        asks for the reason (required, as on a node's own page), then holds them and says which jobs run on there."""
        form = NodesHoldForm(request.POST if "apply" in request.POST else None)
        if form.is_bound and form.is_valid():
            result = nodes_hold(nodes=queryset, reason=form.cleaned_data["held_reason"], by=request.user, request=request)
            self.message_user(request, result.summary(), messages.SUCCESS)
            _say_jobs_run_on(self, request, result)
            return None
        nodes = list(queryset.order_by("name"))
        running = jobs_running_on([n.name for n in nodes])
        context = {
            **self.admin_site.each_context(request),
            "title": "Hold nodes",
            "subtitle": None,
            "opts": self.model._meta,
            "nodes": [(node, running.get(node.name, [])) for node in nodes],
            "form": form,
            "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
            "media": self.media,
        }
        return TemplateResponse(request, "admin/jobs/node/hold_selected.html", context)

    @admin.action(permissions=["change"], description="Release selected nodes")
    def release_selected(self, request: HttpRequest, queryset: QuerySet[Node]) -> None:
        released, not_held = nodes_release(nodes=queryset, by=request.user, request=request)
        if released:
            self.message_user(
                request, f"Released {', '.join(released)}: new work may be placed there again (failure count reset).", messages.SUCCESS
            )
        if not_held:
            self.message_user(request, f"Not held, left as they were: {', '.join(not_held)}.", messages.WARNING)

    search_fields = ["name"]
