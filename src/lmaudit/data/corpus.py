"""Read corpus files (CSV, JSONL, Parquet) into one validated table with a role per sample; write tables the same ways."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from lmaudit.atomic import staged
from lmaudit.data.roles import ROLES
from lmaudit.errors import InputError, row_location

ID_COLUMNS = ("sample_id", "group_id", "subgroup_id")
SUFFIXES = {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet", ".pq": "parquet"}


def _decode_utf8(path: Path) -> str:
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise InputError(
            f"{path}, line {line}: not valid UTF-8 (byte 0x{raw[err.start]:02x}); "
            "re-encode the file as UTF-8, e.g. `iconv -f latin1 -t utf-8`"
        ) from None


def _read_jsonl(path: Path) -> pd.DataFrame:
    records = []
    for line_number, line in enumerate(_decode_utf8(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{path}, line {line_number}: not valid JSON ({err.msg}); write one JSON object per line") from None
        if not isinstance(record, dict):
            raise InputError(f"{path}, line {line_number}: expected a JSON object with a 'text' field")
        records.append(record)
    return pd.DataFrame.from_records(records)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV, JSONL or Parquet file into a DataFrame, with errors that name the file."""
    path = Path(path)
    kind = table_kind(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    if kind == "jsonl":
        return _read_jsonl(path)
    if kind == "csv":
        text = _decode_utf8(path)
        try:
            return pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
        except (pd.errors.ParserError, pd.errors.EmptyDataError) as err:
            raise InputError(f"{path}: not a readable CSV file ({str(err).strip()})") from None
    try:
        return pd.read_parquet(path)
    except Exception as err:  # pyarrow raises several unrelated types for a bad file
        raise InputError(f"{path}: not a readable Parquet file ({type(err).__name__})") from None


def table_kind(path: str | Path) -> str:
    """'csv', 'jsonl' or 'parquet' from the file name, or an InputError naming the file (check before long work)."""
    path = Path(path)
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"{path}: unknown file type '{path.suffix}'; use .csv, .jsonl or .parquet")
    return kind


def write_table(table: pd.DataFrame, path: str | Path) -> None:
    """Write a table as CSV, JSONL or Parquet (by extension), all or nothing."""
    kind = table_kind(path)
    with staged(path) as (temporary,):
        if kind == "csv":
            table.to_csv(temporary, index=False)
        elif kind == "jsonl":
            table.to_json(temporary, orient="records", lines=True, force_ascii=False)
        else:
            table.to_parquet(temporary, index=False)


def _as_text(value: object) -> str:
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    return str(value)


def load_corpus(path: str | Path, role: str | None = None) -> pd.DataFrame:
    """Load one corpus file; `role` assigns a role to every row (else a `role` column may).

    Returns columns text, sample_id, group_id, subgroup_id, label, role, source, row
    (row counts data rows from 1, header excluded). Missing ids are None; missing
    sample ids are generated as '<file stem>-<row>'.
    """
    path = Path(path)
    table = read_table(path)
    if "text" not in table.columns:
        found = ", ".join(map(str, table.columns)) or "none"
        raise InputError(f"{path}: no 'text' column (columns found: {found}); add a 'text' column with one sample per row")
    if table.empty:
        raise InputError(f"{path}: the file has no rows")
    rows = pd.RangeIndex(1, len(table) + 1)
    corpus = pd.DataFrame({"text": [_as_text(v) for v in table["text"]]})
    for position, text in enumerate(corpus["text"]):
        if not text.strip():
            raise InputError(f"{path}, row {rows[position]}: empty text; remove the row or give it text")
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
    if corpus["sample_id"].isna().all():
        corpus["sample_id"] = [f"{path.stem}-{r}" for r in rows]
    corpus["label"] = table["label"].to_numpy() if "label" in table.columns else None
    corpus["role"] = _roles(table, path, role, rows)
    corpus["source"] = str(path)
    corpus["row"] = rows.to_numpy()
    check_unique_sample_ids(corpus)
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
            raise InputError(f"{source}: no 'label' column; the classifier attacks need each sample's true label")
        empty = rows[labels.isna() | (labels.astype(str).str.strip() == "")]
        if not empty.empty:
            raise InputError(f"{row_location(empty.iloc[0])}: empty label; give every sample its true label or remove the row")
