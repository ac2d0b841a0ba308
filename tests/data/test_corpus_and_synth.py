"""Corpus files in three formats load the same; synthetic notes are deterministic and varied."""

import json

import pandas as pd

from lmaudit.data.corpus import load_corpus
from lmaudit.data.roles import split_groups
from lmaudit.data.synth import DIAGNOSES, generate_notes


def test_csv_jsonl_and_parquet_load_identically(tmp_path):
    rows = pd.DataFrame({"sample_id": ["a", "b", "c"], "group_id": ["1", "1", "2"],
                         "text": ["BP 120/80, HR 88.", "Na 134, K 3.1", "stable, \"quoted\""], "role": ["member"] * 3})
    rows.to_csv(tmp_path / "c.csv", index=False)
    rows.to_parquet(tmp_path / "c.parquet", index=False)
    (tmp_path / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows.to_dict("records")) + "\n", encoding="utf-8")
    loaded = [load_corpus(tmp_path / f"c.{ext}") for ext in ("csv", "jsonl", "parquet")]
    for frame in loaded[1:]:
        pd.testing.assert_frame_equal(frame.drop(columns="source"), loaded[0].drop(columns="source"))
    assert loaded[0]["text"].tolist() == rows["text"].tolist()


def test_sample_ids_are_generated_when_absent(tmp_path):
    pd.DataFrame({"text": ["one", "two"]}).to_csv(tmp_path / "notes.csv", index=False)
    corpus = load_corpus(tmp_path / "notes.csv", role="member")
    assert corpus["sample_id"].tolist() == ["notes-1", "notes-2"]
    assert corpus["role"].tolist() == ["member", "member"]
    assert corpus["group_id"].isna().all()


def test_generated_ids_of_two_files_with_one_name_do_not_collide(tmp_path):
    """members/notes.csv and population/notes.csv both generate ids: each keeps its folder, so none is a duplicate."""
    from lmaudit.audit.corpus import load_audit_corpus
    from lmaudit.config import RoleFile

    for role in ("members", "nonmembers", "population"):
        (tmp_path / role).mkdir()
        pd.DataFrame({"text": [f"{role} one", f"{role} two"]}).to_csv(tmp_path / role / "notes.csv", index=False)
    corpus = load_audit_corpus([RoleFile(role, str(tmp_path / folder / "notes.csv")) for role, folder in
                                (("member", "members"), ("nonmember", "nonmembers"), ("population", "population"))])
    assert corpus["sample_id"].tolist() == ["members/notes.csv-1", "members/notes.csv-2", "nonmembers/notes.csv-1",
                                            "nonmembers/notes.csv-2", "population/notes.csv-1", "population/notes.csv-2"]


def test_generated_ids_keep_the_stem_when_the_names_differ(tmp_path):
    from lmaudit.data.corpus import generated_id_prefixes

    assert generated_id_prefixes([tmp_path / "a" / "members.csv", tmp_path / "b" / "population.csv"]) == {
        str(tmp_path / "a" / "members.csv"): "members", str(tmp_path / "b" / "population.csv"): "population"}


def test_numeric_ids_are_read_as_strings(tmp_path):
    (tmp_path / "n.jsonl").write_text('{"sample_id": 1, "group_id": 7, "text": "x"}\n{"sample_id": 2, "group_id": 7, "text": "y"}\n')
    corpus = load_corpus(tmp_path / "n.jsonl", role="population")
    assert corpus["sample_id"].tolist() == ["1", "2"] and corpus["group_id"].tolist() == ["7", "7"]


def test_synthetic_notes_are_deterministic_for_a_seed():
    pd.testing.assert_frame_equal(generate_notes(20, seed=4), generate_notes(20, seed=4))
    assert not generate_notes(20, seed=4)["text"].equals(generate_notes(20, seed=5)["text"])


def test_synthetic_notes_have_the_promised_structure():
    notes = generate_notes(200, seed=0)
    words = notes["text"].str.findall(r"\w+|[^\w\s]").str.len()
    assert words.min() >= 10 and words.max() <= 60
    assert notes["sample_id"].is_unique
    admissions = notes.groupby("group_id")["subgroup_id"].nunique()
    assert admissions.min() >= 1 and admissions.max() >= 3
    assert set(notes["section"]) == {"discharge_summary", "nursing", "radiology", "medication_list", "labs"}
    # Difficulty varies: many exact boilerplate repeats next to one-off, number-heavy samples.
    counts = notes["text"].value_counts()
    assert counts.iloc[0] > 50 and (counts == 1).sum() > len(notes) / 3
    assert notes["text"].str.count(r"\d").max() > 20
    # Long tail of diagnoses: the commonest far more frequent than the rarest seen.
    codes = notes["text"].str.extract(r"ICD ([A-Z]\d+(?:\.\d+)?)")[0].dropna()
    frequency = codes.value_counts()
    assert frequency.iloc[0] > 10 * frequency.iloc[-1]
    assert len(frequency) > len(DIAGNOSES) / 2


def test_insert_names_prepends_the_patients_name():
    plain, named = generate_notes(5, seed=1), generate_notes(5, seed=1, insert_names=True)
    for a, b in zip(plain["text"], named["text"], strict=True):
        assert b.endswith(a) and len(b.split()) == len(a.split()) + 2
    first = named.groupby("group_id")["text"].apply(lambda t: {" ".join(x.split()[:2]) for x in t})
    assert first.map(len).max() == 1


def test_split_groups_is_seeded_and_proportional():
    groups = [f"p{i}" for i in range(200)]
    split = split_groups(groups, {"a": 0.5, "b": 0.25, "c": 0.25}, seed=0)
    assert split == split_groups(groups, {"a": 0.5, "b": 0.25, "c": 0.25}, seed=0)
    counts = pd.Series(split).value_counts()
    assert counts["a"] == 100 and counts["b"] == 50 and counts["c"] == 50
