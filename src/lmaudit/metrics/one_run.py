"""Steinke, Nasr and Jagielski's (2023) one-run privacy audit: a lower bound on epsilon from guesses about canaries.

m canaries are each included in training independently with probability 1/2. After training, an auditor guesses
"included" for the k+ canaries it scores highest and "excluded" for the k- it scores lowest, and abstains on the rest.
If the training is (epsilon, delta)-DP, the number of correct guesses W among r = k+ + k- satisfies, for every v
(the paper's main theorem in the form its experiments use, Corollary 5.4 of arXiv:2305.08846v1, with
W' ~ Binomial(r, e^eps / (1 + e^eps)) and m counting every canary, abstentions included),

    P[W >= v] <= P[W' >= v] + 2 m delta max_{i = 1..v} P[v - i <= W' < v] / i.

The lower bound at confidence 1 - beta is the largest epsilon that this tail rejects at level beta (the paper's
Appendix D computes it the same way, by bisection). The paper tries several (k+, k-) and reports the highest bound,
which it notes reduces the confidence; lmaudit tries a few pairs fixed in advance and splits beta between them
(Bonferroni), so the bound it reports keeps its stated confidence.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.special import expit
from scipy.stats import binom

# Bisection on epsilon: to this width (nats), from [0, EPSILON_CEILING]; no audit of m <= 10^6 canaries gets near it.
EPSILON_TOLERANCE = 1e-6
EPSILON_CEILING = 100.0


@dataclass(frozen=True)
class CanaryGuesses:
    """What the auditor guessed and how well: m canaries, k+ guessed included and k- guessed excluded (r = k+ + k-
    guesses), of which `correct` were right."""

    canaries: int
    positive_guesses: int
    negative_guesses: int
    correct: int

    @property
    def guesses(self) -> int:
        """r: the guesses made (k+ + k-)."""
        return self.positive_guesses + self.negative_guesses


@dataclass(frozen=True)
class OneRunBound:
    """The audit's result: the guesses behind the largest bound, the bound (nats; 0 = nothing proved), the delta and
    confidence it holds at, and how many (k+, k-) choices shared that confidence."""

    guesses: CanaryGuesses
    epsilon_lower_bound: float
    delta: float
    confidence: float
    choices: int


def guess(scores: np.ndarray, included: np.ndarray, positive: int, negative: int, seed: int = 0) -> CanaryGuesses:
    """Guess the `positive` highest-scored canaries included and the `negative` lowest excluded; count the correct.
    Tied scores are ordered by a seeded shuffle, never by the key."""
    scores = np.asarray(scores, dtype=float)
    included = np.asarray(included, dtype=bool)
    if positive < 0 or negative < 0 or positive + negative > len(scores):
        raise ValueError(f"cannot make {positive} + {negative} guesses about {len(scores)} canaries")
    tie_break = np.random.default_rng(seed).permutation(len(scores))
    order = np.lexsort((tie_break, -scores))  # highest score first
    correct = int(included[order[:positive]].sum()) + int((~included[order[len(scores) - negative:]]).sum())
    return CanaryGuesses(len(scores), positive, negative, correct)


def p_value(guesses: CanaryGuesses, epsilon: float, delta: float) -> float:
    """Probability, under (epsilon, delta)-DP, of at least this many correct guesses (the theorem's right side, at
    most 1)."""
    r, v = guesses.guesses, guesses.correct
    accuracy = expit(epsilon)  # e^eps / (1 + e^eps): randomized response's accuracy
    tail = binom.sf(v - 1, r, accuracy)
    if delta == 0 or v == 0:
        return float(min(1.0, tail))
    # P[v - i <= W' < v] for i = 1..v, each divided by i.
    below = np.cumsum(binom.pmf(np.arange(v - 1, -1, -1), r, accuracy)) / np.arange(1, v + 1)
    return float(min(1.0, tail + 2 * guesses.canaries * delta * below.max()))


def epsilon_lower_bound(guesses: CanaryGuesses, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The largest epsilon (nats) whose p-value for these guesses is below 1 - confidence: training this audit saw
    is not (epsilon, delta)-DP, with that confidence. 0 when not even epsilon = 0 is rejected."""
    beta = 1 - confidence
    if p_value(guesses, 0.0, delta) >= beta:
        return 0.0
    low, high = 0.0, EPSILON_CEILING
    if p_value(guesses, high, delta) < beta:
        return high
    while high - low > EPSILON_TOLERANCE:
        middle = (low + high) / 2
        if p_value(guesses, middle, delta) < beta:
            low = middle
        else:
            high = middle
    return low


def guess_counts(canaries: int, fractions: tuple[float, ...] = (0.05, 0.1, 0.2, 0.4, 0.8)) -> list[tuple[int, int]]:
    """The (k+, k-) pairs tried, fixed before any score is seen: for each fraction f, k = ceil(f m / 2) guesses at
    both ends (k, k), and at the top end only (k, 0), which proves more when only some canaries are memorised (a
    model's lowest scores say little about which canaries it did not see). Distinct pairs only. The largest fractions
    are what lets canaries designed to be found prove much: m / 5 right guesses of m = 200 prove at most about 2."""
    pairs = []
    for fraction in fractions:
        half = max(1, math.ceil(fraction * canaries / 2))
        for pair in ((half, half), (half, 0)):
            if sum(pair) <= canaries and pair not in pairs:
                pairs.append(pair)
    return pairs


def best_of_choices(scores: np.ndarray, included: np.ndarray, bound: Callable[[CanaryGuesses, float], float],
                    confidence: float = 0.95, choices: list[tuple[int, int]] | None = None,
                    seed: int = 0) -> tuple[float, CanaryGuesses, int]:
    """The highest `bound(guesses, confidence)` over the (k+, k-) `choices` (default `guess_counts`), each computed at
    confidence 1 - (1 - confidence) / len(choices) so that the best of them holds at `confidence`; with the guesses
    behind it and the number of choices."""
    choices = choices if choices is not None else guess_counts(len(scores))
    if not choices:
        raise ValueError("no guesses to make: give at least two canaries")
    each = 1 - (1 - confidence) / len(choices)
    results = [(bound(g, each), g) for g in
               (guess(scores, included, positive, negative, seed) for positive, negative in choices)]
    value, best = max(results, key=lambda result: (result[0], result[1].correct))
    return value, best, len(choices)


def one_run_bound(scores: np.ndarray, included: np.ndarray, delta: float = 0.0, confidence: float = 0.95,
                  choices: list[tuple[int, int]] | None = None, seed: int = 0) -> OneRunBound:
    """Steinke et al.'s bound, the best over the (k+, k-) `choices` (`best_of_choices`)."""
    bound, best, count = best_of_choices(scores, included, lambda g, c: epsilon_lower_bound(g, delta, c), confidence,
                                         choices, seed)
    return OneRunBound(best, bound, delta, confidence, count)


def provable_ceiling(canaries: int, delta: float = 0.0, confidence: float = 0.95) -> float:
    """The largest bound (nats) `one_run_bound` can give with `canaries` canaries, every guess right: what any audit of
    them can prove at most, however much the model memorised."""
    choices = guess_counts(canaries)
    each = 1 - (1 - confidence) / len(choices)
    return max(epsilon_lower_bound(CanaryGuesses(canaries, positive, negative, positive + negative), delta, each)
               for positive, negative in choices)
