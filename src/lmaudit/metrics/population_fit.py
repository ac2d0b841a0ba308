"""Is the population drawn like the audited non-members? A permutation test of each population threshold: the
false-positive rate it gives the non-members against its distribution when population and non-members are one pool.
Population thresholds calibrate precision and recall; where the two sets differ, those numbers mislead. No torch."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import norm

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
