"""Metrics equal scikit-learn's or hand computations; thresholds follow docs/design.md's rule (Metrics) exactly."""

import math

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    confusion_matrix,
    precision_score,
    recall_score,
    roc_auc_score,
)

from lmaudit.attacks.thresholds import mean_member_loss_threshold, population_threshold
from lmaudit.metrics.roc import auc, tpr_at_fpr
from lmaudit.metrics.threshold import threshold_metrics
from lmaudit.metrics.uncertainty import balanced_subsets, clopper_pearson


@pytest.fixture
def scored():
    rng = np.random.default_rng(0)
    labels = np.r_[np.ones(300, bool), np.zeros(500, bool)]
    # Rounded so that many ties occur between members and non-members.
    scores = np.round(np.r_[rng.normal(0.6, 1, 300), rng.normal(0, 1, 500)], 1)
    return labels, scores


def test_auc_counts_ties_as_half():
    assert auc([1, 0], [0.3, 0.3]) == 0.5
    assert auc([1, 1, 0, 0], [2, 1, 1, 0]) == pytest.approx((1 + 1 + 0.5 + 1) / 4)


def test_auc_equals_sklearn_with_ties_and_refuses_one_sided_labels(scored):
    labels, scores = scored
    assert auc(labels, scores) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    assert auc(labels, -scores) == pytest.approx(roc_auc_score(labels, -scores), abs=1e-12)
    with pytest.raises(ValueError, match="one member and one non-member"):
        auc(np.ones(3, bool), [0.1, 0.2, 0.3])


def test_threshold_metrics_equal_sklearn(scored):
    labels, scores = scored
    for threshold in (-1.0, 0.0, 0.4, 1.3):
        called = scores >= threshold
        metrics = threshold_metrics(labels, scores, threshold)
        tn, fp, fn, tp = confusion_matrix(labels, called).ravel()
        assert (metrics.tp, metrics.fp, metrics.tn, metrics.fn) == (tp, fp, tn, fn)
        assert metrics.precision == pytest.approx(precision_score(labels, called))
        assert metrics.recall == pytest.approx(recall_score(labels, called))
        assert metrics.accuracy == pytest.approx(accuracy_score(labels, called))
        assert metrics.advantage == pytest.approx(tp / (tp + fn) - fp / (fp + tn))


def test_precision_is_nan_when_nothing_is_called_member():
    assert math.isnan(threshold_metrics([1, 0], [0.1, 0.2], 5.0).precision)


def brute_force_tpr_at_fpr(labels, scores, alpha):
    """Try every threshold; keep the best TPR whose FPR is at most alpha."""
    best = (0.0, 0.0)
    for threshold in np.r_[np.unique(scores), np.inf]:
        called = scores >= threshold
        fpr = called[~labels].mean()
        tpr = called[labels].mean()
        if fpr <= alpha and tpr > best[0]:
            best = (tpr, fpr)
    return best


@pytest.mark.parametrize("alpha", [0.1, 0.01, 0.001, 0.25])
def test_tpr_at_fpr_equals_brute_force(scored, alpha):
    labels, scores = scored
    point = tpr_at_fpr(labels, scores, alpha)
    expected_tpr, _ = brute_force_tpr_at_fpr(labels, scores, alpha)
    assert point.tpr == pytest.approx(expected_tpr)
    assert point.fpr <= alpha
    assert point.tp == round(point.tpr * 300) and point.fp == round(point.fpr * 500)
    assert point.resolution_limited == (500 < 1 / alpha)


def test_tpr_at_fpr_hand_case_is_step_lookup_not_interpolation():
    # Non-members 0..9; members 5.5, 8.5, 20. FPR <= 10% allows one non-member (9) to be called:
    # the threshold 8.5 calls 9, 8.5 and 20 -> TP 2, FP 1. Interpolating would not stop there.
    labels = np.r_[np.zeros(10, bool), np.ones(3, bool)]
    scores = np.r_[np.arange(10.0), 5.5, 8.5, 20.0]
    point = tpr_at_fpr(labels, scores, 0.1)
    assert (point.tp, point.fp, point.tpr) == (2, 1, pytest.approx(2 / 3))
    # Below 10% not even 9 may be called: only 20 is above every non-member.
    strict = tpr_at_fpr(labels, scores, 0.05)
    assert (strict.tp, strict.fp) == (1, 0)


def test_population_threshold_hand_cases():
    population = np.arange(1.0, 21.0)  # 20 values, alpha 10% allows 2 at or above t
    assert population_threshold(population, 0.1) == 19.0
    # Ties: three values at the top; none of them can be t without 3 > 2 scores >= t.
    tied = np.r_[np.arange(1.0, 18.0), 20.0, 20.0, 20.0]
    assert population_threshold(tied, 0.1) == math.inf
    tied_low = np.r_[np.arange(1.0, 18.0), 18.0, 18.0, 20.0]
    assert population_threshold(tied_low, 0.1) == 20.0
    # alpha * n below 1: no population score may be called a member.
    assert population_threshold(np.arange(50.0), 0.01) == math.inf
    assert population_threshold(np.arange(100.0), 0.01) == 99.0


def test_population_threshold_never_exceeds_alpha_on_the_population():
    rng = np.random.default_rng(1)
    for _ in range(50):
        population = np.round(rng.normal(size=int(rng.integers(5, 400))), 1)
        for alpha in (0.1, 0.05, 0.01):
            t = population_threshold(population, alpha)
            assert np.mean(population >= t) <= alpha


def test_mean_member_loss_threshold_is_minus_mean_loss():
    assert mean_member_loss_threshold(np.array([1.0, 2.0, 4.5])) == pytest.approx(-2.5)


def test_clopper_pearson_hand_values():
    low, high = clopper_pearson(0, 10)
    assert low == 0.0 and high == pytest.approx(1 - 0.025 ** (1 / 10))
    low, high = clopper_pearson(10, 10)
    assert low == pytest.approx(0.025 ** (1 / 10)) and high == 1.0


def test_balanced_subsets_have_equal_sides_and_whole_rows():
    labels = np.r_[np.ones(30, bool), np.zeros(8, bool)]
    subsets = balanced_subsets(labels, repeats=5, seed=0)
    assert len(subsets) == 5
    for subset in subsets:
        assert labels[subset].sum() == 8 and (~labels[subset]).sum() == 8
        assert len(set(subset)) == len(subset)
    assert not all(np.array_equal(subsets[0], s) for s in subsets[1:])


def _population_attack(population, nonmembers, members, groups=None):
    from lmaudit.attacks.base import AttackScores

    roles = ["population"] * len(population) + ["nonmember"] * len(nonmembers) + ["member"] * len(members)
    frame = pd.DataFrame({"id": [f"u{i}" for i in range(len(roles))], "role": roles,
                          "score": np.r_[population, nonmembers, members]})
    if groups is not None:
        frame["group_id"] = groups
    return AttackScores(frame, attack="loss", signal="x", level="sample")


def test_population_mismatch_warning_fires_on_a_shifted_population_only():
    from lmaudit.metrics.population_fit import population_fit
    from lmaudit.report.checks import population_mismatch_warnings

    rng = np.random.default_rng(0)
    for shift, expect_warning in ((0.0, False), (0.5, True)):
        attack = _population_attack(rng.normal(0, 1, 1000), rng.normal(shift, 1, 1000), rng.normal(2, 1, 300))
        population = population_fit([attack], permutations=200)
        assert population["tested"] == 1 and population["level"] == 0.01
        assert bool(population["rejected"]) == expect_warning
        warnings = population_mismatch_warnings(population, {"sample": "note"})
        assert all(w.startswith("loss on x (note level): the population scores unlike the audited non-members")
                   for w in warnings) and len(warnings) == expect_warning
    [rejected] = population["rejected"]
    assert rejected["population_auc"] == pytest.approx(roc_auc_score(np.r_[np.ones(1000), np.zeros(1000)],
                                                                      attack.frame["score"].to_numpy()[:2000]))


def test_population_fit_keeps_its_family_wise_level_with_correlated_patients_and_many_attacks():
    """Patients of 12 samples each with a strong patient effect, five correlated attacks, population and non-members
    drawn alike: the family rejects in at most about 1% of audits (binomial tolerance over 150), where a test per
    sample would reject far more often."""
    from lmaudit.metrics.population_fit import population_fit

    rng = np.random.default_rng(2)
    rejected = 0
    for seed in range(150):
        patient = rng.normal(size=50)
        groups = np.repeat([f"p{g}" for g in range(50)], 12)
        base = np.repeat(patient, 12) + 0.3 * rng.normal(size=600)
        attacks = [_population_attack(scores[:300], scores[300:], [], groups)
                   for scores in (base + 0.2 * rng.normal(size=600) for _ in range(5))]
        rejected += bool(population_fit(attacks, permutations=100, seed=seed)["rejected"])
    assert rejected <= 5  # P(Binomial(150, 0.01) >= 6) < 0.001


def test_clopper_pearson_is_scipys_exact_interval():
    from scipy.stats import binomtest

    for successes, trials in ((0, 1), (3, 7), (50, 100), (99, 100), (1, 1000), (12, 12)):
        for level in (0.95, 0.99):
            interval = binomtest(successes, trials).proportion_ci(confidence_level=level, method="exact")
            assert clopper_pearson(successes, trials, level) == pytest.approx((interval.low, interval.high), abs=1e-12)


def test_the_threshold_of_sorted_scores_is_the_brute_force_definition():
    """The smallest population score t with at most floor(alpha n) scores >= t, by trying every score, on tie-heavy
    draws: the fast rule (one sorted array, no unique) must agree everywhere."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        population = rng.integers(0, int(rng.integers(2, 30)), size=int(rng.integers(1, 60))).astype(float)
        for alpha in (0.01, 0.1, 0.3, 0.5):
            allowed = math.floor(alpha * len(population) + 1e-9)
            eligible = [t for t in population if np.sum(population >= t) <= allowed]
            assert population_threshold(population, alpha) == (min(eligible) if eligible else math.inf)
