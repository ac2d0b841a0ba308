"""The INVALID-audit rule (metrics/canary_validity.py): the rank test against a hand computation of the Mann-Whitney
statistic and its tie-corrected normal approximation, the AUC against a pairwise count, the edge cases, its false
alarms under a null with heavy ties and few canaries, and its power when the planted canaries score below the
unplanted ones (docs/statistics.md)."""

import numpy as np
import pytest
from scipy.special import ndtr
from scipy.stats import binom, rankdata

from lmaudit.metrics.canary_validity import BELOW_CHANCE_LEVEL, rank_check

# (canaries, share of them tied at one value): the null scenarios of docs/statistics.md's row
NULL_SCENARIOS = ((16, 0.5), (16, 0.98), (40, 0.9), (100, 0.5), (500, 0.0), (500, 0.9))


def simulate(rng: np.random.Generator, canaries: int, tied: float, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Scores and key of one audit: the key a fair coin per canary; scores N(0, 1) rounded to tenths (ties), a share
    `tied` of them exactly equal (new tokens whose rows never trained all score alike), chosen apart from the key; the
    planted canaries' scores moved by `shift` (negative: below the unplanted)."""
    included = rng.random(canaries) < 0.5
    scores = rng.normal(size=canaries)
    scores[rng.random(canaries) < tied] = 0.25
    return np.round(scores, 1) + shift * included, included


def hand_p_below(planted: list[float], unplanted: list[float]) -> tuple[float, float]:
    """U of the planted side from mid-ranks, and the one-sided normal p-value with the tie correction of the variance
    and a continuity correction of 1/2, written out from the textbook formulas (Lehmann, Nonparametrics, 1.4)."""
    n1, n0 = len(planted), len(unplanted)
    n = n1 + n0
    ranks = rankdata(planted + unplanted)
    u = ranks[:n1].sum() - n1 * (n1 + 1) / 2
    _, counts = np.unique(planted + unplanted, return_counts=True)
    variance = n1 * n0 / 12 * ((n + 1) - (counts ** 3 - counts).sum() / (n * (n - 1)))
    return u, float(ndtr((u - n1 * n0 / 2 + 0.5) / np.sqrt(variance)))


def test_the_test_is_the_hand_computed_mann_whitney_and_the_auc_counts_pairs():
    planted, unplanted = [0.1, 0.1, 0.3, -0.2, 0.1], [0.1, 0.4, 0.4, 0.9, 0.1, 0.2, 0.4]
    check = rank_check(np.array(planted + unplanted), np.array([True] * 5 + [False] * 7))
    u, p = hand_p_below(planted, unplanted)
    pairs = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in planted for b in unplanted)
    assert check.auc == pytest.approx(u / 35) == pytest.approx(pairs / 35)
    assert check.p_below == pytest.approx(p, rel=1e-12)
    assert (check.planted, check.unplanted) == (5, 7)


def test_planted_below_every_tied_unplanted_is_invalid_and_the_reverse_is_not():
    """The user's trial in miniature: 13 unplanted canaries at one value, 13 planted each below it."""
    scores = np.r_[np.full(13, -7.5514), -7.775 + np.linspace(-0.1, 0.1, 13)]
    included = np.r_[np.zeros(13, bool), np.ones(13, bool)]
    below = rank_check(scores, included)
    assert below.invalid and below.auc == 0.0 and below.p_below < 1e-4
    above = rank_check(-scores, included)
    assert not above.invalid and above.auc == 1.0 and above.p_below > 0.999


def test_nothing_to_compare_is_never_invalid():
    assert rank_check(np.zeros(10), np.arange(10) % 2 == 0).p_below == 1.0  # every score alike
    empty = rank_check(np.arange(4.0), np.zeros(4, bool))
    assert empty.auc is None and empty.p_below is None and not empty.invalid


def test_null_false_alarms_stay_within_the_level_with_heavy_ties_and_few_canaries():
    """No memorisation: 1,000 audits of each null scenario (6,000 in all); the alarms must stay below Binomial(6,000,
    0.001)'s 99.9% quantile (measured at 20,000 per scenario: docs/statistics.md)."""
    rng = np.random.default_rng(21)
    runs = 1000
    fired = sum(rank_check(*simulate(rng, canaries, tied)).invalid
                for canaries, tied in NULL_SCENARIOS for _ in range(runs))
    assert fired <= binom.ppf(0.999, runs * len(NULL_SCENARIOS), BELOW_CHANCE_LEVEL), fired


def test_planted_canaries_below_the_unplanted_are_found():
    """Half a standard deviation below with 500 canaries: flagged in at least 95% of 200 audits (measured: 99.0% of
    1,000); and 40 canaries whose unplanted ones all tie, every planted one below them, in every audit."""
    rng = np.random.default_rng(22)
    shifted = sum(rank_check(*simulate(rng, 500, 0.0, -0.5)).invalid for _ in range(200))
    assert shifted >= 190, shifted
    lost = 0
    for _ in range(200):
        included = rng.random(40) < 0.5
        lost += rank_check(np.where(included, -1.0 - rng.random(40), 0.0), included).invalid
    assert lost == 200
