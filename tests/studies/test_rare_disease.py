"""The rare-disease analysis: the profile probability of Eqs. 4-5 and the buckets' leakage, by hand."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from lmaudit.studies.rare_disease import bucketed_leakage, patient_profiles, profile_log_probabilities
from tests.helpers import typed_result, typed_threshold


def test_profiles_are_the_codes_over_all_of_a_patients_notes():
    notes = pd.DataFrame({"group_id": ["p1", "p1", "p2"], "codes": ["I10;E11.9", "I10;J18.9", "I10"]})
    assert patient_profiles(notes).to_dict() == {"p1": frozenset({"I10", "E11.9", "J18.9"}), "p2": frozenset({"I10"})}


def test_profile_probability_by_hand():
    profiles = pd.Series({"a": frozenset({"x", "y"}), "b": frozenset({"x"}), "c": frozenset({"z"}), "d": frozenset({"x"})})
    # p(x) = 3/4, p(y) = 1/4, p(z) = 1/4 (Eq. 5); Eq. 4 multiplies p over the profile and 1 - p over the other codes
    expected = {"a": 3 / 4 * 1 / 4 * 3 / 4, "b": 3 / 4 * 3 / 4 * 3 / 4, "c": 1 / 4 * 3 / 4 * 1 / 4, "d": 3 / 4 * 3 / 4 * 3 / 4}
    log_probability = profile_log_probabilities(profiles)
    for patient, probability in expected.items():
        assert log_probability[patient] == pytest.approx(math.log(probability))


def test_buckets_drop_small_ones_and_give_tpr_minus_fpr():
    # 30 patients: log p in three clusters; 3 equal-width buckets (one per 10 patients), the middle one of 5 dropped
    log_p = pd.Series(np.r_[np.full(15, -10.0), np.full(5, -6.0), np.full(10, -2.0)], index=[f"p{i}" for i in range(30)])
    member = pd.Series(np.arange(30) % 2 == 0, index=log_p.index)
    called = pd.Series(np.r_[np.ones(15, bool), np.zeros(5, bool), member.to_numpy()[20:]], index=log_p.index)
    rows = bucketed_leakage(log_p, member, called)
    assert [row["patients"] for row in rows] == [15, 10]
    assert rows[0]["leakage"] == 0.0  # everyone called a member: TPR 1, FPR 1
    assert rows[1]["leakage"] == 1.0  # exactly the members called: TPR 1, FPR 0
    assert (rows[0]["members"], rows[0]["nonmembers"]) == (8, 7)
    assert rows[0]["log p from"] == -10.0 and rows[1]["log p to"] == -2.0


def test_the_bucket_figure_is_drawn_only_when_a_bucket_has_a_leakage():
    import base64

    from lmaudit.studies.rare_disease import figure

    bucket = {"mean log p": -3.0, "leakage": 0.2}
    drawn = figure({"analysis": {"loss: buckets": {"bucket 1": bucket, "bucket 2": {**bucket, "mean log p": -1.0}},
                                 "likelihood_ratio: buckets": "not run: no patient-level population threshold"}})
    assert base64.b64decode(drawn).startswith(b"\x89PNG")
    assert figure({"analysis": {"loss: buckets": "no bucket holds 10 audited patients: more patients needed"}}) is None


def test_the_papers_definition_buckets_admissions_at_the_mean_training_loss_threshold():
    """Two clusters of 12 admissions (6 patients of 2 admissions, half of them members; profile log p -10 and -1) in 100
    buckets, so only the first and the last hold any. An admission's score is its notes' mean. Called at the admission-level
    mean-training-loss threshold 0: in the rare cluster 4 of 6 member admissions and 1 of 6 non-member ones (leakage
    0.5), in the common one every admission (leakage 0)."""
    from lmaudit.studies.rare_disease import paper_buckets

    rows = []
    for cluster, member_scores, nonmember_scores in (("rare", [1, 1, 1, 1, -1, -1], [1, -1, -1, -1, -1, -1]),
                                                     ("common", [1] * 6, [1] * 6)):
        for role, scores in (("member", member_scores), ("nonmember", nonmember_scores)):
            for admission, score in enumerate(scores):
                patient = f"{cluster}-{role}-{admission // 2}"
                for note in range(2):  # two notes per admission, scores score +- 0.5: the mean is the score
                    rows.append({"group_id": patient, "subgroup_id": f"{patient}-a{admission % 2}", "role": role,
                                 "score_loss": score + (0.5 if note else -0.5)})
    audited = pd.DataFrame(rows)
    log_p = pd.Series({group: (-10.0 if group.startswith("rare") else -1.0) for group in audited["group_id"]})
    report = SimpleNamespace(results=[typed_result("loss", "loss", "subgroup", 0.7, [typed_threshold("mean_member_loss")])])
    buckets = paper_buckets(report, audited, log_p)
    assert list(buckets) == ["bucket 1", "bucket 2"]
    first, last = buckets.values()
    assert (first["patients"], first["members"], first["nonmembers"]) == (12, 6, 6)
    assert first["leakage"] == pytest.approx(4 / 6 - 1 / 6) and last["leakage"] == 0.0
    assert first["log p from"] == -10.0 and last["log p to"] == -1.0
    no_mu = SimpleNamespace(results=[typed_result("loss", "loss", "subgroup", 0.7)])
    assert paper_buckets(no_mu, audited, log_p).startswith("not run")
