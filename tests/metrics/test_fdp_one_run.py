"""The f-DP one-run audit (Mahloujifar, Melis and Chaudhuri 2025) against the reference implementation's stated values,
the GDP epsilon against a numerical integral of the Gaussian mechanism's privacy profile, and its behaviour under the
null (scores unrelated to the key)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from lmaudit.metrics.fdp_one_run import MU_GRID, consistent_with_gdp, gaussian_bound, gdp_epsilon, mu_lower_bound
from lmaudit.metrics.one_run import CanaryGuesses, epsilon_lower_bound, one_run_bound


@pytest.mark.parametrize(("m", "answered", "correct", "mu", "epsilon", "steinke"), [
    (1000, 100, 90, 0.602, 2.45, 1.63),
    (500, 100, 100, 1.33, 6.12, 3.48),
])
def test_reproduces_the_reference_implementations_values(m, answered, correct, mu, epsilon, steinke):
    # wave3-methods.md section 13's table (delta 1e-5, tau 0.05), beside Steinke et al.'s bound on the same guesses.
    guesses = CanaryGuesses(m, answered, 0, correct)
    assert mu_lower_bound(guesses) == pytest.approx(mu, abs=5e-3)
    assert gdp_epsilon(mu_lower_bound(guesses), 1e-5) == pytest.approx(epsilon, abs=5e-3)
    assert epsilon_lower_bound(guesses, 1e-5) == pytest.approx(steinke, abs=5e-3)


def slow_gaussian_delta(mu: float, epsilon: float) -> float:
    """delta(epsilon) of N(mu, 1) against N(0, 1), integrated numerically: the integral of (p - e^eps q)_+."""
    def excess(x: float) -> float:
        return max(0.0, norm.pdf(x, loc=mu) - np.exp(epsilon) * norm.pdf(x))
    return quad(excess, -20, 20 + mu, points=[epsilon / mu + mu / 2], limit=200)[0]


@pytest.mark.parametrize(("mu", "delta"), [(1.0, 1e-5), (0.5, 1e-5), (2.0, 1e-3), (0.3, 1e-2)])
def test_gdp_epsilon_is_where_the_gaussian_mechanisms_delta_falls_to_delta(mu, delta):
    epsilon = gdp_epsilon(mu, delta)
    assert slow_gaussian_delta(mu, epsilon) == pytest.approx(delta, rel=1e-4)


def test_gdp_epsilon_stated_values():
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.38, abs=5e-3)
    assert gdp_epsilon(0.5, 1e-5) == pytest.approx(1.99, abs=5e-3)
    assert gdp_epsilon(0.0, 1e-5) == 0.0


def test_a_random_guesser_proves_nothing():
    # The reference implementation returns its grid's last mu (about 0.1) here; nothing is rejected, so 0.
    assert mu_lower_bound(CanaryGuesses(1000, 100, 0, 50)) == 0.0
    assert consistent_with_gdp(CanaryGuesses(1000, 100, 0, 50), 0.0)


def test_more_correct_guesses_prove_more():
    bounds = [mu_lower_bound(CanaryGuesses(1000, 100, 0, correct)) for correct in (60, 70, 80, 90, 100)]
    assert bounds == sorted(bounds) and bounds[0] < bounds[-1]


def test_tighter_than_steinke_on_the_same_guesses():
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    scores = included + rng.normal(0, 0.4, size=1000)
    fdp, steinke = gaussian_bound(scores, included, 1e-5), one_run_bound(scores, included, 1e-5)
    assert fdp.choices == steinke.choices == 10
    assert fdp.epsilon_lower_bound > steinke.epsilon_lower_bound > 0


def test_at_delta_zero_mu_is_reported_without_an_epsilon():
    included = np.arange(200) % 2 == 0
    bound = gaussian_bound(included.astype(float), included, 0.0)
    assert bound.mu_lower_bound > 0 and bound.epsilon_lower_bound is None


def test_scores_unrelated_to_the_key_rarely_prove_anything():
    rng = np.random.default_rng(1)
    positives = sum(gaussian_bound(rng.normal(size=200), rng.random(200) < 0.5, 1e-5).mu_lower_bound > 0
                    for _ in range(100))
    assert positives <= 10


@pytest.mark.parametrize(("m", "answered", "correct"), [(1000, 100, 90), (500, 100, 100), (200, 20, 16), (1000, 10, 9),
                                                        (400, 40, 30), (1000, 100, 62)])
def test_the_bisection_finds_the_reference_scans_first_rejected_mu(m, answered, correct):
    guesses = CanaryGuesses(m, answered, 0, correct)
    scanned = next((float(mu) for mu in MU_GRID if not consistent_with_gdp(guesses, float(mu))), 0.0)
    assert mu_lower_bound(guesses) == scanned


def test_the_f_dp_ceiling_is_the_bound_with_every_guess_right():
    """500 canaries found perfectly prove mu 1.560 and epsilon 7.39 at delta 1e-5 (docs/canaries.md's 400 of 400 rows)."""
    from lmaudit.metrics.fdp_one_run import gaussian_bound, gaussian_ceiling

    included = np.arange(500) % 2 == 1
    perfect = gaussian_bound(included * 1.0, included, 1e-5)
    mu, epsilon = gaussian_ceiling(500, 1e-5)
    assert (mu, epsilon) == pytest.approx((perfect.mu_lower_bound, perfect.epsilon_lower_bound))
    assert (mu, epsilon) == pytest.approx((1.560, 7.39), abs=0.005)
    assert gaussian_ceiling(500, 0.0)[1] is None
