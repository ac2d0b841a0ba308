"""The note-inference task (the MedNLI analogue of the dp study's utility): facts read from a note, one hypothesis of
each label per premise, and labels that the hypothesis alone does not give away."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.data.note_inference import SEPARATOR, note_facts, note_inference_pairs, reported_values
from lmaudit.data.synth import generate_notes


def test_facts_are_the_values_and_doses_a_note_reports():
    text = ("Labs on admission: Na 137, K 4.6, HbA1c 11.8%. Started sodium bicarbonate 650 mg PO BID, held "
            "lisinopril 10 mg IV qHS for Cr 1.8. Na 140 later. BP 120/80.")
    assert note_facts(text) == {"Na": "137", "K": "4.6", "HbA1c": "11.8%", "sodium bicarbonate": "650 mg PO",
                                "lisinopril": "10 mg IV", "Cr": "1.8"}
    assert note_facts("Continue all home medications.") == {}
    assert reported_values("Na 137. Later Na 131.") == {"Na": ["137", "131"]}


def test_a_contradiction_avoids_every_value_the_note_gives_its_name():
    """A note that reports Na twice: its contradiction is neither value, though both are in the pool."""
    notes = pd.DataFrame({"text": ["Na 137. Later Na 131.", "Na 140.", "K 4.1.", "K 3.9."],
                          "group_id": ["a", "b", "c", "d"]})
    for seed in range(20):
        pairs = note_inference_pairs(notes, seed)
        first = pairs[pairs["text"].str.endswith("Later Na 131.")]
        contradiction = first.loc[first["label"] == "contradiction", "text"].str.split(SEPARATOR, regex=False).str[0]
        assert contradiction.tolist() == ["Na was 140."]


@pytest.fixture(scope="module")
def pairs():
    return note_inference_pairs(generate_notes(120, seed=3), seed=0)


def test_every_premise_has_one_hypothesis_of_each_label_that_reads_it_right(pairs):
    split = pairs["text"].str.split(SEPARATOR, regex=False)
    hypothesis, premise = split.str[0], split.str[1]
    assert len(pairs) % 3 == 0 and (pairs["label"].to_numpy().reshape(-1, 3) ==
                                    np.array(["entailment", "contradiction", "neutral"])).all()
    assert (premise.to_numpy().reshape(-1, 3) == premise.to_numpy()[::3, None]).all()
    for claim, note, label in zip(hypothesis, premise, pairs["label"], strict=True):
        name, value = claim.removesuffix(".").split(" was ")
        values = reported_values(note)
        expected = {"entailment": values.get(name, [None])[0] == value,
                    "contradiction": name in values and value not in values[name],
                    "neutral": name not in values and name not in note.split()}
        assert expected[label], (claim, note, label)


def test_the_hypothesis_alone_is_near_chance(pairs):
    """A bag of words on the hypothesis alone, trained on some patients and tested on others, stays near chance (1/3):
    the labels need the premise. (Measured 0.279 here; 0.45 leaves room for another seed, not for a leak.)"""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    test = pairs["group_id"].factorize()[0] % 4 == 0  # a quarter of the patients
    hypotheses = pairs["text"].str.split(SEPARATOR, regex=False).str[0]
    words = CountVectorizer(token_pattern=r"\S+").fit(hypotheses[~test])
    model = LogisticRegression(max_iter=2000).fit(words.transform(hypotheses[~test]), pairs["label"][~test])
    assert model.score(words.transform(hypotheses[test]), pairs["label"][test]) < 0.45
