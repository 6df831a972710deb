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
    """What is wrong with one or more `NAME=VALUE` lines: `problems`, one sentence each, every bad line's."""

    def __init__(self, *problems: str) -> None:
        super().__init__(*problems)
        self.problems = list(problems)

    def __str__(self) -> str:
        return " ".join(self.problems)


def setting_names() -> list[str]:
    return [f.name for f in dataclasses.fields(PolicyConfig)]


def _valid_names() -> str:
    return f"Valid names: {', '.join(setting_names())}."


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
        raise OverrideError(f"Unknown setting {name!r}.", _valid_names())
    kind, nullable = _kinds(name)
    text = raw.strip()
    if nullable and text.lower() in NONE:
        return None
    if kind is bool:
        if text.lower() in TRUE:
            return True
        if text.lower() in FALSE:
            return False
        raise OverrideError(f"{name}: {raw!r} is not true or false.")
    try:
        value: int | float = int(text) if kind is int else float(text)
    except ValueError:
        expected = "a whole number" if kind is int else "a number"
        raise OverrideError(f"{name}: {raw!r} is not {expected}{' (or none)' if nullable else ''}.") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise OverrideError(f"{name}: {raw!r} is not a finite number.")
    if name in POSITIVE and value <= 0:
        raise OverrideError(f"{name}: must be more than 0, not {raw.strip()}.")
    least = MINIMUM.get(name, 0)
    if value < least:
        raise OverrideError(f"{name}: must be at least {least}, not {raw.strip()}.")
    return value


def parse_assignments(lines: Iterable[str], *, numbered: bool = False) -> dict[str, Any]:
    """{name: value} from `NAME=VALUE` strings (blank lines and `#` comments skipped).

    Every bad line is said, not only the first: one OverrideError whose `problems` has a sentence per bad line,
    starting "Line n:" when `numbered` (the lines of one text, as the what-if page's field has them).
    """
    changes: dict[str, Any] = {}
    problems: list[str] = []
    names = _valid_names()
    name_wrong = False
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        name, sep, raw = text.partition("=")
        try:
            if not sep:
                raise OverrideError(f"Not NAME=VALUE: {text!r}.", names)
            changes[name.strip()] = parse_value(name.strip(), raw)
        except OverrideError as exc:
            name_wrong = name_wrong or names in exc.problems
            problems += [f"Line {number}: {p}" if numbered else p for p in exc.problems if p != names]
    if problems:
        # The valid names once, after every line that needed them.
        raise OverrideError(*problems, *([names] if name_wrong else []))
    return changes


def apply_overrides(config: PolicyConfig, lines: Iterable[str]) -> tuple[PolicyConfig, dict[str, Any]]:
    """The config with the `NAME=VALUE` changes applied, and the changes as {name: value}."""
    changes = parse_assignments(lines)
    return dataclasses.replace(config, **changes), changes
