"""Extraction maths: the edit distance equal to the textbook recursion; exact, common-prefix and approximate matches as
read by hand; n*(p) by hand, by its definition and against a 400-digit reference from p_z = 1e-300 to 1; rates per
group with exact intervals, per sample with intervals clustered by patient; the audit's groups used wherever any
sample has one."""

from __future__ import annotations

from decimal import ROUND_CEILING, Context, Decimal

import numpy as np
import pandas as pd
import pytest

from lmaudit.metrics.extraction import (
    edit_distance,
    extractable_share,
    group_rates_by_side,
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


def slow_queries_needed(log_p: float, p: float) -> int:
    """n*(p) at 400 digits (1 - p_z exact for p_z down to 1e-300): the closed form's n, checked against the definition,
    1 - (1 - p_z)^n >= p where 1 - (1 - p_z)^(n - 1) < p (zero queries give nothing, so n >= 1)."""
    context = Context(prec=400)
    miss, p = context.subtract(1, context.exp(Decimal(log_p))), Decimal(p)
    if miss == 0:
        return 1
    ratio = context.divide(context.ln(context.subtract(1, p)), context.ln(miss))
    n = max(1, int(ratio.to_integral_value(rounding=ROUND_CEILING)))
    def given_back(queries: int) -> Decimal:  # 1 - (1 - p_z)^queries, at the reference's precision
        return context.subtract(1, context.power(miss, queries))

    assert given_back(n) >= p and (n == 1 or given_back(n - 1) < p)
    return n


def test_queries_needed_equals_a_slow_reference_from_tiny_p_z_to_one():
    """n*(p) for p_z from 1e-300 (about 1e300 queries: relative float precision) to 1 - 1e-17 and 1 itself (one
    query, never zero), exact wherever it is below a billion."""
    rng = np.random.default_rng(1)
    log_p = np.r_[np.log(10.0 ** -np.arange(300, 0, -7)), np.log1p(-(10.0 ** -np.arange(1, 18))), 0.0,
                  np.log(rng.uniform(1e-9, 1, 100)), -rng.exponential(1e-8, 20)]
    for p in (0.5, 0.8, 0.95):
        needed = queries_needed(log_p, p)
        expected = np.array([slow_queries_needed(value, p) for value in log_p], dtype=float)
        np.testing.assert_allclose(needed, expected, rtol=1e-15)
        small = expected < 1e9
        np.testing.assert_array_equal(needed[small], expected[small])
    assert queries_needed(np.array([np.log1p(-1e-17), 0.0]), 0.999).tolist() == [1.0, 1.0]


def test_rates_per_sample_and_per_group_with_exact_intervals():
    exposed = np.array([True, False, False, True, False, False])
    member = np.array([True, True, True, False, False, False])
    groups = np.array(["a", "a", "b", "c", "d", "d"])
    per_sample = rates_by_side(exposed, member)  # no clusters: independent samples, exact intervals
    assert (per_sample["member"].exposed, per_sample["member"].units) == (1, 3)
    assert per_sample["member"].interval == clopper_pearson(1, 3)
    assert rates_by_side(exposed, member, np.arange(6))["member"].interval == pytest.approx(clopper_pearson(1, 3))
    per_group = group_rates_by_side(exposed, member, groups)  # patient a exposed by one of two notes
    assert (per_group["member"].exposed, per_group["member"].units) == (1, 2)
    assert (per_group["nonmember"].exposed, per_group["nonmember"].units) == (1, 2)
    assert per_group["member"].interval == clopper_pearson(1, 2)


def test_a_patients_correlated_notes_do_not_narrow_the_per_sample_interval():
    """Six members' notes, all given back, from two patients, against six non-members' notes, none given back, from
    six patients: the notes of one patient count as one unit (rate 1: the effective trials are the clusters), so the
    members' interval is that of 2 of 2, which overlaps the non-members' 0 of 6, where six independent notes (6 of 6)
    would lie wholly above it and read as the model giving training text back."""
    exposed = np.r_[np.ones(6, bool), np.zeros(6, bool)]
    member = np.r_[np.ones(6, bool), np.zeros(6, bool)]
    clusters = np.array([0, 0, 0, 1, 1, 1, 2, 3, 4, 5, 6, 7])
    rates = rates_by_side(exposed, member, clusters)
    assert (rates["member"].exposed, rates["member"].units, rates["member"].rate) == (6, 6, 1.0)
    assert rates["member"].interval == pytest.approx(clopper_pearson(2, 2))
    assert rates["nonmember"].interval == pytest.approx(clopper_pearson(0, 6))
    assert rates["member"].interval[0] < rates["nonmember"].interval[1]
    assert clopper_pearson(6, 6)[0] > clopper_pearson(0, 6)[1]  # what notes taken as independent would say


def test_the_audit_uses_groups_where_any_sample_has_one():
    """One member note without a patient is a patient of its own: the per-patient level is reported (it vanished when
    one id was missing), and the per-sample interval counts patient p's two notes as one unit."""
    from lmaudit.audit.extraction import per_set_summaries
    from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET

    exact = [True, True, True, False, False]
    table = pd.DataFrame({"sample_id": ["m1", "m2", "m3", "n1", "n2"], "role": [MEMBER] * 3 + [NONMEMBER] * 2,
                          "group_id": ["p", "p", None, "r", "s"], NONMEMBER_SET: [None] * 3 + ["nonmembers"] * 2,
                          "exact": exact, "common_prefix": [4, 4, 4, 0, 0], "similarity": np.array(exact, float),
                          "approximate": exact})
    [summary] = per_set_summaries(table, np.empty((5, 0)), []).values()
    greedy = summary["greedy"]
    assert greedy["group"]["exact"]["member"] == {"exposed": 2, "units": 2, "rate": 1.0,
                                                  "interval": clopper_pearson(2, 2)}
    assert (greedy["group"]["exact"]["nonmember"]["exposed"], greedy["group"]["exact"]["nonmember"]["units"]) == (0, 2)
    sample = greedy["sample"]["exact"]["member"]
    assert (sample["exposed"], sample["units"]) == (3, 3)
    assert sample["interval"] == pytest.approx(clopper_pearson(2, 2))  # two independent units, not three


def test_the_summary_reads_each_side_and_level_and_each_schemes_curves():
    from lmaudit.metrics.extraction import QUERY_COUNTS, extraction_summary
    from lmaudit.signals.sampling import SamplingScheme

    truth = [[1, 2, 3, 4]] * 4
    matches = suffix_matches([[1, 2, 3, 4], [1, 2, 3, 9], [9, 9, 9, 9], [1, 2, 9, 9]], truth)
    member = np.array([True, True, False, False])
    log_p = np.log([[0.5, 0.9], [1e-3, 0.2], [1e-9, 1e-4], [0.0 + 1e-12, 1e-6]])
    schemes = [SamplingScheme(), SamplingScheme(top_k=40)]
    summary = extraction_summary(matches, log_p, schemes, member, np.array([0, 0, 1, 2]))
    assert summary["greedy"]["sample"]["exact"]["member"]["exposed"] == 1
    assert summary["greedy"]["sample"]["approximate"]["member"]["exposed"] == 2  # 3 of 4 tokens right: 0.75
    assert summary["greedy"]["group"]["exact"]["member"] == {"exposed": 1, "units": 1, "rate": 1.0,
                                                            "interval": clopper_pearson(1, 1)}
    assert summary["greedy"]["mean_common_prefix"] == {"member": 3.5, "nonmember": 1.0}
    first = summary["probabilistic"][0]
    assert (first["scheme"], first["p"], first["queries"]) == ("T=1, top-k all, top-p 1", 0.5, list(QUERY_COUNTS))
    np.testing.assert_allclose(first["member"], extractable_share(log_p[:2, 0], QUERY_COUNTS, 0.5))
    assert len(summary["probabilistic"]) == 4  # two schemes, two probabilities
