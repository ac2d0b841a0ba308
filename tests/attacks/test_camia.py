"""CAMIA's pieces against slow, obviously right versions: Lempel-Ziv phrases counted by hand, approximate entropy by a
double loop, p-values by scipy's percentileofscore, orientation on calibration members, and the score as their mean."""

import math

import numpy as np
import pytest
from scipy.stats import percentileofscore

from lmaudit.attacks.camia import (
    approximate_entropy,
    camia_features,
    camia_score,
    lempel_ziv,
    orientation,
    population_p_values,
)


def test_lempel_ziv_counts_phrases_by_hand():
    # 0 | 1 | 011 | 10: each phrase the shortest piece not seen starting earlier (the last one may repeat)
    assert lempel_ziv(np.array([0, 1, 0, 1, 1, 1, 0])) == pytest.approx(4 / 7)
    assert lempel_ziv(np.array([0, 0, 0, 0])) == pytest.approx(2 / 4)  # 0 | 000


def slow_apen(values, m, r):
    n = len(values)

    def phi(order):
        total = 0.0
        for i in range(n - order + 1):
            close = sum(all(abs(values[i + k] - values[j + k]) <= r for k in range(order)) for j in range(n - order + 1))
            total += math.log(close / (n - order + 1))
        return total / (n - order + 1)

    return phi(m) - phi(m + 1)


def test_approximate_entropy_equals_a_double_loop():
    values = np.random.default_rng(0).normal(size=40)
    assert approximate_entropy(values, m=3, r_share=0.5) == pytest.approx(slow_apen(values, 3, 0.5 * values.std()))


def test_p_values_are_scipys_rank_percentiles():
    rng = np.random.default_rng(1)
    population = rng.integers(0, 5, (30, 2)).astype(float)  # ties
    features = rng.integers(-1, 6, (8, 2)).astype(float)
    expected = [[percentileofscore(population[:, c], v, kind="rank") / 100 for c, v in enumerate(row)] for row in features]
    np.testing.assert_allclose(population_p_values(features, population), expected)


def test_orientation_comes_from_calibration_members_and_the_score_is_minus_the_mean_p_value():
    population = np.array([[1.0, 5.0], [2.0, 6.0], [3.0, 7.0], [4.0, 8.0]])
    known_members = np.array([[0.5, 9.0], [1.0, 9.5]])  # members lower on the first feature, higher on the second
    np.testing.assert_array_equal(orientation(known_members, population), [1.0, -1.0])
    features = np.array([[0.0, 10.0], [5.0, 4.0]])
    expected = [-(0.0 + 0.0) / 2, -(1.0 + 1.0) / 2]  # the first row below every population value once oriented, the second above
    np.testing.assert_allclose(camia_score(features, known_members, population), expected)


def test_features_are_finite_for_short_texts_and_a_repeat_cut_short():
    rng = np.random.default_rng(2)
    log_probs = np.where(np.arange(12)[None, :] < [[12], [5]], rng.normal(-2, 1, (2, 12)), np.nan)
    ids = np.where(np.isnan(log_probs), np.nan, rng.integers(0, 9, (2, 12)).astype(float))
    repeated = np.concatenate([log_probs[:, :12]] * 6, axis=1)[:, :40]  # the first text's third copy is cut
    features = camia_features(log_probs, ids, repeated)
    # per text: 7 at each of 3 cut-offs, 3 thresholds, 3 Lempel-Ziv bins (27); the repeat's slope and entropy; copy 1
    # less copy 2 and less copy 3 of the 27 but the 3 diversities (2 x 24)
    assert features.shape == (2, 27 + 2 + 48)
    assert features.shape[0] == 2 and np.isfinite(features[1]).sum() > 0.8 * features.shape[1]


def test_a_population_sample_is_ranked_among_the_other_population_samples():
    """Leave-one-out for the population's own rows (their scores calibrate thresholds): scipy's rank percentile against
    the population without the row, features with NaN (a cut copy) left out of the mean."""
    rng = np.random.default_rng(4)
    population = rng.integers(0, 6, (12, 3)).astype(float)
    p = population_p_values(population, population, own=np.ones(12, bool))
    for row in range(12):
        others = np.delete(population, row, axis=0)
        expected = [percentileofscore(others[:, c], population[row, c], kind="rank") / 100 for c in range(3)]
        np.testing.assert_allclose(p[row], expected)
