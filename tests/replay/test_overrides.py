"""`--set NAME=VALUE` / the page's changed settings: PolicyConfig fields, validated with the valid names in the error."""

from __future__ import annotations

import pytest

from policy.model import PolicyConfig
from replay.overrides import OverrideError, apply_overrides, parse_assignments, setting_names


def test_changes_apply_over_the_given_config() -> None:
    config, changes = apply_overrides(
        PolicyConfig(max_reservations=2), ["starvation_seconds=7200", "preemption=off", " max_jobs = none ", "", "# a comment"]
    )
    assert changes == {"starvation_seconds": 7200.0, "preemption": False, "max_jobs": None}
    assert config.starvation_seconds == 7200.0 and config.preemption is False and config.max_reservations == 2
    assert parse_assignments(["max_reservations=8", "max_jobs=100"]) == {"max_reservations": 8, "max_jobs": 100}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("starvation=10", "Unknown setting 'starvation'. Valid names: weight_fair_share"),
        ("starvation_seconds", "Not NAME=VALUE: 'starvation_seconds'. Valid names:"),
        ("max_reservations=2.5", "max_reservations: '2.5' is not a whole number"),
        ("starvation_seconds=soon", "starvation_seconds: 'soon' is not a number"),
        ("preemption=maybe", "preemption: 'maybe' is not true or false"),
        ("weight_age=-1", "weight_age: must be at least 0"),
        ("class_count=0", "class_count: must be at least 1"),
        ("half_life_seconds=0", "half_life_seconds: must be more than 0"),
        ("half_life_seconds=inf", "not a finite number"),
        ("max_reservations=none", "not a whole number"),
    ],
)
def test_bad_changes_say_what_is_wrong(line: str, message: str) -> None:
    with pytest.raises(OverrideError, match=message.replace("(", r"\(")) as caught:
        parse_assignments([line])
    if "Valid names" in message:
        assert all(name in str(caught.value) for name in setting_names())


def test_every_bad_line_is_said_at_once_with_its_number() -> None:
    lines = ["starvation_seconds=600", "not_a_knob=1", "", "preemption=maybe", "also_not=2"]
    with pytest.raises(OverrideError) as caught:
        parse_assignments(lines, numbered=True)
    assert caught.value.problems == [
        "Line 2: Unknown setting 'not_a_knob'.",
        "Line 4: preemption: 'maybe' is not true or false.",
        "Line 5: Unknown setting 'also_not'.",
        f"Valid names: {', '.join(setting_names())}.",  # once, after the lines that needed them
    ]
    assert all(problem[0].isupper() for problem in caught.value.problems)
    with pytest.raises(OverrideError) as caught:  # --set items: no line numbers, one message
        parse_assignments(["preemption=maybe", "max_jobs=-1"])
    assert str(caught.value) == "preemption: 'maybe' is not true or false. max_jobs: must be at least 1, not -1."
