"""A file's own column names (--text-column, ... and the config's `columns:`) are renamed to lmaudit's as it is read;
a named column the file lacks, a rename onto a column already there, and a CSV separated by another delimiter than the
comma are refused in one line naming the file."""

import pandas as pd
import pytest

from lmaudit.config import load_config, validated
from lmaudit.data.columns import ColumnNames
from lmaudit.data.corpus import corpus_from_table, load_corpus, read_table
from lmaudit.errors import InputError

NOTES = pd.DataFrame({"note_id": ["a", "b", "c"], "patient": ["p1", "p1", "p2"], "note": ["bp high", "bp low", "ok"],
                      "y": ["1", "0", "1"]})
NAMES = ColumnNames(text="note", sample_id="note_id", group_id="patient", label="y")


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_named_columns_are_read_as_lmaudits(tmp_path, suffix):
    path = tmp_path / f"members{suffix}"
    {".csv": lambda p: NOTES.to_csv(p, index=False), ".jsonl": lambda p: NOTES.to_json(p, orient="records", lines=True),
     ".parquet": lambda p: NOTES.to_parquet(p)}[suffix](path)
    corpus = load_corpus(path, "member", names=NAMES)
    assert corpus["text"].tolist() == NOTES["note"].tolist()
    assert corpus["sample_id"].tolist() == NOTES["note_id"].tolist()
    assert corpus["group_id"].tolist() == NOTES["patient"].tolist()
    assert corpus["label"].tolist() == NOTES["y"].tolist()


def test_a_table_in_memory_is_renamed_as_a_file_is():
    """The Python API's DataFrame (audit_texts(..., columns={...})) takes the same names."""
    corpus = corpus_from_table(NOTES, role="member", names=NAMES)
    assert corpus["sample_id"].tolist() == NOTES["note_id"].tolist() and corpus["label"].tolist() == NOTES["y"].tolist()


def test_the_default_names_leave_a_file_as_it_was(tmp_path):
    NOTES.rename(columns={"note": "text"}).to_csv(tmp_path / "plain.csv", index=False)
    corpus = load_corpus(tmp_path / "plain.csv")
    assert corpus["text"].tolist() == NOTES["note"].tolist() and corpus["group_id"].isna().all()


def test_two_columns_may_swap_names(tmp_path):
    pd.DataFrame({"text": ["x1", "x2"], "sample_id": ["first text", "second text"]}).to_csv(tmp_path / "s.csv", index=False)
    corpus = load_corpus(tmp_path / "s.csv", names=ColumnNames(text="sample_id", sample_id="text"))
    assert corpus["text"].tolist() == ["first text", "second text"] and corpus["sample_id"].tolist() == ["x1", "x2"]


def test_a_named_column_the_file_lacks_is_named_with_its_option(tmp_path):
    NOTES.to_csv(tmp_path / "members.csv", index=False)
    with pytest.raises(InputError, match=r"members.csv: no 'body' column \(--text-column, columns.text in a config\); "
                                         r"its columns are: note_id, patient, note, y"):
        load_corpus(tmp_path / "members.csv", names=ColumnNames(text="body"))
    with pytest.raises(InputError, match=r"no 'body' column \(--group-column"):
        load_corpus(tmp_path / "members.csv", names=ColumnNames(text="note", group_id="body"))


def test_a_rename_onto_a_column_the_file_has_is_refused(tmp_path):
    NOTES.assign(text="other").to_csv(tmp_path / "both.csv", index=False)
    with pytest.raises(InputError, match=r"both.csv: has both a 'note' column \(--text-column.*\) and a 'text' column"):
        load_corpus(tmp_path / "both.csv", names=NAMES)


def test_one_column_may_not_name_two(tmp_path):
    with pytest.raises(InputError, match="command line: --text-column / --id-column / --group-column / --label-column: 'note' names both the text "
                                        "and the sample_id column"):
        validated({"target": "t", "out": "o", "columns": {"text": "note", "sample_id": "note"}}, "command line")
    with pytest.raises(InputError, match="columns: 'sample_id' names both the text and the sample_id column"):
        validated({"target": "t", "out": "o", "columns": {"text": "sample_id"}}, "test")


def test_yaml_columns_and_options_over_them(tmp_path):
    (tmp_path / "audit.yaml").write_text("target: t\nout: o\ncolumns: {text: note, group_id: patient}\n")
    assert load_config(tmp_path / "audit.yaml").columns == ColumnNames(text="note", group_id="patient")
    config = load_config(tmp_path / "audit.yaml", {"sample_id": "note_id", "text": None})
    assert config.columns == ColumnNames(text="note", sample_id="note_id", group_id="patient")
    (tmp_path / "typo.yaml").write_text("target: t\nout: o\ncolumns: {txt: note}\n")
    with pytest.raises(InputError, match="typo.yaml: columns.txt"):
        load_config(tmp_path / "typo.yaml")


@pytest.mark.parametrize(("delimiter", "named"), [(";", "';'"), ("\t", "tabs"), ("|", "'|'")])
def test_a_csv_separated_otherwise_is_named_in_one_line(tmp_path, delimiter, named):
    """A spreadsheet's export with semicolons reads as one column (or fails in pandas' words): say what it is."""
    path = tmp_path / "members.csv"
    NOTES.to_csv(path, index=False, sep=delimiter)
    with pytest.raises(InputError, match=f"members.csv: looks separated by {named}, not commas; .* .jsonl or .parquet"):
        read_table(path)


@pytest.mark.parametrize("header", ["text", "text,note;kind", '"a;b",text'])
def test_a_comma_csv_is_not_mistaken_for_another_delimiter(tmp_path, header):
    """One column, or a header whose other delimiters sit beside commas or in quotes, is a comma-separated file."""
    path = tmp_path / "fine.csv"
    path.write_text(f"{header}\n" + "\n".join([",".join(["x; y"] * (header.count(",") + 1))] * 2) + "\n")
    assert len(read_table(path)) == 2
