"""Evaluate one attack's membership scores: AUC, TPR at low FPR and every threshold, per slice (docs/design.md: Metrics)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from lmaudit.attacks.base import AttackScores, Skipped, Threshold
from lmaudit.attacks.thresholds import population_threshold
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER, POPULATION
from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.clusters import frame_clusters
from lmaudit.metrics.privacy import epsilon_from_bounds
from lmaudit.metrics.results import (
    AttackResult,
    BalancedResult,
    BalancedThreshold,
    ThresholdResult,
    TprRecord,
)
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import NONMEMBER_SLICE, NonmemberSets, slice_order
from lmaudit.metrics.threshold import threshold_metrics
from lmaudit.metrics.uncertainty import balanced_subsets, rate_interval

# How messages name the units of each level when the caller does not say (an audit says patients, users, admissions).
LEVEL_UNITS = {"sample": "samples", "subgroup": "subgroups", "group": "groups"}


def _threshold_result(threshold: Threshold, labels: np.ndarray, scores: np.ndarray, clusters: np.ndarray,
                      population: np.ndarray, delta: float) -> ThresholdResult:
    metrics = threshold_metrics(labels, scores, threshold.value)
    called = scores >= threshold.value
    recall_ci = rate_interval(called[labels], clusters[labels])
    fpr_ci = rate_interval(called[~labels], clusters[~labels])
    unavailable = None
    if metrics.tp + metrics.fp == 0:
        unavailable = {"precision": "no audited unit scores at or above the threshold, so precision (TP / called) is "
                                    "undefined"}
    population_fpr = float((population >= threshold.value).mean()) if len(population) else None
    return ThresholdResult(
        rule=threshold.rule, alpha=threshold.alpha, value=threshold.value, **asdict(metrics),
        recall_ci=recall_ci, fpr_ci=fpr_ci, epsilon_lower_bound=epsilon_from_bounds(recall_ci[0], fpr_ci[1], delta),
        population_fpr=population_fpr, unavailable=unavailable,
    )


# Beyond this size, sums and differences of scores (means, likelihood ratios, histogram widths) can overflow a float.
EXTREME_SCORE = 1e150


@dataclass(frozen=True)
class ExtremeScores:
    """A sample-level attack with scores beyond EXTREME_SCORE in size: how many, of how many scores."""

    attack: str
    signal: str
    extreme: int
    scores: int


def extreme_scores(attacks: list[AttackScores]) -> list[ExtremeScores]:
    """Each sample-level attack with scores beyond EXTREME_SCORE in size (`report/checks.py:extreme_score_warnings`
    words them): a losses file of such values is likelier a mistake than a model's output, and arithmetic on them can
    overflow (ranks, and so the AUC, stand)."""
    found = []
    for attack in attacks:
        scores = attack.frame["score"].to_numpy(dtype=float)
        extreme = int(np.sum(np.abs(scores[np.isfinite(scores)]) > EXTREME_SCORE))
        if attack.level == "sample" and extreme:
            found.append(ExtremeScores(attack.attack, attack.signal, extreme, len(scores)))
    return found


def _mean_and_std(values: list[float]) -> tuple[float, float]:
    values = np.array(values, dtype=float)
    if np.isnan(values).all():
        return float("nan"), float("nan")
    return float(np.nanmean(values)), float(np.nanstd(values))


def _balanced_result(labels: np.ndarray, scores: np.ndarray, thresholds: list[Threshold],
                     settings: EvaluationSettings) -> BalancedResult | None:
    if labels.sum() == (~labels).sum():
        return None
    subsets = balanced_subsets(labels, settings.balanced_repeats, settings.seed)
    aucs = [auc(labels[s], scores[s]) for s in subsets]
    per_threshold = []
    for threshold in thresholds:
        runs = [threshold_metrics(labels[s], scores[s], threshold.value) for s in subsets]
        summary = {}
        for name in ("precision", "recall", "fpr", "accuracy", "advantage"):
            summary[f"{name}_mean"], summary[f"{name}_std"] = _mean_and_std([getattr(r, name) for r in runs])
        per_threshold.append(BalancedThreshold(rule=threshold.rule, alpha=threshold.alpha, **summary))
    return BalancedResult(repeats=len(subsets), size_per_side=int(min(labels.sum(), (~labels).sum())),
                          auc_mean=float(np.mean(aucs)), auc_std=float(np.std(aucs)), thresholds=per_threshold)


def _tpr_record(labels: np.ndarray, scores: np.ndarray, clusters: np.ndarray, alpha: float) -> TprRecord:
    """The ROC's step lookup at `alpha` with both rates' intervals at its threshold. The threshold is fitted on these
    non-members, yet the FPR's upper bound holds: the FPR of the (k+1)-th highest of n units is Beta(k+1, n-k), the
    Clopper-Pearson bound's own distribution."""
    point = tpr_at_fpr(labels, scores, alpha)
    called = scores >= point.threshold if np.isfinite(point.threshold) else np.zeros(len(scores), bool)
    return TprRecord(tpr=point.tpr, fpr=point.fpr, tp=point.tp, fp=point.fp,
                     tpr_ci=rate_interval(called[labels], clusters[labels]), resolution_limited=point.resolution_limited,
                     fpr_ci=rate_interval(called[~labels], clusters[~labels]))


def population_thresholds(population_scores: np.ndarray, alphas: tuple[float, ...], units: str
                           ) -> tuple[list[Threshold], dict[str, str]]:
    """The population threshold at each FPR `alpha` that the population can calibrate, and why each other one cannot
    (keyed population_threshold_<alpha>); `units` names the population's units in the reasons (e.g. 'patients')."""
    thresholds, unavailable = [], {}
    n = len(population_scores)
    for alpha in alphas:
        key, needed = f"population_threshold_{alpha:g}", math.ceil(1 / alpha - 1e-9)
        value = population_threshold(population_scores, alpha) if n else math.inf
        if math.isfinite(value):
            thresholds.append(Threshold("population", value, alpha))
        elif n == 0:
            unavailable[key] = f"no population {units}: give population data (never trained on) to calibrate thresholds"
        elif n < needed:
            unavailable[key] = f"the population has {n} {units}; a {alpha:.0%} threshold needs at least {needed}"
        else:
            unavailable[key] = (f"the highest population scores tie, so no threshold calls at most {alpha:.0%} of the "
                                f"{n} population {units} members")
    return thresholds, unavailable


def evaluate_slice(
    attack: AttackScores, slice_name: str, audited: pd.DataFrame, population: pd.DataFrame, settings: EvaluationSettings,
    units: str | None = None,
) -> AttackResult:
    """One result: AUC with interval, TPR at each FPR, metrics at each threshold; population thresholds calibrated on
    the population units given; why anything is left out (`units` names the level's units, e.g. 'patients')."""
    labels = (audited["role"] == MEMBER).to_numpy()
    scores = audited["score"].to_numpy(dtype=float)
    population_scores = population["score"].to_numpy(dtype=float)
    calibrated, unavailable = population_thresholds(population_scores, settings.threshold_alphas,
                                                    units or LEVEL_UNITS.get(attack.level, "units"))
    thresholds = list(attack.fixed_thresholds) + calibrated
    balanced = _balanced_result(labels, scores, thresholds, settings)
    if balanced is None:
        unavailable["balanced"] = (f"members and non-members are equal in number ({int(labels.sum())} each), so the full "
                                   "data is already balanced")
    clusters = frame_clusters(audited)
    area = auc(labels, scores)
    return AttackResult(
        attack=attack.attack, signal=attack.signal, level=attack.level, slice=slice_name,
        auc=area,
        auc_ci=auc_interval(labels, scores, area, clusters, settings.bootstrap, seed=settings.seed),
        tpr_at_fpr={str(alpha): _tpr_record(labels, scores, clusters, alpha) for alpha in settings.alphas},
        thresholds=[_threshold_result(t, labels, scores, clusters, population_scores, settings.delta)
                    for t in thresholds],
        balanced=balanced,
        n_members=int(labels.sum()), n_nonmembers=int((~labels).sum()), n_population=int(len(population_scores)),
        calibration=attack.calibration or None, unavailable=unavailable or None,
    )


def _slices(attack: AttackScores, slices: pd.DataFrame | None, sets: NonmemberSets | None = None) -> dict[str, pd.Series]:
    """Row masks of the attack's frame: 'all'; at sample level one per slice of each slicing in `slices` (index
    sample_id, one column of slice names per slicing); and at every level one per non-member set. With several sets,
    'all' and the other slices hold the first set's non-members only."""
    frame = attack.frame
    in_set = sets.masks(attack.level, frame["id"]) if sets is not None else {}
    audited = in_set[sets.names[0]] if sets is not None else pd.Series(True, index=frame.index)
    masks = {"all": audited}
    if attack.level == "sample" and slices is not None:
        for column in slices.columns:
            names = frame["id"].map(slices[column])
            for name in slice_order(names):
                masks[name] = (names == name) & audited
    masks.update({NONMEMBER_SLICE + name: mask for name, mask in in_set.items()})
    return masks


def evaluate_attack(attack: AttackScores, settings: EvaluationSettings, slices: pd.DataFrame | None = None,
                    units: str | None = None, sets: NonmemberSets | None = None) -> tuple[list[AttackResult], list[Skipped]]:
    """Results for every slice with at least 2 members and 2 non-members; and the slices skipped.

    Population thresholds are calibrated on the population units of the same slice; `slices`, `sets`: see `_slices`.
    """
    results, skipped = [], []
    for name, selected in _slices(attack, slices, sets).items():
        part = attack.frame[selected]
        audited = part[part["role"].isin(AUDITED_ROLES)]
        counts = audited["role"].value_counts()
        members, nonmembers = counts.get(MEMBER, 0), counts.get(NONMEMBER, 0)
        if members < 2 or nonmembers < 2:
            skipped.append(Skipped(attack.attack, attack.level, f"{members} members and {nonmembers} non-members; need 2 of each",
                                   attack.signal, name))
            continue
        results.append(evaluate_slice(attack, name, audited, part[part["role"] == POPULATION], settings, units))
    return results, skipped


def evaluate_attacks(attacks: list[AttackScores], settings: EvaluationSettings, slices: pd.DataFrame | None = None,
                     units: Mapping[str, str] | None = None, sets: NonmemberSets | None = None
                     ) -> tuple[list[AttackResult], list[Skipped]]:
    """Every attack evaluated, in order: the results, and the slices that could not be (`units`: each level's unit
    word for the reasons, e.g. {'group': 'patients'}; `sets`: the non-member sets, when there are several)."""
    results, skipped = [], []
    for attack in attacks:
        attack_results, attack_skipped = evaluate_attack(attack, settings, slices, (units or {}).get(attack.level), sets)
        results += attack_results
        skipped += attack_skipped
    return results, skipped
