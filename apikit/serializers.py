"""Serializer bases every resource shares."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers


class StrictSerializer(serializers.Serializer):
    """Rejects fields it does not know, instead of silently dropping a typo.

    `answer_serializer`, when set, is what the resource's answers are written with: a field sent back as it was read
    (`is_default`, `usage`, `id`) is said to be read-only rather than unknown."""

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
