"""`NAME=VALUE` changes to the scheduling policy's settings (PolicyConfig fields), validated.

Pure (no Django): `python -m replay.bench --set`, the replay command and the what-if page parse the same way and say
the same thing.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Iterable
from typing import Any

from policy.model import PolicyConfig

TRUE = {"1", "true", "yes", "on"}
FALSE = {"0", "false", "no", "off"}
NONE = {"none", "null", ""}
# The least value each numeric setting may take (class_count: the lowest class is class 0, so at least one).
MINIMUM = {"class_count": 1, "max_jobs": 1}
# Settings that divide (usage decays by the half-life): more than 0.
POSITIVE = {"half_life_seconds"}


class OverrideError(ValueError):
    pass


def setting_names() -> list[str]:
    return [f.name for f in dataclasses.fields(PolicyConfig)]


def _kinds(name: str) -> tuple[type, bool]:
    """(the value's type, whether None is allowed) for a PolicyConfig field."""
    hint = typing.get_type_hints(PolicyConfig)[name]
    args = typing.get_args(hint)
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        kinds = [a for a in args if a is not type(None)]
        return kinds[0], type(None) in args
    return hint, False


def describe_settings(config: PolicyConfig | None = None) -> str:
    config = config or PolicyConfig()
    lines = []
    for name in setting_names():
        kind, nullable = _kinds(name)
        lines.append(f"{name} ({kind.__name__}{' or none' if nullable else ''}, now {getattr(config, name)!r})")
    return "; ".join(lines)


def parse_value(name: str, raw: str) -> Any:
    if name not in setting_names():
        raise OverrideError(f"unknown setting {name!r}; valid names: {', '.join(setting_names())}")
    kind, nullable = _kinds(name)
    text = raw.strip()
    if nullable and text.lower() in NONE:
        return None
    if kind is bool:
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise OverrideError(f"{name}: {raw!r} is not true or false")
    try:
        value: int | float = int(text) if kind is int else float(text)
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise OverrideError(f"{name}: {raw!r} is not {expected}{' (or none)' if nullable else ''}") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise OverrideError(f"{name}: {raw!r} is not a finite number")
    if name in POSITIVE and value <= 0:
        raise OverrideError(f"{name}: must be more than 0, not {raw.strip()}")
    least = MINIMUM.get(name, 0)
    if value < least:
        raise OverrideError(f"{name}: must be at least {least}, not {raw.strip()}")
    return value


def parse_assignments(lines: Iterable[str]) -> dict[str, Any]:
    """{name: value} from `NAME=VALUE` strings (blank lines and `#` comments skipped); the first error raises."""
    changes: dict[str, Any] = {}
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, raw = text.partition("=")
        if not sep:
            raise OverrideError(f"{text!r} is not NAME=VALUE; valid names: {', '.join(setting_names())}")
        name = name.strip()
        changes[name] = parse_value(name, raw)
    return changes


def apply_overrides(config: PolicyConfig, lines: Iterable[str]) -> tuple[PolicyConfig, dict[str, Any]]:
    """The config with the `NAME=VALUE` changes applied, and the changes as {name: value}."""
    changes = parse_assignments(lines)
    return dataclasses.replace(config, **changes), changes
