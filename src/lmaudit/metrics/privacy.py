"""What an attack's counts imply about differential privacy: a lower bound on epsilon."""

from __future__ import annotations

import math

from lmaudit.metrics.uncertainty import clopper_pearson


def accountant_epsilon(dp: dict) -> tuple[str, float | None]:
    """The accountant's epsilon a DP-SGD record is compared with, and its accountant's name: PRV (the tighter) where it
    was computed, else RDP."""
    return ("PRV", dp["epsilon_prv"]) if dp["epsilon_prv"] is not None else ("RDP", dp["epsilon_rdp"])


def contradicts(empirical: float, claimed: float) -> bool:
    """Whether an empirical epsilon lower bound exceeds the accountant's epsilon `claimed` (then the DP training or its
    accounting is wrong): one rule for the canary audit and the white-box audit of DP-SGD, which
    `report/privacy_words.py` words. NaN contradicts: nothing shows it below."""
    return not empirical <= claimed


def epsilon_from_bounds(tpr_low: float, fpr_high: float, delta: float) -> float:
    """Lower bound on the epsilon of any (epsilon, delta)-DP training that allows a membership test whose TPR is at
    least `tpr_low` and whose FPR is at most `fpr_high` (nats; 0 where they prove nothing).

    DP bounds every membership test: TPR <= e^eps FPR + delta and 1 - FPR <= e^eps (1 - TPR) + delta
    (Kairouz et al. 2015), solved for eps. The bound is a DP statement only where the members and the non-members were
    drawn alike (DP compares the same record in and out; a shift between the two sets looks like leakage), and only for
    a threshold chosen without the audited units' labels, as every threshold lmaudit reports is (population,
    calibration or shadow data)."""
    bounds = [0.0]
    if tpr_low - delta > 0 and fpr_high > 0:
        bounds.append(math.log((tpr_low - delta) / fpr_high))
    if 1 - delta - fpr_high > 0 and tpr_low < 1:
        bounds.append(math.log((1 - delta - fpr_high) / (1 - tpr_low)))
    return max(bounds)


def empirical_epsilon(tp: int, fn: int, fp: int, tn: int, delta: float, level: float = 0.95) -> float:
    """`epsilon_from_bounds` at the low end of the TPR's and the high end of the FPR's two-sided Clopper-Pearson
    intervals at `level` for independent units: the bound holds with confidence at least `level` (each end is one-sided
    at (1 + level) / 2; Bonferroni). Units that come in groups take `rate_interval`'s bounds instead."""
    return epsilon_from_bounds(clopper_pearson(tp, tp + fn, level)[0], clopper_pearson(fp, fp + tn, level)[1], delta)


def group_privacy(epsilon: float, delta: float, k: int) -> tuple[float, float]:
    """The (epsilon, delta) that (epsilon, delta)-DP gives a group of k records, e.g. one patient's k notes (Dwork & Roth,
    as Jagannatha et al. Section 2 state it): (k epsilon, k e^((k-1) epsilon) delta); a delta of 1 or more is vacuous,
    and +inf stands for one too large for a float."""
    if k < 1:
        raise ValueError("a group has at least one record")
    if k == 1:  # exactly the record's, not its delta through exp(log(delta))
        return epsilon, delta
    log_delta = math.log(k) + (k - 1) * epsilon + math.log(delta) if delta > 0 else -math.inf
    return k * epsilon, math.exp(log_delta) if log_delta < 700 else math.inf
