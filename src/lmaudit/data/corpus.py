"""Read corpus files (CSV, JSONL, Parquet) into one validated table with a role per sample."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd

from lmaudit.errors import InputError

ROLES = (
    "member",
    "nonmember",
    "population",
    "calibration_member",
    "shadow_member",
    "shadow_nonmember",
)
ID_COLUMNS = ("sample_id", "group_id", "subgroup_id")
OPTIONAL_COLUMNS = (*ID_COLUMNS, "label", "role")
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
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise InputError(f"{path}: unknown file type '{path.suffix}'; use .csv, .jsonl or .parquet")
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
            f"{second['source']}, row {second['row']}: duplicate sample_id '{second['sample_id']}' "
            f"(first used at {first['source']}, row {first['row']}); sample ids must be unique"
        )


def combine_corpora(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate per-role corpora into one table, checking ids and roles across files."""
    corpus = pd.concat(parts, ignore_index=True)
    missing = corpus[corpus["role"].isna()]
    if not missing.empty:
        row = missing.iloc[0]
        raise InputError(f"{row['source']}, row {row['row']}: no role; add a 'role' column or pass the file under a role option")
    check_unique_sample_ids(corpus)
    return corpus
