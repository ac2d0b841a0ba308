"""Files are read, validated, scored and written in chunks: the same table, the same errors (rows numbered across the
whole file), the same scores, and no output file when a later chunk is bad."""

import numpy as np
import pandas as pd
import pytest

from lmaudit.data import corpus as corpus_module
from lmaudit.data.corpus import load_corpus, load_corpus_chunks, write_table
from lmaudit.errors import InputError
from tests.helpers import assert_one_line_error, invoke, run_cli


@pytest.fixture
def small_reads(monkeypatch):
    """Read 7 rows at a time."""
    monkeypatch.setattr(corpus_module, "ROWS_PER_READ", 7)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_chunks_make_the_same_table_as_one_read(notes, tmp_path, suffix):
    path = tmp_path / f"notes{suffix}"
    write_table(notes.head(30)[["sample_id", "group_id", "text"]], path)
    chunks = list(load_corpus_chunks(path, "member", rows=7))
    assert [len(c) for c in chunks] == [7, 7, 7, 7, 2]
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), load_corpus(path, "member"))
    assert pd.concat(chunks)["row"].tolist() == list(range(1, 31))


def test_errors_in_later_chunks_name_the_row_of_the_whole_file(notes, tmp_path):
    table = notes.head(20)[["sample_id", "text"]].copy()
    table.loc[15, "sample_id"] = table.loc[2, "sample_id"]
    write_table(table, tmp_path / "duplicate.csv")
    with pytest.raises(InputError, match=r"duplicate.csv, row 16: duplicate sample_id .* \(first used at .*, row 3\)"):
        list(load_corpus_chunks(tmp_path / "duplicate.csv", rows=7))
    table = notes.head(20)[["text"]].copy()
    table.loc[17, "text"] = " "
    write_table(table, tmp_path / "empty.jsonl")
    with pytest.raises(InputError, match=r"empty.jsonl, row 18: empty text"):
        list(load_corpus_chunks(tmp_path / "empty.jsonl", rows=7))


def test_generated_ids_count_rows_across_chunks(notes, tmp_path):
    write_table(notes.head(10)[["text"]], tmp_path / "plain.csv")
    ids = pd.concat(load_corpus_chunks(tmp_path / "plain.csv", rows=4))["sample_id"].tolist()
    assert ids == [f"plain-{row}" for row in range(1, 11)]


def test_a_bad_byte_deep_in_a_file_is_located_by_line(tmp_path):
    lines = ["text"] + [f"note number {i}" for i in range(50_000)]
    raw = ("\n".join(lines) + "\n").encode()
    position = raw.index(b"note number 40000")
    (tmp_path / "latin.csv").write_bytes(raw[:position] + b"caf\xe9 " + raw[position:])
    with pytest.raises(InputError, match=r"latin.csv, line 40002: not valid UTF-8 \(byte 0xe9\)"):
        list(load_corpus_chunks(tmp_path / "latin.csv", rows=1000))


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_score_reads_and_writes_in_chunks_with_the_same_numbers(small_reads, monkeypatch, tiny_model_dirs, notes, tmp_path,
                                                                suffix):
    data = tmp_path / "notes.csv"
    notes.head(30).to_csv(data, index=False)
    invoke("score", "--target", tiny_model_dirs[0], "--data", data, "--k", 2, "--out", tmp_path / f"chunked{suffix}",
           "--chunk-size", 5)
    written = pd.read_csv(tmp_path / f"chunked{suffix}") if suffix == ".csv" else (
        pd.read_json(tmp_path / f"chunked{suffix}", lines=True) if suffix == ".jsonl" else pd.read_parquet(tmp_path / f"chunked{suffix}"))
    assert written["sample_id"].tolist() == notes["sample_id"].head(30).tolist()
    monkeypatch.setattr(corpus_module, "ROWS_PER_READ", 65536)  # one read, for the reference
    invoke("score", "--target", tiny_model_dirs[0], "--data", data, "--k", 2, "--out", tmp_path / "whole.csv",
           "--cache-dir", tmp_path / "other-cache")
    np.testing.assert_allclose(written["mlm_energy"], pd.read_csv(tmp_path / "whole.csv")["mlm_energy"], rtol=1e-6)


def test_score_writes_nothing_when_a_later_chunk_is_bad(small_reads, tiny_model_dirs, notes, tmp_path):
    table = notes.head(20).copy()
    table.loc[16, "text"] = ""
    table.to_csv(tmp_path / "bad.csv", index=False)
    code, output = run_cli("score", "--target", tiny_model_dirs[0], "--data", tmp_path / "bad.csv", "--k", 2,
                           "--out", tmp_path / "scores.csv")
    assert_one_line_error(code, output, "bad.csv, row 17", "empty text")
    assert not (tmp_path / "scores.csv").exists()
    assert not list(tmp_path.glob(".scores.csv*"))
