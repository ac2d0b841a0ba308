"""Uncertainty of attack metrics: bootstrap AUC intervals, Clopper-Pearson, balanced subsets."""

from __future__ import annotations

import numpy as np
from scipy.stats import binomtest, mannwhitneyu


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for a rate such as TPR = tp / members."""
    if trials == 0:
        return (float("nan"), float("nan"))
    interval = binomtest(successes, trials).proportion_ci(confidence_level=level, method="exact")
    return (float(interval.low), float(interval.high))


def bootstrap_auc_interval(
    labels: np.ndarray, scores: np.ndarray, n_boot: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile interval of the AUC over stratified resamples (members and non-members apart)."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=float)
    members, nonmembers = scores[labels], scores[~labels]
    rng = np.random.default_rng(seed)
    resampled_members = members[rng.integers(0, len(members), size=(n_boot, len(members)))]
    resampled_nonmembers = nonmembers[rng.integers(0, len(nonmembers), size=(n_boot, len(nonmembers)))]
    # Mann-Whitney U / (n1 * n0) is the AUC with ties counted 1/2; vectorised over resamples.
    u_statistic = mannwhitneyu(resampled_members, resampled_nonmembers, axis=1, method="asymptotic").statistic
    aucs = u_statistic / (len(members) * len(nonmembers))
    tail = (1 - level) / 2
    return (float(np.quantile(aucs, tail)), float(np.quantile(aucs, 1 - tail)))


def balanced_subsets(labels: np.ndarray, repeats: int = 10, seed: int = 0) -> list[np.ndarray]:
    """Row indices of `repeats` balanced subsets: the larger side subsampled to the smaller's size.

    Indices select whole rows, so every signal of a sample (target and reference) stays with it.
    """
    labels = np.asarray(labels).astype(bool)
    members, nonmembers = np.flatnonzero(labels), np.flatnonzero(~labels)
    size = min(len(members), len(nonmembers))
    rng = np.random.default_rng(seed)
    subsets = []
    for _ in range(repeats):
        chosen_members = rng.choice(members, size=size, replace=False) if len(members) > size else members
        chosen_nonmembers = rng.choice(nonmembers, size=size, replace=False) if len(nonmembers) > size else nonmembers
        subsets.append(np.sort(np.concatenate([chosen_members, chosen_nonmembers])))
    return subsets
