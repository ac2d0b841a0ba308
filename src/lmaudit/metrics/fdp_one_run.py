"""Mahloujifar, Melis and Chaudhuri's (ICML 2025) one-run audit of f-DP: the same canary guesses as Steinke et al.'s
audit (`one_run.py`), tested against the whole trade-off curve of mu-Gaussian DP rather than one (epsilon, delta).

For a hypothesised mu, the audit asks whether c correct guesses among c' (of m canaries, each in with probability 1/2)
are possible at confidence tau under mu-GDP, whose trade-off curve is f_mu(a) = Phi(Phi^-1(1 - a) - mu); the
recursion below is that of the reference implementation (Meta's PrivacyGuard, `FDPAnalysisNode`; arXiv:2410.22235).
The lower bound is the largest mu the guesses reject, searched on that implementation's grid (sigma = 1/mu from 0.001
in steps of 0.01), and it is converted to epsilon at a delta with the GDP curve (Dong, Roth and Su 2019, Corollary 2.13).
One change: where no mu of the grid is rejected, the reference returns the grid's last point (mu about 0.1, epsilon
about 0.34 at delta 1e-5, even for a random guesser); here that is 0, nothing proved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.special import ndtr, ndtri

from lmaudit.metrics.one_run import EPSILON_CEILING, CanaryGuesses, best_of_choices, guess_counts

MU_GRID = 1 / (0.001 + 0.01 * np.arange(1000))  # the reference implementation's, largest mu first
MEMBERSHIP_OUTCOMES = 2  # k of the paper: a guess is 'in' or 'out'


@dataclass(frozen=True)
class GaussianBound:
    """The f-DP audit's result: the guesses behind the largest bound, mu (0 = nothing proved), the epsilon it implies
    at `delta` (nats; None at delta 0, where any mu > 0 means epsilon unbounded), and the confidence it holds at over
    `choices` (k+, k-) choices."""

    guesses: CanaryGuesses
    mu_lower_bound: float
    epsilon_lower_bound: float | None
    delta: float
    confidence: float
    choices: int


def consistent_with_gdp(guesses: CanaryGuesses, mu: float, confidence: float = 0.95) -> bool:
    """Whether `guesses` are possible under mu-GDP at this confidence (False: mu-GDP rejected)."""
    answered, correct, canaries = guesses.guesses, guesses.correct, guesses.canaries
    if answered == 0:
        return True
    threshold = (1 - confidence) * answered / canaries
    alpha, beta = threshold * correct / answered, threshold * (answered - correct) / answered
    # h[i], r[i] of the recursion, from i = c down to 0; only the previous pair is needed.
    h, r = beta, alpha
    for i in range(correct - 1, -1, -1):
        h_next = max(h, (MEMBERSHIP_OUTCOMES - 1) * ndtr(ndtri(r) - mu))
        r, h = r + i / (answered - i) * (h_next - h), h_next
    return r + h <= answered / canaries


def mu_lower_bound(guesses: CanaryGuesses, confidence: float = 0.95) -> float:
    """The largest mu of the grid that these guesses reject at `confidence` (0 when none is rejected).

    The reference scans the grid from the largest mu down; a larger mu allows every trade-off a smaller one does, so
    the rejected mu are the grid's tail and a bisection over it finds the same first one in 10 tests, not 1,000."""
    if consistent_with_gdp(guesses, float(MU_GRID[-1]), confidence):
        return 0.0
    consistent, rejected = -1, len(MU_GRID) - 1  # MU_GRID[consistent] is not rejected (-1: none tested yet)
    while rejected - consistent > 1:
        middle = (consistent + rejected) // 2
        if consistent_with_gdp(guesses, float(MU_GRID[middle]), confidence):
            consistent = middle
        else:
            rejected = middle
    return float(MU_GRID[rejected])


def gdp_epsilon(mu: float, delta: float) -> float:
    """The epsilon (nats) of mu-GDP at `delta` > 0: the root of delta = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)."""
    if mu <= 0:
        return 0.0

    def excess(epsilon: float) -> float:
        return ndtr(-epsilon / mu + mu / 2) - np.exp(epsilon) * ndtr(-epsilon / mu - mu / 2) - delta

    if excess(0.0) <= 0:  # mu so small that (0, delta)-DP already holds
        return 0.0
    if excess(EPSILON_CEILING) > 0:
        return EPSILON_CEILING
    return float(brentq(excess, 0.0, EPSILON_CEILING, xtol=1e-9))


def gaussian_bound(scores: np.ndarray, included: np.ndarray, delta: float, confidence: float = 0.95,
                   choices: list[tuple[int, int]] | None = None, seed: int = 0) -> GaussianBound:
    """The f-DP bound, the best over the same pre-committed (k+, k-) choices as Steinke et al.'s (`best_of_choices`),
    with its epsilon at `delta`."""
    mu, best, count = best_of_choices(scores, included, mu_lower_bound, confidence, choices, seed)
    return GaussianBound(best, mu, gdp_epsilon(mu, delta) if delta > 0 else None, delta, confidence, count)


def gaussian_ceiling(canaries: int, delta: float, confidence: float = 0.95) -> tuple[float, float | None]:
    """The largest mu `gaussian_bound` can give with `canaries` canaries, every guess right, and its epsilon at `delta`
    (None at delta 0): what the f-DP audit of them can prove at most, however much the model memorised."""
    choices = guess_counts(canaries)
    each = 1 - (1 - confidence) / len(choices)
    mu = max(mu_lower_bound(CanaryGuesses(canaries, positive, negative, positive + negative), each)
             for positive, negative in choices)
    return mu, gdp_epsilon(mu, delta) if delta > 0 else None
