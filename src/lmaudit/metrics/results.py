"""The typed records of an evaluated attack: what report.json's `results` hold (docs/design.md: Report).

Rates are fractions, counts are numbers of samples (or groups at group level), intervals are 95%.
A field marked OPTIONAL is left out of report.json when it does not apply (None). `unavailable` says, per quantity
that could not be computed (a population threshold, precision, the balanced evaluation), why: no blank goes unexplained.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BeforeValidator, WithJsonSchema

OPTIONAL = {"optional": True}


def _nan_if_null(value: object) -> object:
    return math.nan if value is None else value


# A number that report.json writes as null where it is not one (NaN, an infinity), and that reads back as NaN.
Number = Annotated[float, BeforeValidator(_nan_if_null), WithJsonSchema({"type": ["number", "null"]})]
Interval = tuple[Number, Number]


@dataclass(frozen=True)
class TprRecord:
    """The best TPR at FPR <= alpha (a step lookup of the ROC), its counts, and both rates' intervals at its threshold
    (Clopper-Pearson; on effective counts where units come in groups: metrics/uncertainty.py:rate_interval)."""

    tpr: Number
    fpr: Number
    tp: int
    fp: int
    tpr_ci: Interval
    resolution_limited: bool
    fpr_ci: Interval | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class ThresholdResult:
    """The decision `score >= value` on the audited samples: counts, rates, intervals and the empirical epsilon bound.

    population_fpr: the share of the population the threshold calls members."""

    rule: str
    alpha: float | None
    value: Number
    tp: int
    fp: int
    tn: int
    fn: int
    precision: Number
    recall: Number
    fpr: Number
    accuracy: Number
    advantage: Number
    recall_ci: Interval
    fpr_ci: Interval
    epsilon_lower_bound: Number
    population_fpr: float | None = field(default=None, metadata=OPTIONAL)
    unavailable: dict[str, str] | None = field(default=None, metadata=OPTIONAL)


@dataclass(frozen=True)
class BalancedThreshold:
    """Mean and standard deviation of the threshold metrics over the balanced subsets."""

    rule: str
    alpha: float | None
    precision_mean: Number
    precision_std: Number
    recall_mean: Number
    recall_std: Number
    fpr_mean: Number
    fpr_std: Number
    accuracy_mean: Number
    accuracy_std: Number
    advantage_mean: Number
    advantage_std: Number


@dataclass(frozen=True)
class BalancedResult:
    """The same evaluation on `repeats` subsets with as many members as non-members (`size_per_side` each)."""

    repeats: int
    size_per_side: int
    auc_mean: Number
    auc_std: Number
    thresholds: list[BalancedThreshold]


@dataclass(frozen=True)
class AttackResult:
    """One attack on one signal at one level, on one slice of the audited samples."""

    attack: str
    signal: str
    level: str
    slice: str
    auc: Number
    auc_ci: Interval
    tpr_at_fpr: dict[str, TprRecord]
    thresholds: list[ThresholdResult]
    balanced: BalancedResult | None
    n_members: int
    n_nonmembers: int
    n_population: int
    calibration: dict | None = field(default=None, metadata=OPTIONAL)
    unavailable: dict[str, str] | None = field(default=None, metadata=OPTIONAL)
