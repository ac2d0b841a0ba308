"""The score-based one-run bound (`metrics/gaussian_pair.py`): its estimate against a hand computation, its lower
bound's coverage on exactly Gaussian scores (the case where it must hold at its level), its direction (scores that
favour the excluded canaries prove nothing) and its edges."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from lmaudit.metrics.fdp_one_run import gdp_epsilon
from lmaudit.metrics.gaussian_pair import MU_CEILING, gaussian_pair_bound, mu_lower_bound, standardised_difference


def test_the_estimate_is_the_difference_of_means_over_the_pooled_deviation():
    scores = np.array([3.0, 5.0, 4.0, 1.0, 2.0, 0.0, 3.0])
    included = np.array([True, True, True, False, False, False, False])
    # Means 4 and 1.5; squared deviations 2 (in, df 2) and 5 (out, df 3): pooled variance 7 / 5.
    assert standardised_difference(scores, included) == pytest.approx(2.5 / math.sqrt(7 / 5))


def test_the_lower_bound_is_close_to_the_large_sample_normal_one():
    # For large n the standardised difference has standard error sqrt(1/n1 + 1/n0 + d^2 / (2 n)).
    estimate, inside, outside = 0.8, 1000, 1000
    error = math.sqrt(1 / inside + 1 / outside + estimate ** 2 / (2 * (inside + outside)))
    assert mu_lower_bound(estimate, inside, outside) == pytest.approx(estimate - norm.ppf(0.95) * error, abs=2e-3)


@pytest.mark.parametrize(("mu", "canaries"), [(1.0, 40), (0.5, 1000)])
def test_on_gaussian_scores_the_bound_exceeds_the_true_mu_at_most_at_its_level(mu, canaries):
    rng = np.random.default_rng(0)
    runs, above = 1000, 0
    for _ in range(runs):
        included = rng.random(canaries) < 0.5
        bound = gaussian_pair_bound(rng.normal(size=canaries) + mu * included, included, 1e-5)
        above += bound.mu_lower_bound > mu
    assert bound.epsilon_lower_bound == pytest.approx(gdp_epsilon(bound.mu_lower_bound, 1e-5))
    # Exact under normality: 5%; a binomial 99.9% band over 1,000 runs is about +-2.3 points.
    assert 0.027 <= above / runs <= 0.073


def test_scores_that_favour_the_excluded_canaries_prove_nothing():
    rng = np.random.default_rng(1)
    included = rng.random(500) < 0.5
    bound = gaussian_pair_bound(rng.normal(size=500) - 1.0 * included, included, 1e-5)
    assert bound.mu_estimate < 0 and bound.mu_lower_bound == 0 and bound.epsilon_lower_bound == 0


def test_separated_scores_without_noise_reach_the_ceiling_and_too_few_canaries_prove_nothing():
    included = np.array([True, False] * 10)
    separated = gaussian_pair_bound(included.astype(float), included, 1e-5)
    assert separated.mu_lower_bound == MU_CEILING and separated.epsilon_lower_bound > 100 - 1e-6
    alone = gaussian_pair_bound(np.array([1.0, 0.0, 0.5]), np.array([True, False, False]), 1e-5)
    assert (alone.included, alone.excluded, alone.mu_lower_bound, alone.epsilon_lower_bound) == (1, 2, 0.0, 0.0)
    assert gaussian_pair_bound(np.arange(6.0), np.array([True] * 3 + [False] * 3), 0.0).epsilon_lower_bound is None


def white_box_record(shift: float, accountant: float) -> dict:
    """A DP record whose 400 gradient canaries' scores are Gaussian, included ones `shift` sd up."""
    rng = np.random.default_rng(2)
    included = rng.random(400) < 0.5
    scores = rng.normal(size=400) + shift * included
    return {"delta": 1e-5, "epsilon_prv": accountant, "epsilon_rdp": accountant + 0.3,
            "gradient_canary_observations": {"scores": scores.tolist(), "included": included.tolist(), "checks": []}}


def test_the_white_box_audit_carries_the_score_based_bound_and_words_it_by_the_accountant():
    from lmaudit.metrics.dp_audit import white_box_audit
    from lmaudit.report.privacy_words import white_box_line, with_verdict

    record = white_box_record(1.0, 4.0)
    audit = with_verdict(white_box_audit(record))
    canaries = record["gradient_canary_observations"]
    expected = gaussian_pair_bound(np.array(canaries["scores"]), np.array(canaries["included"]), 1e-5)
    assert audit["gaussian_pair_epsilon_lower_bound"] == expected.epsilon_lower_bound > 2.5
    assert audit["gaussian_pair_mu_lower_bound"] == expected.mu_lower_bound
    line = white_box_line(audit)
    assert f"from the scores' Gaussian limit: {expected.epsilon_lower_bound:.3f}" in line and "wrong accounting" not in line
    # Above a (wrong) accountant's 1.5 while Steinke et al.'s bound is not: said, with its assumption; verdict unchanged.
    low = with_verdict(white_box_audit(white_box_record(1.0, 1.5)))
    assert low["epsilon_lower_bound"] <= 1.5 and low["verdict"].startswith("consistent")
    assert "wrong accounting if the steps' sum is Gaussian" in white_box_line(low)
    # An audit recorded before the bound existed still reads.
    old = {k: v for k, v in audit.items() if not k.startswith("gaussian_pair")}
    assert "Gaussian limit" not in white_box_line(old)
