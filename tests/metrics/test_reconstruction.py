"""Reconstruction maths: mid-ranks equal a slow count over the scored candidates; exposure by hand; the frequency
baseline ranks by counts, the span's own occurrence left out, among the span's scored candidates; top-1 rates per side
(intervals clustered by patient) and per group (exact); the audit's kind_result ranks, chance and exposure over the
candidates scored for each span and uses groups wherever any span has one."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmaudit.metrics.reconstruction import exposure_bits, frequency_ranks, reconstruction_summary, truth_ranks
from lmaudit.metrics.uncertainty import clopper_pearson, effective_counts


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


def test_an_unscored_candidate_takes_no_part_in_the_rank():
    """A NaN (cut off by truncation) is neither above, below nor tied: the rank equals the slow count over the row
    with its NaN columns removed."""
    rng = np.random.default_rng(1)
    scores = rng.integers(0, 4, size=(300, 7)).astype(float)
    truth = rng.integers(0, 7, size=300)
    scores[(rng.random((300, 7)) < 0.3) & (np.arange(7) != truth[:, None])] = np.nan
    expected = [slow_rank(row[~np.isnan(row)], int(np.sum(~np.isnan(row[:t])))) for row, t in zip(scores, truth, strict=True)]
    np.testing.assert_array_equal(truth_ranks(scores, truth), expected)


def test_exposure_in_bits_by_hand():
    np.testing.assert_allclose(exposure_bits(np.array([1.0, 8.0, 2.0]), 8), [3.0, 0.0, 2.0])


def test_frequency_baseline_ranks_by_counts():
    candidates = ["rare", "common", "middle"]
    counts = {"common": 10, "middle": 5, "rare": 1}
    np.testing.assert_array_equal(frequency_ranks(np.array(["common", "rare", "middle"]), counts, candidates), [1, 3, 2])


def test_frequency_baseline_leaves_the_spans_own_occurrence_out():
    """A value found once in the audited texts, ranked against a candidate found nowhere (from a given list): with its
    own occurrence counted it would come first (1 against 0); left out, it ties (0 each: rank 1.5). A value found
    twice keeps its other span's count: it ties 'once' (1 each) and 'once' comes after both (0 against 2 and 0)."""
    np.testing.assert_array_equal(frequency_ranks(np.array(["once"]), {"once": 1}, ["once", "never"]), [1.5])
    counts, candidates = {"once": 1, "twice": 2}, ["once", "twice", "never"]
    np.testing.assert_array_equal(frequency_ranks(np.array(["twice", "once"]), counts, candidates), [1.5, 2.5])


def test_frequency_baseline_ranks_among_the_spans_scored_candidates():
    """A candidate the model could not score for a span (cut off) is no candidate of that span for the baseline either:
    'common' (10 others) is left out of the first span's ranking, so 'middle' (4 others) comes first there."""
    candidates = ["common", "middle", "rare"]
    counts = {"common": 10, "middle": 5, "rare": 1}
    scored = np.array([[False, True, True], [True, True, True]])
    np.testing.assert_array_equal(frequency_ranks(np.array(["middle", "middle"]), counts, candidates, scored), [1.0, 2.0])


def test_summary_rates_and_intervals_per_side_and_group():
    ranks = np.array([1.0, 1.0, 2.0, 4.0, 1.0, 3.0, 2.5])
    baseline = np.array([1.0, 2.0, 2.0, 1.0, 1.0, 1.0, 4.0])
    member = np.array([True, True, True, True, False, False, False])
    groups = np.array(["a", "a", "b", "c", "d", "e", "e"])
    summary = reconstruction_summary(ranks, baseline, 4, member, groups)
    assert summary["chance_top1"] == 0.25 and summary["candidates"] == 4
    assert (summary["top1"]["member"]["exposed"], summary["top1"]["member"]["units"]) == (2, 4)
    # patient a's two spans are correlated: the interval rests on effective counts, wider than 2 of 4 independent
    top1_interval = clopper_pearson(*effective_counts(np.array([1, 1, 0, 0]), np.array([0, 0, 1, 2])))
    assert summary["top1"]["member"]["interval"] == pytest.approx(top1_interval)
    assert top1_interval[0] < clopper_pearson(2, 4)[0] and top1_interval[1] > clopper_pearson(2, 4)[1]
    assert (summary["top1"]["nonmember"]["exposed"], summary["top1"]["nonmember"]["units"]) == (1, 3)
    assert summary["frequency_baseline_top1"]["member"]["exposed"] == 2
    assert summary["frequency_baseline_top1"]["nonmember"]["exposed"] == 2
    assert summary["mean_rank"]["member"] == pytest.approx(2.0)
    assert summary["mean_exposure_bits"]["nonmember"] == pytest.approx(np.mean(np.log2(4) - np.log2([1.0, 3.0, 2.5])))
    # per patient: a restored first in a, none in b or c; d yes, e no
    assert (summary["group_top1"]["member"]["exposed"], summary["group_top1"]["member"]["units"]) == (1, 3)
    assert (summary["group_top1"]["nonmember"]["exposed"], summary["group_top1"]["nonmember"]["units"]) == (1, 2)
    assert summary["group_top1"]["member"]["interval"] == clopper_pearson(1, 3)
    assert "group_top1" not in reconstruction_summary(ranks, baseline, 4, member)


def test_kind_result_ranks_each_span_among_its_scored_candidates_and_uses_groups_where_any_exist():
    """Six spans, three candidates; NaN: cut off by truncation. The span whose truth was cut off is not ranked; a span
    that lost one other candidate is ranked among two (exposure log2(2) - log2(rank), chance 1/2), not among three with
    the lost one last. Members m0 and m1 are one patient's, m5 has no patient (a patient of its own): the per-patient
    rate is reported, and the members' per-span interval, every ranked span restored first, is that of 2 patients of
    2. The frequency baseline leaves each span's own value out: 'y' (three spans) no longer comes first by itself."""
    from lmaudit.audit.reconstruction import kind_result
    from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET

    nan = np.nan
    corpus = pd.DataFrame({"sample_id": ["m0", "m1", "m2", "n3", "n4", "m5"],
                           "role": [MEMBER] * 3 + [NONMEMBER] * 2 + [MEMBER],
                           "group_id": ["g1", "g1", None, "g2", "g3", None],
                           NONMEMBER_SET: [None] * 3 + ["nonmembers"] * 2 + [None]})
    values = pd.Series(["x", "y", "x", "z", "y", "y"], index=corpus.index)
    scores = np.array([[-1, -2, nan], [-3, -1, -2], [nan, -1, -2], [-1, -3, -2], [-2, -1, nan], [-2, -1, -3]])
    result, table = kind_result(corpus, values, ["x", "y", "z"], scores)
    assert result["cut_off"] == 1 and table["sample_id"].tolist() == ["m0", "m1", "n3", "n4", "m5"]
    assert table["rank"].tolist() == [1.0, 1.0, 2.0, 1.0, 1.0]
    assert table["candidates"].tolist() == [2, 3, 3, 2, 3]
    np.testing.assert_allclose(table["exposure_bits"], [1.0, np.log2(3), np.log2(3) - 1.0, 1.0, np.log2(3)])
    assert table["first_choice"].tolist() == ["x", "y", "x", "y", "y"]
    [summary] = result["sets"].values()
    assert summary["candidates"] == 3
    assert summary["chance_top1"] == pytest.approx((1 / 2 + 1 / 3 + 1 / 3 + 1 / 2 + 1 / 3) / 5)
    assert summary["mean_exposure_bits"]["nonmember"] == pytest.approx(np.log2(3) / 2)
    assert summary["top1"]["member"]["interval"] == pytest.approx(clopper_pearson(2, 2))
    assert summary["group_top1"]["member"] == {"exposed": 2, "units": 2, "rate": 1.0, "interval": clopper_pearson(2, 2)}
    assert summary["group_top1"]["nonmember"]["interval"] == clopper_pearson(1, 2)
    # baseline, counts x 2, y 3, z 1 less the span's own: m1, m5 and n4 tie 'y' with 'x' (2 each), none first
    assert summary["frequency_baseline_top1"]["member"]["exposed"] == 0
    assert summary["frequency_baseline_top1"]["nonmember"]["exposed"] == 0
