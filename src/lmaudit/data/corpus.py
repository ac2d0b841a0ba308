"""Read corpus files (CSV, JSONL, Parquet) into one validated table with a role per sample; write tables the same ways."""

from __future__ import annotations

import codecs
import csv
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from lmaudit.atomic import staged
from lmaudit.data.columns import DEFAULT_COLUMNS, ColumnNames, renamed
from lmaudit.data.roles import ROLES
from lmaudit.errors import InputError, row_location

ID_COLUMNS = ("sample_id", "group_id", "subgroup_id")
SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


# Cells that spreadsheet and pandas exports write for a missing value: as a sample's whole text, they are a lost
# text, not a text (a CSV read keeps them as strings so that ids like "NA" survive).
MISSING_TEXT_MARKERS = frozenset({"nan", "NaN", "-nan", "NA", "N/A", "n/a", "#N/A", "NULL", "null", "None", "<NA>"})

# Rows read and validated at a time: memory stays bounded by a chunk (plus an id per sample), whatever the file's size.
ROWS_PER_READ = 65536
# Delimiters a CSV header is checked for, and how an error names them: a file separated by another (a spreadsheet's
# export in a locale whose decimal mark is the comma) reads as one column, or fails with pandas' own message.
OTHER_DELIMITERS = {";": "';'", "\t": "tabs", "|": "'|'"}


def _utf8_error(path: Path, error: UnicodeDecodeError | None = None) -> InputError:
    """The one-line error for a file that is not UTF-8, naming the first bad line (found by reading the file in blocks)."""
    line = 1
    with open(path, "rb") as handle:
        decoder = codecs.getincrementaldecoder("utf-8")()
        for block in iter(lambda: handle.read(1 << 20), b""):
            try:
                decoder.decode(block)
            except UnicodeDecodeError as err:
                line += block[: err.start].count(b"\n")
                return InputError(f"{path}, line {line}: not valid UTF-8 (byte 0x{block[err.start]:02x}); "
                                  "re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`")
            line += block.count(b"\n")
    return InputError(f"{path}: not valid UTF-8 ({error}); re-encode the file as UTF-8")


def _jsonl_chunks(path: Path, rows: int) -> Iterator[pd.DataFrame]:
    records = []
    try:
        with open(path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise InputError(f"{path}, line {line_number}: not valid JSON ({err.msg}); write one JSON object per line") from None
                if not isinstance(record, dict):
                    raise InputError(f"{path}, line {line_number}: expected a JSON object with a 'text' field")
                records.append(record)
                if len(records) == rows:
                    yield pd.DataFrame.from_records(records)
                    records = []
    except UnicodeDecodeError as err:
        raise _utf8_error(path, err) from None
    if records:
        yield pd.DataFrame.from_records(records)


def _refuse_other_delimiter(path: Path) -> None:
    """InputError for a CSV file whose header line is separated by another delimiter than the comma."""
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        header = handle.readline(1 << 16)
    try:
        delimiter = csv.Sniffer().sniff(header, delimiters="," + "".join(OTHER_DELIMITERS)).delimiter
    except csv.Error:  # one column, or an empty file: nothing to tell
        return
    if delimiter in OTHER_DELIMITERS:
        raise InputError(f"{path}: looks separated by {OTHER_DELIMITERS[delimiter]}, not commas; lmaudit reads "
                         "comma-separated CSV: save the file with commas, or as .jsonl or .parquet")


def _csv_chunks(path: Path, rows: int) -> Iterator[pd.DataFrame]:
    _refuse_other_delimiter(path)
    try:
        yield from pd.read_csv(path, dtype=str, keep_default_na=False, chunksize=rows, encoding="utf-8",
                               encoding_errors="strict")
    except UnicodeDecodeError as err:
        raise _utf8_error(path, err) from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
        raise InputError(f"{path}: not a readable CSV file ({str(err).strip()})") from None


def _parquet_chunks(path: Path, rows: int) -> Iterator[pd.DataFrame]:
    import pyarrow.parquet as pq

    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=rows):
            yield batch.to_pandas()
    except Exception as err:  # pyarrow raises several unrelated types for a bad file
        raise InputError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None


def read_table_chunks(path: str | Path, rows: int | None = None) -> Iterator[pd.DataFrame]:
    """A CSV, JSONL or Parquet file as DataFrames of at most `rows` rows (default ROWS_PER_READ), with errors that name
    the file (and line)."""
    path = Path(path)
    rows = rows or ROWS_PER_READ
    kind = table_kind(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    yield from {"jsonl": _jsonl_chunks, "csv": _csv_chunks, "parquet": _parquet_chunks}[kind](path, rows)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV, JSONL or Parquet file into a DataFrame, with errors that name the file."""
    chunks = list(read_table_chunks(path))
    return pd.concat(chunks, ignore_index=True) if chunks else pd.DataFrame()


def table_kind(path: str | Path) -> str:
    """'csv', 'jsonl' or 'parquet' from the file name, or an InputError naming the file (check before long work)."""
    path = Path(path)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"{path}: unknown file type '{path.suffix}'; use .csv, .jsonl or .parquet")
    return kind


def write_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write a table as CSV, JSONL or Parquet (by extension), all or nothing."""
    with table_writer(path) as write:
        write(table)


@contextmanager
def table_writer(path: str | Path) -> Iterator[Callable[[pd.DataFrame], None]]:
    """A function that appends a chunk of rows to a CSV, JSONL or Parquet file (by extension); the file appears, whole,
    only when the block ends without an error (in its folder, made if missing)."""
    kind = table_kind(path)
    with staged(path) as (temporary,):
        parquet = None
        first = True

        def write(chunk: pd.DataFrame) -> None:
            nonlocal parquet, first
            if first:
                temporary.parent.mkdir(parents=True, exist_ok=True)
            if kind == "csv":
                chunk.to_csv(temporary, index=False, mode="w" if first else "a", header=first)
            elif kind == "jsonl":
                lines = chunk.to_json(orient="records", lines=True, force_ascii=False) if len(chunk) else ""
                with open(temporary, "w" if first else "a", encoding="utf-8") as handle:
                    handle.write(lines if not lines or lines.endswith("\n") else lines + "\n")
            else:
                import pyarrow as pa
                import pyarrow.parquet as pq

                batch = pa.Table.from_pandas(chunk, preserve_index=False)
                parquet = parquet or pq.ParquetWriter(temporary, batch.schema)
                parquet.write_table(batch)
            first = False

        try:
            yield write
        finally:
            if parquet is not None:
                parquet.close()


def _as_text(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)


def load_corpus(path: str | Path, role: str | None = None, columns: tuple[str, ...] = (),
                id_prefix: str | None = None, names: ColumnNames = DEFAULT_COLUMNS) -> pd.DataFrame:
    """Load one corpus file; `role` assigns a role to every row (else a `role` column may); `names`: the file's own
    names of lmaudit's columns.

    Returns columns text, sample_id, group_id, subgroup_id, label, role, source, row
    (row counts data rows from 1, header excluded), and the extra `columns` asked for (e.g. to slice by; an
    InputError if the file lacks one). Missing ids are None; missing sample ids are generated as '<id_prefix>-<row>'
    (default prefix: the file's stem; `generated_id_prefixes` keeps several files' ids apart).
    """
    return pd.concat(list(load_corpus_chunks(path, role, columns=columns, id_prefix=id_prefix, names=names)),
                     ignore_index=True)


def load_corpus_chunks(path: str | Path, role: str | None = None, rows: int | None = None,
                       columns: tuple[str, ...] = (), id_prefix: str | None = None,
                       names: ColumnNames = DEFAULT_COLUMNS) -> Iterator[pd.DataFrame]:
    """load_corpus one chunk of at most `rows` rows at a time, each validated as it is read; sample ids are checked for
    duplicates across the whole file."""
    path = Path(path)
    yield from _validated_chunks(read_table_chunks(path, rows), path, role, columns, id_prefix or path.stem, names)


def generated_id_prefixes(paths: Iterable[str | Path]) -> dict[str, str]:
    """The prefix of each file's generated sample ids: its stem, or, where two files share a stem (members/notes.csv,
    population/notes.csv), its path from the files' common folder, so generated ids never collide across files."""
    paths = [Path(p) for p in paths]
    files = {p.resolve() for p in paths}  # one file given twice is one file: its ids are duplicates, reported as such
    if len({f.stem for f in files}) == len(files):
        return {str(p): p.stem for p in paths}
    common = Path(os.path.commonpath(files))
    return {str(p): p.resolve().relative_to(common).as_posix() for p in paths}


def corpus_from_table(table: pd.DataFrame, name: str = "DataFrame", role: str | None = None,
                      columns: tuple[str, ...] = (), names: ColumnNames = DEFAULT_COLUMNS) -> pd.DataFrame:
    """A corpus from a table already in memory (columns as in a corpus file, or as `names` names them), validated as
    load_corpus validates a file; errors name `name` and the row."""
    return pd.concat(list(_validated_chunks([table], Path(name), role, columns, Path(name).stem, names)),
                     ignore_index=True)


def _validated_chunks(tables: Iterable[pd.DataFrame], path: Path, role: str | None, columns: tuple[str, ...],
                      id_prefix: str, names: ColumnNames) -> Iterator[pd.DataFrame]:
    first_row: dict[str, int] = {}  # sample id -> the row that used it first
    generated: bool | None = None
    offset = 0
    for table in tables:
        table = renamed(table, names, path)
        corpus = _corpus_chunk(table, path, role, offset)
        for column in columns:
            if column not in table.columns:
                found = ", ".join(map(str, table.columns))
                raise InputError(f"{path}: no column '{column}' (columns found: {found}); add it to every corpus file "
                                 f"or drop the option that names it (--slice-by {column}, --field-column ...={column})")
            corpus[column] = [_as_text(v).strip() or None for v in table[column]]
        generated = corpus["sample_id"].isna().all() if generated is None else generated
        if generated:
            corpus["sample_id"] = [f"{id_prefix}-{r}" for r in corpus["row"]]
        check_unique_sample_ids(corpus)
        for sample_id, row in zip(corpus["sample_id"], corpus["row"], strict=True):
            if sample_id in first_row:
                raise InputError(f"{path}, row {row}: duplicate sample_id '{sample_id}' (first used at {path}, row "
                                 f"{first_row[sample_id]}); sample ids must be unique")
            first_row[sample_id] = row
        offset += len(table)
        yield corpus
    if offset == 0:
        raise InputError(f"{path}: the file has no rows")


def _corpus_chunk(table: pd.DataFrame, path: Path, role: str | None, offset: int) -> pd.DataFrame:
    """One validated chunk of a corpus file whose first row is data row `offset` + 1."""
    if "text" not in table.columns:
        found = ", ".join(map(str, table.columns)) or "none"
        raise InputError(f"{path}: no 'text' column (columns found: {found}); add a 'text' column with one sample per "
                         "row, or name yours with --text-column")
    rows = pd.RangeIndex(offset + 1, offset + len(table) + 1)
    corpus = pd.DataFrame({"text": [_as_text(v) for v in table["text"]]})
    for position, text in enumerate(corpus["text"]):
        if not text.strip():
            raise InputError(f"{path}, row {rows[position]}: empty text; remove the row or give it text")
        if text.strip() in MISSING_TEXT_MARKERS:
            raise InputError(f"{path}, row {rows[position]}: the text is '{text.strip()}', which exports write for a "
                             "missing value; remove the row or give it its text")
    for column in ID_COLUMNS:
        if column in table.columns:
            values = [_as_text(v).strip() for v in table[column]]
            if column == "sample_id":
                for position, value in enumerate(values):
                    if not value:
                        raise InputError(f"{path}, row {rows[position]}: empty sample_id; fill it or drop the column to generate ids")
            corpus[column] = [v or None for v in values]
        else:
            corpus[column] = None
    corpus["label"] = table["label"].to_numpy() if "label" in table.columns else None
    corpus["role"] = _roles(table, path, role, rows)
    corpus["source"] = str(path)
    corpus["row"] = rows.to_numpy()
    return corpus


def _roles(table: pd.DataFrame, path: Path, role: str | None, rows: pd.RangeIndex) -> list[str | None]:
    if role is not None and role not in ROLES:
        raise InputError(f"unknown role '{role}'; use one of {', '.join(ROLES)}")
    if "role" not in table.columns:
        return [role] * len(table)
    values = [_as_text(v).strip() for v in table["role"]]
    for position, value in enumerate(values):
        if value not in ROLES:
            raise InputError(f"{path}, row {rows[position]}: unknown role '{value}'; use one of {', '.join(ROLES)}")
        if role is not None and value != role:
            raise InputError(
                f"{path}, row {rows[position]}: role column says '{value}' but the file was given as the {role} file; "
                "fix the column or pass the file under its own role"
            )
    return values


def check_unique_sample_ids(corpus: pd.DataFrame) -> None:
    """Refuse a corpus in which one sample_id names two rows."""
    duplicated = corpus["sample_id"].duplicated(keep="first")
    if duplicated.any():
        second = corpus[duplicated].iloc[0]
        first = corpus[corpus["sample_id"] == second["sample_id"]].iloc[0]
        raise InputError(
            f"{row_location(second)}: duplicate sample_id '{second['sample_id']}' "
            f"(first used at {row_location(first)}); sample ids must be unique"
        )


def combine_corpora(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-role corpora into one table, checking ids and roles across files."""
    corpus = pd.concat(parts, ignore_index=True)
    missing = corpus[corpus["role"].isna()]
    if not missing.empty:
        raise InputError(f"{row_location(missing.iloc[0])}: no role; add a 'role' column or pass the file under a role option")
    check_unique_sample_ids(corpus)
    return corpus


def check_labels(corpus: pd.DataFrame) -> None:
    """Refuse samples without a true label (a classifier's features and training need it), naming the file and row."""
    for source, rows in corpus.groupby("source", sort=False):
        labels = rows["label"]
        if labels.isna().all():
            raise InputError(f"{source}: no 'label' column; the classifier attacks need each sample's true label "
                             "(name your column with --label-column)")
        empty = rows[labels.isna() | (labels.astype(str).str.strip() == "")]
        if not empty.empty:
            raise InputError(f"{row_location(empty.iloc[0])}: empty label; give every sample its true label or remove the row")
