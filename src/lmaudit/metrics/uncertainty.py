"""Uncertainty of attack metrics: bootstrap AUC intervals, Clopper-Pearson, balanced subsets."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import beta, mannwhitneyu, norm

from lmaudit.attacks.thresholds import sorted_population_threshold


def clopper_pearson(successes: int, trials: int, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for a rate such as TPR = tp / members: the beta quantiles that scipy's
    binomtest(...).proportion_ci(method="exact") computes, without its hundred-fold overhead per call."""
    if trials == 0:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2
    low = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes == trials else float(beta.isf(tail, successes + 1, trials - successes))
    return (low, high)


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


# Below this many units on its smaller side, the bootstrap's interval of an AUC near 0 or 1 is too narrow (every
# resample of a perfectly separated audit gives 1): the interval then also covers the exact interval of as many
# independent member/non-member pairs (FEW_UNITS is also the count that resolves a 1% false-positive rate).
FEW_UNITS = 100


def auc_interval(labels: np.ndarray, scores: np.ndarray, auc: float, n_boot: int = 1000, level: float = 0.95,
                 seed: int = 0) -> tuple[float, float]:
    """The AUC's interval: the stratified bootstrap's; with fewer than FEW_UNITS members or non-members, widened to
    cover the Clopper-Pearson interval of min(members, non-members) disjoint pairs, a share `auc` of them ranked right.
    Disjoint pairs are independent, so that interval holds however few units there are; it is conservative, since
    the AUC compares every pair."""
    low, high = bootstrap_auc_interval(labels, scores, n_boot, level, seed)
    labels = np.asarray(labels).astype(bool)
    pairs = int(min(labels.sum(), (~labels).sum()))
    if 0 < pairs < FEW_UNITS and np.isfinite(auc):
        pair_low, pair_high = clopper_pearson(int(round(auc * pairs)), pairs, level)
        low, high = min(low, pair_low), max(high, pair_high)
    return low, high


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


PERMUTATION_CELLS = 1 << 22  # splits x samples held at once by population_fit_p_value


def nonmember_fprs(ascending: np.ndarray, in_population: np.ndarray, alpha: float) -> np.ndarray:
    """(splits,) for each row of the (splits, n) mask over `ascending` scores: the share of the rows outside it at or
    above the threshold `sorted_population_threshold` calibrates on the rows inside it (0 where none are outside)."""
    n = len(ascending)
    counts = in_population.sum(axis=1)
    ranks = np.cumsum(in_population, axis=1)  # population rows at or before each position
    allowed = np.floor(alpha * counts + 1e-9).astype(int)
    candidate = counts - allowed  # the allowed-th largest population score, as a 0-based population rank
    usable = (allowed > 0) & (counts > 0)

    def position_of(rank: np.ndarray) -> np.ndarray:
        """The position in `ascending` of each split's population row of that 0-based rank (n past the last)."""
        found = ranks > rank[:, None]
        return np.where(found.any(axis=1), found.argmax(axis=1), n)

    at = position_of(np.minimum(candidate, counts - 1))
    value = ascending[np.minimum(at, n - 1)]
    below = ascending[np.minimum(position_of(np.maximum(candidate - 1, 0)), n - 1)]
    distinct = (candidate == 0) | (below < value)
    # Tied with the population score below it: the threshold is the next larger population score (none: infinity).
    larger = np.searchsorted(ascending, value, side="right")
    population_before = np.where(larger > 0, ranks[np.arange(len(ranks)), np.maximum(larger - 1, 0)], 0)
    next_at = position_of(population_before)
    threshold = np.where(distinct, value, np.where(next_at < n, ascending[np.minimum(next_at, n - 1)], np.inf))
    threshold = np.where(usable, threshold, np.inf)
    start = np.searchsorted(ascending, threshold, side="left")
    population_from = counts - np.where(start > 0, ranks[np.arange(len(ranks)), np.maximum(start - 1, 0)], 0)
    outside = n - counts
    above = (n - start) - population_from
    return np.divide(above, outside, out=np.zeros(len(outside)), where=outside > 0)


def population_fit_p_value(
    nonmember_scores: np.ndarray,
    population_scores: np.ndarray,
    alpha: float,
    nonmember_groups: np.ndarray | None = None,
    population_groups: np.ndarray | None = None,
    permutations: int = 1000,
    seed: int = 0,
) -> float:
    """Two-sided p-value that the non-members and the population come from one distribution,
    judged by the FPR that the population threshold at `alpha` gives the non-members (z-test
    against the permutation distribution).

    Units are pooled and split at random into a pseudo-population of the population's size and
    pseudo-non-members; each split recalibrates the threshold by the same rule, so the noise of
    estimating it is in the null. With group ids the units are whole groups, because samples of
    one patient or user are correlated and a sample-level test would overstate the evidence.
    """
    scores = np.r_[np.asarray(population_scores, dtype=float), np.asarray(nonmember_scores, dtype=float)]
    n_population = len(population_scores)
    if nonmember_groups is None or population_groups is None:
        codes = np.arange(len(scores))
    else:
        labels = np.r_[np.asarray(population_groups, dtype=object), np.asarray(nonmember_groups, dtype=object)]
        codes = pd.factorize(labels)[0]
    is_population_unit = np.zeros(codes.max() + 1, dtype=bool)
    is_population_unit[codes[:n_population]] = True
    n_population_units = int(is_population_unit.sum())

    # Sorted once: a subset of a sorted array is sorted, so each split needs no sort of its own.
    order = np.argsort(scores, kind="stable")
    scores, codes = scores[order], codes[order]
    observed = float(nonmember_fprs(scores, is_population_unit[codes][None, :], alpha)[0])
    rng = np.random.default_rng(seed)
    null = np.empty(permutations)
    block = max(1, PERMUTATION_CELLS // len(scores))  # splits at a time, so a block's (splits, samples) arrays stay small
    for start in range(0, permutations, block):
        chosen = np.zeros((min(block, permutations - start), len(is_population_unit)), dtype=bool)
        for row in chosen:  # drawn one split at a time, in order: the same units as one loop over the splits
            row[rng.permutation(len(is_population_unit))[:n_population_units]] = True
        null[start:start + len(chosen)] = nonmember_fprs(scores, chosen[:, codes], alpha)
    # A normal approximation to the permutation distribution gives p-values far below 1/permutations,
    # which a report-wide Bonferroni correction needs.
    spread = null.std()
    if spread == 0:
        return 1.0 if abs(observed - null.mean()) < 1e-12 else 0.0
    return float(2 * norm.sf(abs(observed - null.mean()) / spread))
