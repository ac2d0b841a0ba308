"""Shadow thresholds (Algorithms 1-4 of Shejwalkar et al.) on hand-made cases; calibration never reads the audited
samples' membership."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks import rank_histogram, shadow
from lmaudit.attacks.base import CLASSIFIER_FEATURE, CLASSIFIER_RAW_FEATURE, LABEL_RANKS, AttackInput
from lmaudit.attacks.rank_histogram import rank_histograms
from lmaudit.attacks.registry import run_attacks
from lmaudit.attacks.shadow import (
    best_separating_threshold,
    classwise_thresholds,
    feature_direction,
    shadow_accuracy,
    user_statistics,
)
from lmaudit.data.roles import AUDITED_ROLES, SHADOW_ROLES


def build_feature_attacks(table, feature, direction, seed=0):
    """Algorithms 1-4 on one feature of a table whose shadow rows were scored by the shadow model."""
    raw = table[feature].to_numpy(dtype=float)
    data = AttackInput(feature, table, {CLASSIFIER_FEATURE: direction * raw, CLASSIFIER_RAW_FEATURE: raw}, seed,
                       AUDITED_ROLES + SHADOW_ROLES)
    return run_attacks([data], shadow.SPECS)


def _brute_force_threshold(members, nonmembers):
    """Every candidate on a fine grid; the smallest value reaching the best accuracy."""
    values = np.concatenate([members, nonmembers])
    grid = np.unique(np.concatenate([values, [values.max() + 1.0]]))
    accuracies = [shadow_accuracy(members, nonmembers, t) for t in grid]
    return grid[int(np.argmax(accuracies))], max(accuracies)


@pytest.mark.parametrize("seed", range(5))
def test_best_threshold_maximises_shadow_accuracy(seed):
    rng = np.random.default_rng(seed)
    members = np.round(rng.normal(1.0, 1.0, 30), 1)  # rounded: ties between and within the two sides
    nonmembers = np.round(rng.normal(0.0, 1.0, 25), 1)
    threshold = best_separating_threshold(members, nonmembers)
    expected, best = _brute_force_threshold(members, nonmembers)
    assert threshold == expected
    # No real number does better than the chosen threshold: check between and beyond all values.
    values = np.unique(np.concatenate([members, nonmembers]))
    between = np.concatenate([(values[:-1] + values[1:]) / 2, [values[0] - 1, values[-1] + 1]])
    assert all(shadow_accuracy(members, nonmembers, t) <= best for t in between)


def test_best_threshold_hand_made():
    # Members 3, 4, 5; non-members 1, 2, 3.5: tau = 3 calls 3, 3.5, 4, 5 -> 5 of 6 right.
    assert best_separating_threshold(np.array([3.0, 4.0, 5.0]), np.array([1.0, 2.0, 3.5])) == 3.0
    # Non-members all above members: calling no one is best (3 of 5), the candidate above every score.
    assert best_separating_threshold(np.array([0.0, 1.0]), np.array([5.0, 6.0, 7.0])) == 8.0
    # A tie between "everyone" (2 of 4 right) and "no one" (2 of 4): the lowest candidate wins.
    assert best_separating_threshold(np.array([0.0, 1.0]), np.array([5.0, 6.0])) == 0.0


def test_classwise_thresholds_hand_made():
    scores = np.array([5.0, 6.0, 1.0, 2.0, -1.0, 0.0, -3.0, -2.0, 9.0])
    labels = np.array(["a", "a", "a", "a", "b", "b", "b", "b", "c"])
    is_member = np.array([True, True, False, False, True, True, False, False, True])
    thresholds, fallback = classwise_thresholds(scores, labels, is_member)
    assert thresholds["a"] == 5.0 and thresholds["b"] == -1.0
    # Class c has no shadow non-member: it gets the threshold of all classes together.
    assert fallback == ["c"] and thresholds["c"] == thresholds["*"] == best_separating_threshold(scores[is_member], scores[~is_member])


def test_user_statistics_hand_made():
    stats = user_statistics(np.array([1.0, 3.0, 2.0, 2.0, 8.0]), np.array(["u1", "u1", "u2", "u2", "u2"]))
    assert stats.loc["u1"].tolist() == [2.0, 1.0, 3.0, 1.0]
    assert stats.loc["u2"].tolist() == pytest.approx([4.0, 2.0, 8.0, 8.0])  # variance of (2, 2, 8) around 4


def feature_table(seed=0, users_per_role=12, samples_per_user=6):
    """Members have a lower loss; the shadow model behaves like the target; 3 labels."""
    rng = np.random.default_rng(seed)
    rows = []
    for role in ("member", "nonmember", "shadow_member", "shadow_nonmember"):
        shift = 0.6 if role.endswith("_member") or role == "member" else 0.0
        for user in range(users_per_role):
            for sample in range(samples_per_user):
                label = f"c{rng.integers(3)}"
                rows.append({"sample_id": f"{role}-{user}-{sample}", "role": role, "group_id": f"{role}-u{user}",
                             "label": label, "loss": rng.exponential(1.0) + 1.0 - shift + 0.2 * int(label[1])})
    return pd.DataFrame(rows)


def _fitted(attacks):
    return [(a.attack, a.level, a.fixed_thresholds, repr(a.calibration)) for a in attacks]


def test_calibration_never_reads_audited_membership():
    """Shuffling which audited samples are members changes no threshold, orientation or regression."""
    table = feature_table()
    shuffled = table.copy()
    audited = shuffled["role"].isin(["member", "nonmember"])
    # Shuffle the role among audited users (roles stay disjoint by user).
    users = shuffled.loc[audited, "group_id"].unique()
    new_role = dict(zip(users, np.random.default_rng(1).permutation(shuffled.loc[audited].groupby("group_id")["role"].first().loc[users]), strict=True))
    shuffled.loc[audited, "role"] = shuffled.loc[audited, "group_id"].map(new_role)
    assert not shuffled["role"].equals(table["role"])
    original, _ = build_feature_attacks(table, "loss", -1.0)
    after, _ = build_feature_attacks(shuffled, "loss", -1.0)
    assert _fitted(original) == _fitted(after)
    # And the audited scores themselves do not depend on membership either.
    for a, b in zip(original, after, strict=True):
        assert np.array_equal(a.frame.sort_values("id")["score"].to_numpy(), b.frame.sort_values("id")["score"].to_numpy())


def test_calibration_follows_the_shadow_data():
    """The converse: changing the shadow data moves the thresholds (the test above could not pass vacuously)."""
    table = feature_table()
    moved = table.copy()
    moved.loc[moved["role"] == "shadow_member", "loss"] -= 0.5
    assert _fitted(build_feature_attacks(table, "loss", -1.0)[0]) != _fitted(build_feature_attacks(moved, "loss", -1.0)[0])


def test_attack_scores_are_higher_for_members_and_decisions_match_the_algorithms():
    table = feature_table(users_per_role=30)
    attacks, skipped = build_feature_attacks(table, "loss", -1.0)
    assert not skipped
    names = {a.attack: a for a in attacks}
    assert set(names) == {"sample_threshold", "user_threshold_avg", "user_threshold_min", "user_threshold_max",
                          "user_threshold_var", "user_logistic", "sample_to_user"}
    for attack in (names["sample_threshold"], names["user_threshold_avg"], names["user_logistic"]):
        frame = attack.frame
        assert frame.loc[frame["role"] == "member", "score"].mean() > frame.loc[frame["role"] == "nonmember", "score"].mean()
    # Algorithm 1: score >= 0 exactly when -loss >= the class threshold.
    sample = names["sample_threshold"]
    audited = table[table["role"].isin(["member", "nonmember"])].set_index("sample_id").loc[sample.frame["id"]]
    class_threshold = audited["label"].map(sample.calibration["class_thresholds"]).to_numpy()
    assert np.array_equal(sample.frame["score"].to_numpy() >= 0, -audited["loss"].to_numpy() >= class_threshold)
    # Algorithm 4: a user's score is the share of their samples that Algorithm 1 calls members.
    called = pd.Series(sample.frame["score"].to_numpy() >= 0).groupby(sample.frame["group_id"].to_numpy()).mean()
    s2u = names["sample_to_user"].frame.set_index("id")["score"]
    assert np.allclose(s2u.loc[called.index].to_numpy(), called.to_numpy())
    assert names["sample_to_user"].calibration["posts_called_members"] == pytest.approx(
        (sample.frame["score"].to_numpy() >= 0).mean())
    # Algorithm 2: the user's average of -loss, minus the threshold fitted on shadow users.
    average = (-audited["loss"]).groupby(audited["group_id"]).mean()
    threshold = names["user_threshold_avg"].calibration["threshold"]
    assert np.allclose(names["user_threshold_avg"].frame.set_index("id")["score"].loc[average.index], average - threshold)


def test_user_level_attacks_are_skipped_without_user_ids():
    table = feature_table()
    table["group_id"] = None
    attacks, skipped = build_feature_attacks(table, "loss", -1.0)
    assert [a.attack for a in attacks] == ["sample_threshold"]
    assert any("group_id" in s.reason for s in skipped)


def test_shadow_samples_without_users_skip_the_shadow_fitted_user_attacks_only():
    """The user thresholds and regression are fitted on shadow users; Algorithm 4 needs only the audited users."""
    table = feature_table()
    table.loc[table["role"].str.startswith("shadow"), "group_id"] = None
    attacks, skipped = build_feature_attacks(table, "loss", -1.0)
    assert [a.attack for a in attacks] == ["sample_threshold", "sample_to_user"]
    assert {s.attack for s in skipped} == {"user_threshold_avg", "user_threshold_min", "user_threshold_max",
                                          "user_threshold_var", "user_logistic"}
    assert all("shadow samples without group_id" in s.reason for s in skipped)


def test_user_statistics_are_of_the_raw_feature_as_the_paper_names_them():
    """The paper's Minimum loss is a user's smallest loss (not the minimum of the negated loss, which is the largest
    loss): each statistic, negated for loss, against the threshold fitted on shadow users."""
    table = feature_table(users_per_role=20)
    attacks, _ = build_feature_attacks(table, "loss", -1.0)
    names = {a.attack: a for a in attacks}
    audited = table[table["role"].isin(["member", "nonmember"])]
    for statistic, aggregate in (("min", "min"), ("max", "max"), ("avg", "mean")):
        attack = names[f"user_threshold_{statistic}"]
        raw = audited.groupby("group_id")["loss"].agg(aggregate)
        assert attack.calibration["orientation"] == -1.0
        scores = attack.frame.set_index("id")["score"].loc[raw.index]
        assert np.allclose(scores, -raw - attack.calibration["threshold"])
    # The logistic regression reads the same four raw statistics.
    assert names["user_logistic"].calibration["features"] == ["avg", "min", "max", "var"]


def test_feature_direction():
    raw = np.array([0.5, 2.0, 0.0])
    assert feature_direction(raw, raw) == 1.0 and feature_direction(-raw, raw) == -1.0
    with pytest.raises(ValueError):
        feature_direction(raw + 1.0, raw)


def test_rank_histograms_hand_made():
    histograms = rank_histograms(np.array([1, 1, 2, 3, 1]), np.array(["a", "a", "b", "b", "c"]), 3)
    assert histograms.loc["a"].tolist() == [1.0, 0.0, 0.0]
    assert histograms.loc["b"].tolist() == [0.0, 0.5, 0.5]
    assert histograms.loc["c"].tolist() == [1.0, 0.0, 0.0]
    assert np.allclose(histograms.sum(axis=1), 1.0)


def rank_table(seed=0, users_per_role=15, samples_per_user=8):
    """Members' true labels rank first more often (0.8 against 0.4 of their samples); 4 classes."""
    rng = np.random.default_rng(seed)
    rows = []
    for role in ("member", "nonmember", "shadow_member", "shadow_nonmember"):
        top = 0.8 if role in ("member", "shadow_member") else 0.4
        for user in range(users_per_role):
            for sample in range(samples_per_user):
                rank = 1 if rng.random() < top else int(rng.integers(2, 5))
                rows.append({"sample_id": f"{role}-{user}-{sample}", "role": role, "group_id": f"{role}-u{user}",
                             "label": "c0", "rank": float(rank)})
    return pd.DataFrame(rows)


def _rank_attack(table):
    data = AttackInput("rank", table, {LABEL_RANKS: table["rank"].to_numpy(dtype=float)}, 0, AUDITED_ROLES + SHADOW_ROLES)
    (attack,), skipped = run_attacks([data], [rank_histogram.SPEC])
    assert not skipped
    return attack


def test_rank_histogram_baseline_tells_members_apart_and_fits_on_shadow_users_only():
    table = rank_table()
    attack = _rank_attack(table)
    assert attack.level == "group" and attack.calibration["ranks"] == 4
    frame = attack.frame
    assert frame.loc[frame["role"] == "member", "score"].mean() > frame.loc[frame["role"] == "nonmember", "score"].mean()
    # The first rank's coefficient is the largest: a member's labels rank first more often.
    coefficients = attack.calibration["coefficients"]
    assert coefficients[0] == max(coefficients)
    # Relabelling which audited users are members changes nothing fitted; changing the shadow data does.
    flipped = table.replace({"role": {"member": "nonmember", "nonmember": "member"}})
    assert _rank_attack(flipped).calibration == attack.calibration
    moved = table.copy()
    moved.loc[moved["role"] == "shadow_member", "rank"] = 1.0
    assert _rank_attack(moved).calibration != attack.calibration
