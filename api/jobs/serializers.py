"""Input and output shapes of the jobs API."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import User
from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import MaxLengthValidator, URLValidator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from api.telemetry.summary import TelemetrySummarySerializer
from apikit.serializers import StrictQuerySerializer, StrictSerializer
from jobs import validators
from jobs.arrays import ARRAY_MAX_INDEX, ARRAY_SYNTAX, array_indices
from jobs.dependencies import JOB_ID_MAX, Asked, Named
from jobs.dependencies import KINDS as DEPENDENCY_KINDS
from jobs.dependencies import contradictions as dependency_contradictions
from jobs.dependencies import met as dependency_met
from jobs.dependencies import resolve as dependencies_resolve
from jobs.logs import job_attempt_ranks, job_log_attempts, ranks_text
from jobs.maintenance import maintenance_by_node
from jobs.models import EstimateKind, Job, JobEvent, JobResize, Node
from jobs.selectors import (
    job_gpus_held,
    job_nodes_shown,
    job_run_seconds,
    node_gpus_free,
    node_gpus_idle,
    node_settles_until,
    node_slices_free,
)
from jobs.services import CANCEL_COMMENT_MAX, UPDATABLE_FIELDS, job_submit_problems
from notify.services import EVENTS, asks_json
from notify.webhooks import webhook_refusal
from policy.model import Priority
from scheduler.queue import QueueCounts, QueueEntry, stored_priority
from telemetry.selectors import job_telemetry_summary


class SimulateSerializer(StrictSerializer):
    duration_seconds = serializers.FloatField(min_value=0, max_value=30 * 24 * 3600, required=False)
    exit_code = serializers.IntegerField(min_value=0, max_value=255, required=False)
    checkpoint_every_seconds = serializers.FloatField(
        min_value=60,
        max_value=30 * 24 * 3600,
        required=False,
        help_text="The simulated cluster only: rank 0 reports a checkpoint this often while it runs, as training code would; "
        "at least 60 seconds.",
    )


class VolumeSerializer(StrictSerializer):
    claim = serializers.CharField(max_length=253, help_text="A PersistentVolumeClaim the job's team was given (an admin lists them).")
    mount_path = serializers.CharField(max_length=512, help_text="An absolute path in the containers, e.g. /data; not a system one.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # Declared here, not as a class attribute: `read_only` is also every DRF field's own flag.
        fields = super().get_fields()
        fields["read_only"] = serializers.BooleanField(
            required=False, default=False, help_text="Mount it read-only; a volume the team was given read-only always is."
        )
        return fields


class WebhookField(serializers.URLField):
    """An http(s) URL, checked once. DRF's URLField adds Django's URL check, which takes ftp:// as well and, beside the
    check of the scheme, said a second "Enter a valid URL." of the same mistake (ftp://hooks, "not a url")."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        only_http = URLValidator(
            schemes=["http", "https"], message="A webhook is an http:// or https:// URL, e.g. https://hooks.example.org/muster."
        )
        self.validators = [v for v in self.validators if not isinstance(v, URLValidator)] + [only_http]


# Slurm's --mail-type names, which `muster submit` takes and the docs cite. The API keeps one spelling, Muster's
# lowercase events, as its other JSON fields do (a class name or a type is never coerced) and as it stores, echoes and
# sends them in webhooks; a Slurm name is answered with the event it means, not "not a valid choice".
SLURM_MAIL_TYPES = {
    "BEGIN": '"start"',
    "END": '"end"',
    "FAIL": '"fail"',
    "REQUEUE": '"requeue"',
    "ALL": "all four",
    "NONE": 'an empty list, "on": []',
}


class NotifyEventField(serializers.ChoiceField):
    """One of Muster's events; anything else is refused naming the events it takes (and a Slurm name, the one it means)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=list(EVENTS), **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and data not in EVENTS:
            meant = SLURM_MAIL_TYPES.get(data.strip().upper())
            hint = f"; Slurm's {data.strip().upper()} (muster submit --mail-type) is {meant} here" if meant else ""
            raise serializers.ValidationError(
                f'"{data}" is not an event: the API takes "start", "end", "fail" or "requeue", in lowercase{hint}.'
            )
        return super().to_internal_value(data)


class NotifySerializer(StrictSerializer):
    """When to tell the job's owner, and how (docs/notifications.md); Slurm's --mail-type BEGIN, END, FAIL, REQUEUE."""

    on = serializers.ListField(
        child=NotifyEventField(),
        allow_empty=True,
        max_length=len(EVENTS),
        help_text=(
            "Any of start (it runs), end (it ended, however), fail (it failed or reached its wall time), requeue (back in the "
            "queue after running: preempted, its node lost or drained, a pod deleted, a failed attempt restarted); in "
            "lowercase, Muster's names: Slurm's BEGIN, END, FAIL and REQUEUE (muster submit --mail-type) are refused, naming "
            "the event meant."
        ),
    )
    email = serializers.BooleanField(required=False, default=True, help_text="By e-mail, to the owner's address.")
    webhook = WebhookField(
        required=False,
        allow_blank=True,
        default="",
        max_length=500,
        error_messages={"max_length": "A webhook's URL is at most {max_length} characters."},
        help_text="An http(s) URL that gets a JSON POST for each.",
    )

    def validate_webhook(self, value: str) -> str:
        refused = webhook_refusal(value, resolve_fails_ok=True) if value else None
        if refused:
            raise serializers.ValidationError(f"Muster will not send to this webhook: {refused}.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs.get("on") and not attrs.get("webhook"):
            if not attrs.get("email", True):
                raise serializers.ValidationError({"on": ["Nothing would be sent: ask for e-mail, give a webhook, or choose no events."]})
            request = self.context.get("request")
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated and not user.email:
                nowhere = "Nothing would be sent: your account has no e-mail address (an admin sets it)"
                raise serializers.ValidationError({"email": [f"{nowhere}; give a webhook, or choose no events."]})
        return attrs


class DependencySerializer(StrictSerializer):
    type = serializers.ChoiceField(
        choices=list(DEPENDENCY_KINDS),
        help_text="afterok: start once the job has succeeded; afternotok: once it failed, timed out or was cancelled; "
        "afterany: once it ended, whatever way (sbatch --dependency's names).",
        error_messages={
            "invalid_choice": "Unknown dependency type {input!r}; choose afterok, afterany or afternotok (Slurm's after, "
            "aftercorr and singleton are not supported)."
        },
    )
    job = serializers.IntegerField(
        min_value=1,
        max_value=JOB_ID_MAX,
        help_text="The job's id; an array's id (its first element's) names every element, and with `index` one of them. "
        'Slurm\'s ARRAYID_INDEX is taken too, as a string: "12_1" is {"job": 12, "index": 1} (and "12" is 12).',
    )
    # No upper bound: an index no array has is said as any other one ("Array 12 has no element ... (its elements:
    # 12_[0-99])"), where a bound read "dependencies.0.index: Ensure this value is less than or equal to 9223372036854775807".
    index = serializers.IntegerField(
        min_value=0,
        required=False,
        allow_null=True,
        default=None,
        help_text="One element of the array `job` names, by its index (Slurm's 12_1: job 12, index 1).",
    )

    def to_internal_value(self, data: Any) -> Any:
        # `"job": "12_1"`, as `muster submit -d afterok:12_1` and Slurm write an array's element; `"12"` is job 12 (it
        # read "Must be an integer, not the string '12'" beside "12_1" taken), and any other text says both forms.
        if isinstance(data, Mapping) and isinstance(data.get("job"), str):
            job, sep, index = data["job"].strip().partition("_")
            if job.isascii() and job.isdigit() and not sep:
                data = {**data, "job": int(job)}
            elif sep and "index" not in data and job.isascii() and job.isdigit() and index.isascii() and index.isdigit():
                data = {**data, "job": int(job), "index": int(index)}
            else:
                said = f"'{data['job'][:40]}' is not a job: give its id, 12, or an array's element as Slurm writes it, 12_1"
                if sep and "index" in data:
                    said = f"'{data['job'][:40]}' names an element already: give 12_1, or job 12 with index 1, not both"
                raise serializers.ValidationError({"job": [said + "."]})
        if isinstance(data, Mapping) and (missing := [name for name, f in self.fields.items() if f.required and name not in data]):
            # A dependency is whole in an update too: DRF's partial update (PATCH, update-array) skips a nested
            # serializer's missing required fields, and {"job": 1, "index": 0} without a type was a 500.
            raise serializers.ValidationError({name: [str(self.fields[name].error_messages["required"])] for name in missing})
        return super().to_internal_value(data)


class DependedSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=list(DEPENDENCY_KINDS))
    job = serializers.IntegerField()
    array_id = serializers.IntegerField(allow_null=True, help_text="The array it is an element of (null: none), as the job's own.")
    array_index = serializers.IntegerField(allow_null=True, help_text="Its index in that array: Slurm names it array_id_array_index.")
    state = serializers.CharField(help_text="The state of the job it depends on, now.")
    met = serializers.BooleanField(allow_null=True, help_text="true: met; false: never will be (the job is cancelled); null: not yet.")


class JobSubmitSerializer(StrictSerializer):
    elsewhere = {
        "array": "An array is submitted to POST /api/v1/jobs/array/ (muster submit --array), one job per index.",
        # Written at the top level as docs/cli.md once showed it: said where it goes, not a bare "Unknown field."
        **{
            name: f'A field of simulate, not of the job: "simulate": {{"{name}": {example}}} (the simulated cluster only).'
            for name, example in (("duration_seconds", 600), ("exit_code", 1), ("checkpoint_every_seconds", 600))
        },
    }
    name = serializers.CharField(max_length=100)
    image = serializers.CharField(max_length=validators.IMAGE_MAX_LENGTH)
    command = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=validators.COMMAND_MAX_BYTES),
        allow_empty=False,
        min_length=1,
        max_length=validators.COMMAND_MAX_ARGS,
    )
    nodes = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="Nodes (ranks), all started at once; required unless max_nodes is given, or a GPU slice is asked "
        "(gpu_fraction, gpu_memory_gb or gpu_isolation), whose only node count is 1: left out, 1.",
    )
    min_nodes = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        allow_null=True,
        default=None,
        help_text="An elastic job (with max_nodes): it starts on as many whole nodes as fit, at least this many, grows "
        "onto idle nodes up to max_nodes and shrinks back (never below this) rather than be preempted. Equal to max_nodes, "
        "a plain job of that many nodes (as -N 4-4 is 4). docs/elastic-jobs.md.",
    )
    max_nodes = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        allow_null=True,
        default=None,
        help_text="An elastic job's most nodes, at least min_nodes (equal to it: a plain job of that many nodes). Beyond "
        "the cluster's nodes that fit the job, it is kept as asked and the job grows to those there are at each "
        "scheduling cycle, onto nodes added later too (the submit's first event says how far it may grow now).",
    )
    gpus_per_node = serializers.IntegerField(
        min_value=1,
        max_value=1024,
        required=False,
        help_text="Whole GPUs on each node; required unless a GPU slice is asked (gpu_fraction, gpu_memory_gb or "
        "gpu_isolation), a share of one GPU: left out, 1.",
    )
    wall_time_seconds = serializers.IntegerField(min_value=1)
    env = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=validators.ENV_MAX_BYTES),
        required=False,
        default=dict,
    )
    # Choices are the site's classes, read when the serializer is made (the schema lists them as an enum).
    priority_class = serializers.ChoiceField(choices=[], required=False)
    max_restarts = serializers.IntegerField(min_value=0, required=False, default=0)
    team = serializers.CharField(required=False, allow_null=True, default=None)
    simulate = SimulateSerializer(required=False, allow_null=True, default=None)
    preemptible = serializers.BooleanField(
        required=False, default=False, help_text="May borrow idle GPUs beyond its owner's quota; preempted first when they are needed."
    )
    volumes = VolumeSerializer(
        many=True, required=False, default=list, help_text="The team's volumes to mount (Kubernetes: PersistentVolumeClaims)."
    )
    rdma_per_node = serializers.IntegerField(
        min_value=0,
        max_value=1024,
        required=False,
        default=0,
        help_text="RDMA/SR-IOV devices each node's pod asks for (multi-node jobs only); the job goes only to nodes that have them.",
    )
    notify = NotifySerializer(
        required=False, allow_null=True, default=None, help_text="Tell the owner when it starts, ends or fails; default: their own default."
    )
    dependencies = DependencySerializer(
        many=True,
        required=False,
        default=list,
        help_text="sbatch --dependency: the job waits (pending reason DEPENDENCY) until each job named has ended as its type "
        "asks; one that can never be met any more cancels it, saying why. Jobs you may see, at most 1000 (an array's "
        "elements counted one by one).",
    )
    # A GPU slice (docs/gpu-sharing.md): one node, one GPU, and any of these three asks.
    gpu_fraction = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0.01,
        max_value=0.99,
        help_text="A share of one GPU (0.01-0.99), e.g. 0.25, instead of whole GPUs: single-node jobs with gpus_per_node 1. "
        "It runs on a node whose GPUs the site shares (time-slicing, MPS or MIG) and holds the smallest slice at least this large.",
    )
    gpu_memory_gb = serializers.FloatField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0.1,
        max_value=4096,
        help_text="GPU memory the slice must guarantee, in GB: only MPS and MIG slices enforce memory, time-slicing does not.",
    )
    gpu_isolation = serializers.BooleanField(
        required=False,
        default=False,
        help_text="The slice must be isolated in hardware (its own memory and faults): MIG slices only.",
    )

    def validate_dependencies(self, value: list[dict[str, Any]]) -> list[Asked]:
        if not value:
            return []
        named = [Named(d["type"], d["job"], d.get("index")) for d in value]
        found, problems = dependencies_resolve(self.context["request"].user, named)
        problems += dependency_contradictions(found)
        if problems:
            raise serializers.ValidationError(problems)
        return found

    def validate_volumes(self, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        errors = validators.volume_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return [{**v, "mount_path": "/" + "/".join(p for p in v["mount_path"].split("/") if p)} for v in value]

    def validate_name(self, value: str) -> str:
        value = value.strip()
        if not validators.printable_name(value):
            raise serializers.ValidationError("A name is 1-100 printable characters (no control or invisible ones).")
        return value

    def validate_image(self, value: str) -> str:
        error = validators.image_reference_error(value)
        if error:
            raise serializers.ValidationError(error)
        return value

    def validate_command(self, value: list[str]) -> list[str]:
        errors = validators.command_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate_env(self, value: dict[str, str]) -> dict[str, str]:
        errors = validators.env_errors(value)
        if errors:
            raise serializers.ValidationError(errors)
        return value

    def validate_wall_time_seconds(self, value: int) -> int:
        limit = settings.MUSTER_MAX_WALL_TIME_SECONDS
        if value > limit:
            raise serializers.ValidationError(f"The site maximum wall time is {limit} seconds; asked for {value}.")
        return value

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        classes = settings.MUSTER_PRIORITY_CLASSES
        field = cast(serializers.ChoiceField, self.fields["priority_class"])
        field.choices = classes
        field.error_messages["invalid_choice"] = f"Unknown priority class {{input!r}}; choose one of {', '.join(classes)}."
        # The site's most restarts and longest wall time, for the schema to give as bounds (validate_* refuse more in
        # words; the schema said any number).
        cast(serializers.IntegerField, self.fields["max_restarts"]).max_value = settings.MUSTER_MAX_RESTARTS
        cast(serializers.IntegerField, self.fields["wall_time_seconds"]).max_value = settings.MUSTER_MAX_WALL_TIME_SECONDS

    def validate_max_restarts(self, value: int) -> int:
        if value > settings.MUSTER_MAX_RESTARTS:
            raise serializers.ValidationError(f"At most {settings.MUSTER_MAX_RESTARTS} restarts.")
        return value

    def validate_team(self, value: str | None) -> Any:
        user = self.context["request"].user
        teams = {t.name: t for t in user.teams.all()}
        if value is None:
            # A member of exactly one team submits for it without saying so; a member of several says which (as Slurm
            # charges a job to an account): else a job of no team escaped both teams' quotas and budgets.
            if len(teams) > 1:
                raise serializers.ValidationError(
                    f"You are in teams {', '.join(sorted(teams))}: say which this job is for (team; muster submit --team), "
                    "so its quota and budget apply."
                )
            return next(iter(teams.values()), None)
        if value not in teams:
            raise serializers.ValidationError(f"You are not a member of a team named {value!r}.")
        return teams[value]

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Whether the job fits the cluster at all is checked by `job_submit` itself.
        attrs.setdefault("priority_class", settings.MUSTER_DEFAULT_PRIORITY_CLASS)
        low, high = attrs.get("min_nodes"), attrs.get("max_nodes")
        if (low is None) != (high is None):
            missing = "max_nodes" if high is None else "min_nodes"
            raise serializers.ValidationError({missing: ["An elastic job gives both min_nodes and max_nodes."]})
        if low is not None and high is not None:
            if low > high:
                raise serializers.ValidationError({"max_nodes": [f"max_nodes ({high}) must be at least min_nodes ({low})."]})
            if attrs.get("nodes") not in (None, high):
                raise serializers.ValidationError({"nodes": [f"An elastic job's nodes is its max_nodes ({high}); leave it out."]})
            attrs["nodes"] = high
            if low == high:
                # 4 to 4 nodes is 4 nodes, as `-N 4-4` is for the CLI and sbatch: a plain job, not a refusal.
                attrs["min_nodes"] = attrs["max_nodes"] = None
        # A GPU slice is one node and one GPU (docs/gpu-sharing.md): 1 is the only value either may take, so it is
        # the default, as `muster submit` and the form give it; any other is refused by the slice's own check.
        absent: dict[str, list[str]] = {}
        for field in ("nodes", "gpus_per_node"):
            if field not in attrs:
                if self._asks_a_slice(attrs):
                    attrs[field] = 1
                else:
                    absent[field] = [str(self.fields[field].error_messages["required"])]
        if absent:
            raise serializers.ValidationError(absent)
        return attrs

    def _asks_a_slice(self, attrs: Mapping[str, Any]) -> bool:
        """Whether the body asks for a GPU slice: in the valid fields, or as sent when that field is itself wrong (a
        gpu_fraction of 1.5 is refused for itself, without "gpus_per_node: This field is required." beside it)."""
        sent = self.initial_data if isinstance(getattr(self, "initial_data", None), Mapping) else {}
        return any(attrs.get(f) or sent.get(f) not in (None, False) for f in SLICE_FIELDS)


SLICE_FIELDS = ("gpu_fraction", "gpu_memory_gb", "gpu_isolation")


ELASTIC_FIELDS = {"nodes", "min_nodes", "max_nodes"}


def submit_problems(serializer: JobSubmitSerializer, owner: User) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Every reason a submit of the serializer's data would be refused, all at once, and the submit's spec if none.

    Each field's own errors, then the checks across fields and those of the cluster's size and the owner's limits
    (`jobs.services.job_submit_problems`) over the fields that are valid: a form never shows its mistakes in rounds.
    """
    if serializer.is_valid():
        spec = dict(serializer.validated_data)
        problems = job_submit_problems(owner=owner, **spec)
        return problems, None if problems else spec
    errors: dict[str, Any] = dict(serializer.errors)
    if not isinstance(serializer.initial_data, Mapping):
        return errors, None  # not an object: no field to look at
    valid, own = serializer.valid_fields()
    for key, detail in own.items():
        errors.setdefault(key, detail)
    if not ELASTIC_FIELDS & set(errors):
        try:
            valid = serializer.validate(valid)
        except serializers.ValidationError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {api_settings.NON_FIELD_ERRORS_KEY: exc.detail}
            for key, detailed in detail.items():
                errors.setdefault(key, detailed)
    # The checks below look at every field not refused (GPUs per node beyond every node is said whatever else is
    # wrong), but not at an elastic range when the node counts are: wrong, they would hide the rest.
    refused = set(errors) | ({"min_nodes", "max_nodes"} if ELASTIC_FIELDS & set(errors) else set())
    valid = {k: v for k, v in valid.items() if k not in refused}
    for key, messages in job_submit_problems(owner=owner, **valid).items():
        errors.setdefault(key, messages)
    return errors, None


# Why each of a submit's fields an update does not take is refused: said by name, not as an unknown field.
_NOT_UPDATED = (
    "Not changed by an update (muster update): only name, wall_time_seconds, priority_class, max_restarts, "
    "preemptible and dependencies are; cancel the job and submit it again."
)


class JobUpdateSerializer(JobSubmitSerializer):
    """`scontrol update`: what a pending job's owner (or an admin) may change before it starts. Each field is checked as
    a submit checks it (the same validators); the owner's limits are checked with the job as it would be."""

    answer_serializer = None
    elsewhere = {
        **{name: _NOT_UPDATED for name in JobSubmitSerializer._declared_fields if name not in UPDATABLE_FIELDS},
        "array": _NOT_UPDATED,
    }
    # The submit's other fields are not an update's (DRF drops a field set to None).
    image = command = nodes = min_nodes = max_nodes = gpus_per_node = env = team = simulate = volumes = None  # type: ignore[assignment]
    rdma_per_node = notify = gpu_fraction = gpu_memory_gb = gpu_isolation = None  # type: ignore[assignment]
    dependencies = DependencySerializer(
        many=True,
        required=False,
        help_text="scontrol update's Dependency: what it waits for from now on, in place of what it waited for (checked "
        "as at submit); an empty list clears them. A job may not come to wait on itself, directly or through the jobs "
        "it waits for.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Partial: a field left out is left as it is (none is required, and the submit's defaults do not apply).
        super().__init__(*args, partial=True, **kwargs)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if not attrs:
            fields = ", ".join(UPDATABLE_FIELDS)
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [f"Nothing to update: give at least one of {fields}."]})
        return attrs


class JobArrayUpdateSerializer(JobUpdateSerializer):
    """`scontrol update JobId=4` of array 4: every pending element of it, or those of `indices`, in one transaction."""

    array_id = serializers.IntegerField(min_value=1, help_text="The array's id (its first element's), as the submit answered.")
    indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=ARRAY_MAX_INDEX),
        required=False,
        allow_empty=False,
        help_text="The elements to update, by `array_index`; each must be pending. Left out, every pending element.",
        error_messages={"empty": "Give at least one index, or leave `indices` out to update every pending element."},
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "array_id" not in attrs:
            # Required, though the update's partial body makes no field so.
            raise serializers.ValidationError({"array_id": [str(self.fields["array_id"].error_messages["required"])]})
        super().validate({k: v for k, v in attrs.items() if k in UPDATABLE_FIELDS})
        return attrs


class JobArraySubmitSerializer(JobSubmitSerializer):
    array = serializers.CharField(
        max_length=1000,
        help_text="The elements' indices as `sbatch --array` takes them: `0-99`, `1,3,5-7`, `0-98:2`.",
        error_messages={"blank": ARRAY_SYNTAX, "required": ARRAY_SYNTAX},
    )

    def validate_array(self, value: str) -> list[int]:
        try:
            return array_indices(value, max_count=settings.MUSTER_MAX_ARRAY_SIZE)
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict["array"]) from exc


class JobCheckSerializer(JobArraySubmitSerializer):
    """The body of either submit, one job's or an array's (with `array`), checked without queueing anything."""

    array = serializers.CharField(
        required=False,
        max_length=1000,
        help_text="An array's indices as `sbatch --array` takes them (`0-99`, `1,3,5-7`, `0-98:2`), as `POST "
        "/api/v1/jobs/array/` takes them; left out, one job.",
        error_messages={"blank": ARRAY_SYNTAX},
    )


class JobEventSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobEvent
        fields = ["at", "from_state", "to_state", "reason", "attempt"]


class CheckpointReportSerializer(StrictSerializer):
    at = serializers.DateTimeField(
        required=False, help_text="When the checkpoint was written (ISO 8601, with a zone); now if left out. Not in the future."
    )
    step = serializers.IntegerField(min_value=0, max_value=2**63 - 1, required=False, help_text="The training step it holds.")
    attempt = serializers.IntegerField(
        min_value=1, required=False, help_text="The attempt that wrote it (the pods' MUSTER_ATTEMPT): a report of another one is a 409."
    )


class CheckpointSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    attempt = serializers.IntegerField(help_text="The attempt that wrote it.")
    checkpointed_at = serializers.DateTimeField()
    checkpoint_step = serializers.IntegerField(allow_null=True)
    recorded = serializers.BooleanField(help_text="False when the attempt had already reported this checkpoint or a later one.")


class JobResizeSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobResize
        fields = ["at", "attempt", "from_nodes", "to_nodes", "added", "removed", "reason"]


class PendingReasonSerializer(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()


class PriorityFactorSerializer(serializers.Serializer):
    value = serializers.FloatField(help_text="The factor, between 0 and 1.")
    weighted = serializers.FloatField(help_text="The factor times its weight: what it adds to the priority.")


class PrioritySerializer(serializers.Serializer):
    total = serializers.FloatField(help_text="The sum of the weighted factors; the queue runs highest first.")
    factors = serializers.DictField(child=PriorityFactorSerializer(), help_text="fair_share, age, class, size and short (wall time).")


def priority_data(priority: Priority) -> dict[str, Any]:
    return {
        "total": round(priority.total, 3),
        "factors": {name: {"value": round(v, 6), "weighted": round(w, 3)} for name, (v, w) in priority.factors.items()},
    }


QUEUE_POSITION_HELP = (
    "1 is next, in the order the last scheduling cycle considered the queue; null unless the job is pending, "
    "and for a pending job no cycle has planned yet (new)."
)
PRIORITY_HELP = "The priority the last cycle used and each factor's part; null unless the job is pending, and until a cycle planned it."
ESTIMATE_KIND_HELP = (
    "What estimated_start means: `reserved` (a reservation: starts by then at the latest, on reserved_nodes), "
    "`planned` (the queue planned forward as the work is expected to run: moves if higher-priority work arrives), "
    "`after` (past the planned part of the queue: not before then), or empty (nothing known)."
)
RESERVED_NODES_HELP = "The nodes held for the job by its reservation; empty without one."
PROMISED_START_HELP = "The start its first reservation promised during this wait, kept while it waits; null if none was made."


class JobSerializer(serializers.ModelSerializer):
    """A job as stored: a pending job's position, priority and estimate are what the last cycle stored on it."""

    owner = serializers.CharField(source="owner.username", read_only=True)
    team = serializers.CharField(source="team.name", read_only=True, allow_null=True, default=None)
    gpus = serializers.IntegerField(
        read_only=True, help_text="The GPUs asked: nodes x GPUs per node (a GPU-slice job: 1, the GPU its slice is of)."
    )
    gpus_held = serializers.SerializerMethodField(
        help_text="What its current attempt holds now, as usage and quotas count it: its whole GPUs, or its slice's share "
        "of a GPU (a MIG 1g slice holds 1/7, 0.143, for an ask of at least 0.1). Null while it holds none."
    )
    pending_reason = serializers.SerializerMethodField()
    assigned_nodes = serializers.SerializerMethodField()
    run_seconds = serializers.SerializerMethodField(
        help_text="How long its latest attempt held its nodes: from its placement (as its wall time counts) until it let "
        "them go, so far while it holds them. Null before it is placed, while it waits in the queue again, and for an "
        "ended job that never started: one that ended while queued, or whose launches never came up (cancelled after "
        "them, or failed after too many; its code never ran). A job cancelled back in the queue counts only until its "
        "requeue."
    )
    started_at = serializers.DateTimeField(
        source="attempt_started_at",
        read_only=True,
        allow_null=True,
        help_text="When its latest attempt's pods were all running: null until they are, also while a new attempt after "
        "a requeue is starting (the earlier attempt's start is in `events`).",
    )
    queue_position = serializers.IntegerField(read_only=True, allow_null=True, help_text=QUEUE_POSITION_HELP)
    priority = serializers.SerializerMethodField(help_text=PRIORITY_HELP)
    estimate_kind = serializers.ChoiceField(choices=EstimateKind.choices, read_only=True, help_text=ESTIMATE_KIND_HELP)
    reserved_nodes = serializers.ListField(child=serializers.CharField(), read_only=True, help_text=RESERVED_NODES_HELP)
    promised_start = serializers.DateTimeField(read_only=True, allow_null=True, help_text=PROMISED_START_HELP)

    class Meta:
        model = Job
        fields = [
            "id", "name", "owner", "team", "state", "state_reason", "pending_reason", "queue_position", "priority",
            "image", "command",
            "nodes", "gpus_per_node", "gpus", "gpus_held", "wall_time_seconds", "priority_class", "max_restarts",
            "min_nodes", "max_nodes", "attempt", "restarts", "exit_code", "assigned_nodes", "preemptible", "rdma_per_node",
            "gpu_fraction", "gpu_memory_gb", "gpu_isolation", "over_quota", "estimated_start", "estimate_kind",
            "reserved_nodes", "promised_start", "array_id", "array_index",
            "checkpointed_at", "checkpoint_step", "checkpoint_attempt",
            "submitted_at", "scheduled_at", "started_at", "finished_at", "run_seconds",
        ]  # fmt: skip
        read_only_fields = fields

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_run_seconds(self, job: Job) -> float | None:
        return job_run_seconds(job)

    @extend_schema_field(PendingReasonSerializer(allow_null=True))
    def get_pending_reason(self, job: Job) -> dict[str, str] | None:
        if job.state != "PENDING":
            return None
        return {"code": job.pending_reason_code, "message": job.pending_reason}

    def get_assigned_nodes(self, job: Job) -> list[str]:
        return job_nodes_shown(job)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_gpus_held(self, job: Job) -> float | None:
        return job_gpus_held(job)

    @extend_schema_field(PrioritySerializer(allow_null=True))
    def get_priority(self, job: Job) -> dict[str, Any] | None:
        priority = stored_priority(job) if job.state == "PENDING" else None
        return priority_data(priority) if priority else None


class LogAttemptSerializer(serializers.Serializer):
    attempt = serializers.IntegerField()
    ranks = serializers.ListField(child=serializers.IntegerField())


class HeldSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["user", "admin"],
        help_text="user: held by its owner (Slurm's JobHeldUser), whom its owner or an admin may release; admin: held by "
        "an admin (JobHeldAdmin), whom only an admin may release.",
    )
    by = serializers.CharField(allow_null=True, help_text="Who held it (null if that account is gone).")
    at = serializers.DateTimeField()


class JobDetailSerializer(JobSerializer):
    events = JobEventSerializer(many=True, read_only=True)
    held = serializers.SerializerMethodField(
        help_text="A pending job held out of placement (`POST .../hold/`) until released (`POST .../release/`); null if not held. "
        "It keeps its place in the queue; its pending_reason is HELD."
    )
    resizes = serializers.SerializerMethodField(help_text="An elastic job's growths and shrinks, oldest first (empty for others).")
    attempts = serializers.SerializerMethodField(help_text="The attempts whose output can be read (`logs/?attempt=`), with their ranks.")
    telemetry_summary = serializers.SerializerMethodField(
        help_text="GPU and network summary of the job's stored runs; null until a run ends."
    )
    dependencies = serializers.SerializerMethodField(
        help_text="What it waits for (sbatch --dependency), with each job's state now and whether the ask is met."
    )
    notify = serializers.SerializerMethodField(
        help_text="The submit's `notify`, as it was sent (a re-submit with it asks the same); null: none was sent, so its "
        "owner's default applies when it is told (`GET /api/v1/notifications/`). A job, its webhook with it, is shown "
        "only to its owner and admins."
    )

    class Meta(JobSerializer.Meta):
        fields = [
            *JobSerializer.Meta.fields,
            *("held", "dependencies", "env", "simulate", "volumes", "notify", "events", "resizes", "attempts"),
            "telemetry_summary",
        ]
        read_only_fields = fields

    @extend_schema_field(DependedSerializer(many=True))
    def get_dependencies(self, job: Job) -> list[dict[str, Any]]:
        rows = job.dependencies.values_list("kind", "on_id", "on__state", "on__array_id", "on__array_index").order_by("on_id")
        return [
            {"type": kind, "job": on, "array_id": array_id, "array_index": index, "state": state, "met": dependency_met(kind, state)}
            for kind, on, state, array_id, index in rows
        ]

    @extend_schema_field(NotifySerializer(allow_null=True))
    def get_notify(self, job: Job) -> dict[str, Any] | None:
        try:
            asks = job.notify  # notify.JobNotify's reverse one-to-one (select_related by the views)
        except ObjectDoesNotExist:
            return None
        return asks_json(asks)

    @extend_schema_field(HeldSerializer(allow_null=True))
    def get_held(self, job: Job) -> dict[str, Any] | None:
        if job.state != "PENDING" or not job.hold:
            return None
        by = job.held_by.get_username() if job.held_by is not None else None
        return {"kind": job.hold, "by": by, "at": serializers.DateTimeField().to_representation(job.held_at) if job.held_at else None}

    @extend_schema_field(JobResizeSerializer(many=True))
    def get_resizes(self, job: Job) -> list[dict[str, Any]]:
        # Read only for an elastic job: no other has any, and the detail's queries stay bounded.
        return list(JobResizeSerializer(job.resizes.all(), many=True).data) if job.elastic else []

    @extend_schema_field(TelemetrySummarySerializer(allow_null=True))
    def get_telemetry_summary(self, job: Job) -> dict[str, Any] | None:
        summary = job_telemetry_summary(job)
        return TelemetrySummarySerializer(summary).data if summary else None

    @extend_schema_field(LogAttemptSerializer(many=True))
    def get_attempts(self, job: Job) -> list[dict[str, object]]:
        return job_log_attempts(job)


class NodeMaintenanceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    reason = serializers.CharField()
    on = serializers.BooleanField(help_text="On now: the node takes no new work until `end`.")
    in_the_way = serializers.ListField(
        child=serializers.IntegerField(),
        help_text="The jobs running here whose wall time reaches the window's start: they run on into it.",
    )


class NodeSerializer(serializers.ModelSerializer):
    gpus_free = serializers.SerializerMethodField()
    maintenance = serializers.SerializerMethodField(
        help_text="Its maintenance window on now, else the next one planned (`muster nodes maint`); null: none."
    )
    gpus_idle = serializers.SerializerMethodField()
    slices_free = serializers.SerializerMethodField()
    settling_until = serializers.SerializerMethodField(
        help_text="A node back from NotReady (or back in the cluster after leaving it) takes no new work until then "
        "(MUSTER_NODE_SETTLE_SECONDS); null otherwise."
    )

    class Meta:
        model = Node
        fields = [
            "name",
            "gpus_total",
            "gpus_free",
            "gpus_idle",
            "gpus_foreign",
            "rack",
            "block",
            "rdma_devices",
            "gpu_model",
            "state",
            "closed_by",
            "held",
            "held_reason",
            "settling_until",
            "sharing",
            "slices_per_gpu",
            "slice_gpus",
            "slice_memory_gb",
            "slices_free",
            "slices_foreign",
            "maintenance",
        ]
        read_only_fields = fields
        extra_kwargs = {
            "gpus_foreign": {"help_text": "GPUs held by pods Muster did not start (another scheduler's jobs, notebooks)."},
            "slices_foreign": {"help_text": "Slices of a shared node's GPUs held by pods Muster did not start."},
            "closed_by": {
                "help_text": 'Why a CORDONED node takes no new pods: "cordoned", or its taint ("tainted maintenance=true:NoExecute").'
            },
        }

    @extend_schema_field(OpenApiTypes.NUMBER)
    def get_gpus_free(self, node: Node) -> float:
        """GPUs new work may take: those neither Muster's jobs nor other pods hold, on a node that takes new work (0 on
        one cordoned, tainted, NotReady, held or settling); on a shared node, the shares its slices leave (1.75 of 2),
        as the cluster page says too (jobs.selectors.node_gpus_free)."""
        return node_gpus_free(node)

    @extend_schema_field(OpenApiTypes.NUMBER)
    def get_gpus_idle(self, node: Node) -> float:
        """GPUs neither Muster's jobs nor other pods hold, whether or not the node takes new work: `gpus_free` unless
        it takes none (a cordoned node's idle GPUs are not free)."""
        return node_gpus_idle(node)

    @extend_schema_field(serializers.DateTimeField(allow_null=True))
    def get_settling_until(self, node: Node) -> str | None:
        until = node_settles_until(node)
        return serializers.DateTimeField().to_representation(until) if until else None

    @extend_schema_field(NodeMaintenanceSerializer(allow_null=True))
    def get_maintenance(self, node: Node) -> dict[str, Any] | None:
        # Worked out once for the whole list (two queries), not once a node.
        context = self.context
        if "node_maintenance" not in context:
            context["node_maintenance"] = maintenance_by_node()
        found = context["node_maintenance"].get(node.name)
        return None if found is None else dict(NodeMaintenanceSerializer(found).data)

    @extend_schema_field(OpenApiTypes.INT)
    def get_slices_free(self, node: Node) -> int:
        """Slices no job and no other pod holds, on a node that takes new work (0 on a node whose GPUs are not shared or
        that takes no new work)."""
        return node_slices_free(node)


class QueueEntrySerializer(serializers.Serializer):
    """One pending job, in the order the last cycle considered it, with why it waits, its priority and its estimate."""

    position = serializers.IntegerField(allow_null=True, help_text=QUEUE_POSITION_HELP)
    id = serializers.IntegerField(source="job.pk")
    name = serializers.CharField(source="job.name")
    owner = serializers.CharField(source="job.owner.username")
    team = serializers.CharField(source="job.team.name", allow_null=True, default=None)
    nodes = serializers.IntegerField(source="job.nodes")
    gpus_per_node = serializers.IntegerField(source="job.gpus_per_node")
    # An elastic job's range and a GPU slice's asks, as on the job: without them a quarter of a GPU reads as "1x1".
    min_nodes = serializers.IntegerField(source="job.min_nodes", allow_null=True)
    max_nodes = serializers.IntegerField(source="job.max_nodes", allow_null=True)
    gpu_fraction = serializers.FloatField(source="job.gpu_fraction", allow_null=True)
    gpu_memory_gb = serializers.FloatField(source="job.gpu_memory_gb", allow_null=True)
    gpu_isolation = serializers.BooleanField(source="job.gpu_isolation")
    # An array element's array and index, as the job gives them: `muster queue` shows it as Slurm's `5_2`.
    array_id = serializers.IntegerField(source="job.array_id", allow_null=True)
    array_index = serializers.IntegerField(source="job.array_index", allow_null=True)
    priority_class = serializers.CharField(source="job.priority_class")
    preemptible = serializers.BooleanField(source="job.preemptible")
    submitted_at = serializers.DateTimeField(source="job.submitted_at")
    estimated_start = serializers.DateTimeField(source="job.estimated_start", allow_null=True)
    estimate_kind = serializers.ChoiceField(source="job.estimate_kind", choices=EstimateKind.choices, help_text=ESTIMATE_KIND_HELP)
    reserved_nodes = serializers.ListField(source="job.reserved_nodes", child=serializers.CharField(), help_text=RESERVED_NODES_HELP)
    promised_start = serializers.DateTimeField(source="job.promised_start", allow_null=True, help_text=PROMISED_START_HELP)
    pending_reason = serializers.SerializerMethodField()
    priority = serializers.SerializerMethodField(help_text=PRIORITY_HELP)

    @extend_schema_field(PendingReasonSerializer)
    def get_pending_reason(self, entry: QueueEntry) -> dict[str, str]:
        return {"code": entry.job.pending_reason_code, "message": entry.job.pending_reason}

    @extend_schema_field(PrioritySerializer(allow_null=True))
    def get_priority(self, entry: QueueEntry) -> dict[str, Any] | None:
        return priority_data(entry.priority) if entry.priority else None


def queue_summary(counts: QueueCounts) -> dict[str, Any]:
    return {
        "pending": counts.pending,
        "pending_by_reason": counts.pending_by_reason,
        "running_within_quota": counts.running_within_quota,
        "running_over_quota": counts.running_over_quota,
        "gpus_over_quota": counts.gpus_over_quota,
        "accounts_above_quota": [
            {"kind": a.limits.kind, "name": a.limits.name, "gpus": a.gpus_within_quota, "max_gpus": a.limits.max_gpus}
            for a in counts.above_quota
        ],
    }


class LogsQuerySerializer(StrictQuerySerializer):
    rank = serializers.IntegerField(min_value=0, default=0, help_text="Which rank's output (0 is the master).")
    attempt = serializers.IntegerField(
        min_value=1, required=False, help_text="Which attempt (1 is the first); the latest by default. Ended attempts' output is kept."
    )
    tail = serializers.IntegerField(
        min_value=1,
        max_value=100_000,
        required=False,
        help_text="Last lines to return: 500 by default, and all of it with follow.",
        # DRF's own words read "Ensure this value is less than or equal to 100000." (muster logs --tail said them).
        error_messages={
            "min_value": "At least the last line (1); leave tail out for the last 500.",
            "max_value": "At most the last 100,000 lines; leave tail out and follow to read it all.",
        },
    )
    follow = serializers.BooleanField(
        default=False,
        help_text="Stream the output as text/plain as it is written, until the attempt ends (or MUSTER_LOG_FOLLOW_SECONDS "
        "pass: reconnect while the job runs). An ended attempt's output is sent whole, once.",
    )

    def validate_attempt(self, value: int) -> int:
        job = self.context["job"]
        if value > job.attempt:
            raise serializers.ValidationError(f"The job has had {job.attempt} attempt{'s' if job.attempt != 1 else ''}.")
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        job = self.context["job"]
        rank = attrs["rank"]
        if job.attempt:
            # The ranks of the attempt asked for: an elastic job's may be more than it holds now (a shrink's are kept).
            attempt = attrs.get("attempt") or job.attempt
            ranks = job_attempt_ranks(job).get(attempt)
            had = ranks.had if ranks else []
            if rank not in had:
                raise serializers.ValidationError({"rank": [f"Attempt {attempt} of the job had ranks {ranks_text(had)}."]})
        elif rank >= job.nodes:
            raise serializers.ValidationError(
                {"rank": [f"The job has {job.nodes} rank{'s' if job.nodes != 1 else ''}: {ranks_text(list(range(job.nodes)))}."]}
            )
        if "tail" not in attrs:
            attrs["tail"] = None if attrs["follow"] else 500
        return attrs


class LogsSerializer(serializers.Serializer):
    job = serializers.IntegerField()
    attempt = serializers.IntegerField()
    rank = serializers.IntegerField()
    logs = serializers.CharField()
    # A field named like DRF's Field.source: the metaclass takes it out of the class, which mypy cannot see.
    source = serializers.ChoiceField(  # type: ignore[assignment]
        choices=["live", "stored", "none"],
        help_text="`live`: read from the running pod; `stored`: kept when the attempt ended; `none`: nothing to read.",
    )
    truncated = serializers.BooleanField(help_text="Only the last MUSTER_LOG_CAPTURE_BYTES of this output were kept.")
    note = serializers.CharField(help_text="Why there is nothing, when it is known (e.g. the pod was gone before it was kept).")
    ended = serializers.CharField(
        help_text="How the attempt ended, as its history says, e.g. `timed out at 2026-11-29 05:12:07 UTC: Stopped: wall time of "
        "1 min reached.`, as Slurm's last line of a job's output; empty while it runs. The output itself is the job's own."
    )


class JobArraySerializer(serializers.Serializer):
    array_id = serializers.IntegerField(help_text="The first element's id; `GET /api/v1/jobs/?array=<array_id>` lists the elements.")
    count = serializers.IntegerField()
    jobs = JobSerializer(many=True)


CANCEL_REASON_HELP = (
    "Why, in a few words: added to the job's reason, which its owner reads (\"Cancelled by root: the node goes into "
    'maintenance."). Optional.'
)


class JobCancelSerializer(StrictSerializer):
    """The body of a cancel: nothing, or why."""

    reason = serializers.CharField(required=False, allow_blank=True, max_length=CANCEL_COMMENT_MAX, help_text=CANCEL_REASON_HELP)


class JobRequeueSerializer(JobCancelSerializer):
    """The body of a requeue: nothing, or why, and whether to hold it too."""

    hold = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Hold it as well (scontrol requeuehold), in the same transaction: no cycle starts it first.",
    )


# The most jobs one cancel of several names (scancel's list of ids); an array's elements go by cancel-array.
CANCEL_MANY_MAX = 1000


class JobsCancelSerializer(JobCancelSerializer):
    """`scancel 12 13 17`: the jobs to cancel, by id, in one transaction."""

    ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=JOB_ID_MAX),
        allow_empty=False,
        max_length=CANCEL_MANY_MAX,
        help_text=f"The jobs' ids, at most {CANCEL_MANY_MAX}. One that has ended, or that is no job you may see, is left out and "
        "said in the answer; the others are cancelled.",
        error_messages={"empty": "Give at least one job id.", "max_length": f"At most {CANCEL_MANY_MAX} jobs in one cancel."},
    )


class JobsCancelledSerializer(serializers.Serializer):
    """What a cancel of several jobs did."""

    cancelled = JobSerializer(many=True, help_text="The jobs cancelled, by id: each is CANCELLED now.")
    ended = JobSerializer(many=True, help_text="The jobs asked for that had already ended, by id: left as they were.")
    not_found = serializers.ListField(
        child=serializers.IntegerField(), help_text="The ids asked for that are no job you may see (as a single cancel's 404)."
    )


class JobArrayCancelSerializer(JobCancelSerializer):
    """`scancel 4` / `scancel 4_[1-3]`: an array, and the indices of the elements to cancel (all of them if left out)."""

    array_id = serializers.IntegerField(min_value=1, help_text="The array's id (its first element's), as the submit answered.")
    indices = serializers.ListField(
        child=serializers.IntegerField(min_value=0, max_value=ARRAY_MAX_INDEX),
        required=False,
        allow_empty=False,
        help_text="The elements to cancel, by `array_index`; left out, every element not ended. An index the array "
        "does not have is a 400 naming it, and nothing is cancelled.",
        error_messages={"empty": "Give at least one index, or leave `indices` out to cancel every element."},
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The site's largest array, read when the serializer is made: more indices than that cannot all be its.
        most = settings.MUSTER_MAX_ARRAY_SIZE
        indices = cast(serializers.ListField, self.fields["indices"])
        indices.max_length = most
        message = f"An array has at most {most} elements (MUSTER_MAX_ARRAY_SIZE); leave `indices` out to cancel all of it."
        indices.validators.append(MaxLengthValidator(most, message=message))


class JobArrayCancelledSerializer(serializers.Serializer):
    """What a cancel of an array did: the elements it cancelled and those asked for that had already ended."""

    array_id = serializers.IntegerField()
    name = serializers.CharField(help_text="The array's name (every element has it).")
    cancelled = JobSerializer(many=True, help_text="The elements cancelled, by index: each is CANCELLED now.")
    ended = JobSerializer(many=True, help_text="The elements asked for that had already ended, by index: left as they were.")


class JobArrayUpdatedSerializer(serializers.Serializer):
    """What an update of an array did: the elements it changed (every one asked for, all pending)."""

    array_id = serializers.IntegerField()
    name = serializers.CharField(help_text="The array's name as it is now (every element has it).")
    updated = JobSerializer(many=True, help_text="The elements updated, by index, as they are now.")


class JobArrayEndedSerializer(JobArrayCancelledSerializer):
    """A cancel of an array with nothing left to cancel: every element asked for had ended (`cancelled` is empty)."""

    detail = serializers.CharField()


class SubmitCheckSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    count = serializers.IntegerField(help_text="How many jobs the submit would create (an array's elements).")
    note = serializers.CharField(
        required=False,
        help_text="What the job may not get of what was asked on today's cluster, in words; absent when nothing. An "
        "elastic job whose max_nodes is beyond the cluster's nodes that fit it keeps it, and grows to those there are "
        "for now (e.g. 'Asked for 2 to 40 nodes; the cluster has 16 nodes with at least 8 GPUs now, so it may grow to 16 "
        "for now, and further if nodes are added.').",
    )


class LimitCheckSerializer(serializers.Serializer):
    name = serializers.ChoiceField(choices=["cluster", "gpus", "wall_time", "node_hours", "budget"])
    status = serializers.ChoiceField(
        choices=["ok", "waits", "refused"], help_text="ok: lets it run now; waits: it would wait for it; refused: never."
    )
    text = serializers.CharField()


class OtherJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    owner = serializers.CharField()


class ShrinkSerializer(OtherJobSerializer):
    from_nodes = serializers.IntegerField()
    to_nodes = serializers.IntegerField()


class StartEstimateSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["now", "reserved", "planned", "after", "unknown"],
        help_text="now: the next cycle would start it; reserved: by `at` at the latest; planned: about `at` (moves if "
        "higher-priority work arrives); after: not before `at`; unknown: see `reason` (or it would be refused).",
    )
    at = serializers.DateTimeField(allow_null=True)
    reason_code = serializers.CharField(help_text="Why it would wait, as a pending job's `pending_reason.code`; empty if it starts now.")
    reason = serializers.CharField()
    position = serializers.IntegerField(allow_null=True, help_text="Its place in the queue (1 is next) if it would wait.")
    preempts = serializers.IntegerField(help_text="Running jobs it would preempt to start now.")
    stopped = OtherJobSerializer(many=True, help_text="Which: the running jobs it would preempt to start now (as the queue shows them).")
    shrunk = ShrinkSerializer(many=True, help_text="The running elastic jobs it would shrink to start now, from and to how many nodes.")
    nodes = serializers.IntegerField(
        allow_null=True,
        help_text="The nodes it would start on now (an elastic job: the most that fit, between min_nodes and max_nodes); "
        "null unless kind is now.",
    )
    min_nodes = serializers.IntegerField(allow_null=True, help_text="An elastic job's range, when it would start now; else null.")
    max_nodes = serializers.IntegerField(allow_null=True, help_text="An elastic job's range, when it would start now; else null.")


class EstimateSerializer(serializers.Serializer):
    """A submit's dry run with its estimated start (`sbatch --test-only`): nothing is written."""

    accepted = serializers.BooleanField(help_text="A submit would be accepted now (the cluster's size, the owner's limits).")
    fits_limits = serializers.BooleanField(help_text="Accepted, and no limit makes it wait (GPUs in use, the period's budget).")
    problems = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()), help_text="What a submit would refuse, by field."
    )
    limits = LimitCheckSerializer(many=True)
    start = StartEstimateSerializer()
    count = serializers.IntegerField(help_text="How many jobs the submit would create (an array's elements).")
    note = serializers.CharField(
        help_text="What the job may not get of what was asked on today's cluster, in words; empty when nothing. An "
        "elastic job whose max_nodes is beyond the cluster's nodes that fit it keeps it, and grows to those there are "
        "for now (e.g. 'Asked for 2 to 40 nodes; the cluster has 16 nodes with at least 8 GPUs now, so it may grow to 16 "
        "for now, and further if nodes are added.')."
    )
    array_index = serializers.IntegerField(
        allow_null=True,
        help_text="An array (`array` sent): the index of the element estimated, its first; `start` is that element's. "
        "Every element asks the same, and the others would queue behind it. Null for one job.",
    )


# A job read and sent back (id, state, owner included) is told which fields are read-only.
JobSubmitSerializer.answer_serializer = JobDetailSerializer
