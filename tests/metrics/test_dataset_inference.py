"""Dataset inference (Maini et al. 2024) as lmaudit runs it: equal to a slow, step-by-step reference on the same halves;
uniform p-values under the null, also when a person's samples are correlated (the halves and the t-test are by group);
power where the suspect set was trained on; one-line errors for too few units or no usable score."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kstest
from scipy.stats import t as student_t

from lmaudit.attacks.base import AttackScores
from lmaudit.errors import InputError
from lmaudit.metrics.dataset_inference import (
    CLIP_FRACTION,
    attack_features,
    dataset_inference,
    members_against_nonmembers,
)


def clustered(groups_per_side: int, samples_per_group: int, shift: float, seed: int):
    """Three features per sample, each a group effect (shared by a person's samples) plus noise; suspect groups'
    first two features moved by `shift` in opposite directions (the learnt weights must find each direction)."""
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(2 * groups_per_side), samples_per_group)
    is_suspect = groups < groups_per_side
    effect = rng.normal(size=(2 * groups_per_side, 3))[groups]
    values = effect + rng.normal(size=(len(groups), 3)) + shift * is_suspect[:, None] * np.array([1.0, -1.0, 0.0])
    return pd.DataFrame(values, columns=["loss", "zlib", "min_k"]), is_suspect, groups


def reference_p_value(features: pd.DataFrame, is_suspect: np.ndarray, groups: np.ndarray, seed: int) -> float:
    """The procedure spelt out: the same halves (one permutation of each side's groups, suspect first), per-feature
    clipping and standardising on the learning rows, a logistic regression, group means, Student's t by its formula."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(seed)
    learn_groups, test_groups = [], []
    for side in (True, False):
        order = rng.permutation(np.unique(groups[is_suspect == side]))
        learn_groups += list(order[: len(order) // 2])
        test_groups += list(order[len(order) // 2:])
    learn, test = np.isin(groups, learn_groups), np.isin(groups, test_groups)
    columns = []
    for name in features.columns:
        column = features[name].to_numpy()
        low, high = np.quantile(column[learn], CLIP_FRACTION), np.quantile(column[learn], 1 - CLIP_FRACTION)
        clipped = np.clip(column, low, high)
        columns.append((clipped - clipped[learn].mean()) / clipped[learn].std())
    x = np.column_stack(columns)
    model = LogisticRegression(max_iter=1000).fit(x[learn], is_suspect[learn])
    score = model.decision_function(x)
    means = {g: score[groups == g].mean() for g in test_groups}
    suspect = np.array([means[g] for g in test_groups if is_suspect[groups == g][0]])
    validation = np.array([means[g] for g in test_groups if not is_suspect[groups == g][0]])
    n1, n2 = len(suspect), len(validation)
    pooled = ((n1 - 1) * suspect.var(ddof=1) + (n2 - 1) * validation.var(ddof=1)) / (n1 + n2 - 2)
    statistic = (suspect.mean() - validation.mean()) / np.sqrt(pooled * (1 / n1 + 1 / n2))
    return float(student_t.sf(statistic, n1 + n2 - 2))


def test_equal_to_the_step_by_step_reference_on_the_same_halves():
    features, is_suspect, groups = clustered(30, 4, shift=0.3, seed=1)
    result = dataset_inference(features, is_suspect, groups, unit="patient", seed=5)
    assert result.p_value == pytest.approx(reference_p_value(features, is_suspect, groups, seed=5), rel=1e-9)
    assert result.n_learn == {"suspect": 15, "validation": 15} and result.n_test == {"suspect": 15, "validation": 15}
    assert result.unit == "patient" and result.features == ["loss", "zlib", "min_k"]
    assert result.weights[0] > 0 > result.weights[1]  # each feature's direction learnt


def test_p_values_are_uniform_under_the_null_even_with_correlated_samples():
    """Two random halves of one population, 100 times: Kolmogorov-Smirnov against uniform p > 0.05 and at most 7 of
    100 below 0.05. Ignoring the groups (a t-test over samples) rejects far more often on the same data."""
    grouped, by_sample = [], []
    for seed in range(100):
        features, is_suspect, groups = clustered(20, 5, shift=0.0, seed=seed)
        grouped.append(dataset_inference(features, is_suspect, groups, seed=seed).p_value)
        by_sample.append(dataset_inference(features, is_suspect, None, seed=seed).p_value)
    grouped = np.array(grouped)
    assert kstest(grouped, "uniform").pvalue > 0.05
    assert (grouped < 0.05).sum() <= 7
    assert (np.array(by_sample) < 0.05).sum() > 15


def test_a_trained_on_suspect_set_is_found_and_the_sizes_say_how_many_units_it_takes():
    features, is_suspect, groups = clustered(60, 3, shift=1.0, seed=2)
    result = dataset_inference(features, is_suspect, groups, seed=0)
    assert result.p_value < 0.01 and result.decisions == {"p<0.1": True, "p<0.01": True}
    sizes = list(result.p_value_by_size)
    assert sizes == [2, 5, 10, 20] and result.p_value_by_size[20] < result.p_value_by_size[2]
    needed = result.minimum_needed
    assert needed["p<0.1"] is not None and needed["p<0.01"] is not None and needed["p<0.1"] <= needed["p<0.01"]
    assert result.p_value_by_size[needed["p<0.01"]] < 0.01


def test_too_few_units_or_no_usable_score_is_a_one_line_error():
    features, is_suspect, groups = clustered(3, 4, shift=1.0, seed=0)
    with pytest.raises(InputError, match="at least 4 suspect patients .* there are 3"):
        dataset_inference(features, is_suspect, groups, unit="patient")
    features, is_suspect, groups = clustered(10, 2, shift=1.0, seed=0)
    with pytest.raises(InputError, match="no membership score varies"):
        dataset_inference(features * 0.0, is_suspect, groups)
    with pytest.raises(InputError, match="no attack gave any"):
        dataset_inference(features[[]], is_suspect, groups)


def test_features_leave_out_attacks_fitted_on_the_audited_labels_and_scores_missing_somewhere():
    frame = pd.DataFrame({"id": ["a", "b", "c", "d"], "role": ["member", "member", "nonmember", "nonmember"],
                          "score": [0.9, 0.8, 0.2, 0.1]})
    attacks = [AttackScores(frame, attack="loss", signal="mlm_energy", level="sample"),
               AttackScores(frame, attack="logistic_split", signal="gradient_norms", level="sample"),
               AttackScores(frame.assign(score=[0.5, np.nan, 0.1, 0.2]), attack="zlib", signal="mlm_tokens", level="sample"),
               AttackScores(frame, attack="loss", signal="mlm_energy", level="group")]
    assert list(attack_features(attacks).columns) == ["loss on mlm_energy"]


def test_members_against_the_first_nonmember_set_only():
    features, is_suspect, groups = clustered(12, 2, shift=1.0, seed=3)
    ids = [f"s{i}" for i in range(len(groups))]
    samples = pd.DataFrame({"sample_id": ids, "role": np.where(is_suspect, "member", "nonmember"),
                            "group_id": [f"p{g}" for g in groups],
                            "nonmember_set": np.where(is_suspect, None, np.where(groups % 2 == 0, "near", "far"))})
    attacks = [AttackScores(pd.DataFrame({"id": ids, "role": samples["role"], "score": features[name]}),
                            attack=attack, signal="x", level="sample")
               for name, attack in (("loss", "loss"), ("zlib", "zlib"))]
    result = members_against_nonmembers(samples, attacks, unit="patient")
    assert result.unit == "patient" and result.n_learn["suspect"] + result.n_test["suspect"] == 12
    assert result.n_learn["validation"] + result.n_test["validation"] == 6  # the 'near' set's patients only


def test_a_sample_without_a_group_id_is_left_out_and_every_patient_kept_whole():
    """Where some samples have no group id, they are left out and counted: as groups of their own they could carry
    their patient into both halves (before, one missing id dropped all groups and halves split patients, p < 0.01 in
    67% of null runs)."""
    features, is_suspect, groups = clustered(12, 3, shift=0.0, seed=4)
    ids = [f"s{i}" for i in range(len(groups))]
    samples = pd.DataFrame({"sample_id": ids, "role": np.where(is_suspect, "member", "nonmember"),
                            "group_id": [f"p{g}" for g in groups]})
    samples.loc[0, "group_id"] = None
    attacks = [AttackScores(pd.DataFrame({"id": ids, "role": samples["role"], "score": features["loss"]}),
                            attack="loss", signal="x", level="sample")]
    result = members_against_nonmembers(samples, attacks, unit="patient")
    assert result.unit == "patient" and result.excluded == 1
    assert sum(result.n_learn.values()) + sum(result.n_test.values()) == len(set(groups))  # sample 0's patient kept
    assert members_against_nonmembers(samples.fillna("p0"), attacks, unit="patient").excluded == 0
