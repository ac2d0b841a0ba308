"""The loss and likelihood-ratio attacks: scores, aggregation over admissions and patients, the mu threshold,
target/reference pairing in balanced runs, thresholds that never read audited membership."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import REFERENCE_LOSSES, TARGET_LOSS, Skipped, aggregate_by_group
from lmaudit.attacks.likelihood_ratio import likelihood_ratio_score
from lmaudit.attacks.loss import loss_score
from lmaudit.attacks.registry import attacks_reading, run_attacks
from lmaudit.metrics.evaluate import evaluate_attack
from lmaudit.metrics.settings import EvaluationSettings
from tests.helpers import audited_auc, loss_input, scores_of


def build_attacks(table, signal="mlm_energy"):
    return run_attacks([loss_input(table, signal)])


def signals_table(n=40, seed=0):
    """Members have a target loss 1 nat lower than their reference loss; difficulty varies widely."""
    rng = np.random.default_rng(seed)
    rows = []
    for role, count in (("member", n), ("nonmember", n // 2), ("population", n), ("calibration_member", 10)):
        difficulty = rng.uniform(1, 8, count)
        gap = 1.0 if role in ("member", "calibration_member") else 0.0
        for i in range(count):
            rows.append({"sample_id": f"{role}-{i}", "role": role, "group_id": f"{role}-g{i // 4}",
                         "length": 25, "reference": difficulty[i], "target": difficulty[i] - gap})
    return pd.DataFrame(rows)


def test_loss_and_ratio_scores_point_towards_members():
    assert loss_score(np.array([1.0]))[0] > loss_score(np.array([2.0]))[0]
    # Same reference energy: the lower target energy (member-like) gets the higher score.
    assert likelihood_ratio_score(np.array([1.0]), np.array([3.0]))[0] > likelihood_ratio_score(np.array([2.5]), np.array([3.0]))[0]


def test_likelihood_ratio_explains_away_difficulty():
    attacks, _ = build_attacks(signals_table())
    assert audited_auc(scores_of(attacks, "likelihood_ratio").frame) == 1.0
    assert audited_auc(scores_of(attacks, "loss").frame) < 0.8  # difficulty varies 7 nats, membership moves 1


def test_balanced_evaluation_keeps_target_and_reference_together():
    """Perfect paired separation must stay perfect in every balanced subset (the released script's bug breaks it)."""
    attacks, _ = build_attacks(signals_table(n=60))
    results, _ = evaluate_attack(scores_of(attacks, "likelihood_ratio"), EvaluationSettings(bootstrap=20))
    overall = next(r for r in results if r.slice == "all")
    assert overall.balanced.repeats == 10 and overall.balanced.size_per_side == 30
    assert overall.balanced.auc_mean == 1.0 and overall.balanced.auc_std == 0.0


def test_group_scores_are_group_means():
    series = aggregate_by_group(np.array([1.0, 3.0, 10.0]), np.array(["a", "a", "b"]))
    assert series.to_dict() == {"a": 2.0, "b": 10.0}


def test_mean_member_loss_threshold_comes_from_calibration_members_only():
    table = signals_table()
    attacks, _ = build_attacks(table)
    mu = scores_of(attacks, "loss").fixed_thresholds[0]
    expected = -table.loc[table["role"] == "calibration_member", "target"].mean()
    assert mu.rule == "mean_member_loss" and mu.value == pytest.approx(expected)


def test_population_thresholds_ignore_audited_membership():
    """Shuffling the audited samples' roles leaves every calibrated threshold unchanged."""
    table = signals_table()
    shuffled = table.copy()
    audited = shuffled["role"].isin(["member", "nonmember"])
    shuffled.loc[audited, "role"] = np.random.default_rng(3).permutation(shuffled.loc[audited, "role"].to_numpy())
    for data in (table, shuffled):
        attacks, _ = build_attacks(data)
        results, _ = evaluate_attack(scores_of(attacks, "likelihood_ratio"), EvaluationSettings(bootstrap=20))
        data.attrs["thresholds"] = [t.value for t in results[0].thresholds]
    assert table.attrs["thresholds"] == shuffled.attrs["thresholds"]


def test_group_level_needs_group_ids():
    table = signals_table()
    table.loc[table["role"] == "member", "group_id"] = None
    attacks, skipped = build_attacks(table)
    assert {a.level for a in attacks} == {"sample"}
    assert {s for s in skipped if s.attack == "*"} == {Skipped("*", "group", "audited samples without group_id"),
                            Skipped("*", "subgroup", "audited samples without subgroup_id")}


def test_subgroup_and_group_scores_are_means_over_hand_made_groups():
    """Admissions (subgroups) nest in patients (groups); each level scores the mean of its samples."""
    table = pd.DataFrame({
        "sample_id": ["a", "b", "c", "d", "e", "f", "g", "h"],
        "role": ["member"] * 4 + ["nonmember"] * 4,
        "group_id": ["p1", "p1", "p1", "p2", "p3", "p3", "p4", "p4"],
        "subgroup_id": ["p1-a1", "p1-a1", "p1-a2", "p2-a1", "p3-a1", "p3-a1", "p4-a1", "p4-a2"],
        "length": 25, "target": [1.0, 3.0, 5.0, 2.0, 4.0, 6.0, 7.0, 9.0],
    })
    attacks, _ = build_attacks(table, "clm_loss")
    subgroup = scores_of(attacks, "loss", "subgroup").frame.set_index("id")["score"].to_dict()
    group = scores_of(attacks, "loss", "group").frame.set_index("id")["score"].to_dict()
    assert subgroup == {"p1-a1": -2.0, "p1-a2": -5.0, "p2-a1": -2.0, "p3-a1": -5.0, "p4-a1": -7.0, "p4-a2": -9.0}
    assert group == {"p1": -3.0, "p2": -2.0, "p3": -5.0, "p4": -8.0}


def test_likelihood_ratio_without_a_reference_is_skipped_with_the_reason():
    """Without a reference, the attacks that read the target's loss alone run (loss among them) and every attack that
    reads a reference is skipped, saying why."""
    attacks, skipped = build_attacks(signals_table().drop(columns="reference"))
    target_only = {spec.name for spec in attacks_reading(TARGET_LOSS) if spec.reads == (TARGET_LOSS,)}
    assert "loss" in target_only and {a.attack for a in attacks} == target_only
    for spec in attacks_reading(TARGET_LOSS):
        if REFERENCE_LOSSES in spec.reads:
            assert Skipped(spec.name, "sample", "no reference-model signal (give --reference)", "mlm_energy") in skipped
