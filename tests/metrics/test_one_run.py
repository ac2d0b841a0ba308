"""The one-run epsilon lower bound (Steinke, Nasr, Jagielski 2023) against closed forms, a brute-force search over
epsilon on the binomial tail written out term by term, and the guessing rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lmaudit.metrics.one_run import (
    CanaryGuesses,
    epsilon_lower_bound,
    guess,
    guess_counts,
    one_run_bound,
    p_value,
)


def binomial_tail(r: int, v: int, q: float) -> float:
    """P[Binomial(r, q) >= v], summed term by term."""
    return sum(math.comb(r, w) * q ** w * (1 - q) ** (r - w) for w in range(v, r + 1))


def slow_p_value(m: int, r: int, v: int, epsilon: float, delta: float) -> float:
    """The theorem's right side, written out: the tail plus 2 m delta max_i P[v - i <= W' < v] / i."""
    q = math.exp(epsilon) / (1 + math.exp(epsilon))
    pmf = [math.comb(r, w) * q ** w * (1 - q) ** (r - w) for w in range(r + 1)]
    worst = max((sum(pmf[w] for w in range(max(0, v - i), v)) / i for i in range(1, m + 1)), default=0.0)
    return min(1.0, binomial_tail(r, v, q) + 2 * m * delta * worst)


def brute_force_bound(m: int, r: int, v: int, delta: float, beta: float, step: float = 1e-3) -> float:
    """The largest epsilon on a grid of `step` whose slow p-value is below beta (0 if none)."""
    best = 0.0
    for epsilon in np.arange(0, 12, step):
        if slow_p_value(m, r, v, epsilon, delta) < beta:
            best = float(epsilon)
    return best


@pytest.mark.parametrize(("m", "r", "v", "delta"), [(20, 10, 10, 0.0), (30, 20, 18, 0.0), (40, 30, 24, 0.0),
                                                    (40, 30, 27, 1e-3), (60, 40, 40, 1e-4), (25, 25, 20, 0.0)])
def test_bound_matches_a_brute_force_search_over_epsilon(m, r, v, delta):
    guesses = CanaryGuesses(m, r // 2, r - r // 2, v)
    assert epsilon_lower_bound(guesses, delta, 0.95) == pytest.approx(brute_force_bound(m, r, v, delta, 0.05), abs=2e-3)


@pytest.mark.parametrize(("r", "epsilon", "delta"), [(10, 0.5, 0.0), (30, 2.0, 1e-3), (50, 1.0, 1e-5)])
def test_p_value_is_the_theorem_written_out(r, epsilon, delta):
    for v in (0, 1, r // 2, r - 1, r):
        guesses = CanaryGuesses(2 * r, r, 0, v)
        assert p_value(guesses, epsilon, delta) == pytest.approx(slow_p_value(2 * r, r, v, epsilon, delta), abs=1e-12)


@pytest.mark.parametrize("r", [10, 100, 1000])
def test_all_guesses_right_gives_the_closed_form(r):
    # With every guess right and delta 0 the tail is q^r, so the bound solves q^r = beta: q = beta^(1/r), eps = logit q.
    q = 0.05 ** (1 / r)
    expected = math.log(q / (1 - q))
    assert epsilon_lower_bound(CanaryGuesses(r, r, 0, r), 0.0, 0.95) == pytest.approx(expected, abs=1e-5)


def test_chance_accuracy_proves_nothing():
    assert epsilon_lower_bound(CanaryGuesses(1000, 100, 100, 100), 0.0, 0.95) == 0.0
    assert epsilon_lower_bound(CanaryGuesses(1000, 100, 100, 110), 0.0, 0.95) == 0.0  # 55%: within chance at r = 200


def test_delta_and_confidence_only_lower_the_bound():
    guesses = CanaryGuesses(1000, 50, 50, 95)
    plain = epsilon_lower_bound(guesses, 0.0, 0.95)
    assert epsilon_lower_bound(guesses, 1e-5, 0.95) < plain
    assert epsilon_lower_bound(guesses, 0.0, 0.99) < plain
    assert plain > 1.5


def test_guess_counts_hand_computed():
    scores = np.array([9.0, 8.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.0])
    included = np.array([True, False, True, True, False, False, True, False])
    # top 2 guessed in: one of two right; bottom 3 guessed out: indices 5, 6, 7 -> out, in, out: two right.
    assert guess(scores, included, 2, 3) == CanaryGuesses(8, 2, 3, 3)
    assert guess(scores, included, 0, 0).correct == 0
    with pytest.raises(ValueError):
        guess(scores, included, 5, 4)


def test_ties_are_broken_by_a_seeded_shuffle_not_by_order():
    scores = np.zeros(200)
    included = np.arange(200) < 100  # the first half planted: an order-based tie-break would look perfect
    counts = [guess(scores, included, 50, 50, seed).correct for seed in range(20)]
    assert counts[3] == guess(scores, included, 50, 50, 3).correct  # seeded: repeatable
    assert 35 < np.mean(counts) < 65  # about half right, as chance gives


def test_the_guess_counts_are_fixed_in_advance():
    assert guess_counts(1000) == [(25, 25), (25, 0), (50, 50), (50, 0), (100, 100), (100, 0), (200, 200), (200, 0),
                                  (400, 400), (400, 0)]
    assert guess_counts(10) == [(1, 1), (1, 0), (2, 2), (2, 0), (4, 4), (4, 0)]
    assert all(k + j <= 3 for k, j in guess_counts(3))


@pytest.mark.parametrize(("m", "r", "v", "delta", "stated"), [
    (100, 100, 75, 0.0, 0.702), (100, 100, 75, 1e-4, 0.699), (1000, 100, 75, 1e-4, 0.673),  # Appendix D's examples
    (100000, 1510, 1439, 1e-5, 2.675),  # Figure 11's best point (arXiv v1, p. 28)
])
def test_bound_reproduces_the_papers_stated_values(m, r, v, delta, stated):
    assert epsilon_lower_bound(CanaryGuesses(m, r, 0, v), delta, 0.95) == pytest.approx(stated, abs=1.5e-3)


def test_p_value_reproduces_the_papers_example():
    # Appendix D: 75 of 100 right is not unlikely under eps = log 3 (randomized response's 75% accuracy): p = 0.553.
    assert p_value(CanaryGuesses(100, 100, 0, 75), math.log(3), 0.0) == pytest.approx(0.553, abs=5e-4)


def test_best_of_several_guess_counts_is_bonferroni_corrected():
    rng = np.random.default_rng(0)
    included = rng.random(1000) < 0.5
    scores = included + rng.normal(0, 0.5, size=1000)
    single = one_run_bound(scores, included, choices=[(50, 50)])
    assert single.epsilon_lower_bound == pytest.approx(
        epsilon_lower_bound(guess(scores, included, 50, 50), 0.0, 0.95), abs=1e-9)
    several = one_run_bound(scores, included)
    assert several.choices == 10
    # each choice at confidence 1 - 0.05 / 10: never above its own bound at 0.95
    for positive, negative in guess_counts(1000):
        g = guess(scores, included, positive, negative)
        assert epsilon_lower_bound(g, 0.0, 1 - 0.05 / 10) <= several.epsilon_lower_bound + 1e-9
    best = several.guesses
    assert several.epsilon_lower_bound == pytest.approx(epsilon_lower_bound(best, 0.0, 1 - 0.05 / 10), abs=1e-9)


def test_scores_unrelated_to_the_key_rarely_prove_anything():
    # Under the null (scores independent of inclusion) the bound is positive in at most about 5% of audits.
    rng = np.random.default_rng(1)
    positives = sum(one_run_bound(rng.normal(size=200), rng.random(200) < 0.5).epsilon_lower_bound > 0
                    for _ in range(200))
    assert positives <= 20
