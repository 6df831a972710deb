"""How the replay's report writes its figures."""

from __future__ import annotations

from replay.report import DASH, fmt_number


def test_a_small_figure_keeps_two_significant_digits_instead_of_reading_zero() -> None:
    # A what-if run's offered load of 0.004 read "0.00" beside a GPU utilisation of 1.6%.
    assert fmt_number(0.004, 2) == "0.004"
    assert fmt_number(0.000123, 2) == "0.00012"
    assert fmt_number(0.0, 2) == "0.00"
    assert fmt_number(0.85, 2) == "0.85"
    assert fmt_number(12345.678, 1) == "12,345.7"
    assert fmt_number(7) == "7"
    assert fmt_number(None) == DASH
