"""What counts can show at best (metrics/power.py), against scipy's exact intervals, a brute-force permutation test, the
verdict's own AUC interval on data that holds no signal, and counts taken by hand from a corpus."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from lmaudit.attacks.base import AttackScores
from lmaudit.metrics.auc_interval import auc_interval
from lmaudit.metrics.clusters import cluster_codes
from lmaudit.metrics.permutation_tests import leakage_tests
from lmaudit.metrics.power import (
    LevelCounts,
    best_auc_upper,
    best_tpr_upper,
    corpus_counts,
    level_power,
    nonmembers_for_low,
    one_percent_fpr_bound,
    reads_low,
    smallest_family_p,
)
from lmaudit.metrics.privacy import epsilon_from_bounds


def exact_upper(successes: int, trials: int) -> float:
    return binomtest(successes, trials).proportion_ci(method="exact").high


@pytest.mark.parametrize("n", [12, 99, 100, 238, 580, 581, 650, 718])
def test_the_one_percent_bound_is_clopper_pearsons_of_the_accused(n):
    assert one_percent_fpr_bound(n) == pytest.approx(exact_upper(math.floor(n / 100), n), rel=1e-9)


def test_low_needs_581_independent_non_members_and_the_count_is_not_monotone():
    """'low' asks the 1% threshold's FPR bound to be at most 2%: 5 accused of 581 is the first count to reach it (by
    scipy), 6 of 600 falls back above it, and from 718 on every count reaches it."""
    assert exact_upper(5, 581) <= 0.02 < exact_upper(5, 580)
    assert nonmembers_for_low() == 581 and nonmembers_for_low(45) == 581
    assert not reads_low(600) and exact_upper(6, 600) > 0.02
    assert nonmembers_for_low(600) > 600 and reads_low(nonmembers_for_low(600))
    assert all(reads_low(n) for n in range(718, 2000))


def test_the_smallest_p_value_matches_a_brute_force_permutation_test():
    """A perfect attack on 3 member and 3 non-member patients: only 20 relabellings exist, so the verdict's own test
    draws the observed one again about 1,000/20 times and its p-value sits near (1 + 50) / 1,001, what the formula
    says; with 30 and 30 it reaches 1/1,001."""
    for members, nonmembers, tolerance in ((3, 3, 0.015), (30, 30, 1e-12)):
        roles = ["member"] * members + ["nonmember"] * nonmembers
        frame = pd.DataFrame({"id": [f"p{i}" for i in range(len(roles))], "role": roles,
                              "score": [1.0] * members + [0.0] * nonmembers})
        tests = leakage_tests([AttackScores(frame, attack="loss", signal="loss", level="group")], permutations=1000)
        assert tests.tests[0].family_p_value == pytest.approx(smallest_family_p(members, nonmembers, 1000),
                                                              abs=tolerance)
    assert smallest_family_p(30, 30, 1000, families=2) == pytest.approx(2 / 1001, rel=1e-9)
    assert smallest_family_p(24, 12, 100) == pytest.approx(1 / 101, rel=1e-6)


def test_twelve_non_member_patients_read_high_only_through_epsilon():
    """The demo's patients (24 members, 12 non-members): a perfect attack's TPR bound over the FPR's is 3.2 times (5
    needed), but its counts prove epsilon 1.64 at a calibrated threshold; 'low' is out of reach (26.5% at best)."""
    every, none = binomtest(24, 24).proportion_ci().low, exact_upper(0, 12)
    counts = LevelCounts(24, 12, 24, 12, calibrated=True, relabelled_members=24, relabelled_nonmembers=12)
    power = level_power(counts)
    assert power.best_exposure_ratio == pytest.approx(every / none, rel=1e-9) and power.best_exposure_ratio < 5
    assert power.best_epsilon == pytest.approx(epsilon_from_bounds(every, none, 1e-5), rel=1e-9)
    assert power.best_epsilon == pytest.approx(1.64, abs=0.01)
    assert power.can_read_high and power.can_read_moderate and not power.can_read_low
    assert power.fpr_bound == pytest.approx(0.2646, abs=1e-4)
    uncalibrated = level_power(LevelCounts(24, 12, 24, 12, False, 24, 12))
    assert uncalibrated.best_epsilon == 0 and not uncalibrated.can_read_high
    # 100 relabellings and two families (some level tests its TPRs): p cannot go below 2/101, above 0.01
    few = level_power(LevelCounts(24, 12, 24, 12, True, 24, 12, permutations=100, families=2))
    assert not few.can_read_high and few.can_read_moderate and few.smallest_p == pytest.approx(2 / 101, rel=1e-6)


@pytest.mark.parametrize(("members", "nonmembers", "groups"), [(40, 40, None), (200, 150, 30), (24, 12, None)])
def test_a_model_that_learnt_nothing_never_reads_below_the_best_auc_upper(members, nonmembers, groups):
    """Scores with no signal at all (every unit tied: AUC exactly 0.5) get the verdict's own interval, whose upper end
    is the best one: data with signal can only widen it."""
    labels = np.array([True] * members + [False] * nonmembers)
    # groups of one role each: unit i in group i mod `groups` of its own role
    clusters = cluster_codes(np.arange(len(labels)), [f"{'m' if member else 'n'}{i % groups}"
                                                      for i, member in enumerate(labels)]) if groups else None
    scores = np.zeros(len(labels))
    low, high = auc_interval(labels, scores, 0.5, clusters, n_boot=200)
    member_groups = len(set(clusters[labels])) if groups else members
    nonmember_groups = len(set(clusters[~labels])) if groups else nonmembers
    counts = LevelCounts(members, nonmembers, member_groups, nonmember_groups, True, member_groups, nonmember_groups)
    assert high >= best_auc_upper(counts) - 1e-9
    if not groups:
        assert high == pytest.approx(best_auc_upper(counts), abs=1e-9)


def test_no_member_exposed_reads_the_groups_clopper_pearson_bound():
    assert best_tpr_upper(LevelCounts(350, 238, 24, 12, True, 24, 12)) == pytest.approx(exact_upper(0, 24), rel=1e-9)


def test_corpus_counts_take_units_and_groups_per_level_by_hand():
    """Two member patients (one with two admissions, one note without a patient), one non-member patient of each
    non-member set (the verdict's is the first), a population of ten: counts as a hand count gives them."""
    rows = [("m1", "member", "p1", "a1", None), ("m2", "member", "p1", "a1", None), ("m3", "member", "p1", "a2", None),
            ("m4", "member", "p2", "a3", None), ("m5", "member", None, None, None),
            ("n1", "nonmember", "p3", "a4", "first"), ("n2", "nonmember", "p3", "a4", "first"),
            ("n3", "nonmember", "p4", "a5", "second")]
    rows += [(f"q{i}", "population", f"q{i}", f"b{i}", None) for i in range(10)]
    corpus = pd.DataFrame(rows, columns=["sample_id", "role", "group_id", "subgroup_id", "nonmember_set"])
    counts = corpus_counts(corpus, 1000)
    assert set(counts) == {"sample", "subgroup", "group"}
    assert (counts["sample"].members, counts["sample"].nonmembers) == (5, 2)
    assert (counts["sample"].member_groups, counts["sample"].nonmember_groups) == (3, 1)  # p1, p2 and m5 alone
    assert (counts["subgroup"].members, counts["subgroup"].member_groups) == (3, 2)
    assert (counts["group"].members, counts["group"].nonmembers) == (2, 1)
    assert (counts["group"].relabelled_members, counts["group"].relabelled_nonmembers) == (3, 1)
    assert all(c.calibrated for c in counts.values())
    assert counts["sample"].families == 1
    assert not corpus_counts(corpus[corpus["role"] != "population"], 1000)["group"].calibrated
    assert corpus_counts(corpus[corpus["role"] != "population"], 1000, calibration_members=True)["group"].calibrated
