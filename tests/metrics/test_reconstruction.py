"""Reconstruction maths: mid-ranks equal a slow count over candidates; exposure by hand; the frequency baseline ranks by
counts; top-1 rates per side and per group with exact intervals."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.metrics.reconstruction import exposure_bits, frequency_ranks, reconstruction_summary, truth_ranks
from lmaudit.metrics.uncertainty import clopper_pearson


def slow_rank(row, truth):
    """1 + every other candidate above the truth + half of every other tied with it, one candidate at a time."""
    rank = 1.0
    for column, score in enumerate(row):
        if column != truth:
            rank += 1.0 if score > row[truth] else 0.5 if score == row[truth] else 0.0
    return rank


def test_ranks_equal_a_slow_count_with_ties():
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 4, size=(300, 7)).astype(float)  # many ties
    truth = rng.integers(0, 7, size=300)
    expected = [slow_rank(row, t) for row, t in zip(scores, truth, strict=True)]
    np.testing.assert_array_equal(truth_ranks(scores, truth), expected)


def test_rank_by_hand_and_a_flat_model_ranks_the_truth_in_the_middle():
    assert truth_ranks(np.array([[-1.0, -3.0, -2.0]]), np.array([0]))[0] == 1.0
    assert truth_ranks(np.array([[-1.0, -3.0, -2.0]]), np.array([1]))[0] == 3.0
    assert truth_ranks(np.zeros((1, 5)), np.array([2]))[0] == 3.0  # ties everywhere: never "restored first"
    assert truth_ranks(np.array([[-1.0, -np.inf, -2.0]]), np.array([2]))[0] == 2.0  # an unscored candidate ranks last


def test_exposure_in_bits_by_hand():
    np.testing.assert_allclose(exposure_bits(np.array([1.0, 8.0, 2.0]), 8), [3.0, 0.0, 2.0])


def test_frequency_baseline_ranks_by_counts():
    candidates = ["rare", "common", "middle"]
    counts = {"common": 10, "middle": 5, "rare": 1}
    np.testing.assert_array_equal(frequency_ranks(np.array(["common", "rare", "middle"]), counts, candidates), [1, 3, 2])


def test_summary_rates_and_intervals_per_side_and_group():
    ranks = np.array([1.0, 1.0, 2.0, 4.0, 1.0, 3.0, 2.5])
    baseline = np.array([1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 4.0])
    member = np.array([True, True, True, True, False, False, False])
    groups = np.array(["a", "a", "b", "c", "d", "e", "e"])
    summary = reconstruction_summary(ranks, baseline, 4, member, groups)
    assert summary["chance_top1"] == 0.25 and summary["candidates"] == 4
    assert (summary["top1"]["member"]["exposed"], summary["top1"]["member"]["units"]) == (2, 4)
    assert summary["top1"]["member"]["interval"] == pytest.approx(clopper_pearson(2, 4))
    assert (summary["top1"]["nonmember"]["exposed"], summary["top1"]["nonmember"]["units"]) == (1, 3)
    assert summary["frequency_baseline_top1"]["member"]["exposed"] == 2
    assert summary["frequency_baseline_top1"]["nonmember"]["exposed"] == 2
    assert summary["mean_rank"]["member"] == pytest.approx(2.0)
    assert summary["mean_exposure_bits"]["nonmember"] == pytest.approx(np.mean(np.log2(4) - np.log2([1.0, 3.0, 2.5])))
    # per patient: a restored first in a, none in b or c; d yes, e no
    assert (summary["group_top1"]["member"]["exposed"], summary["group_top1"]["member"]["units"]) == (1, 3)
    assert (summary["group_top1"]["nonmember"]["exposed"], summary["group_top1"]["nonmember"]["units"]) == (1, 2)
