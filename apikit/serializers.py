"""Serializer bases every resource shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers
from rest_framework.fields import SkipField


class StrictSerializer(serializers.Serializer):
    # Rejects fields it does not know, instead of silently dropping a typo.
    #
    # `answer_serializer`, when set, is what the resource's answers are written with: a field sent back as it was read
    # (`is_default`, `usage`, `id`) is said to be read-only rather than unknown.
    #
    # (A comment, not a docstring: drf-spectacular describes every request body by its serializer's docstring, inherited
    # from here by those that have none, which put this in the public schema as SimulateRequest's description.)

    answer_serializer: type[serializers.Serializer] | None = None
    # Fields another resource takes, with where to send them: said instead of a bare "Unknown field."
    elsewhere: Mapping[str, str] = {}

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                answered = set(self.answer_serializer().fields) if self.answer_serializer is not None else set()
                read_only = "Read-only: it is in the answer, and no request sets it."

                def why(name: str) -> str:
                    return read_only if name in answered else self.elsewhere.get(name, "Unknown field.")

                raise serializers.ValidationError({name: [why(name)] for name in unknown})
        return super().to_internal_value(data)

    def valid_fields(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """After `is_valid()` failed: the values of the fields that are valid on their own, validated as DRF does, so
        the checks across fields (a submit's: of the cluster's size, the owner's limits) can still look at them; and each
        other field's own errors (an unknown field stops DRF before it looks at any)."""
        valid: dict[str, Any] = {}
        errors: dict[str, Any] = {}
        for field in self._writable_fields:
            method = getattr(self, f"validate_{field.field_name}", None)
            try:
                value = field.run_validation(field.get_value(self.initial_data))
                if method is not None:
                    value = method(value)
            except serializers.ValidationError as exc:
                errors[str(field.field_name)] = exc.detail
                continue
            except DjangoValidationError as exc:
                errors[str(field.field_name)] = list(exc.messages)
                continue
            except SkipField:
                continue
            self.set_value(valid, field.source_attrs, value)
        return valid, errors

    def every_problem(self) -> dict[str, Any]:
        """After `is_valid()` failed: its errors and every field's own, so a body is refused with all its mistakes at
        once (an unknown field alone stops DRF before it looks at the others)."""
        errors: dict[str, Any] = dict(self.errors)
        if isinstance(self.initial_data, Mapping):
            for key, detail in self.valid_fields()[1].items():
                errors.setdefault(key, detail)
        return errors


class NoBody(StrictSerializer):
    """The body of an action that takes none (`cancel`, `hold`): nothing, or `{}`. One with fields is refused rather
    than ignored, so a client sending a `reason` learns it was not read instead of having the job cancelled without it."""


def refuse_a_body(data: Any) -> None:
    """Read the request's body (a malformed one is a 400, and so is JSON that is no object, `null` included:
    apikit/parsers.py; an oversized one a 413, another media type a 415, as on every write) and refuse any field it has."""
    NoBody(data=data).is_valid(raise_exception=True)
