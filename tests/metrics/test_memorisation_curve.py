"""The memorisation curve by repetition: per tier, AUC as scikit-learn computes it, TPR at the controls' 1% threshold
counted by hand, Holm's adjustment by hand; the claim "memorised at r copies" holds its family-wise level under the null
(shared controls, ties, few planted canaries per tier) and finds a tier the run does memorise."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from lmaudit.metrics.memorisation_curve import controls_needed, holm_adjusted, memorisation_curve
from lmaudit.studies.memorisation_null import CurveScenario, curve_rates


def test_each_tier_against_every_control_as_sklearn_and_hand_count_it():
    """Tier 1: 3 planted, tier 4: 3 planted; 120 controls 0..119 (tier labels of controls ignored). At most 1 control
    (1% of 120) may lie at or above the threshold: tier 4's 119.5, 200, 300 are all above 119 (TPR 1); of tier 1's 1,
    2, 118.5 only the last reaches 118.5, which only control 119 also exceeds (TPR 1/3)."""
    controls = np.arange(120.0)
    scores = np.concatenate([[1, 2, 118.5], [119.5, 200, 300], controls])
    included = np.r_[np.ones(6, bool), np.zeros(120, bool)]
    repeats = np.r_[[1, 1, 1, 4, 4, 4], np.tile([1, 4], 60)]
    given_back = np.r_[[False, False, True, True, True, False], np.zeros(120, bool)]
    given_back[10] = True  # one never-planted secret given back: counted as the control it is
    curve = memorisation_curve(scores, included, repeats, given_back=given_back, n_boot=200)
    low, high = curve.tiers
    assert (low.given_back, high.given_back, curve.controls_given_back) == (1, 2, 1)
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


@pytest.mark.parametrize("canaries,ties", [(250, False), (250, True), (60, True)])
def test_no_false_claim_beyond_the_level_when_nothing_is_learned(canaries, ties):
    """Nothing learned at any tier, the tiers sharing their controls: a claim at any tier in at most 5% of 2,000 runs
    (binomial 99.9% margin)."""
    [rate] = curve_rates(CurveScenario("null", canaries, ties=ties), 2000, seed=canaries + ties)
    assert rate.truth == "null" and rate.rate <= 0.05 + 3.1 * np.sqrt(0.05 * 0.95 / 2000)


def test_a_tier_the_run_memorises_is_found_and_the_ones_it_does_not_are_not_claimed():
    """Only the 16-copy tier learned (0.7 standard deviation up): the smallest count claimed is 16 in most runs; an
    unlearned count is claimed at most at the level."""
    found, wrong = curve_rates(CurveScenario("16 learned", 300, {1: 0, 4: 0, 16: 0.7}, ties=True), 300, seed=7)
    assert found.rate > 0.85  # 0.92 measured over 1,000 runs (docs/statistics.md)
    assert wrong.rate <= 0.05 + 3.1 * np.sqrt(0.05 * 0.95 / 300)
