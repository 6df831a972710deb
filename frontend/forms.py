"""The browser's submit form. It only turns form text into the API's shape; the API serializer validates."""

from __future__ import annotations

import shlex
from typing import Any

from django import forms
from django.conf import settings


class JobForm(forms.Form):
    name = forms.CharField(max_length=100)
    image = forms.CharField(max_length=512, help_text="e.g. nvcr.io/nvidia/pytorch:24.05-py3")
    command = forms.CharField(max_length=65536, help_text="Split like a shell would: torchrun --nproc-per-node 8 train.py")
    nodes = forms.IntegerField(min_value=1, initial=1)
    gpus_per_node = forms.IntegerField(min_value=1, initial=8, label="GPUs per node")
    wall_time_minutes = forms.IntegerField(min_value=1, initial=60, label="Wall time (minutes)")
    priority_class = forms.ChoiceField(choices=())
    max_restarts = forms.IntegerField(min_value=0, initial=0)
    team = forms.ChoiceField(choices=(), required=False)
    env = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}), required=False, help_text="One NAME=value per line.", label="Environment"
    )
    sim_duration_seconds = forms.FloatField(min_value=0, required=False, label="Simulated run time (seconds)")
    sim_exit_code = forms.IntegerField(min_value=0, max_value=255, required=False, label="Simulated exit code")

    # Where the API's error keys land on this form.
    FIELD_FOR_API = {"wall_time_seconds": "wall_time_minutes", "simulate": "sim_duration_seconds"}

    def __init__(self, *args: Any, team_names: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["priority_class"].choices = [(c, c) for c in settings.MUSTER_PRIORITY_CLASSES]
        self.fields["priority_class"].initial = settings.MUSTER_DEFAULT_PRIORITY_CLASS
        self.fields["team"].choices = [("", "(none)")] + [(t, t) for t in team_names]
        if len(team_names) == 1:
            self.fields["team"].initial = team_names[0]
        if settings.MUSTER_CLUSTER != "simulated":
            del self.fields["sim_duration_seconds"]
            del self.fields["sim_exit_code"]

    def clean_command(self) -> list[str]:
        try:
            return shlex.split(self.cleaned_data["command"])
        except ValueError as exc:
            raise forms.ValidationError(f"Cannot split the command: {exc}.") from exc

    def clean_env(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data["env"].splitlines(), start=1):
            if not line.strip():
                continue
            name, sep, value = line.partition("=")
            if not sep:
                raise forms.ValidationError(f"Line {number} has no '=': write NAME=value.")
            env[name.strip()] = value
        return env

    def api_payload(self) -> dict[str, Any]:
        data = self.cleaned_data
        payload: dict[str, Any] = {
            "name": data["name"],
            "image": data["image"],
            "command": data["command"],
            "nodes": data["nodes"],
            "gpus_per_node": data["gpus_per_node"],
            "wall_time_seconds": data["wall_time_minutes"] * 60,
            "priority_class": data["priority_class"],
            "max_restarts": data["max_restarts"],
            "env": data["env"],
            "team": data.get("team") or None,
        }
        simulate = {}
        if data.get("sim_duration_seconds") is not None:
            simulate["duration_seconds"] = data["sim_duration_seconds"]
        if data.get("sim_exit_code") is not None:
            simulate["exit_code"] = data["sim_exit_code"]
        if simulate:
            payload["simulate"] = simulate
        return payload

    def add_api_errors(self, errors: dict[str, Any]) -> None:
        for key, messages in errors.items():
            field = self.FIELD_FOR_API.get(key, key)
            if isinstance(messages, dict):
                messages = [f"{k}: {' '.join(map(str, v))}" for k, v in messages.items()]
            for message in messages if isinstance(messages, list) else [messages]:
                self.add_error(field if field in self.fields else None, str(message))
