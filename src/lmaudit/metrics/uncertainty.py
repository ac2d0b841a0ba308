"""Uncertainty of rates: Clopper-Pearson's exact interval, its clustered form (Korn and Graubard) for units that come
in groups, and the balanced subsets of an evaluation."""

from __future__ import annotations

import numpy as np
from scipy.stats import beta, t


def clopper_pearson(successes: float, trials: float, level: float = 0.95) -> tuple[float, float]:
    """Exact binomial interval for a rate such as TPR = tp / members: the beta quantiles that scipy's
    binomtest(...).proportion_ci(method="exact") computes, without its hundred-fold overhead per call. Counts may be
    effective (non-integer) ones, as `rate_interval` gives it."""
    if trials == 0:
        return (float("nan"), float("nan"))
    tail = (1 - level) / 2
    low = 0.0 if successes <= 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    high = 1.0 if successes >= trials else float(beta.isf(tail, successes + 1, trials - successes))
    return (low, high)


def effective_counts(outcomes: np.ndarray, clusters: np.ndarray | None = None, level: float = 0.95) -> tuple[float, float]:
    """(successes, trials) that carry a rate's clustered uncertainty into Clopper-Pearson's interval: Korn and Graubard's
    (1998) effective sample size, the trials divided by the design effect (the cluster-robust variance of the rate over
    the binomial one, at least 1), scaled by (t(n - 1) / t(df))^2 for the few clusters the variance rests on. df is one
    less than the clusters that hold the rarer outcome (at least 1): of a 1% FPR's three notes above the threshold, two
    of them one patient's, the variance knows two clusters, not the thirty it was read over (Korn and Graubard take all
    clusters, which covered an FPR's bound 92% of the time in docs/statistics.md's thirty-patient audit). Where the rate
    is 0 or 1 no variance can be estimated, and the trials are the clusters: the most the correlation can cost. Without
    clusters, or one unit per cluster, the counts themselves."""
    outcomes = np.asarray(outcomes, dtype=float)
    n = len(outcomes)
    if clusters is None or n == 0:
        return float(outcomes.sum()), float(n)
    codes = np.unique(np.asarray(clusters), return_inverse=True)[1]
    g = int(codes.max()) + 1
    if g == n:
        return float(outcomes.sum()), float(n)
    rate = outcomes.mean()
    if rate in (0.0, 1.0) or g < 2:
        return rate * g, float(g)
    residual = np.bincount(codes, weights=outcomes - rate, minlength=g)
    variance = g / (g - 1) * np.square(residual).sum() / n**2
    trials = min(n, rate * (1 - rate) / variance) if variance > 0 else n
    events, sizes = np.bincount(codes, weights=outcomes, minlength=g), np.bincount(codes, minlength=g)
    informative = min(int((events > 0).sum()), int((events < sizes).sum()))
    tail = 1 - (1 - level) / 2
    trials *= (t.ppf(tail, n - 1) / t.ppf(tail, max(1, informative - 1))) ** 2
    return rate * trials, trials


def rate_interval(outcomes: np.ndarray, clusters: np.ndarray | None = None, level: float = 0.95) -> tuple[float, float]:
    """The interval of the share of True in `outcomes` (one per unit): Clopper-Pearson's, on `effective_counts` where
    units come in `clusters` (codes: one patient's notes share one), exact where they do not."""
    return clopper_pearson(*effective_counts(outcomes, clusters, level), level)


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


