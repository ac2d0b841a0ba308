"""The AUC's interval, for units that may come in groups (one patient's notes are correlated, so whole patients are
resampled) and for AUCs near 1, where a percentile bootstrap's lower bound misses far more often than it says.

The interval is the widest of two, each at the stated level:
- a stratified cluster bootstrap (whole groups of each role drawn with replacement), read on the logit scale: the AUC
  plus or minus z bootstrap standard deviations of logit(AUC), mapped back;
- Newcombe's (2006) score interval (his method 5: the Hanley-McNeil variance as a function of the AUC, with N/2 - 1 for
  both sides' counts), its variance multiplied by the design effect the bootstrap measures (at least 1): the variance
  at the AUC hypothesised, not at the one observed, which keeps the lower bound honest near 1.
With fewer than FEW_UNITS groups on a side it also covers the exact interval of that many independent member/non-member
pairs of groups. benchmarks/null_calibration.py measures its coverage (docs/statistics.md).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm

from lmaudit.metrics.uncertainty import clopper_pearson

# Below this many groups on its smaller side, the interval also covers the exact interval of as many independent
# member/non-member pairs: every resample of a perfectly separated audit gives 1 (FEW_UNITS is also the count of
# non-members at which a 1% false-positive rate has a threshold at all).
FEW_UNITS = 100
BOOTSTRAP_CELLS = 1 << 22  # resamples x units held at once


def strata_weights(labels: np.ndarray, clusters: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """(n_boot, clusters) how often each cluster is drawn when each role's clusters are resampled with replacement."""
    n_clusters = int(clusters.max()) + 1
    member_cluster = np.zeros(n_clusters, bool)
    member_cluster[clusters[labels]] = True
    weights = np.zeros((n_boot, n_clusters))
    for side in (True, False):
        chosen = np.flatnonzero(member_cluster == side)
        weights[:, chosen] = rng.multinomial(len(chosen), np.full(len(chosen), 1 / len(chosen)), size=n_boot)
    return weights


def bootstrap_aucs(labels: np.ndarray, scores: np.ndarray, clusters: np.ndarray | None = None, n_boot: int = 1000,
                   seed: int = 0) -> np.ndarray:
    """(n_boot,) AUCs (ties 1/2) of resamples that draw whole clusters (codes; each unit alone without them) of each
    role with replacement, as many as the role has: each unit weighted by how often its cluster was drawn."""
    labels = np.asarray(labels).astype(bool)
    scores = np.asarray(scores, dtype=float)
    codes = np.arange(len(labels)) if clusters is None else np.asarray(clusters)
    # A cluster is one role's: a code shared across roles would resample members and non-members together.
    codes = np.unique(np.c_[codes, labels], axis=0, return_inverse=True)[1].ravel()
    order = np.argsort(scores, kind="stable")
    sorted_scores, labels, codes = scores[order], labels[order], codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_scores)) + 1]
    ends = np.r_[starts[1:], len(sorted_scores)]
    block = np.repeat(np.arange(len(starts)), ends - starts)
    below_at, tied_to = starts[block], ends[block]  # per unit: its tie block's first position and the one after it
    weights = strata_weights(labels, codes, n_boot, np.random.default_rng(seed))
    aucs = np.empty(n_boot)
    step = max(1, BOOTSTRAP_CELLS // len(labels))
    for first in range(0, n_boot, step):
        unit_weights = weights[first:first + step][:, codes]
        nonmember = np.where(labels, 0.0, unit_weights)
        cumulative = np.concatenate([np.zeros((len(unit_weights), 1)), np.cumsum(nonmember, axis=1)], axis=1)
        below = cumulative[:, below_at]
        tied = cumulative[:, tied_to] - below
        member = np.where(labels, unit_weights, 0.0)
        aucs[first:first + step] = (member * (below + 0.5 * tied)).sum(1) / (member.sum(1) * nonmember.sum(1))
    return aucs


def newcombe_variance(auc: float, n_members: int, n_nonmembers: int) -> float:
    """The AUC's variance under Newcombe's method 5: Hanley and McNeil's with both sides' counts less one replaced by
    N/2 - 1 (N all units)."""
    half = (n_members + n_nonmembers) / 2 - 1
    return auc * (1 - auc) * (1 + half * ((1 - auc) / (2 - auc) + auc / (1 + auc))) / (n_members * n_nonmembers)


def score_interval(auc: float, n_members: int, n_nonmembers: int, design_effect: float = 1.0,
                   level: float = 0.95) -> tuple[float, float]:
    """The AUCs A with (auc - A)^2 <= z^2 design_effect newcombe_variance(A): Newcombe's score interval."""
    z = norm.ppf(1 - (1 - level) / 2)

    def excess(value: float) -> float:
        return (auc - value) ** 2 - z * z * design_effect * newcombe_variance(value, n_members, n_nonmembers)

    edge = 1e-12
    low = 0.0 if auc <= edge or excess(edge) <= 0 else brentq(excess, edge, auc)
    high = 1.0 if auc >= 1 - edge or excess(1 - edge) <= 0 else brentq(excess, auc, 1 - edge)
    return float(low), float(high)


def _logit(values: np.ndarray | float, floor: float) -> np.ndarray:
    clipped = np.clip(values, floor, 1 - floor)
    return np.log(clipped / (1 - clipped))


def auc_interval(labels: np.ndarray, scores: np.ndarray, auc: float, clusters: np.ndarray | None = None,
                 n_boot: int = 1000, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """The AUC's interval (module docstring): `clusters` are the units' group codes (metrics/clusters.py; each unit
    alone without them); `auc` the observed AUC."""
    labels = np.asarray(labels).astype(bool)
    n_members, n_nonmembers = int(labels.sum()), int((~labels).sum())
    codes = np.arange(len(labels)) if clusters is None else np.asarray(clusters)
    member_groups, nonmember_groups = len(np.unique(codes[labels])), len(np.unique(codes[~labels]))
    resampled = bootstrap_aucs(labels, scores, codes, n_boot, seed)
    z = norm.ppf(1 - (1 - level) / 2)
    floor = 0.5 / (n_members * n_nonmembers)
    spread = float(np.std(_logit(resampled, floor)))
    centre = float(_logit(auc, floor))
    low, high = 1 / (1 + math.exp(-(centre - z * spread))), 1 / (1 + math.exp(-(centre + z * spread)))
    fewest = min(member_groups, nonmember_groups)
    variance = newcombe_variance(auc, n_members, n_nonmembers)
    # Where the AUC is 0 or 1 the bootstrap cannot measure the clusters' effect: assume the most it can be, each
    # cluster's units as one.
    effect = (float(np.var(resampled)) / variance * fewest / max(fewest - 1, 1) if variance > 0
              else len(labels) / (member_groups + nonmember_groups))
    score_low, score_high = score_interval(auc, n_members, n_nonmembers, max(1.0, effect), level)
    low, high = min(low, score_low), max(high, score_high)
    if fewest < FEW_UNITS:
        pair_low, pair_high = clopper_pearson(int(round(auc * fewest)), fewest, level)
        low, high = min(low, pair_low), max(high, pair_high)
    return float(low), float(high)
