"""Localisation end to end: a tiny causal audit with a reference and a declared field writes report.json's
`localisation` section (numbers and class names only) and the page's table, and without --include-text no member-only
word or word pair anywhere in the output folder; with it, the page shows each member text with its top spans marked."""

import json

import numpy as np
import pandas as pd
import pytest

from lmaudit.data.token_classes import WORD_CLASSES
from tests.families import save_family_model
from tests.helpers import assert_document_round_trips, invoke, member_only_terms, terms_written

FIELD = r"dose=(\d+(?:\.\d+)? mg)"


def planted_name(index: int) -> str:
    """A made-up surname, one per member text, found in no other text (letters only, so a word of its own)."""
    return "Zyq" + "".join("abcdefghij"[int(digit)] for digit in f"{index:02d}") + "ton"


@pytest.fixture(scope="module")
def setup(notes, tiny_tokenizer, tmp_path_factory):
    """A random tiny GPT-2 target and reference, and members, non-members and population by patient."""
    folder = tmp_path_factory.mktemp("localisation")
    target = save_family_model("gpt2", "clm", tiny_tokenizer, folder / "target", seed=0)
    reference = save_family_model("gpt2", "clm", tiny_tokenizer, folder / "reference", seed=1)
    patients = sorted(notes["group_id"].unique())
    parts = {"members": patients[:4], "nonmembers": patients[4:8], "population": patients[8:12]}
    for name, group in parts.items():
        chosen = notes[notes["group_id"].isin(group)].groupby("group_id").head(4).reset_index(drop=True)
        if name == "members":  # each member text names its own made-up patient: what must never be written
            chosen["text"] = [f"Seen by Dr {planted_name(i)}. {text}" for i, text in enumerate(chosen["text"])]
        chosen.to_csv(folder / f"{name}.csv", index=False)
    return folder, target, reference


def audit(setup, out: str, *extra) -> dict:
    folder, target, reference = setup
    invoke("audit", "--target", target, "--reference", reference, "--members", folder / "members.csv",
           "--nonmembers", folder / "nonmembers.csv", "--population", folder / "population.csv", "--out", folder / out,
           "--cache-dir", folder / "store", "--signal", "clm_tokens", "--max-length", 64, "--bootstrap", 20,
           "--permutations", 100, "--no-lowercase", "--recall-prefix", 0, "--no-figures", "--field", FIELD, *extra)
    return json.loads((folder / out / "report.json").read_text())


def test_the_section_holds_numbers_and_class_names_and_no_training_text(setup):
    report = audit(setup, "plain")
    folder = setup[0]
    assert_document_round_trips(folder / "plain" / "report.json")
    section = report["localisation"]
    assert section["statistic"] == "gain" and section["compared_with"] == "population"
    assert [entry["name"] for entry in section["classes"]] == ["dose", *WORD_CLASSES]
    assert section["texts"] == {"member": 16, "comparison": 16, "misaligned": 0}
    assert section["level"] == 0.05 and section["permutations"] == 1999
    assert section["per_class_level"] == pytest.approx(0.05 / section["classes_tested"])
    dose = section["classes"][0]
    assert dose["member_tokens"] > 0 and dose["comparison_tokens"] > 0
    assert sum(entry["member_tokens"] for entry in section["classes"]) > 0
    assert np.isclose(sum(entry["token_share"] for entry in section["classes"]), 1.0)
    assert sum(section["patients_by_class"].values()) == len(section["patients"]) == 4
    page = (folder / "plain" / "report.html").read_text()
    assert "localisation by kind of token" in page and "<mark" not in page
    members = pd.read_csv(folder / "members.csv")["text"]
    others = pd.concat([pd.read_csv(folder / f"{name}.csv")["text"] for name in ("nonmembers", "population")])
    # the planted names and every member-only word pair holding one (the corpus is too small for its other member-only
    # words to be rare: 'interval' is among them, and the page's own wording)
    planted = {planted_name(i).lower() for i in range(16)}
    terms = {term for term in member_only_terms(members, others) if planted & set(term.split())}
    assert len(terms) > 16 and terms_written(folder / "plain", terms) == {}
    assert not any(text in json.dumps(report) + page for text in members)


def test_include_text_marks_each_member_texts_top_spans_on_the_page(setup):
    audit(setup, "with-text", "--include-text")
    page = (setup[0] / "with-text" / "report.html").read_text()
    assert "Member texts with their top spans marked (16;" in page
    assert page.count("<mark title=\"highest token score") >= 16
    assert planted_name(0) in page  # the texts are there, asked for
