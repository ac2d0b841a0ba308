"""Precomputed per-sample losses (`lmaudit attack`): read and validated like a corpus, in the signals layout."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.data.corpus import check_unique_sample_ids, read_table
from lmaudit.data.roles import NONMEMBER, NONMEMBER_SET, ROLES, check_audit_roles
from lmaudit.errors import InputError, row_location

REQUIRED_COLUMNS = ("sample_id", "role", "target_loss")
# Loss columns of a scores file: the target's, and one reference's or several (reference_loss_1, reference_loss_2, ...).
REFERENCE_COLUMN = re.compile(r"^reference_loss(_\d+)?$")
# ... and the name of that reference model in the loaded table (reference, reference_1, ...).
REFERENCE_MODEL = re.compile(r"^reference(_\d+)?$")


def loss_columns(columns: list[str]) -> dict[str, str]:
    """Each loss column of a scores file and the model it is of (target, reference or reference_<i>)."""
    models = {"target_loss": "target"} if "target_loss" in columns else {}
    return models | {column: column.replace("_loss", "") for column in columns if REFERENCE_COLUMN.match(column)}


def load_scores(path: str | Path, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """A scores file read and checked by `scores_from_table`."""
    return scores_from_table(read_table(path), str(path), columns)


def scores_from_table(table: pd.DataFrame, path: str, columns: tuple[str, ...] = ()) -> pd.DataFrame:
    """Columns sample_id, role, target[, reference or reference_1, reference_2, ...] (losses: lower = more likely under
    that model), group_id, subgroup_id, length, nonmember_set if the file has it, and the extra `columns` asked for (to
    slice by); every id and role checked as for a corpus, errors naming `path` and the row."""
    missing = [c for c in REQUIRED_COLUMNS if c not in table.columns]
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(missing)}; a scores file needs sample_id, role, target_loss")
    signals = pd.DataFrame({"sample_id": table["sample_id"].astype(str), "role": table["role"].astype(str)})
    for column, model in loss_columns(list(table.columns)).items():
        if column in table.columns:
            values = pd.to_numeric(table[column], errors="coerce")
            bad = np.flatnonzero(~np.isfinite(values.to_numpy(dtype=float)))
            if len(bad):
                raise InputError(f"{path}, row {bad[0] + 1}: {column} is not a finite number; fix or remove the row")
            signals[model] = values.to_numpy(dtype=float)
    for column in ("group_id", "subgroup_id", "length"):
        signals[column] = table[column].to_numpy() if column in table.columns else None
    if NONMEMBER_SET in table.columns:  # as an audit with several non-member sets writes scores.parquet
        signals[NONMEMBER_SET] = [value if role == NONMEMBER and pd.notna(value) else None
                                  for role, value in zip(signals["role"], table[NONMEMBER_SET], strict=True)]
    signals["length"] = pd.to_numeric(signals["length"], errors="coerce")
    for column in columns:
        if column not in table.columns:
            raise InputError(f"{path}: no column '{column}' to slice by (columns found: {', '.join(map(str, table.columns))}); "
                             f"add it or drop --slice-by {column}")
        signals[column] = table[column].to_numpy()
    corpus_like = signals.assign(source=str(path), row=np.arange(1, len(signals) + 1))
    unknown = corpus_like[~corpus_like["role"].isin(ROLES)]
    if not unknown.empty:
        row = unknown.iloc[0]
        raise InputError(f"{row_location(row)}: unknown role '{row['role']}'; use one of {', '.join(ROLES)}")
    check_unique_sample_ids(corpus_like)
    check_audit_roles(corpus_like)
    return signals
