"""How every reader-facing text writes a number: the terminal, the page (as Jinja filters) and the verdict's sentences
share these, so that an AUC, a rate or a missing value reads the same everywhere."""

from __future__ import annotations

import math
from collections.abc import Sequence

MISSING = "n/a"  # a value that could not be measured, where a blank would look like a layout error


def finite_or_none(value: float | None) -> float | None:
    """`value` as a float, or None where it is no finite number (report.json's null reads back as NaN)."""
    return None if value is None or not math.isfinite(value) else float(value)


def number(value: float | None) -> str:
    """Three decimals; blank when unknown (None, or NaN: a typed report's null)."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def percent(value: float | None) -> str:
    """A fraction as a percentage with one decimal; blank when unknown."""
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.1f}%"


def with_interval(value: float, interval: Sequence[float]) -> str:
    """'0.812 [0.700, 0.900]': a value and its 95% interval, three decimals each."""
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]"


def counted(exposed: int, units: int, whose: str, rate: float, interval: Sequence[float]) -> str:
    """'9 of 385 member samples (0.023 [0.011, 0.044])': a count with its rate and interval."""
    return f"{exposed} of {units} {whose} ({with_interval(rate, interval)})"
