"""audit/reconstruction.py's own bookkeeping, without a model: the settings it refuses, how result files record them
(no candidate value written), which models it refuses before loading one, and how each span's candidate scores become
its row and the per-set summaries (the maths of ranks and rates is tests/metrics/test_reconstruction.py's)."""

import hashlib
import json
import re

import numpy as np
import pandas as pd
import pytest

from lmaudit.audit.reconstruction import ReconstructionSettings, kind_result, load_scored_model, settings_record
from lmaudit.data.fields import FieldRule
from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.errors import InputError
from lmaudit.models.source import Placement

NAME, DRUG = FieldRule("name", pattern=r"Mr (\w+)"), FieldRule("drug", column="drug")


@pytest.mark.parametrize(("arguments", "refusal"), [
    ({"fields": ()}, "at least one field: --field KIND=REGEX or --field-column KIND=COLUMN"),
    ({"fields": (NAME,), "max_candidates": 1}, "--max-candidates must be at least 2"),
    ({"fields": (NAME, FieldRule("name", column="surname"))}, "the field kind 'name' is declared twice"),
    ({"fields": (NAME,), "candidate_lists": {"zzz": ["c"], "drug": ["a", "b"]}},
     "--candidates drug=...: no --field or --field-column declares that kind"),
])
def test_settings_that_cannot_be_audited_are_refused_in_one_line(arguments, refusal):
    """No field, a single candidate, a kind declared twice (its results would overwrite each other) or a candidate
    list for a kind no field declares (it would be ignored): InputError naming the option (the first unknown kind in
    alphabetical order)."""
    with pytest.raises(InputError, match=re.escape(refusal)):
        ReconstructionSettings(**arguments)
    ReconstructionSettings((NAME, DRUG), max_candidates=2, candidate_lists={"drug": ["a", "b"]})  # the limits pass


def test_the_record_keeps_each_candidate_list_as_its_size_and_hash_never_its_values():
    """Candidate lists may be patients' names: report and reconstruction.json record each by its length and the
    SHA-256 of its values joined by newlines, so that a rerun with another list (same length) is told apart and no
    value is written; everything else is recorded as given."""
    names = ["Alice Smith", "Bob Jones", "Carol White"]
    settings = ReconstructionSettings((NAME, DRUG), max_candidates=50, candidate_lists={"name": names},
                                      batch_tokens=512, include_text=True)
    record = settings_record(settings)
    assert record == {
        "fields": [{"kind": "name", "pattern": r"Mr (\w+)", "column": None},
                   {"kind": "drug", "pattern": None, "column": "drug"}],
        "max_candidates": 50, "batch_tokens": 512, "include_text": True,
        "candidate_lists": {"name": {"candidates": 3, "sha256": hashlib.sha256(
            b"Alice Smith\nBob Jones\nCarol White").hexdigest()}}}
    written = json.dumps(record)
    assert not any(part in written for name in names for part in name.split())
    other = ReconstructionSettings((NAME, DRUG), max_candidates=50, candidate_lists={"name": [*names[:2], "Dan Brown"]})
    assert settings_record(other)["candidate_lists"]["name"]["sha256"] != record["candidate_lists"]["name"]["sha256"]
    assert settings_record(ReconstructionSettings((NAME,)))["candidate_lists"] == {}


def test_a_classifier_is_refused_before_any_weights_load(tmp_path):
    """Reconstruction fills a field into the text, so it needs a language model: a sequence classifier is refused by
    its family from config.json alone (the folder's weights here are empty and would not load)."""
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"]}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(InputError, match="needs a masked or causal LM, not a classifier"):
        load_scored_model(str(tmp_path), Placement())


def slow_rank(row: np.ndarray, truth: int) -> float:
    """1 + the scored candidates above the truth + half of those tied with it, counted one by one."""
    rank = 1.0
    for column, score in enumerate(row):
        if column == truth or np.isnan(score):
            continue
        rank += 1.0 if score > row[truth] else 0.5 if score == row[truth] else 0.0
    return rank


def test_spans_keep_their_own_rows_and_each_set_is_summarised_with_its_own():
    """The spans come as a series indexed like the corpus with gaps (texts without a value, or with one outside the
    candidates, are not spans): each table row carries its own sample's ids, role and set, and the rank of its own
    scores (against a rank counted one candidate at a time); the span whose truth was cut off is dropped and counted;
    each non-member set's summary reads the members and that set only."""
    nan = np.nan
    corpus = pd.DataFrame({
        "sample_id": [f"s{i}" for i in range(8)],
        "role": [MEMBER, MEMBER, MEMBER, MEMBER, NONMEMBER, NONMEMBER, NONMEMBER, NONMEMBER],
        "group_id": ["p1", "p1", "p2", "p3", "q1", "q2", "q3", "q4"],
        NONMEMBER_SET: [None] * 4 + ["mimic", "mimic", "i2b2", "i2b2"]})
    rows = [0, 2, 3, 4, 5, 6, 7]  # s1 holds no value
    values = pd.Series(["b", "a", "c", "a", "c", "b", "a"], index=rows)
    scores = np.array([[-3.0, -1.0, -2.0],   # s0, truth b: first
                       [-1.0, -1.0, -4.0],   # s2, truth a: tied with b
                       [-2.0, -1.0, nan],    # s3, truth c cut off: not ranked
                       [-5.0, -1.0, -2.0],   # s4, truth a: last
                       [-1.0, nan, -3.0],    # s5, truth c: among two, second
                       [-1.0, -1.5, -2.0],   # s6, truth b: second
                       [-0.5, -2.0, -1.0]])  # s7, truth a: first
    result, table = kind_result(corpus, values, ["a", "b", "c"], scores)
    assert result["cut_off"] == 1
    kept = [0, 1, 3, 4, 5, 6]  # positions in `values`/`scores` of the ranked spans
    assert table["sample_id"].tolist() == ["s0", "s2", "s4", "s5", "s6", "s7"]
    assert table["role"].tolist() == corpus.loc[[rows[i] for i in kept], "role"].tolist()
    assert table[NONMEMBER_SET].fillna("-").tolist() == ["-", "-", "mimic", "mimic", "i2b2", "i2b2"]
    truth = [["a", "b", "c"].index(v) for v in values]
    expected = [slow_rank(scores[i], truth[i]) for i in kept]
    assert table["rank"].tolist() == expected == [1.0, 1.5, 3.0, 2.0, 2.0, 1.0]
    assert table["value"].tolist() == ["b", "a", "a", "c", "b", "a"]
    assert list(result["sets"]) == ["mimic", "i2b2"]
    for name, nonmember_ranks in (("mimic", [3.0, 2.0]), ("i2b2", [2.0, 1.0])):
        summary = result["sets"][name]
        assert summary["mean_rank"] == {"member": pytest.approx(1.25), "nonmember": pytest.approx(np.mean(nonmember_ranks))}
        assert summary["top1"]["member"]["exposed"] == 1 and summary["top1"]["member"]["units"] == 2
        assert summary["top1"]["nonmember"]["units"] == 2
