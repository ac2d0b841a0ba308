"""Learned (logistic regression) attacks on white-box features: the 20/80 split never overlaps, the
calibration variant never reads audited labels, scores point towards members."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks import learned
from lmaudit.attacks.base import FEATURE_VECTORS, AttackInput
from lmaudit.attacks.learned import split_units, training_split
from lmaudit.attacks.registry import run_attacks
from lmaudit.metrics.roc import auc


def build_learned_attacks(table, features, signal="f", seed=0):
    """The registered learned attacks on one feature matrix (one row per row of `table`)."""
    return run_attacks([AttackInput(signal, table, {FEATURE_VECTORS: features}, seed)], learned.SPECS)


def feature_table(seed=0, dims=6):
    """Members (and calibration members) have their first feature shifted by 1.5; 3 samples per patient."""
    rng = np.random.default_rng(seed)
    rows, features = [], []
    for role, patients in (("member", 40), ("nonmember", 30), ("population", 30), ("calibration_member", 20)):
        for patient in range(patients):
            for sample in range(3):
                rows.append({"sample_id": f"{role}-{patient}-{sample}", "role": role, "group_id": f"{role}-p{patient}",
                             "subgroup_id": f"{role}-p{patient}-a{sample % 2}", "length": 20})
                vector = rng.normal(size=dims)
                vector[0] += 1.5 if role in ("member", "calibration_member") else 0.0
                features.append(vector)
    return pd.DataFrame(rows), np.array(features)


def test_training_split_is_by_group_stratified_and_seeded():
    table, _ = feature_table()
    audited = table[table["role"].isin(["member", "nonmember"])]
    train = training_split(audited["role"].to_numpy(), split_units(audited), 0.2, seed=3)
    train_groups = set(audited.loc[train, "group_id"])
    assert not train_groups & set(audited.loc[~train, "group_id"])  # no patient on both sides
    assert audited.loc[train].groupby("role")["group_id"].nunique().to_dict() == {"member": 8, "nonmember": 6}
    assert np.array_equal(train, training_split(audited["role"].to_numpy(), split_units(audited), 0.2, seed=3))
    assert not np.array_equal(train, training_split(audited["role"].to_numpy(), split_units(audited), 0.2, seed=4))


def by_name(attacks, name, level="sample"):
    return next(a for a in attacks if a.attack == name and a.level == level)


def test_split_variant_audits_only_samples_it_did_not_train_on():
    table, features = feature_table()
    attacks, skipped = build_learned_attacks(table, features, "gradient_norms", seed=1)
    assert not skipped
    split = by_name(attacks, "logistic_split")
    audited = table[table["role"].isin(["member", "nonmember"])]
    train = set(audited["sample_id"][training_split(audited["role"].to_numpy(), split_units(audited), 0.2, 1)])
    assert len(train) == split.calibration["n_train"] == 3 * (8 + 6)
    assert not train & set(split.frame["id"])
    assert set(split.frame["id"]) | train == set(audited["sample_id"]) | set(table.loc[table["role"] == "population", "sample_id"])
    frame = split.frame[split.frame["role"].isin(["member", "nonmember"])]
    assert auc((frame["role"] == "member").to_numpy(), frame["score"].to_numpy()) > 0.8  # higher = member


def test_calibration_variant_never_reads_audited_labels():
    table, features = feature_table()
    shuffled = table.copy()
    audited = shuffled["role"].isin(["member", "nonmember"]).to_numpy()
    shuffled.loc[audited, "role"] = np.random.default_rng(0).permutation(shuffled.loc[audited, "role"].to_numpy())
    original = by_name(build_learned_attacks(table, features, "f")[0], "logistic_calibration").frame
    after = by_name(build_learned_attacks(shuffled, features, "f")[0], "logistic_calibration").frame
    assert np.array_equal(original.sort_values("id")["score"].to_numpy(), after.sort_values("id")["score"].to_numpy())
    # Every audited sample is scored; the population half that trained the attack is not.
    assert set(table.loc[audited, "sample_id"]) <= set(original["id"])
    population_scored = original[original["role"] == "population"]
    assert 0 < len(population_scored) < (table["role"] == "population").sum()


def test_group_levels_and_missing_calibration_data():
    table, features = feature_table()
    attacks, _ = build_learned_attacks(table, features, "f")
    assert {(a.attack, a.level) for a in attacks} == {(n, level) for n in ("logistic_split", "logistic_calibration")
                                                      for level in ("sample", "subgroup", "group")}
    keep = (table["role"] != "calibration_member").to_numpy()
    attacks, skipped = build_learned_attacks(table[keep].reset_index(drop=True), features[keep], "f")
    assert {a.attack for a in attacks} == {"logistic_split"}
    assert [s.attack for s in skipped] == ["logistic_calibration"]


@pytest.mark.parametrize("fraction", [0.2, 0.5])
def test_split_fraction_without_groups(fraction):
    roles = np.array(["member"] * 50 + ["nonmember"] * 30)
    train = training_split(roles, np.arange(80).astype(str), fraction, seed=0)
    assert train[:50].sum() == round(fraction * 50) and train[50:].sum() == round(fraction * 30)


def test_numerically_zero_columns_do_not_change_the_scores():
    """A column of float noise (a gradient that is zero in exact arithmetic) is dropped before standardising."""
    table, features = feature_table()
    noisy = np.hstack([features, 1e-25 * np.random.default_rng(1).normal(size=(len(features), 1))])
    for name in ("logistic_split", "logistic_calibration"):
        plain = by_name(build_learned_attacks(table, features, "f")[0], name).frame["score"].to_numpy()
        with_noise = by_name(build_learned_attacks(table, noisy, "f")[0], name).frame["score"].to_numpy()
        np.testing.assert_allclose(plain, with_noise, rtol=1e-12)


def test_samples_without_a_group_are_their_own_unit_and_groups_stay_whole():
    table, features = feature_table()
    table.loc[table.index[::7], "group_id"] = None  # some samples lost their patient id
    audited = table[table["role"].isin(["member", "nonmember"])]
    train = training_split(audited["role"].to_numpy(), split_units(audited), 0.2, seed=0)
    grouped = audited["group_id"].notna().to_numpy()
    assert not set(audited.loc[train & grouped, "group_id"]) & set(audited.loc[~train & grouped, "group_id"])


def test_tiny_roles_keep_one_unit_on_each_side_or_are_skipped():
    table, features = feature_table()
    two_each = table[table["group_id"].isin(["member-p0", "member-p1", "nonmember-p0", "nonmember-p1"])
                     | ~table["role"].isin(["member", "nonmember"])].reset_index(drop=True)
    kept = table.index[table["sample_id"].isin(two_each["sample_id"])]
    attacks, skipped = build_learned_attacks(two_each, features[kept], "f")
    split = by_name(attacks, "logistic_split")
    assert split.calibration["n_train"] == 3 * 2  # one patient per role trains, one per role is audited
    one_each = two_each[~two_each["group_id"].isin(["member-p1", "nonmember-p1"])].reset_index(drop=True)
    kept = table.index[table["sample_id"].isin(one_each["sample_id"])]
    attacks, skipped = build_learned_attacks(one_each, features[kept], "f")
    assert "logistic_split" not in {a.attack for a in attacks}
    assert any(s.attack == "logistic_split" and "fewer than 2" in s.reason for s in skipped)


def test_the_papers_sample_split_trains_on_20_percent_of_samples_and_shares_patients():
    """attacks.whitebox_split 'sample' (Jagannatha et al.): 20% of each role's samples train, 0.2 x 120 = 24 members and
    0.2 x 90 = 18 non-members (by patient: 8 and 6 patients of 3 samples, the same 42 here only by coincidence of sizes,
    so the sets are compared); a trained sample's patient is audited on its other samples; one patient per role is
    enough to split samples, not patients."""
    from lmaudit.attacks.settings import AttackSettings

    table, features = feature_table()
    settings = AttackSettings(whitebox_split="sample")
    [attacks, _] = run_attacks([AttackInput("f", table, {FEATURE_VECTORS: features}, 1, settings=settings)], learned.SPECS)
    split = by_name(attacks, "logistic_split")
    audited = table[table["role"].isin(["member", "nonmember"])]
    trained = audited[~audited["sample_id"].isin(split.frame["id"])]
    assert trained["role"].value_counts().to_dict() == {"member": 24, "nonmember": 18}
    assert split.calibration["split_by"] == "sample" and split.calibration["n_train"] == 42
    assert set(trained["group_id"]) & set(split.frame["group_id"])  # patients on both sides
    by_patient = by_name(build_learned_attacks(table, features, seed=1)[0], "logistic_split")
    assert set(by_patient.frame["id"]) != set(split.frame["id"])
    one_patient = table[table["group_id"].isin(["member-p0", "nonmember-p0", "population-p0", "population-p1"])]
    rows = table.index.isin(one_patient.index)
    _, skipped = run_attacks([AttackInput("f", one_patient, {FEATURE_VECTORS: features[rows]}, 1)], learned.SPECS[:1])
    assert "fewer than 2 patients or users" in skipped[0].reason
    ran, _ = run_attacks([AttackInput("f", one_patient, {FEATURE_VECTORS: features[rows]}, 1, settings=settings)],
                         learned.SPECS[:1])
    assert ran and ran[0].calibration["n_train"] == 2  # one of each role's 3 samples (0.2 x 3, at least one)
