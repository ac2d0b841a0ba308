"""Extraction maths: the edit distance equal to the textbook recursion; exact, common-prefix and approximate matches as
read by hand; n*(p) by hand and by its definition; rates with exact intervals per sample and per group."""

from __future__ import annotations

import numpy as np
import pytest

from lmaudit.metrics.extraction import (
    edit_distance,
    extractable_share,
    queries_needed,
    rates_by_side,
    suffix_matches,
)
from lmaudit.metrics.uncertainty import clopper_pearson


def textbook_distance(first, second):
    """Levenshtein distance by the full dynamic-programming table."""
    table = [[max(i, j) if min(i, j) == 0 else 0 for j in range(len(second) + 1)] for i in range(len(first) + 1)]
    for i in range(1, len(first) + 1):
        for j in range(1, len(second) + 1):
            table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1,
                              table[i - 1][j - 1] + (first[i - 1] != second[j - 1]))
    return table[-1][-1]


def test_edit_distance_equals_the_textbook_table():
    rng = np.random.default_rng(0)
    for _ in range(200):
        first, second = rng.integers(0, 4, rng.integers(0, 9)).tolist(), rng.integers(0, 4, rng.integers(0, 9)).tolist()
        assert edit_distance(first, second) == textbook_distance(first, second)
    assert edit_distance([1, 2, 3], [1, 3]) == 1 and edit_distance([], [5, 6]) == 2


def test_matches_as_read_by_hand():
    truth = [[1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4], [1, 2, 3, 4]]
    generated = [[1, 2, 3, 4, 9], [1, 2, 9, 4], [1, 2], [9, 1, 2, 3]]  # exact (cut to 4); one swap; stopped early; shifted
    match = suffix_matches(generated, truth)
    assert match.exact.tolist() == [True, False, False, False]
    assert match.common_prefix.tolist() == [4, 2, 2, 0]
    np.testing.assert_allclose(match.similarity, [1.0, 0.75, 0.5, 0.5])
    assert match.approximate.tolist() == [True, True, False, False]
    with pytest.raises(ValueError, match="zero tokens"):
        suffix_matches([[1]], [[]])


def test_queries_needed_by_hand_and_by_definition():
    log_p = np.log([0.5, 1.0, 1e-12, 0.0 + 1e-300]).tolist() + [-np.inf]
    needed = queries_needed(np.array(log_p), 0.9)
    assert needed[0] == 4  # 1 - 0.5^3 = 0.875 < 0.9 <= 1 - 0.5^4
    assert needed[1] == 1 and np.isinf(needed[4])
    assert needed[2] == pytest.approx(np.log(0.1) / np.log1p(-1e-12), rel=1e-9)  # ~2.3e12, exact in log space
    for p_z in (0.3, 0.01, 0.77):
        n = int(queries_needed(np.array([np.log(p_z)]), 0.5)[0])
        assert 1 - (1 - p_z) ** n >= 0.5 > 1 - (1 - p_z) ** (n - 1)
    share = extractable_share(np.log([0.5, 0.01, 1e-9]), [1, 4, 100, 10**6], 0.9)
    np.testing.assert_allclose(share, [0, 1 / 3, 1 / 3, 2 / 3])  # 0.01 needs 230 queries, 1e-9 about 2.3e9
    with pytest.raises(ValueError):
        queries_needed(np.array([0.0]), 1.0)


def test_rates_per_sample_and_per_group_with_exact_intervals():
    exposed = np.array([True, False, False, True, False, False])
    member = np.array([True, True, True, False, False, False])
    groups = np.array(["a", "a", "b", "c", "d", "d"])
    per_sample = rates_by_side(exposed, member)
    assert (per_sample["member"].exposed, per_sample["member"].units) == (1, 3)
    assert per_sample["member"].interval == clopper_pearson(1, 3)
    per_group = rates_by_side(exposed, member, groups)  # patient a exposed by one of two notes
    assert (per_group["member"].exposed, per_group["member"].units) == (1, 2)
    assert (per_group["nonmember"].exposed, per_group["nonmember"].units) == (1, 2)


def test_the_summary_reads_each_side_and_level_and_each_schemes_curves():
    from lmaudit.metrics.extraction import QUERY_COUNTS, extraction_summary
    from lmaudit.signals.sampling import SamplingScheme

    truth = [[1, 2, 3, 4]] * 4
    matches = suffix_matches([[1, 2, 3, 4], [1, 2, 3, 9], [9, 9, 9, 9], [1, 2, 9, 9]], truth)
    member = np.array([True, True, False, False])
    log_p = np.log([[0.5, 0.9], [1e-3, 0.2], [1e-9, 1e-4], [0.0 + 1e-12, 1e-6]])
    schemes = [SamplingScheme(), SamplingScheme(top_k=40)]
    summary = extraction_summary(matches, log_p, schemes, member, np.array(["a", "a", "b", "c"]))
    assert summary["greedy"]["sample"]["exact"]["member"]["exposed"] == 1
    assert summary["greedy"]["sample"]["approximate"]["member"]["exposed"] == 2  # 3 of 4 tokens right: 0.75
    assert summary["greedy"]["group"]["exact"]["member"] == {"exposed": 1, "units": 1, "rate": 1.0,
                                                            "interval": clopper_pearson(1, 1)}
    assert summary["greedy"]["mean_common_prefix"] == {"member": 3.5, "nonmember": 1.0}
    first = summary["probabilistic"][0]
    assert (first["scheme"], first["p"], first["queries"]) == ("T=1, top-k all, top-p 1", 0.5, list(QUERY_COUNTS))
    np.testing.assert_allclose(first["member"], extractable_share(log_p[:2, 0], QUERY_COUNTS, 0.5))
    assert len(summary["probabilistic"]) == 4  # two schemes, two probabilities
