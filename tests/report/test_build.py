"""report.json is built in one place: typed results become strict JSON with the documented keys; the output folder is
written all or nothing."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import AttackScores, Skipped, Threshold
from lmaudit.metrics.evaluate import evaluate_attack
from lmaudit.metrics.settings import EvaluationSettings
from lmaudit.report import build

RESULT_KEYS = ["attack", "signal", "level", "slice", "auc", "auc_ci", "tpr_at_fpr", "thresholds", "balanced",
               "n_members", "n_nonmembers", "n_population"]
THRESHOLD_KEYS = ["rule", "alpha", "value", "tp", "fp", "tn", "fn", "precision", "recall", "fpr", "accuracy", "advantage",
                  "recall_ci", "fpr_ci", "epsilon_lower_bound"]


def scores(with_population: bool) -> AttackScores:
    rng = np.random.default_rng(0)
    roles = ["member"] * 30 + ["nonmember"] * 20 + (["population"] * 40 if with_population else [])
    frame = pd.DataFrame({"id": [f"s{i}" for i in range(len(roles))], "role": roles, "group_id": None,
                          "score": rng.normal(size=len(roles)) + np.r_[np.ones(30), np.zeros(len(roles) - 30)]})
    # A threshold above every score calls no one: precision is undefined (NaN), and an infinite one has no value.
    return AttackScores(frame, [Threshold("mean_member_loss", 99.0), Threshold("never", math.inf)], {"fitted": [1, 2]},
                        attack="loss", signal="mlm_energy", level="sample")


def record_of(with_population: bool) -> dict:
    results, _ = evaluate_attack(scores(with_population), EvaluationSettings(bootstrap=20))
    return build.json_ready(results[0])


def test_result_records_have_the_documented_keys_and_strict_json_values():
    record = record_of(with_population=True)
    assert list(record) == [*RESULT_KEYS, "calibration", "unavailable"]
    assert record["calibration"] == {"fitted": [1, 2]}
    assert record["auc_ci"] == list(record["auc_ci"]) and len(record["auc_ci"]) == 2
    rules = [(t["rule"], t["alpha"]) for t in record["thresholds"]]
    # 40 population samples calibrate a 10% threshold (4 may be above it) but not a 1% one, and the report says why.
    assert rules == [("mean_member_loss", None), ("never", None), ("population", 0.1)]
    assert record["unavailable"] == {"population_threshold_0.01": "the population has 40 samples; a 1% threshold needs "
                                                                  "at least 100"}
    called_no_one = record["thresholds"][0]
    assert called_no_one["precision"] is None and called_no_one["recall"] == 0.0
    assert called_no_one["unavailable"] == {"precision": "no audited unit scores at or above the threshold, so precision "
                                                         "(TP / called) is undefined"}
    for threshold in record["thresholds"]:
        blank = ["unavailable"] if threshold["precision"] is None else []
        assert list(threshold) == [*THRESHOLD_KEYS, "population_fpr", *blank]
    assert record["thresholds"][1]["value"] is None  # +inf
    json.dumps(record, allow_nan=False)


def test_fields_that_do_not_apply_are_left_out():
    record = record_of(with_population=False)
    assert [list(t) for t in record["thresholds"]] == [[*THRESHOLD_KEYS, "unavailable"], [*THRESHOLD_KEYS, "unavailable"]]
    plain = AttackScores(scores(False).frame, attack="loss", signal="x", level="sample")
    results, _ = evaluate_attack(plain, EvaluationSettings(bootstrap=20))
    assert "calibration" not in build.json_ready(results[0])


def test_skipped_records():
    assert build.json_ready([Skipped("likelihood_ratio", "sample", "no reference")]) == [
        {"attack": "likelihood_ratio", "level": "sample", "reason": "no reference", "signal": None, "slice": "all"}]


def small_report() -> dict:
    """A whole report.json document: one attack evaluated on 30 members, 20 non-members and 40 population samples."""
    results, _ = evaluate_attack(scores(with_population=True), EvaluationSettings(bootstrap=20))
    facts = build.AuditFacts({"out": "x"}, build.environment_info(), {"sample": "sample"})
    data = {"counts": {"member": 30, "nonmember": 20, "population": 40}, "groups": {}, "truncated": 0}
    return build.build_report(facts, data, results, [Skipped("min_k", "sample", "no token values")], [], 1e-5)


def test_failed_report_leaves_nothing_half_written(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("disk full while plotting")

    monkeypatch.setattr(build, "render_html", broken)
    with pytest.raises(RuntimeError):
        build.write_report(tmp_path, small_report(), pd.DataFrame({"a": [1]}), [])
    assert list(tmp_path.iterdir()) == []

    def broken_parquet(self, path, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(build, "render_html", lambda report, attacks, highlighted=None: "<html></html>")
    monkeypatch.setattr(pd.DataFrame, "to_parquet", broken_parquet)
    with pytest.raises(OSError):
        build.write_report(tmp_path, small_report(), pd.DataFrame({"a": [1]}), [])
    assert list(tmp_path.iterdir()) == []


def test_a_population_warning_says_why_an_attack_counts_fewer_population_samples_than_the_data():
    """logistic_calibration trains on half of the population: the warning that its other half is too small to
    calibrate says so, so that its count is not read against the header's whole population."""
    from dataclasses import replace

    from lmaudit.report.checks import population_warnings
    from tests.helpers import typed_result

    def result(attack, n, calibration=None):
        return replace(typed_result(attack, "loss", "sample", 0.6), n_population=n, calibration=calibration,
                       unavailable={"population_threshold_0.01": f"the population has {n} samples; a 1% threshold "
                                                                 "needs at least 100"})

    [warning] = population_warnings([result("loss", 60), result("logistic_calibration", 30, {
        "trained_on": "calibration members and half of the population"})], {})
    assert ("the population has 30 samples; a 1% threshold needs at least 100 (logistic_calibration, which trains on "
            "half of the population and calibrates on the other half)") in warning
    assert "the population has 60 samples; a 1% threshold needs at least 100 (loss)" in warning


def test_the_report_names_the_dataset_inference_sets_and_rule_unless_it_could_not_run():
    """metrics/ gives the test's numbers; the report words them: which set is the suspect, which the validation, and
    the decision rule; a section that says why it could not run is left as it is."""
    from lmaudit.report.verdict import DATASET_INFERENCE_RULE

    results, _ = evaluate_attack(scores(with_population=True), EvaluationSettings(bootstrap=20))
    facts = build.AuditFacts({"out": "x"}, build.environment_info(), {"sample": "sample"})
    data = {"counts": {"member": 30, "nonmember": 20, "population": 40}, "groups": {}, "truncated": 0}
    ran = build.build_report(facts, data, results, [], [], 1e-5, sections={"dataset_inference": {"p_value": 0.2}})
    assert ran["dataset_inference"] == {"suspect": "the audited members", "validation": "the verdict's non-members",
                                        "p_value": 0.2, "rule": DATASET_INFERENCE_RULE}
    why = {"unavailable": "too few patients"}
    assert build.build_report(facts, data, results, [], [], 1e-5, sections={"dataset_inference": why})[
        "dataset_inference"] == why
