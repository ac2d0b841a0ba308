"""The empirical epsilon lower bound against a hand computation from beta quantiles."""

import math

import pytest
from scipy.stats import beta

from lmaudit.metrics.privacy import empirical_epsilon, group_privacy


def hand_bound(tp, fn, fp, tn, delta):
    # Clopper-Pearson ends at 95%, from the beta distribution directly.
    tpr_low = beta.ppf(0.025, tp, fn + 1) if tp else 0.0
    fpr_high = beta.ppf(0.975, fp + 1, tn) if tn else 1.0
    return max(0.0, math.log((tpr_low - delta) / fpr_high), math.log((1 - delta - fpr_high) / (1 - tpr_low)))


@pytest.mark.parametrize("counts", [(90, 10, 5, 95), (30, 70, 1, 99), (999, 1, 0, 1000), (60, 40, 40, 60)])
def test_epsilon_lower_bound_equals_hand_computation(counts):
    assert empirical_epsilon(*counts, delta=1e-5) == pytest.approx(hand_bound(*counts, 1e-5), rel=1e-9)


def test_no_evidence_gives_zero_and_more_evidence_gives_more():
    assert empirical_epsilon(5, 95, 5, 95, delta=1e-5) == 0.0  # TPR = FPR: nothing learned
    assert empirical_epsilon(50, 50, 0, 100, delta=1e-5) < empirical_epsilon(500, 500, 0, 1000, delta=1e-5)
    # (90 TP of 100, 5 FP of 100): ln(0.90 / 0.05) = 2.89 is the point value; the bound is lower.
    assert 0 < empirical_epsilon(90, 10, 5, 95, delta=1e-5) < math.log(0.90 / 0.05)


def test_group_privacy_by_hand_and_from_the_accountant():
    # Three notes of one patient under (0.1, 1e-6)-DP: (0.3, 3 e^0.2 1e-6).
    assert group_privacy(0.1, 1e-6, 3) == pytest.approx((0.3, 3 * math.exp(0.2) * 1e-6), rel=1e-12)
    # The paper's cap, 50 notes, on the RDP accountant's epsilon for sigma = 1 (one group of one is the accountant's own).
    from lmaudit.models.dp import privacy_spent

    epsilon = privacy_spent(0.05, 1.0, 300, 1e-6)["epsilon_rdp"]
    assert group_privacy(epsilon, 1e-6, 1) == pytest.approx((epsilon, 1e-6))
    group_epsilon, group_delta = group_privacy(epsilon, 1e-6, 50)
    assert group_epsilon == pytest.approx(50 * epsilon) and group_delta == pytest.approx(50 * math.exp(49 * epsilon) * 1e-6)
    assert group_privacy(1e4, 1e-6, 50)[1] == math.inf  # too large for a float, not an overflow error
    with pytest.raises(ValueError):
        group_privacy(1.0, 1e-6, 0)
