"""The browser's job forms: submit, and a pending job's update. They only turn form text into the API's shape; the API
serializer validates."""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping, Sequence
from typing import Any, cast

from django import forms
from django.conf import settings
from django.core.exceptions import NON_FIELD_ERRORS
from django.core.exceptions import ValidationError as DjangoValidationError
from django.utils.text import capfirst

from api.jobs.serializers import JobSubmitSerializer
from frontend.templatetags.muster import duration
from jobs.arrays import array_indices
from jobs.dependencies import DependencyTextInvalid, dependencies_parse, dependencies_text
from jobs.models import Job
from jobs.validators import env_errors

# No autocomplete="off": with it the browser forgets what was typed when the user comes back to the form (Back).
MONO = {"class": "mono", "spellcheck": "false", "autocapitalize": "off"}
# The priority class that also makes a job preemptible in the browser: one control, not a class and a tick box.
PREEMPTIBLE_CLASS = "preemptible"


def says(message: str) -> dict[str, str]:
    """A field's own words for an empty or out-of-range value (Django's would say "Ensure this value is greater than or
    equal to 1.", "This field is required."), what it needs in the form's terms."""
    return {"required": message, "min_value": message, "max_value": message}


class JobForm(forms.Form):
    name = forms.CharField(
        max_length=100, help_text="A label for you; it need not be unique.", error_messages=says("Give the job a name: any label of yours.")
    )
    image = forms.CharField(
        max_length=512,
        help_text="e.g. nvcr.io/nvidia/pytorch:24.05-py3",
        widget=forms.TextInput(attrs=MONO),
        error_messages=says("Give the container image to run, e.g. nvcr.io/nvidia/pytorch:24.05-py3."),
    )
    command = forms.CharField(
        max_length=65536,
        # jobs.validators.command_errors' words (what the API says of an empty command), in the form's shell syntax.
        error_messages=says("The command cannot be empty: give the program to run, e.g. torchrun train.py."),
        help_text="Split like a shell would: torchrun --nproc-per-node 8 train.py --config 'my run.yaml'",
        widget=forms.TextInput(attrs=MONO),
    )
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3, **MONO}), required=False, help_text="One NAME=value per line.", label="Environment"
    )
    nodes = forms.IntegerField(
        min_value=1, initial=1, help_text="A multi-node job takes whole nodes.", error_messages=says("A job needs at least 1 node.")
    )
    min_nodes = forms.IntegerField(
        min_value=1,
        required=False,
        error_messages=says("An elastic job runs on at least 1 node; leave it empty for a job on Nodes, no fewer."),
        label="Elastic: at least",
        help_text="Empty: the job runs on Nodes, no fewer. With a value it is elastic (torchrun --nnodes=MIN:MAX): Nodes is its "
        "most; it starts on as many whole nodes as fit, grows when nodes stay idle, and shrinks to no fewer than this rather "
        "than be preempted. Equal to Nodes: a job on Nodes, as empty.",
    )
    gpus_per_node = forms.IntegerField(
        min_value=1, initial=8, label="GPUs per node", error_messages=says("A job needs at least 1 GPU per node.")
    )
    rdma_per_node = forms.IntegerField(
        min_value=0,
        initial=0,
        required=False,
        error_messages=says("Give 0 or more RDMA devices per node (0: the job needs none)."),
        label="RDMA devices per node",
        help_text="For multi-node jobs on an RDMA fabric (RoCE, InfiniBand): the job goes only to nodes that have them.",
    )
    gpu_fraction = forms.FloatField(
        min_value=0.01,
        max_value=0.99,
        required=False,
        label="GPU share",
        error_messages=says("A GPU share is part of one GPU, from 0.01 to 0.99; for whole GPUs leave it empty."),
        help_text="A share of one GPU (e.g. 0.25) instead of whole GPUs: 1 node, 1 GPU per node. "
        "Time-slicing shares take turns on the GPU with no memory limit or fault isolation; MPS shares run at once with "
        "their memory enforced; MIG slices are isolated in hardware.",
    )
    gpu_memory_gb = forms.FloatField(
        min_value=0.1,
        required=False,
        label="GPU memory (GB)",
        help_text="Memory the slice must guarantee: MPS or MIG only.",
        error_messages=says("A slice guarantees at least 0.1 GB; leave it empty for no memory guarantee."),
    )
    gpu_isolation = forms.BooleanField(required=False, label="Isolated slice", help_text="Its own memory and faults: MIG only.")
    wall_time_minutes = forms.IntegerField(
        min_value=1, initial=60, label="Wall time (minutes)", error_messages=says("A job needs a wall time of at least 1 minute.")
    )
    priority_class = forms.ChoiceField(choices=(), help_text="Higher classes are scheduled first.")
    max_restarts = forms.IntegerField(
        min_value=0,
        initial=0,
        help_text="Times a failed job is started again.",
        error_messages=says("Give 0 or more restarts: 0 means a failed job is not started again."),
    )
    team = forms.ChoiceField(choices=(), required=False)
    volumes = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2, **MONO}),
        required=False,
        help_text="One per line: CLAIM:/mount/path, with :ro at the end to mount it read-only.",
    )
    preemptible = forms.BooleanField(
        required=False, help_text="May run on idle GPUs beyond your quota; stopped and requeued first when they are needed."
    )
    dependencies = forms.CharField(
        max_length=10000,
        required=False,
        label="Start after",
        widget=forms.TextInput(attrs={**MONO, "placeholder": "afterok:12:13,afterany:14_2"}),
        help_text="Jobs to wait for, as sbatch --dependency (muster submit -d) writes them: afterok:ID once it has "
        "succeeded, afternotok:ID once it has failed, timed out or been cancelled, afterany:ID once it has ended; several "
        "ids as afterok:12:13, several types joined by commas. An array's id names every element, 12_3 one of them (its "
        "index 3). One that can never be met any more cancels the job, saying why.",
    )
    array = forms.CharField(
        max_length=1000,
        required=False,
        label="Array indices",
        widget=forms.TextInput(attrs={**MONO, "placeholder": "0-99"}),
        help_text="Empty: one job. With indices, one job per index, as sbatch --array (muster submit --array) takes them: "
        "0-99, 1,3,5-7 or 0-98:2. Each element reads its index from MUSTER_ARRAY_INDEX and is listed as ID_INDEX.",
    )
    notify_on = forms.MultipleChoiceField(
        choices=[("start", "it starts"), ("end", "it ends"), ("fail", "it fails"), ("requeue", "it is requeued after running")],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        label="Tell me when",
        help_text="By your notification default's channels (e-mail, webhook): see Notifications.",
    )
    sim_duration_seconds = forms.FloatField(
        min_value=0,
        required=False,
        label="Simulated run time (seconds)",
        error_messages=says("A simulated run time is 0 seconds or more; leave it empty for the default."),
    )
    sim_exit_code = forms.IntegerField(
        min_value=0,
        max_value=255,
        required=False,
        label="Simulated exit code",
        help_text="0 succeeds (the default); anything else fails.",
        error_messages=says("An exit code is from 0 to 255: 0 succeeds, anything else fails."),
    )
    # A cloned job's submit, whole (JSON): what no field above shows is sent with the form's own fields, so a clone
    # carries every setting the job was submitted with (a simulated checkpoint interval, say).
    carried = forms.JSONField(required=False, widget=forms.HiddenInput)

    # The API's keys the form's own fields send (`simulate` by its parts): a carried value of one of these is the form's
    # to give or leave out. A key no field here sends is carried as the cloned job had it.
    FORM_FIELD_FOR_KEY = {
        "name": "name", "image": "image", "command": "command", "env": "env", "nodes": "nodes", "min_nodes": "min_nodes",
        "max_nodes": "nodes", "gpus_per_node": "gpus_per_node", "rdma_per_node": "rdma_per_node", "gpu_fraction": "gpu_fraction",
        "gpu_memory_gb": "gpu_memory_gb", "gpu_isolation": "gpu_isolation", "wall_time_seconds": "wall_time_minutes",
        "priority_class": "priority_class", "max_restarts": "max_restarts", "team": "team", "volumes": "volumes",
        "preemptible": "preemptible", "notify": "notify_on", "dependencies": "dependencies",
        "simulate.duration_seconds": "sim_duration_seconds",
        "simulate.exit_code": "sim_exit_code",
    }  # fmt: skip
    # Where the API's error keys land on this form.
    FIELD_FOR_API = {"wall_time_seconds": "wall_time_minutes", "simulate": "sim_duration_seconds", "max_nodes": "nodes"}
    SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
        ("What to run", ("name", "image", "command", "env", "volumes")),
        (
            "Resources",
            (
                "nodes",
                "min_nodes",
                "gpus_per_node",
                "rdma_per_node",
                "wall_time_minutes",
                "priority_class",
                "max_restarts",
                "team",
                "preemptible",
            ),
        ),
        ("A slice of a GPU (instead of whole GPUs)", ("gpu_fraction", "gpu_memory_gb", "gpu_isolation")),
        ("Job array", ("array",)),
        ("Dependencies", ("dependencies",)),
        ("Notifications", ("notify_on",)),
        ("Simulated cluster", ("sim_duration_seconds", "sim_exit_code")),
    )

    def __init__(
        self,
        *args: Any,
        team_names: list[str],
        volumes: Sequence[tuple[str, str, bool]] = (),
        shared_pools: Sequence[str] = (),
        notify_default: Mapping[str, Any] | None = None,
        has_email: bool = True,
        priority_classes: Sequence[str] | None = None,
        wall_time_limits: Sequence[tuple[str | None, str, int]] = (),
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # (team or None for the user's own, whose quota, its most seconds): checked here to say it in minutes.
        self.wall_time_limits = wall_time_limits
        # The owner's default channels; the events are ticked from it and may be changed for this job.
        self.notify_default = dict(notify_default or {"on": [], "email": True, "webhook": ""})
        self.fields["notify_on"].initial = self.notify_default["on"]
        if not has_email and not self.notify_default.get("webhook"):
            # Said before the submit is refused for it ("Nothing would be sent").
            self.fields["notify_on"].help_text = (
                "Nothing can be sent now: your account has no e-mail address (an admin sets it) and your notification "
                "default has no webhook (see Notifications)."
            )
        if shared_pools:
            self.fields["gpu_fraction"].help_text += f" Here: {'; '.join(shared_pools)}."
            self.fields["gpus_per_node"].error_messages.update(
                says("A job needs at least 1 GPU per node; for part of one, give a GPU share.")
            )
        else:
            for name in ("gpu_fraction", "gpu_memory_gb", "gpu_isolation"):
                del self.fields[name]  # no node shares its GPUs
        # Only the classes the user may submit in (a class kept for admins was offered, then refused).
        offered = settings.MUSTER_PRIORITY_CLASSES if priority_classes is None else priority_classes
        cast(forms.ChoiceField, self.fields["priority_class"]).choices = [(c, c) for c in offered]
        self.fields["priority_class"].initial = settings.MUSTER_DEFAULT_PRIORITY_CLASS
        if PREEMPTIBLE_CLASS in settings.MUSTER_PRIORITY_CLASSES and not self._preemptible_beside_its_class():
            # The class says it: a job of the preemptible class may borrow idle GPUs and is stopped first.
            self.fields["priority_class"].help_text += (
                f" {PREEMPTIBLE_CLASS}: scheduled last, may run on idle GPUs beyond your quota, and is stopped and requeued "
                "first when they are needed."
            )
            del self.fields["preemptible"]
        self.fields["wall_time_minutes"].help_text = (
            f"The job is stopped after this long. Site maximum: {settings.MUSTER_MAX_WALL_TIME_SECONDS // 60} minutes"
            f" ({duration(settings.MUSTER_MAX_WALL_TIME_SECONDS)})."
        )
        if len(team_names) == 1:
            # A member of one team submits for it, named or not (the API's rule): a "(none)" here was charged to it all
            # the same, so there is nothing else to offer.
            cast(forms.ChoiceField, self.fields["team"]).choices = [(t, t) for t in team_names]
            only = f"{team_names[0]}, your only team (a member of one team submits for it)"
            self.fields["team"].help_text = f"The team whose quota this job counts against: {only}."
            self.fields["team"].initial = team_names[0]
        elif team_names:
            # A member of several teams must say which one pays (a job without one is refused): no "(none)" to pick,
            # a first option that asks, and the field required, so the browser and the form say it before the API does.
            team = cast(forms.ChoiceField, self.fields["team"])
            team.choices = [("", "Choose a team")] + [(t, t) for t in team_names]
            team.required = True
            team.error_messages["required"] = (
                f"You are in teams {', '.join(team_names)}: choose the one this job is for, so its quota and budget apply."
            )
            team.help_text = "The team whose quota this job counts against: required, as you are in several."
        else:
            del self.fields["team"]  # nothing to choose
        if volumes:
            given = ", ".join(f"{claim} ({team}{', read-only' if read_only else ''})" for team, claim, read_only in volumes)
            self.fields["volumes"].help_text += f" Your teams' volumes: {given}."
        else:
            del self.fields["volumes"]  # no team of the user's was given any
        if settings.MUSTER_CLUSTER == "simulated":
            default = settings.MUSTER_SIM_DEFAULT_DURATION_SECONDS
            self.fields["sim_duration_seconds"].help_text = f'How long the job "runs"; {default:g} s when left empty.'
        else:
            del self.fields["sim_duration_seconds"]
            del self.fields["sim_exit_code"]

    @staticmethod
    def initial_from(job: Job) -> dict[str, Any]:
        """A job's fields as this form shows them: what Clone fills in."""
        simulate = job.simulate or {}
        initial: dict[str, Any] = {
            "name": job.name,
            "image": job.image,
            "command": shlex.join(job.command),
            "env": "\n".join(f"{k}={v}" for k, v in job.env.items()),
            "nodes": job.max_nodes or job.nodes,
            "min_nodes": job.min_nodes,
            "gpus_per_node": job.gpus_per_node,
            "rdma_per_node": job.rdma_per_node,
            "gpu_fraction": job.gpu_fraction,
            "gpu_memory_gb": job.gpu_memory_gb,
            "gpu_isolation": job.gpu_isolation,
            "wall_time_minutes": -(-job.wall_time_seconds // 60),
            "priority_class": job.priority_class,
            "max_restarts": job.max_restarts,
            "team": job.team.name if job.team else "",
            "preemptible": job.preemptible,
            "volumes": "\n".join(f"{v['claim']}:{v['mount_path']}{':ro' if v.get('read_only') else ''}" for v in job.volumes),
            "sim_duration_seconds": _whole(simulate.get("duration_seconds")),
            "sim_exit_code": simulate.get("exit_code"),
            "dependencies": dependencies_text(job) or None,
            "carried": submit_spec_of(job),
        }
        return {key: value for key, value in initial.items() if value is not None}

    def _preemptible_beside_its_class(self) -> bool:
        """Whether this form shows a preemptible job of a class other than the preemptible one (a clone of one, or its
        post): then the tick box is kept, so the clone stays preemptible and can be made otherwise."""
        if self.is_bound:
            return "preemptible" in self.data
        initial = self.initial or {}
        return bool(initial.get("preemptible")) and initial.get("priority_class") != PREEMPTIBLE_CLASS

    def sections(self) -> list[tuple[str, list[forms.BoundField]]]:
        """The fields in titled groups, for the template; groups with no fields left are dropped."""
        groups = [(title, [self[name] for name in names if name in self.fields]) for title, names in self.SECTIONS]
        return [(title, fields) for title, fields in groups if fields]

    def errors_as_shown(self) -> list[tuple[str, str]]:
        """Every error as (the field's label, or "" for one about the whole job, the message), in the order the page shows
        the fields: the form's own and the API's were listed as they were found (Command before Image)."""
        shown = [field.name for _, fields in self.sections() for field in fields]
        place = {name: i for i, name in enumerate(shown)}
        # Errors about the whole job first, as the page's summary says them above the fields.
        ordered = sorted(self.errors.items(), key=lambda item: place.get(item[0], -1))
        return [(str(self[name].label) if name in self.fields else "", str(error)) for name, errors in ordered for error in errors]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or self.cleaned_data
        low, high = data.get("min_nodes"), data.get("nodes")
        if low is not None and high is not None and low > high:
            # Said on the field that makes it elastic, in the form's words (the API would name max_nodes on Nodes).
            self.add_error(
                "min_nodes", f"An elastic job runs on at least this many nodes and at most Nodes ({high}): give {high} or fewer."
            )
        return data

    def clean_command(self) -> list[str]:
        try:
            return shlex.split(self.cleaned_data["command"])
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the command: {exc}.") from exc

    def clean_wall_time_minutes(self) -> int:
        """The site's maximum in the unit this field asks in (the API says it in seconds)."""
        minutes = int(self.cleaned_data["wall_time_minutes"])
        most = settings.MUSTER_MAX_WALL_TIME_SECONDS
        if minutes * 60 > most:
            raise forms.ValidationError(f"The site maximum is {most // 60} minutes ({duration(most)}); you asked for {minutes}.")
        return minutes

    def wall_time_limit_errors(self) -> list[str]:
        """The owner's and the chosen team's wall-time limits the job breaks, in minutes (the API says them in seconds)."""
        minutes, team = self.cleaned_data.get("wall_time_minutes"), self.cleaned_data.get("team") or None
        return [
            f"{capfirst(whose)} allows at most {most // 60} minutes ({duration(most)}) per job; you asked for {minutes}."
            for applies_to, whose, most in self.wall_time_limits
            if minutes is not None and applies_to in (None, team) and minutes * 60 > most
        ]

    def clean_dependencies(self) -> list[dict[str, Any]]:
        """Start after's text as the API's `dependencies`, every mistake at once (jobs.dependencies reads it as
        `muster submit -d` does); the API then checks the jobs named."""
        try:
            asked = dependencies_parse(self.cleaned_data["dependencies"])
        except DependencyTextInvalid as exc:
            raise forms.ValidationError(exc.problems) from exc
        return [{"type": a.kind, "job": a.job_id, **({"index": a.element} if a.element is not None else {})} for a in asked]

    def clean_array(self) -> list[int]:
        """The indices of an array submit (jobs.arrays reads them as the API and `muster submit --array` do); none, one
        job."""
        text = self.cleaned_data["array"].strip()
        if not text:
            return []
        try:
            return array_indices(text, max_count=settings.MUSTER_MAX_ARRAY_SIZE)
        except DjangoValidationError as exc:
            raise forms.ValidationError(exc.message_dict["array"]) from exc

    def clean_volumes(self) -> list[dict[str, Any]]:
        volumes, errors = [], []
        for number, line in enumerate(self.cleaned_data["volumes"].splitlines(), start=1):
            text = line.strip()
            if not text:
                continue
            read_only = text.endswith(":ro")
            claim, sep, path = text.removesuffix(":ro").partition(":")
            if not sep or not claim.strip() or not path.strip():
                errors.append(f"Line {number}: write CLAIM:/mount/path (and :ro to mount it read-only).")
                continue
            volumes.append({"claim": claim.strip(), "mount_path": path.strip(), "read_only": read_only})
        if errors:
            raise forms.ValidationError(errors)
        return volumes

    def clean_env(self) -> dict[str, str]:
        """Every mistake at once: lines without '=' and the names the API would refuse (it is not asked while a line
        is wrong, so they showed one submit later)."""
        env: dict[str, str] = {}
        errors: list[str] = []
        for number, line in enumerate(self.cleaned_data["env"].splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            if not sep:
                errors.append(f"Line {number} has no '=': write NAME=value.")
                continue
            env[name.strip()] = value
        errors += env_errors(env, cite_docs=False)  # a page cannot open docs/security.md: the reason stands alone
        if errors:
            raise forms.ValidationError(errors)
        return env

    def api_payload(self) -> dict[str, Any]:
        """The API's request body from the fields that are clean (others are left out: they already have an error)."""
        data = self.cleaned_data
        payload: dict[str, Any] = {
            key: data[key]
            for key in (
                "name", "image", "command", "nodes", "gpus_per_node", "rdma_per_node", "priority_class", "max_restarts", "env",
                "gpu_fraction", "gpu_memory_gb",
            )
            if data.get(key) is not None
        }  # fmt: skip
        if data.get("gpu_isolation"):
            payload["gpu_isolation"] = True
        slice_asked = data.get("gpu_fraction") is not None or data.get("gpu_memory_gb") is not None or data.get("gpu_isolation")
        if slice_asked and "gpus_per_node" not in self.changed_data:
            payload["gpus_per_node"] = 1  # a slice is of one GPU: its default, as the CLI's, not the form's 8
        if data.get("notify_on") or self.notify_default["on"]:
            payload["notify"] = {**self.notify_default, "on": list(data.get("notify_on") or [])}
        if data.get("min_nodes") is not None and data["min_nodes"] != data.get("nodes"):
            # Elastic: Nodes is its most. At least Nodes and at most Nodes is a plain job of Nodes, as the API takes it.
            payload["min_nodes"] = data["min_nodes"]
            payload["max_nodes"] = payload.pop("nodes", None)
        if data.get("wall_time_minutes") is not None:
            payload["wall_time_seconds"] = data["wall_time_minutes"] * 60
        payload["team"] = data.get("team") or None
        if data.get("volumes"):
            payload["volumes"] = data["volumes"]
        if data.get("dependencies"):
            payload["dependencies"] = data["dependencies"]
        payload["preemptible"] = bool(data.get("preemptible")) or (
            "preemptible" not in self.fields and data.get("priority_class") == PREEMPTIBLE_CLASS
        )
        simulate = {}
        if data.get("sim_duration_seconds") is not None:
            simulate["duration_seconds"] = data["sim_duration_seconds"]
        if data.get("sim_exit_code") is not None:
            simulate["exit_code"] = data["sim_exit_code"]
        carried = data.get("carried")
        if isinstance(carried, dict):
            for key, value in carried.items():
                if key == "simulate" and isinstance(value, dict):
                    for part, part_value in value.items():
                        if self.FORM_FIELD_FOR_KEY.get(f"simulate.{part}") not in self.fields:
                            simulate.setdefault(part, part_value)
                elif key not in self.FORM_FIELD_FOR_KEY or self.FORM_FIELD_FOR_KEY[key] not in self.fields:
                    if key != "preemptible" and value is not None:  # preemptible: the class says it when no box is shown
                        payload.setdefault(key, value)
        if simulate:
            payload["simulate"] = simulate
        return payload

    def add_api_errors(self, errors: dict[str, Any]) -> None:
        """Show the API's errors beside the fields they are about; a field the form already faulted keeps its own."""
        for key, messages in errors.items():
            field = self.FIELD_FOR_API.get(key, key)
            if field in self.errors:
                continue
            if key == "wall_time_seconds":
                messages = self.wall_time_limit_errors() or messages  # in the unit the field asks in
            if isinstance(messages, dict):
                messages = [f"{k}: {' '.join(map(str, v))}" for k, v in messages.items()]
            elif isinstance(messages, list) and any(isinstance(m, dict) for m in messages):
                # Per item (a volume's own fields): name the item by its line.
                messages = [
                    f"Line {n}: " + "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in m.items())
                    for n, m in enumerate(messages, start=1)
                    if isinstance(m, dict) and m
                ] + [str(m) for m in messages if not isinstance(m, dict)]
            for message in messages if isinstance(messages, list) else [messages]:
                self.add_error(field if field in self.fields else None, str(message))
        if "wall_time_minutes" not in self.errors:
            # The API checks limits only with a valid size; the wall time's are known without one.
            for message in self.wall_time_limit_errors():
                self.add_error("wall_time_minutes", message)


class JobUpdateForm(JobForm):
    """A pending job's Update on its page, as `muster update` (PATCH /api/v1/jobs/{id}/): the submit form's fields an
    update changes, with their words, checked as the submit form checks them (the form's own, the API's serializer,
    then the owner's limits with the job as it would be, `jobs.services.job_update`). Only what was changed is sent."""

    FIELDS = ("name", "wall_time_minutes", "priority_class", "max_restarts", "preemptible")
    SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (("Update", FIELDS),)

    def __init__(self, *args: Any, job: Job, priority_classes: Sequence[str], **kwargs: Any) -> None:
        # The job's class is offered whatever the viewer may give (an owner renaming a job an admin gave a kept class).
        offered = [c for c in settings.MUSTER_PRIORITY_CLASSES if c in priority_classes or c == job.priority_class]
        super().__init__(*args, team_names=[], priority_classes=offered, initial=self.initial_from(job), prefix="update", **kwargs)
        for name in [name for name in self.fields if name not in self.FIELDS]:
            del self.fields[name]
        if "preemptible" not in self.fields:
            # Its own box here, whatever the class: the API changes it on its own (`muster update --preemptible`).
            self.fields["preemptible"] = copy.deepcopy(JobForm.base_fields["preemptible"])
        self.fields["preemptible"].help_text = JobForm.base_fields["preemptible"].help_text
        self.fields["wall_time_minutes"].help_text += " An update may raise it up to the owner's most, or lower it."
        # Each field carries the value the page was drawn with (a hidden `initial-update-NAME`): what was changed is
        # what the viewer changed, not what differs from the job now. Compared with the job now, a page drawn before
        # `muster update 12 -J x --max-restarts 2` sent the old name and restarts back beside its new wall time, and
        # undid that update unsaid.
        for name in self.FIELDS:
            self.fields[name].show_hidden_initial = True

    def marked(self) -> int:
        """How many fields have a mistake marked (the page's summary counts them; one about the whole form is not one)."""
        return len([name for name in self.errors if name != NON_FIELD_ERRORS])

    def _changed_by_viewer(self) -> set[str]:
        """The fields whose value differs from the one the page was drawn with; a post without those (not from the
        page) is compared with the job as it is now."""
        changed = set()
        for name in self.FIELDS:
            bound, field = self[name], self.fields[name]
            was: Any = bound.initial
            if bound.html_initial_name in self.data:
                try:
                    was = field.to_python(field.hidden_widget().value_from_datadict(self.data, self.files, bound.html_initial_name))
                except forms.ValidationError:
                    was = None  # not a value the page drew: taken as changed
            if field.has_changed(was, bound.data):
                changed.add(name)
        return changed

    def changes(self) -> dict[str, Any]:
        """The API's body of what the viewer changed on the page: `{}` when nothing was."""
        data = self.cleaned_data
        changed = {name for name in self._changed_by_viewer() if name not in self.errors}
        said = {
            "name": lambda: data["name"],
            "wall_time_seconds": lambda: data["wall_time_minutes"] * 60,
            "priority_class": lambda: data["priority_class"],
            "max_restarts": lambda: data["max_restarts"],
            "preemptible": lambda: bool(data["preemptible"]),
        }
        # In the order the form shows them, which the page's answer says them in.
        return {key: value() for key, value in said.items() if self.FIELD_FOR_API.get(key, key) in changed}


def submit_spec_of(job: Job) -> dict[str, Any]:
    """What `job` was submitted with, as the submit API takes it: every field of the submit serializer the job keeps
    (derived from the serializer, so a field added there is carried by a clone too)."""
    spec: dict[str, Any] = {}
    for name in JobSubmitSerializer().fields.keys():
        if name == "team":
            spec[name] = job.team.name if job.team else None
        elif name == "nodes" and job.max_nodes is not None:
            continue  # an elastic job is submitted by its bounds
        elif hasattr(job, name) and not callable(getattr(job, name)):
            spec[name] = getattr(job, name)
    return spec


def _whole(value: float | None) -> float | int | None:
    """A number as a user typed it: 5, not 5.0."""
    return int(value) if isinstance(value, float) and value.is_integer() else value
