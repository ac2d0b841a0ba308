"""Evaluate one attack's membership scores: the result records of report.json (DESIGN.md: Report)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from lmaudit.attacks.suite import AttackScores, Threshold
from lmaudit.attacks.thresholds import population_threshold
from lmaudit.metrics.privacy import empirical_epsilon
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.threshold import threshold_metrics
from lmaudit.metrics.uncertainty import (
    balanced_subsets,
    bootstrap_auc_interval,
    clopper_pearson,
    population_fit_p_value,
)

# Length slices of the paper's Table 3, in content tokens of the target's tokenizer: [low, high).
LENGTH_SLICES = {"length:short": (10, 20), "length:long": (20, 61)}


@dataclass(frozen=True)
class EvaluationSettings:
    """How attacks are evaluated: FPR levels, bootstrap and balanced repeats, seeds, and the delta of the epsilon bounds."""

    alphas: tuple[float, ...] = (0.1, 0.01, 0.001)
    threshold_alphas: tuple[float, ...] = (0.1, 0.01)
    bootstrap: int = 1000
    balanced_repeats: int = 10
    seed: int = 0
    delta: float = 1e-5


def _finite_or_none(value: float) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _threshold_record(threshold: Threshold, labels: np.ndarray, scores: np.ndarray, population: np.ndarray,
                      nonmember_groups: np.ndarray | None = None, population_groups: np.ndarray | None = None,
                      delta: float = 1e-5) -> dict:
    metrics = threshold_metrics(labels, scores, threshold.value)
    record = {"rule": threshold.rule, "alpha": threshold.alpha, "value": _finite_or_none(threshold.value)}
    record.update({k: _finite_or_none(v) if isinstance(v, float) else v for k, v in asdict(metrics).items()})
    record["recall_ci"] = list(clopper_pearson(metrics.tp, metrics.tp + metrics.fn))
    record["fpr_ci"] = list(clopper_pearson(metrics.fp, metrics.fp + metrics.tn))
    record["epsilon_lower_bound"] = empirical_epsilon(metrics.tp, metrics.fn, metrics.fp, metrics.tn, delta)
    if len(population):
        population_called = population >= threshold.value
        record["population_fpr"] = float(population_called.mean())
        if threshold.rule == "population":
            record["population_match_p"] = population_fit_p_value(
                scores[~labels], population, threshold.alpha, nonmember_groups, population_groups
            )
    return record


def population_mismatch_warnings(results: list[dict], level: float = 0.01) -> list[str]:
    """Warn where a population threshold's FPR differs between the population and the audited non-members.

    Both should be draws from one distribution; when the permutation test (`population_fit_p_value`,
    over whole groups when samples carry group ids) rejects that at `level`, Bonferroni-corrected over
    every population threshold of the report, precision and recall at that threshold mislead.
    """
    tested = [(r, t) for r in results for t in r["thresholds"] if t.get("population_match_p") is not None]
    corrected = level / max(1, len(tested))
    return [
        f"{r['attack']} ({r['level']}, {r['slice']}): the population threshold for {t['alpha']:.0%} FPR calls "
        f"{t['population_fpr']:.1%} of the population but {t['fpr']:.1%} of the audited non-members "
        f"(p = {t['population_match_p']:.1g}, Bonferroni level {corrected:.1g}); the population data is not "
        "distributed like the non-members, so precision and recall at this threshold mislead"
        for r, t in tested
        if t["population_match_p"] < corrected
    ]


def _groups(audited: pd.DataFrame, population: pd.DataFrame, labels: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Group ids of the non-members and the population, when every one of them has one."""
    if "group_id" not in audited or audited["group_id"].isna().any() or population["group_id"].isna().any():
        return None, None
    return audited["group_id"].to_numpy()[~labels], population["group_id"].to_numpy()


def _balanced_record(labels: np.ndarray, scores: np.ndarray, thresholds: list[Threshold], settings: EvaluationSettings) -> dict | None:
    if labels.sum() == (~labels).sum():
        return None
    subsets = balanced_subsets(labels, settings.balanced_repeats, settings.seed)
    aucs = [auc(labels[s], scores[s]) for s in subsets]
    per_threshold = []
    for threshold in thresholds:
        runs = [threshold_metrics(labels[s], scores[s], threshold.value) for s in subsets]
        summary = {"rule": threshold.rule, "alpha": threshold.alpha}
        for name in ("precision", "recall", "fpr", "accuracy", "advantage"):
            values = np.array([getattr(r, name) for r in runs], dtype=float)
            summary[f"{name}_mean"] = _finite_or_none(float(np.nanmean(values)) if not np.isnan(values).all() else float("nan"))
            summary[f"{name}_std"] = _finite_or_none(float(np.nanstd(values)) if not np.isnan(values).all() else float("nan"))
        per_threshold.append(summary)
    return {
        "repeats": len(subsets),
        "size_per_side": int(min(labels.sum(), (~labels).sum())),
        "auc_mean": float(np.mean(aucs)),
        "auc_std": float(np.std(aucs)),
        "thresholds": per_threshold,
    }


def evaluate_slice(
    attack: AttackScores, slice_name: str, audited: pd.DataFrame, population: pd.DataFrame, settings: EvaluationSettings
) -> dict:
    """One result record: AUC with interval, TPR at each FPR, metrics at each threshold."""
    labels = (audited["role"] == "member").to_numpy()
    scores = audited["score"].to_numpy(dtype=float)
    population_scores = population["score"].to_numpy(dtype=float)
    thresholds = list(attack.fixed_thresholds)
    if len(population_scores):
        thresholds += [Threshold("population", population_threshold(population_scores, a), a) for a in settings.threshold_alphas]
    tpr_records = {}
    for alpha in settings.alphas:
        point = tpr_at_fpr(labels, scores, alpha)
        tpr_records[str(alpha)] = {
            "tpr": point.tpr, "fpr": point.fpr, "tp": point.tp, "fp": point.fp,
            "tpr_ci": list(clopper_pearson(point.tp, int(labels.sum()))),
            "resolution_limited": point.resolution_limited,
        }
    return {
        "attack": attack.attack,
        "signal": attack.signal,
        "level": attack.level,
        "slice": slice_name,
        "auc": auc(labels, scores),
        "auc_ci": list(bootstrap_auc_interval(labels, scores, settings.bootstrap, seed=settings.seed)),
        "tpr_at_fpr": tpr_records,
        "thresholds": [_threshold_record(t, labels, scores, population_scores, *_groups(audited, population, labels),
                                         delta=settings.delta)
                       for t in thresholds],
        "balanced": _balanced_record(labels, scores, thresholds, settings),
        "n_members": int(labels.sum()),
        "n_nonmembers": int((~labels).sum()),
        "n_population": int(len(population_scores)),
        **({"calibration": attack.calibration} if attack.calibration else {}),
    }


def _slices(attack: AttackScores) -> dict[str, pd.Series]:
    frame = attack.frame
    slices = {"all": pd.Series(True, index=frame.index)}
    if attack.level == "sample" and "length" in frame.columns and frame["length"].notna().all():
        for name, (low, high) in LENGTH_SLICES.items():
            slices[name] = (frame["length"] >= low) & (frame["length"] < high)
    return slices


def evaluate_attack(attack: AttackScores, settings: EvaluationSettings) -> tuple[list[dict], list[dict]]:
    """Result records for every slice with at least 2 members and 2 non-members; and the slices skipped.

    Population thresholds are calibrated on the population units of the same slice.
    """
    results, skipped = [], []
    for name, selected in _slices(attack).items():
        part = attack.frame[selected]
        audited = part[part["role"].isin(["member", "nonmember"])]
        counts = audited["role"].value_counts()
        if counts.get("member", 0) < 2 or counts.get("nonmember", 0) < 2:
            skipped.append({"attack": attack.attack, "level": attack.level, "slice": name,
                            "reason": f"{counts.get('member', 0)} members and {counts.get('nonmember', 0)} non-members; need 2 of each"})
            continue
        results.append(evaluate_slice(attack, name, audited, part[part["role"] == "population"], settings))
    return results, skipped
