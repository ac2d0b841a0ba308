"""Several non-member sets: every result is also reported against each set (all members, that set's non-members, the one
population), and the main results audit the first set only, at every level."""

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from lmaudit.attacks.base import AttackScores, aggregated_attack
from lmaudit.attacks.thresholds import population_threshold
from lmaudit.metrics.evaluate import evaluate_attack
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.metrics.slices import NONMEMBER_SLICE, nonmember_sets, sample_slices


@pytest.fixture
def samples():
    """12 member, 9 set-a, 6 set-b and 12 population samples; three per patient; set b scores low (easy to tell)."""
    rng = np.random.default_rng(3)
    roles = ["member"] * 12 + ["nonmember"] * 15 + ["population"] * 12
    sets = [None] * 12 + ["a"] * 9 + ["b"] * 6 + [None] * 12
    frame = pd.DataFrame({"sample_id": [f"s{i}" for i in range(39)], "role": roles, "nonmember_set": sets,
                          "group_id": [f"p{i // 3}" for i in range(39)], "subgroup_id": None,
                          "length": rng.integers(5, 50, 39)})
    frame["score"] = rng.normal(size=39) + np.where(frame["nonmember_set"] == "b", -1.5, 0.0)
    return frame


def attack_of(samples: pd.DataFrame) -> AttackScores:
    frame = samples.rename(columns={"sample_id": "id"})[["id", "role", "group_id", "subgroup_id", "score"]]
    return AttackScores(frame, attack="loss", signal="x", level="sample")


def expected_auc(samples: pd.DataFrame, set_name: str) -> float:
    audited = samples[(samples["role"] == "member") | (samples["nonmember_set"] == set_name)]
    return roc_auc_score(audited["role"] == "member", audited["score"])


def test_sets_are_read_in_the_order_given_for_every_level(samples):
    sets = nonmember_sets(samples)
    assert sets.names == ("a", "b")
    assert sets.by_level["sample"].to_dict() == {f"s{i}": "a" if i < 21 else "b" for i in range(12, 27)}
    assert sets.by_level["group"].to_dict() == {f"p{i}": "a" if i < 7 else "b" for i in range(4, 9)}
    assert nonmember_sets(samples.assign(nonmember_set=samples["nonmember_set"].replace("b", "a"))) is None
    assert nonmember_sets(samples.drop(columns="nonmember_set")) is None


def test_all_audits_the_first_set_and_each_set_has_its_own_result(samples):
    settings = EvaluationSettings(bootstrap=20, length_slices=2)
    results, skipped = evaluate_attack(attack_of(samples), settings, sample_slices(samples, settings),
                                       sets=nonmember_sets(samples))
    by_slice = {r.slice: r for r in results}
    assert skipped == [] and list(by_slice)[0] == "all" and list(by_slice)[-2:] == ["nonmembers:a", "nonmembers:b"]
    assert by_slice["all"].auc == pytest.approx(expected_auc(samples, "a"))
    assert (by_slice["all"].n_members, by_slice["all"].n_nonmembers) == (12, 9)
    for name, n_nonmembers in (("a", 9), ("b", 6)):
        result = by_slice[NONMEMBER_SLICE + name]
        assert result.auc == pytest.approx(expected_auc(samples, name))
        assert (result.n_members, result.n_nonmembers, result.n_population) == (12, n_nonmembers, 12)
        # Every set is judged by the same population threshold.
        population = samples.loc[samples["role"] == "population", "score"].to_numpy()
        assert result.thresholds[0].value == population_threshold(population, 0.1)
    assert by_slice["nonmembers:b"].auc > by_slice["nonmembers:a"].auc  # set b was made easy to tell apart
    # The length slices hold the first set's non-members only, in the bins an audit of the first set alone draws.
    lengths = [r for r in results if r.slice.startswith("length:")]
    assert sum(r.n_nonmembers for r in lengths) == 9 and sum(r.n_members for r in lengths) == 12
    first_only = samples[samples["nonmember_set"] != "b"]
    assert sample_slices(samples, settings).loc[first_only["sample_id"]].equals(sample_slices(first_only, settings))


def test_patient_level_results_are_per_set_too(samples):
    groups = aggregated_attack(attack_of(samples), "group")
    results, _ = evaluate_attack(groups, EvaluationSettings(bootstrap=20), sets=nonmember_sets(samples))
    by_slice = {r.slice: r for r in results}
    assert list(by_slice) == ["all", "nonmembers:a", "nonmembers:b"]
    assert [by_slice[name].n_nonmembers for name in by_slice] == [3, 3, 2]
    patients = samples.groupby("group_id").agg(role=("role", "first"), nonmember_set=("nonmember_set", "first"),
                                                score=("score", "mean"))
    assert by_slice["nonmembers:b"].auc == pytest.approx(expected_auc(patients, "b"))


def test_a_scores_file_with_a_nonmember_set_column_is_reported_per_set(samples, tmp_path):
    """`lmaudit attack` reads the column as scores.parquet writes it; set names on other roles are ignored."""
    import json

    from tests.helpers import invoke

    table = samples.assign(target_loss=-samples["score"]).drop(columns=["score", "subgroup_id"])
    table.loc[0, "nonmember_set"] = "b"  # a member: not a non-member of any set
    table.to_csv(tmp_path / "scores.csv", index=False)
    output = invoke("attack", "--scores", tmp_path / "scores.csv", "--out", tmp_path / "out", "--bootstrap", 20)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["data"]["nonmember_sets"] == {"a": 9, "b": 6}
    loss = {r["slice"]: r for r in report["results"] if r["attack"] == "loss" and r["level"] == "sample"}
    assert loss["all"]["auc"] == pytest.approx(expected_auc(samples, "a"))
    assert loss["nonmembers:b"]["auc"] == pytest.approx(expected_auc(samples, "b"))
    assert "AUC per non-member set (the results above audit the first, a):" in output
