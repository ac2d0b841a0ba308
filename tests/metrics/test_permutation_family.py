"""The verdict's own test (metrics/permutation_tests.py) against slow, obviously right references on tiny inputs: each
relabelling's AUC is scikit-learn's, its TPR at 1% FPR the best ROC point found by trying every threshold, the
permutation p-value the exact share over every relabelling of whole groups, and the Westfall-Young max-T and min-P
adjustments hand-computed."""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.permutation_tests import (
    auc_statistics,
    max_t_adjusted,
    min_p_adjusted,
    raw_p_values,
    relabellings,
    tpr_statistics,
)


def tiny_audit(seed: int, n_groups: int = 8, n_members: int = 4):
    """Scores of 1-3 notes per group, in steps of 0.5 (ties), members shifted up a little; the group of each note."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), rng.integers(1, 4, size=n_groups))
    is_member_group = np.arange(n_groups) < n_members
    scores = np.round(rng.normal(0.6 * is_member_group[groups], 1.0) * 2) / 2
    return scores, groups, is_member_group


def every_relabelling(n_groups: int, n_members: int) -> np.ndarray:
    """Every way of choosing `n_members` member groups among `n_groups`, as masks."""
    masks = []
    for chosen in combinations(range(n_groups), n_members):
        mask = np.zeros(n_groups, bool)
        mask[list(chosen)] = True
        masks.append(mask)
    return np.array(masks)


def best_tpr(scores: np.ndarray, is_member: np.ndarray, fpr: float) -> float:
    """The highest TPR over every threshold `score >= t` whose FPR is at most `fpr` (none flagged: TPR 0)."""
    best = 0.0
    for threshold in np.unique(scores):
        flagged = scores >= threshold
        if flagged[~is_member].mean() <= fpr + 1e-12:
            best = max(best, flagged[is_member].mean())
    return best


@pytest.mark.parametrize("seed", range(5))
def test_each_relabellings_auc_and_tpr_are_the_brute_force_ones(seed):
    scores, groups, is_member_group = tiny_audit(seed)
    masks = every_relabelling(len(is_member_group), int(is_member_group.sum()))
    aucs = auc_statistics(scores, groups, masks)
    tprs = tpr_statistics(scores, groups, masks, fpr=0.25)
    for mask, auc, tpr in zip(masks, aucs, tprs, strict=True):
        is_member = mask[groups]
        assert auc == pytest.approx(roc_auc_score(is_member, scores), abs=1e-12)
        assert tpr == pytest.approx(best_tpr(scores, is_member, 0.25), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_the_permutation_p_value_is_the_exact_share_over_every_relabelling(seed):
    """Over every relabelling (the observed one first, so it counts itself) the p-value is exact; over 20,000 random
    relabellings it is that share within 0.015 (four binomial standard errors at worst)."""
    scores, groups, is_member_group = tiny_audit(seed, n_groups=10, n_members=5)
    masks = every_relabelling(10, 5)
    observed = auc_statistics(scores, groups, is_member_group[None, :])[0]
    exact = (auc_statistics(scores, groups, masks) >= observed - 1e-12).mean()
    enumerated = np.vstack([is_member_group[None, :], masks])
    assert raw_p_values(auc_statistics(scores, groups, enumerated)[:, None])[0] == pytest.approx(
        (1 + exact * len(masks)) / (1 + len(masks)))
    drawn = auc_statistics(scores, groups, relabellings(is_member_group, 20_000, seed=seed))
    assert abs(raw_p_values(drawn[:, None])[0] - exact) < 0.015


def test_max_t_standardises_each_column_and_compares_the_rows_maximum():
    """Two columns, four rows (the observed first). Column a: 3, 1, 2, 2 (mean 2, sd sqrt(0.5)): standardised 1.414,
    -1.414, 0, 0; column b: 10, 30, 10, 30 (mean 20, sd 10): -1, 1, -1, 1. Row maxima 1.414, 1, 0, 1. a's own 1.414 is
    reached by row 1 only: 1/4; b's own -1 by every row: 4/4."""
    statistics = np.array([[3.0, 10.0], [1.0, 30.0], [2.0, 10.0], [2.0, 30.0]])
    assert max_t_adjusted(statistics) == pytest.approx([0.25, 1.0])


def test_min_p_compares_each_rows_smallest_own_p_value():
    """Column a: 5, 1, 2, 3; its rows' own p-values (share at or above) 1/4, 4/4, 3/4, 2/4. Column b: 1, 9, 9, 1:
    4/4, 2/4, 2/4, 4/4. Row minima 1/4, 2/4, 2/4, 2/4. a's observed p 1/4 is reached (<=) by row 1 only: 1/4; b's 4/4
    by every row: 1."""
    statistics = np.array([[5.0, 1.0], [1.0, 9.0], [2.0, 9.0], [3.0, 1.0]])
    assert raw_p_values(statistics) == pytest.approx([0.25, 1.0])
    assert min_p_adjusted(statistics) == pytest.approx([0.25, 1.0])


def test_a_column_without_evidence_never_counts_for_the_others():
    """NaN (too few members or non-members under a relabelling) counts as no evidence: it is never at or above a
    finite observed value, so it cannot lower another column's adjusted p-value."""
    statistics = np.array([[0.9, np.nan], [0.5, np.nan], [0.6, np.nan], [0.4, np.nan]])
    assert max_t_adjusted(statistics)[0] == pytest.approx(0.25)
    assert min_p_adjusted(statistics)[0] == pytest.approx(0.25)
