"""The memorisation curve by repetition: per tier, AUC as scikit-learn computes it, TPR at the controls' 1% threshold
counted by hand, Holm's adjustment by hand; the claim "memorised at r copies" holds its family-wise level under the null
(shared controls, ties, few planted canaries per tier) and finds a tier the run does memorise."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.memorisation_curve import (
    controls_needed,
    holm_adjusted,
    memorisation_curve,
    memorised_counts,
    tier_p_values,
)


def test_each_tier_against_every_control_as_sklearn_and_hand_count_it():
    """Tier 1: 3 planted, tier 4: 3 planted; 120 controls 0..119 (tier labels of controls ignored). At most 1 control
    (1% of 120) may lie at or above the threshold: tier 4's 119.5, 200, 300 are all above 119 (TPR 1); of tier 1's 1,
    2, 118.5 only the last reaches 118.5, which only control 119 also exceeds (TPR 1/3)."""
    controls = np.arange(120.0)
    scores = np.concatenate([[1, 2, 118.5], [119.5, 200, 300], controls])
    included = np.r_[np.ones(6, bool), np.zeros(120, bool)]
    repeats = np.r_[[1, 1, 1, 4, 4, 4], np.tile([1, 4], 60)]
    curve = memorisation_curve(scores, included, repeats, n_boot=200)
    low, high = curve.tiers
    assert (low.repeats, high.repeats, low.controls) == (1, 4, 120)
    assert low.auc == pytest.approx(roc_auc_score(np.r_[[1, 1, 1], np.zeros(120)], np.r_[[1, 2, 118.5], controls]))
    assert high.auc == 1.0 and high.tpr == 1.0 and low.tpr == pytest.approx(1 / 3)
    assert high.memorised and not low.memorised and curve.smallest_memorised == 4
    assert high.adjusted_p_value == pytest.approx(min(1, 2 * min(low.p_value, high.p_value)))


def test_holm_by_hand():
    """p = (0.01, 0.04, 0.03): sorted 0.01, 0.03, 0.04 times 3, 2, 1 = 0.03, 0.06, 0.04, made monotone: 0.03, 0.06,
    0.06."""
    assert holm_adjusted(np.array([0.01, 0.04, 0.03])) == pytest.approx([0.03, 0.06, 0.06])


def test_too_few_controls_give_no_tpr_at_one_percent():
    rng = np.random.default_rng(0)
    included = np.r_[np.ones(40, bool), np.zeros(99, bool)]
    curve = memorisation_curve(rng.normal(size=139), included, np.r_[np.full(40, 16), np.ones(99, int)], n_boot=50)
    assert controls_needed() == 100 and curve.tiers[0].tpr is None and curve.tiers[0].tpr_ci is None


def simulated(rng: np.random.Generator, canaries: int, shifts: dict[int, float], ties: bool) -> tuple:
    """Canaries dealt to tiers in turn, each planted by a fair coin; a planted canary of tier r scores shifts[r] up
    (0: not learned); scores rounded to a coarse grid where `ties`, as a log-probability read to few digits ties."""
    counts = np.array(sorted(shifts))[np.arange(canaries) % len(shifts)]
    included = rng.random(canaries) < 0.5
    scores = rng.normal(size=canaries) + included * np.array([shifts[int(count)] for count in counts], float)
    return (np.round(scores * 2) / 2 if ties else scores), included, counts


@pytest.mark.parametrize("canaries,ties", [(250, False), (250, True), (60, True)])
def test_no_false_claim_beyond_the_level_when_nothing_is_learned(canaries, ties):
    """Nothing learned at any tier: a claim at any tier in at most 5% of 2,000 runs (binomial 99.9% margin)."""
    rng = np.random.default_rng(canaries + ties)
    runs = 2000
    claims = sum(any(memorised for _, memorised in memorised_counts(tier_p_values(*simulated(
        rng, canaries, {1: 0, 4: 0, 16: 0}, ties))).values()) for _ in range(runs))
    assert claims / runs <= 0.05 + 3.1 * np.sqrt(0.05 * 0.95 / runs)


def test_a_tier_the_run_memorises_is_found_and_the_ones_it_does_not_are_not_claimed():
    """Only the 16-copy tier learned (0.7 standard deviation up): found in most runs; the 1-copy tier claimed rarely."""
    rng = np.random.default_rng(7)
    claims = [memorised_counts(tier_p_values(*simulated(rng, 300, {1: 0, 4: 0, 16: 0.7}, True)))
              for _ in range(300)]
    assert np.mean([claim[16][1] and not (claim[4][1] or claim[1][1]) for claim in claims]) > 0.85  # 0.92 measured over 1,000 runs
    assert np.mean([claim[1][1] for claim in claims]) <= 0.05
