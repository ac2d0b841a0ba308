"""Intervals that count who wrote the text: the cluster bootstrap of the AUC equals scikit-learn's AUC on the resampled
rows, Newcombe's score interval solves its own equation, the interval of few or perfectly separated units stays
honest, and a rate's clustered interval is Korn and Graubard's, exact Clopper-Pearson where every unit stands alone.
(Their coverage under realistic dependence is measured in tests/metrics/test_null_calibration.py.)"""

import numpy as np
import pytest
from scipy.stats import beta, t
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.auc_interval import (
    auc_interval,
    bootstrap_aucs,
    newcombe_variance,
    score_interval,
    strata_weights,
)
from lmaudit.metrics.clusters import cluster_codes, cluster_keys, ungrouped_count
from lmaudit.metrics.uncertainty import clopper_pearson, effective_counts, rate_interval


def grouped_scores(seed=0):
    rng = np.random.default_rng(seed)
    labels = np.r_[np.ones(30, bool), np.zeros(20, bool)]
    scores = np.round(rng.normal(size=50) + labels, 1)  # rounded: ties across roles
    clusters = np.r_[np.repeat(np.arange(10), 3), 10 + np.repeat(np.arange(10), 2)]
    return labels, scores, clusters


def test_each_bootstrap_auc_is_sklearns_on_the_rows_its_clusters_resample():
    labels, scores, clusters = grouped_scores()
    aucs = bootstrap_aucs(labels, scores, clusters, n_boot=6, seed=3)
    order = np.argsort(scores, kind="stable")
    weights = strata_weights(labels[order], clusters[order], 6, np.random.default_rng(3))
    for k in range(6):
        rows = np.repeat(order, weights[k][clusters[order]].astype(int))
        assert set(clusters[rows]) <= set(clusters) and len(set(clusters[rows][labels[rows]])) <= 10
        assert aucs[k] == pytest.approx(roc_auc_score(labels[rows], scores[rows]), abs=1e-12)


def test_resamples_draw_each_roles_clusters_as_many_times_as_it_has():
    labels, _, clusters = grouped_scores()
    weights = strata_weights(labels, clusters, 50, np.random.default_rng(0))
    assert (weights[:, :10].sum(1) == 10).all() and (weights[:, 10:].sum(1) == 10).all()


def test_newcombe_variance_by_hand_and_the_score_interval_solves_its_equation():
    # A = 0.8, 40 members, 60 non-members: N/2 - 1 = 49.
    expected = 0.8 * 0.2 * (1 + 49 * (0.2 / 1.2 + 0.8 / 1.8)) / (40 * 60)
    assert newcombe_variance(0.8, 40, 60) == pytest.approx(expected)
    low, high = score_interval(0.8, 40, 60, design_effect=2.0)
    for bound in (low, high):
        assert (0.8 - bound) ** 2 == pytest.approx(1.959964 ** 2 * 2.0 * newcombe_variance(bound, 40, 60), rel=1e-5)
    assert low < 0.8 < high
    wider = score_interval(0.8, 40, 60, design_effect=4.0)
    assert wider[0] < low and wider[1] > high


def test_a_perfectly_separated_auc_of_few_units_keeps_an_honest_interval():
    """15 members all above 8 non-members: every bootstrap resample gives AUC 1, but the interval is at least that of 8
    independent pairs all ranked right, [0.025^(1/8), 1] (Clopper-Pearson), never [1, 1]."""
    labels = np.r_[np.ones(15, bool), np.zeros(8, bool)]
    scores = np.r_[np.arange(15) + 100.0, np.arange(8.0)]
    assert (bootstrap_aucs(labels, scores, n_boot=200) == 1.0).all()
    low, high = auc_interval(labels, scores, 1.0, n_boot=200)
    assert low <= 0.025 ** (1 / 8) + 1e-12 and high == 1.0
    flipped = auc_interval(labels, -scores, 0.0, n_boot=200)
    assert flipped[0] == 0.0 and flipped[1] >= 1 - 0.025 ** (1 / 8) - 1e-12


def test_few_groups_are_few_units_however_many_notes_they_wrote():
    """8 non-member patients of 20 notes each, all below 15 member patients' notes: the pairs' interval counts 8
    pairs of patients, not 160 notes."""
    labels = np.r_[np.ones(300, bool), np.zeros(160, bool)]
    scores = np.r_[np.arange(300) + 1000.0, np.arange(160.0)]
    clusters = np.r_[np.repeat(np.arange(15), 20), 15 + np.repeat(np.arange(8), 20)]
    low, _ = auc_interval(labels, scores, 1.0, clusters, n_boot=200)
    assert low <= 0.025 ** (1 / 8) + 1e-12
    assert auc_interval(labels, scores, 1.0, n_boot=200)[0] > 0.025 ** (1 / 8)  # the notes as independent: narrower


def test_the_interval_is_the_widest_of_the_logit_bootstrap_and_the_score_interval():
    rng = np.random.default_rng(5)
    labels = np.r_[np.ones(300, bool), np.zeros(200, bool)]
    scores = np.r_[rng.normal(2.5, 1, 300), rng.normal(0, 1, 200)]
    area = roc_auc_score(labels, scores)
    low, high = auc_interval(labels, scores, area, n_boot=300, seed=2)
    resampled = bootstrap_aucs(labels, scores, None, 300, seed=2)
    logit = np.log(resampled / (1 - resampled)).std()
    centre = np.log(area / (1 - area))
    by_logit = (1 / (1 + np.exp(-(centre - 1.959964 * logit))), 1 / (1 + np.exp(-(centre + 1.959964 * logit))))
    effect = max(1.0, resampled.var() / newcombe_variance(area, 300, 200) * 200 / 199)
    by_score = score_interval(area, 300, 200, effect)
    assert low == pytest.approx(min(by_logit[0], by_score[0]), abs=1e-6)
    assert high == pytest.approx(max(by_logit[1], by_score[1]), abs=1e-6)


def test_rate_interval_is_clopper_pearson_when_every_unit_stands_alone():
    outcomes = np.r_[np.ones(7), np.zeros(93)]
    assert rate_interval(outcomes) == clopper_pearson(7, 100)
    assert rate_interval(outcomes, np.arange(100)) == clopper_pearson(7, 100)


def test_rate_interval_is_korn_and_graubards_on_clustered_units():
    """Hand computation: 6 patients of 5 notes; rate 0.2; cluster-robust variance and effective trials, the degrees of
    freedom from the 4 patients with an event (the rarer outcome)."""
    outcomes = np.array([1, 1, 1, 0, 0] + [0] * 5 + [1, 0, 0, 0, 0] + [0] * 5 + [1, 0, 0, 0, 0] + [1, 0, 0, 0, 0], float)
    clusters = np.repeat(np.arange(6), 5)
    rate = 6 / 30
    residuals = np.array([3, 0, 1, 0, 1, 1]) - rate * 5
    variance = 6 / 5 * np.square(residuals).sum() / 30 ** 2
    trials = min(30, rate * (1 - rate) / variance) * (t.ppf(0.975, 29) / t.ppf(0.975, 3)) ** 2
    assert effective_counts(outcomes, clusters) == pytest.approx((rate * trials, trials))
    low, high = rate_interval(outcomes, clusters)
    assert low == pytest.approx(beta.ppf(0.025, rate * trials, trials - rate * trials + 1))
    assert high == pytest.approx(beta.isf(0.025, rate * trials + 1, trials - rate * trials))
    assert low < clopper_pearson(6, 30)[0] and high > clopper_pearson(6, 30)[1]  # the correlation widens it


def test_events_in_few_patients_widen_the_interval():
    """Three notes above a threshold: spread over three patients, or two of them one patient's; the second rests on two
    clusters and is wider, though the counts are the same."""
    clusters = np.repeat(np.arange(30), 10)
    spread, bunched = np.zeros(300), np.zeros(300)
    spread[[0, 10, 20]] = 1
    bunched[[0, 1, 20]] = 1
    assert rate_interval(bunched, clusters)[1] > rate_interval(spread, clusters)[1] > clopper_pearson(3, 300)[1]


def test_a_rate_of_zero_in_clusters_counts_the_clusters():
    """No variance can be estimated from no events: the trials are the clusters, the most the correlation can cost."""
    outcomes, clusters = np.zeros(200), np.repeat(np.arange(20), 10)
    assert rate_interval(outcomes, clusters) == clopper_pearson(0, 20)


def test_units_without_a_group_are_groups_of_their_own():
    keys = cluster_keys(["a", "b", "c", "p1"], ["p1", None, float("nan"), None])
    assert list(keys) == ["group:p1", "unit:b", "unit:c", "unit:p1"]  # unit p1 is not group p1
    assert list(cluster_codes(["a", "b", "c", "d"], ["p", None, "p", None])) == [0, 1, 0, 2]
    import pandas as pd
    frame = pd.DataFrame({"group_id": ["p", None, "p"]})
    assert ungrouped_count(frame) == 1 and ungrouped_count(frame.fillna("q")) == 0
    assert ungrouped_count(pd.DataFrame({"group_id": [None, None]})) == 0
