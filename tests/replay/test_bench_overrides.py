"""`python -m replay.bench --set KNOB=VALUE`: a what-if on one of the policy's knobs, or a clear error."""

from __future__ import annotations

import argparse

import pytest

from policy.model import PolicyConfig
from replay.bench import with_overrides


def parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(prog="bench")


def test_each_knob_is_read_as_its_fields_type() -> None:
    config = with_overrides(
        PolicyConfig(max_jobs=5000), ["weight_short=0", "max_reservations=8", "preemption=false", "starvation_wall_factor=0.5"], parser()
    )
    assert (config.weight_short, config.max_reservations, config.preemption, config.starvation_wall_factor) == (0.0, 8, False, 0.5)
    assert config.max_jobs == 5000
    assert with_overrides(PolicyConfig(), [], parser()) == PolicyConfig()


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("bogus=1", "expected KNOB=VALUE with KNOB one of"),
        ("weight_short", "expected KNOB=VALUE"),
        ("weight_short=lots", "'lots' is not a valid float"),
        ("max_reservations=2.5", "'2.5' is not a valid int"),
        ("preemption=maybe", "'maybe' is not a valid bool"),
    ],
)
def test_anything_else_is_refused_with_what_was_wrong(item: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        with_overrides(PolicyConfig(), [item], parser())
    assert exited.value.code == 2
    assert says in capsys.readouterr().err
