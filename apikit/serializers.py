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
    # A body is JSON, whose values carry their type: `"name": 123` or `"gpus": "8"` is a client's mistake, refused
    # rather than coerced as DRF does for form input. A serializer of query parameters, which are all strings, sets
    # this off.
    json_types: bool = True
    # Fields another resource takes, with where to send them: said instead of a bare "Unknown field."
    elsewhere: Mapping[str, str] = {}

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for name, field in fields.items():
            _choices_named(name, field)
            _choices_named(name, getattr(field, "child", None))
        return fields

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(self.fields))
            if unknown:
                answered = set(self.answer_serializer().fields) if self.answer_serializer is not None else set()
                read_only = "Read-only: it is in the answer, and no request sets it."

                def why(name: str) -> str:
                    return read_only if name in answered else self.elsewhere.get(name, "Unknown field.")

                raise serializers.ValidationError({name: [why(name)] for name in unknown})
            mistyped = self._mistyped(data)
            if mistyped:
                try:
                    super().to_internal_value(data)
                except serializers.ValidationError as exc:
                    if isinstance(exc.detail, Mapping):
                        raise serializers.ValidationError(_merged(exc.detail, mistyped)) from exc
                raise serializers.ValidationError(mistyped)
        return super().to_internal_value(data)

    def _mistyped(self, data: Mapping[str, Any]) -> dict[str, Any]:
        if not self.json_types:
            return {}
        errors: dict[str, Any] = {}
        for field in self._writable_fields:
            name = str(field.field_name)
            if name in data:
                error = json_type_error(field, data[name])
                if error:
                    errors[name] = error
        return errors

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
        mistyped = self._mistyped(self.initial_data) if isinstance(self.initial_data, Mapping) else {}
        for name in mistyped:
            valid.pop(name, None)
        errors = _merged(errors, mistyped)
        return valid, errors

    def every_problem(self) -> dict[str, Any]:
        """After `is_valid()` failed: its errors and every field's own, so a body is refused with all its mistakes at
        once (an unknown field alone stops DRF before it looks at the others)."""
        errors: dict[str, Any] = dict(self.errors)
        if isinstance(self.initial_data, Mapping):
            for key, detail in self.valid_fields()[1].items():
                errors.setdefault(key, detail)
        return errors


# The JSON type each kind of field takes, in the words of an error. Checked in this order: a subclass first.
_JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...], str], ...] = (
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.CharField, (str,), "a string"),
    (serializers.IntegerField, (int,), "an integer"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.ListField, (list,), "a list"),
    (serializers.DictField, (dict,), "an object"),
)


def _merged(errors: Mapping[Any, Any], more: Mapping[Any, Any]) -> dict[Any, Any]:
    # A list's items are keyed by index on both sides: its item 2's type beside its item 1's range.
    merged = dict(errors)
    for key, detail in more.items():
        mine = merged.get(key)
        both_keyed = isinstance(mine, Mapping) and isinstance(detail, Mapping)
        merged[key] = _merged(mine, detail) if both_keyed else detail  # type: ignore[arg-type]
    return merged


def _json_name(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value!r}" if len(value) <= 40 else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def json_type_error(field: serializers.Field, value: Any) -> Any:
    """What is wrong with the JSON type of `value` for `field` (and, for a list or an object, of its items), or None.
    `null` is left to the field: it says whether it may be null."""
    if value is None:
        return None
    for kind, types, words in _JSON_TYPES:
        if isinstance(field, kind):
            # JSON's true and false are Python ints too.
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                return [f"Must be {words}, not {_json_name(value)}."]
            break
    else:
        return None
    child = getattr(field, "child", None)
    if child is None or isinstance(child, serializers.BaseSerializer):
        return None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    errors = {key: error for key, item in items if (error := json_type_error(child, item))}
    return errors or None


_DRF_INVALID_CHOICE = serializers.ChoiceField.default_error_messages["invalid_choice"]


def _choices_named(name: str, field: serializers.Field | None) -> None:
    """DRF refuses a choice with '"bogus" is not a valid choice.', naming neither the field's choices nor, in a list,
    the field: `?group_by=Team` on the usage report, `?level=rank` on a job's metrics. A field that says more keeps it."""
    if not isinstance(field, serializers.ChoiceField) or field.error_messages.get("invalid_choice") != _DRF_INVALID_CHOICE:
        return
    choices = [str(choice) for choice in field.choices]
    listed = " or ".join(choices) if len(choices) < 3 else f"{', '.join(choices[:-1])} or {choices[-1]}"
    field.error_messages["invalid_choice"] = f"Unknown {name} {{input!r}}; choose {listed}."


class StrictQuerySerializer(StrictSerializer):
    # Reads a query string: every value is a string, which the fields convert.
    json_types = False


class NoBody(StrictSerializer):
    """The body of an action that takes none (`cancel`, `hold`): nothing, or `{}`. One with fields is refused rather
    than ignored, so a client sending a `reason` learns it was not read instead of having the job cancelled without it."""


def refuse_a_body(data: Any) -> None:
    """Read the request's body (a malformed one is a 400, and so is JSON that is no object, `null` included:
    apikit/parsers.py; an oversized one a 413, another media type a 415, as on every write) and refuse any field it has."""
    NoBody(data=data).is_valid(raise_exception=True)
