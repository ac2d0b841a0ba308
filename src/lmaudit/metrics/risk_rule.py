"""The verdict's rule in numbers: the family-wise levels, the magnitude that makes a leak "high", and the resolution
that makes a clean result "low" (report/verdict.py words them; metrics/power.py asks which of them data can reach)."""

from __future__ import annotations

ONE_PERCENT = 0.01  # the false-positive rate the verdict reads TPR at
MODERATE_LEVEL = 0.05  # family-wise level of the permutation tests for "moderate" (and above)
HIGH_LEVEL = 0.01  # ... and for "high"
HIGH_RATIO = 5.0  # TPR's lower bound at least this times the larger of 1% and the FPR's upper bound at its threshold
HIGH_EPSILON = 1.0  # empirical epsilon lower bound (nats)
RESOLUTION_FACTOR = 2.0  # "low" needs the FPR's upper bound at the 1% threshold within this factor of 1%
# The gate reads a level as exposing most of its members when the verdict's TPR at the 1% threshold is above this and
# the level's test rejects at MODERATE_LEVEL: a leak that few non-members keep from reading "high" is still a leak.
MOST_EXPOSED = 0.5


def exposure_ratio(tpr_low: float | None, fpr_high: float | None) -> float:
    """A TPR's lower bound over the larger of 1% and its FPR's upper bound: how many times what a guess that accuses as
    many non-members exposes, at least (0 where a bound is missing)."""
    if tpr_low is None or fpr_high is None:
        return 0.0
    return tpr_low / max(ONE_PERCENT, fpr_high)


def resolves_one_percent(fpr_high: float | None) -> bool:
    """Whether an FPR's upper bound at the 1% threshold is within RESOLUTION_FACTOR of 1% (what "low" needs)."""
    return fpr_high is not None and fpr_high <= RESOLUTION_FACTOR * ONE_PERCENT
