"""report.json's validity section: the blind baseline per non-member set and level, computed as the blind scores,
their group means and the AUC say; a shift flagged only where the interval leaves 0.5; each level's lift read off the
verdict's strongest attack."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from lmaudit.metrics.blind import blind_scores, group_means
from lmaudit.metrics.roc import auc
from lmaudit.metrics.validity import blind_validity
from lmaudit.report.document import RankedAttack
from lmaudit.report.validity import ranking_with_lift, shift_caveats, with_lift

WORDS = "patient admitted with chest pain fever cough stable discharged home follow up clinic blood pressure".split()


@pytest.fixture(scope="module")
def audited():
    """Members, same-site non-members and other-site non-members (whose notes name their site), 4 notes a patient."""
    rng = np.random.default_rng(0)
    rows = []
    for role, nonmember_set, site, patients in (("member", None, "", 40), ("nonmember", "same", "", 40),
                                                ("nonmember", "other", " seen at st mary's", 40)):
        for patient in range(patients):
            for note in range(4):
                rows.append({"sample_id": f"{nonmember_set}-{patient}-{note}", "role": role,
                             "group_id": f"{nonmember_set}-{patient}", "subgroup_id": None,
                             "nonmember_set": nonmember_set, "text": " ".join(rng.choice(WORDS, 12)) + site})
    samples = pd.DataFrame(rows)
    return samples, samples.set_index("sample_id")["text"]


def test_each_set_and_level_is_the_blind_scores_their_group_means_and_their_auc(audited):
    samples, texts = audited
    validity = blind_validity(samples.drop(columns="text"), texts, bootstrap=200, seed=1)
    assert list(validity["sets"]) == ["same", "other"]  # the order given: the first is the verdict's
    rows = samples[(samples["role"] == "member") | (samples["nonmember_set"] == "other")].reset_index(drop=True)
    labels = (rows["role"] == "member").to_numpy()
    scores = blind_scores(rows["text"].tolist(), labels, rows["group_id"].to_numpy(), seed=1)
    other = validity["sets"]["other"]["levels"]
    assert other["sample"]["auc"] == pytest.approx(auc(labels, scores))
    means = group_means(scores, rows["group_id"])
    patient_labels = rows.groupby("group_id")["role"].first().loc[means.index] == "member"
    assert other["group"]["auc"] == pytest.approx(auc(patient_labels.to_numpy(), means.to_numpy()))
    assert "subgroup" not in other  # no admission ids: no admission level
    assert other["sample"]["texts_separate"] and not validity["sets"]["same"]["levels"]["sample"]["texts_separate"]
    assert validity["sets"]["other"]["member_words_withheld"] == 5 and "member_words" not in validity["sets"]["other"]
    listed = blind_validity(samples.drop(columns="text"), texts, bootstrap=50, seed=1, include_text=True)
    assert not any("mary" in word for word in listed["sets"]["other"]["member_words"])  # the site says non-member


def test_a_shift_is_a_caveat_with_the_lift_of_the_verdicts_strongest_attack(audited):
    samples, texts = audited
    # the verdict's set first: the other site
    ordered = pd.concat([samples[samples["nonmember_set"] != "same"], samples[samples["nonmember_set"] == "same"]])
    validity = blind_validity(ordered.drop(columns="text"), texts, bootstrap=200)
    def ranked(attack: str, auc: float) -> RankedAttack:
        return RankedAttack(attack=attack, signal="mlm_energy", auc=auc, auc_ci=(auc - 0.1, auc + 0.1), tpr_at_fpr={},
                            n_members=10, n_nonmembers=10, description="", paper="", access="")

    ranking = {"sample": [ranked("loss", 0.9), ranked("zlib", 0.6)]}
    validity = with_lift(validity, ranking)
    sample = validity["sets"]["other"]["levels"]["sample"]
    assert sample["lift"] == pytest.approx(0.9 - sample["auc"]) and sample["strongest_attack"] == "loss on mlm_energy"
    assert "lift" not in validity["sets"]["same"]["levels"]["sample"]  # only the verdict's set
    rows = ranking_with_lift(ranking, validity)["sample"]  # every row, against the verdict's set
    assert [row.lift_over_blind for row in rows] == pytest.approx([0.9 - sample["auc"], 0.6 - sample["auc"]])
    [caveat], elsewhere = shift_caveats(validity, {"sample": "note", "group": "patient"})
    assert "the other non-members" in caveat and "goes" in caveat and "same" not in caveat.split(":")[0]
    assert "how the data was collected" in caveat and elsewhere == []  # the verdict's own set: it bears on the verdict
    swapped = blind_validity(pd.concat([ordered[ordered["nonmember_set"] != "other"],
                                        ordered[ordered["nonmember_set"] == "other"]]).drop(columns="text"), texts,
                             bootstrap=200)
    verdicts, [other] = shift_caveats(swapped, {"sample": "note"})
    assert verdicts == [] and "the other non-members" in other and "does not change it" in other


def test_too_few_groups_is_a_reason_not_an_error(audited):
    samples, texts = audited
    few = samples[samples["group_id"].isin(["None-0", "None-1", "same-0", "same-1", "same-2"])]
    validity = blind_validity(few.drop(columns="text"), texts, bootstrap=50)
    assert "at least 5 member groups" in validity["sets"]["same"]["unavailable"]


def test_identical_texts_separate_nothing_and_a_single_group_is_a_reason(audited):
    """All texts the same: every blind classifier ties, the AUC is 0.5 and nothing is flagged; one member patient: the
    reason, not an error."""
    samples, texts = audited
    same_text = texts.copy()
    same_text[:] = "patient admitted with chest pain"
    validity = blind_validity(samples.drop(columns="text"), same_text, bootstrap=50)
    for entry in validity["sets"].values():
        for level in entry["levels"].values():
            assert level["auc"] == 0.5 and not level["texts_separate"]
    one = samples[(samples["role"] != "member") | (samples["group_id"] == "None-0")]
    assert "at least 5 member groups" in blind_validity(one.drop(columns="text"), texts, bootstrap=50)["sets"]["same"][
        "unavailable"]
