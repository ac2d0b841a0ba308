"""The white-box null laboratory's simulator (`studies/gaussian_pair_null.py`): canaries scored by the training's own
code from the observations' exact distribution, and the scope row that shows the score-based bound failing on
non-Gaussian scores."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.studies.gaussian_pair_null import DPSGDScenario, laplace_rate, simulated_scores, unrelated_rate


def test_full_batch_scores_are_the_sum_of_the_observations():
    # q = 1: every included canary adds 1 in every step, so with little noise its score is the step count.
    scores, included = simulated_scores(DPSGDScenario("full", 200, 1.0, 1e-6, 7), np.random.default_rng(0))
    assert scores[included] == pytest.approx(7.0, abs=1e-4)
    assert scores[~included] == pytest.approx(0.0, abs=1e-4)


def test_subsampled_scores_are_the_log_likelihood_ratio_of_each_step():
    scenario = DPSGDScenario("poisson", 50, 0.3, 1.5, 3)
    scores, included = simulated_scores(scenario, np.random.default_rng(4))
    rng = np.random.default_rng(4)  # the same draws, scored by hand
    assert (rng.random(50) < 0.5).tolist() == included.tolist()
    expected = np.zeros(50)
    for _ in range(3):
        x = (included & (rng.random(50) < 0.3)) + 1.5 * rng.normal(size=50)
        expected += np.log(0.7 + 0.3 * np.exp((2 * x - 1) / (2 * 1.5 ** 2)))
    assert scores == pytest.approx(expected)


def test_unrelated_scores_rarely_prove_anything_and_laplace_scores_break_the_gaussian_assumption():
    assert unrelated_rate(200, 200).rate <= 0.1
    # A pure 1-DP Laplace mechanism: the Gaussian reading puts the bound above 1 in most runs (out of scope).
    assert laplace_rate(1000, 1.0, 20).rate >= 0.9
