"""The typed records of an evaluated attack: what report.json's `results` hold (docs/design.md: Report).

Rates are fractions, counts are numbers of samples (or groups at group level), intervals are 95%.
A field marked OPTIONAL is left out of report.json when it does not apply (None). `unavailable` says, per quantity
that could not be computed (a population threshold, precision, the balanced evaluation), why: no blank goes unexplained.
"""

from __future__ import annotations

from dataclasses import dataclass, field

OPTIONAL = {"optional": True}


@dataclass(frozen=True)
class TprRecord:
    """The best TPR at FPR <= alpha (a step lookup of the ROC), its counts, and both rates' intervals at its threshold
    (Clopper-Pearson; on effective counts where units come in groups: metrics/uncertainty.py:rate_interval)."""

    tpr: float
    fpr: float
    tp: int
    fp: int
    tpr_ci: tuple[float, float]
    resolution_limited: bool
    fpr_ci: tuple[float, float] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class ThresholdResult:
    """The decision `score >= value` on the audited samples: counts, rates, intervals and the empirical epsilon bound.

    population_fpr: the share of the population the threshold calls members."""

    rule: str
    alpha: float | None
    value: float
    tp: int
    fp: int
    tn: int
    fn: int
    precision: float
    recall: float
    fpr: float
    accuracy: float
    advantage: float
    recall_ci: tuple[float, float]
    fpr_ci: tuple[float, float]
    epsilon_lower_bound: float
    population_fpr: float | None = field(default=None, metadata=OPTIONAL)
    unavailable: dict[str, str] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class BalancedThreshold:
    """Mean and standard deviation of the threshold metrics over the balanced subsets."""

    rule: str
    alpha: float | None
    precision_mean: float
    precision_std: float
    recall_mean: float
    recall_std: float
    fpr_mean: float
    fpr_std: float
    accuracy_mean: float
    accuracy_std: float
    advantage_mean: float
    advantage_std: float


@dataclass(frozen=True)
class BalancedResult:
    """The same evaluation on `repeats` subsets with as many members as non-members (`size_per_side` each)."""

    repeats: int
    size_per_side: int
    auc_mean: float
    auc_std: float
    thresholds: list[BalancedThreshold]


@dataclass(frozen=True)
class AttackResult:
    """One attack on one signal at one level, on one slice of the audited samples."""

    attack: str
    signal: str
    level: str
    slice: str
    auc: float
    auc_ci: tuple[float, float]
    tpr_at_fpr: dict[str, TprRecord]
    thresholds: list[ThresholdResult]
    balanced: BalancedResult | None
    n_members: int
    n_nonmembers: int
    n_population: int
    calibration: dict | None = field(default=None, metadata=OPTIONAL)
    unavailable: dict[str, str] | None = field(default=None, metadata=OPTIONAL)
