"""The per-class analyses of a classifier audit (Shejwalkar et al., Figures 6 and 7) against hand-computed cases, the
entropy buckets against a slow reference and the correlation against scipy."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from lmaudit.metrics.per_class import (
    audited_samples,
    class_accuracy,
    class_entropy_bits,
    class_generalization_gaps,
    correct_decisions,
    entropy_bucket_table,
    entropy_buckets,
    gap_correlation,
    label_entropy_bits,
    per_class_report,
)


def approx_tree(value):
    """`value` with every float wrapped in pytest.approx, so nested dicts and lists compare to within rounding."""
    if isinstance(value, dict):
        return {k: approx_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [approx_tree(v) for v in value]
    return pytest.approx(value) if isinstance(value, float) else value


def test_correct_decisions_call_a_member_at_or_above_the_threshold():
    frame = pd.DataFrame({"id": ["s1", "s2", "s3", "s4"], "role": ["member", "member", "nonmember", "nonmember"],
                          "score": [0.5, -0.1, 0.0, -2.0]})
    # called member: s1 (0.5 >= 0), s3 (0.0 >= 0); right: s1 (member), s4 (non-member not called)
    assert correct_decisions(frame, 0.0).to_dict() == {"s1": True, "s2": False, "s3": False, "s4": True}
    assert correct_decisions(frame, -1.0).to_dict() == {"s1": True, "s2": True, "s3": False, "s4": True}


def test_class_generalization_gap_is_member_minus_nonmember_accuracy():
    samples = pd.DataFrame({
        "label": ["a", "a", "a", "a", "a", "a", "b", "b", "b", "b", "b"],
        "role": ["member"] * 4 + ["nonmember"] * 2 + ["member"] * 2 + ["nonmember"] * 3,
        "correctness": [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
    })
    gaps = class_generalization_gaps(samples)
    assert gaps.index.tolist() == ["a", "b"]
    assert gaps["members"].tolist() == [4, 2] and gaps["nonmembers"].tolist() == [2, 3]
    # a: 3/4 right on members, 1/2 on non-members; b: 2/2 and 1/3.
    assert gaps["member_accuracy"].tolist() == pytest.approx([0.75, 1.0])
    assert gaps["nonmember_accuracy"].tolist() == pytest.approx([0.5, 1 / 3])
    assert gaps["generalization_gap"].tolist() == pytest.approx([0.25, 2 / 3])


def test_a_class_without_nonmembers_has_no_gap():
    samples = pd.DataFrame({"label": ["a", "a", "b"], "role": ["member", "nonmember", "member"],
                            "correctness": [1.0, 0.0, 1.0]})
    gaps = class_generalization_gaps(samples)
    assert gaps.loc["a", "generalization_gap"] == 1.0
    assert gaps.loc["b", "nonmembers"] == 0 and math.isnan(gaps.loc["b", "generalization_gap"])


def test_class_accuracy_is_the_share_of_right_decisions_per_class():
    labels = pd.Series(["a", "a", "b", "b", "b"], index=["s1", "s2", "s3", "s4", "s5"])
    correct = pd.Series([True, False, True, True, False, True], index=["s1", "s2", "s3", "s4", "s5", "shadow"])
    assert class_accuracy(labels, correct).to_dict() == pytest.approx({"a": 0.5, "b": 2 / 3})


def test_gap_correlation_is_pearsons_r_across_classes():
    rng = np.random.default_rng(3)
    labels = [f"c{i}" for i in range(10)]
    gaps, accuracies = pd.Series(rng.random(10), index=labels), pd.Series(rng.random(10), index=labels[::-1])
    expected = pearsonr(gaps.to_numpy(), accuracies.loc[labels].to_numpy()).statistic  # aligned by label, not position
    assert gap_correlation(gaps, accuracies) == pytest.approx(expected)
    assert gap_correlation(gaps, 0.5 + 0.1 * gaps) == pytest.approx(1.0)
    assert gap_correlation(gaps, 1 - gaps) == pytest.approx(-1.0)


def test_gap_correlation_is_none_below_three_classes_or_on_a_constant_column():
    gaps = pd.Series([0.1, 0.2, 0.4, np.nan], index=["a", "b", "c", "d"])
    accuracies = pd.Series([0.5, 0.6, 0.9, 0.7], index=["a", "b", "c", "d"])
    # d has no gap: left out, and a, b, c remain.
    assert gap_correlation(gaps, accuracies) == pytest.approx(pearsonr([0.1, 0.2, 0.4], [0.5, 0.6, 0.9]).statistic)
    assert gap_correlation(gaps[["a", "b"]], accuracies[["a", "b"]]) is None
    assert gap_correlation(gaps, pd.Series(0.5, index=gaps.index)) is None
    assert gap_correlation(pd.Series(0.2, index=gaps.index), accuracies) is None


def test_label_entropy_in_bits():
    assert label_entropy_bits(np.array(["a", "a", "b", "b"])) == pytest.approx(1.0)
    assert label_entropy_bits(np.array(["a", "b", "c", "d"])) == pytest.approx(2.0)
    assert label_entropy_bits(np.array(["a", "a", "a"])) == 0.0
    # -(3/4 log2 3/4 + 1/4 log2 1/4)
    assert label_entropy_bits(np.array(["a", "a", "a", "b"])) == pytest.approx(0.8112781244591328)
    # the same distribution over other labels is the same number, bit for bit (entropy ties stay ties)
    assert label_entropy_bits(np.array(["x", "y", "y", "z", "z", "z"])) == label_entropy_bits(
        np.array(["q", "q", "q", "r", "r", "p"]))


def test_class_entropy_per_user():
    labels = pd.Series(["a", "a", "b", "b", "c", "c", "a", "b", "c", "d"])
    users = pd.Series(["u1", "u1", "u1", "u1", "u2", "u2", "u3", "u3", "u3", "u3"])
    assert class_entropy_bits(labels, users).to_dict() == pytest.approx({"u1": 1.0, "u2": 0.0, "u3": 2.0})


def reference_buckets(entropy: dict, count: int) -> list[list]:
    """Slow and obviously right: sort (entropy, user) pairs; the first n % k buckets get one user more than the rest."""
    users = [user for _, user in sorted((value, user) for user, value in entropy.items())]
    k = min(count, len(users))
    buckets, start = [], 0
    for index in range(k):
        size = len(users) // k + (1 if index < len(users) % k else 0)
        buckets.append(users[start:start + size])
        start += size
    return buckets


@pytest.mark.parametrize("n_users", [0, 1, 3, 10, 11, 23, 100])
def test_entropy_buckets_match_a_slow_reference(n_users):
    rng = np.random.default_rng(n_users)
    # few distinct entropies, so many ties, broken by user id; ids shuffled so the input order is no help
    ids = [f"user{i:03d}" for i in rng.permutation(n_users)]
    entropy = pd.Series(rng.choice([0.0, 0.8112781244591328, 1.0, 1.5], size=n_users), index=pd.Index(ids, dtype=object))
    buckets = entropy_buckets(entropy)
    assert [list(b) for b in buckets] == reference_buckets(entropy.to_dict(), 10)
    assert len(buckets) == min(10, n_users)


def test_entropy_bucket_table_by_hand():
    entropy = pd.Series({"u1": 0.0, "u2": 1.0, "u3": 0.8112781244591328, "u4": 0.0})
    correct = {"loss": pd.Series({"u1": True, "u2": True, "u3": True, "u4": False})}
    # sorted: u1 (0), u4 (0), u3 (0.811), u2 (1); two buckets of two
    assert entropy_bucket_table(entropy, correct, buckets=2) == approx_tree([
        {"bucket": 1, "users": 2, "mean_entropy_bits": 0.0, "s2u_accuracy": {"loss": 0.5}},
        {"bucket": 2, "users": 2, "mean_entropy_bits": (0.8112781244591328 + 1.0) / 2, "s2u_accuracy": {"loss": 1.0}},
    ])


def test_per_class_report_by_hand_ignores_shadow_rows():
    samples = pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(1, 12)],
        "role": ["member"] * 5 + ["nonmember"] * 4 + ["shadow_member", "shadow_nonmember"],
        "group_id": ["u1", "u1", "u1", "u2", "u2", "u3", "u3", "u4", "u4", "u9", "u10"],
        "label": ["a", "a", "b", "b", "b", "a", "b", "a", "a", "a", "c"],
        "correctness": [1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0],
    })
    sample_correct = {
        "loss": pd.Series([True, True, False, True, False, True, False, False, True, True, False],
                          index=samples["sample_id"]),
        "rank": pd.Series(True, index=samples["sample_id"]),
    }
    user_correct = {"loss": pd.Series({"u1": True, "u2": False, "u3": True, "u4": True, "u9": False, "u10": False}),
                    "rank": pd.Series({"u1": True, "u2": True, "u3": True, "u4": True})}
    report = per_class_report(samples, sample_correct, user_correct)
    # a: members s1, s2 (both right) = 1; non-members s6, s8, s9 (0, 1, 0) = 1/3. b: members s3, s4, s5 = 2/3; s7 = 1.
    # Algorithm 1 on loss: a right on s1, s2, s6, s9 of s1, s2, s6, s8, s9 = 4/5; b on s4 of s3, s4, s5, s7 = 1/4.
    # Users' class entropy: u1 (a, a, b) 0.918 bits, u2 (b, b) 0, u3 (a, b) 1, u4 (a, a) 0: one user per bucket,
    # ordered u2, u4, u1, u3.
    h_u1 = -(2 / 3 * math.log2(2 / 3) + 1 / 3 * math.log2(1 / 3))
    assert report == approx_tree({
        "classes": [
            {"label": "a", "members": 2, "nonmembers": 3, "member_accuracy": 1.0, "nonmember_accuracy": 1 / 3,
             "generalization_gap": 2 / 3, "attack_accuracy": {"loss": 0.8, "rank": 1.0}},
            {"label": "b", "members": 3, "nonmembers": 1, "member_accuracy": 2 / 3, "nonmember_accuracy": 1.0,
             "generalization_gap": -1 / 3, "attack_accuracy": {"loss": 0.25, "rank": 1.0}},
        ],
        "gap_correlation": {"loss": None, "rank": None},  # two classes
        "entropy_buckets": [
            {"bucket": 1, "users": 1, "mean_entropy_bits": 0.0, "s2u_accuracy": {"loss": 0.0, "rank": 1.0}},
            {"bucket": 2, "users": 1, "mean_entropy_bits": 0.0, "s2u_accuracy": {"loss": 1.0, "rank": 1.0}},
            {"bucket": 3, "users": 1, "mean_entropy_bits": h_u1, "s2u_accuracy": {"loss": 1.0, "rank": 1.0}},
            {"bucket": 4, "users": 1, "mean_entropy_bits": 1.0, "s2u_accuracy": {"loss": 1.0, "rank": 1.0}},
        ],
    })
    assert per_class_report(samples, sample_correct, {})["entropy_buckets"] == []


def test_with_several_nonmember_sets_only_the_first_is_audited():
    samples = pd.DataFrame({
        "sample_id": ["m1", "m2", "n1", "n2", "n3", "n4", "s1"],
        "role": ["member", "member", "nonmember", "nonmember", "nonmember", "nonmember", "shadow_member"],
        "group_id": ["u1", "u1", "u2", "u2", "u3", "u3", "u4"],
        "subgroup_id": [None] * 7,
        "nonmember_set": [None, None, "mimic", "mimic", "i2b2", "i2b2", None],
    })
    assert audited_samples(samples)["sample_id"].tolist() == ["m1", "m2", "n1", "n2"]
    assert audited_samples(samples.drop(columns="nonmember_set"))["sample_id"].tolist() == ["m1", "m2", "n1", "n2", "n3", "n4"]
