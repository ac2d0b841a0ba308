"""Who wrote what: the independent units behind an audit's statistics. One patient's (or user's) notes are correlated,
so intervals resample and tests permute whole groups; a unit without a group id is a group of its own. Every module
that needs the groups takes them from `cluster_codes`, so none falls back to treating a patient's notes as independent
because some other row lacks an id."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def cluster_keys(unit_ids: Sequence, group_ids: Sequence | None = None, kind: str = "unit") -> np.ndarray:
    """(n,) a key per unit naming its independent unit: 'group:<id>' for a unit with a group id, else
    '<kind>:<its own id>' (a unit without a group is a group of its own; `kind` keeps sample and admission ids apart
    where keys of several levels are pooled). A group id equal to some unit's id is still another key."""
    own = (f"{kind}:" + pd.Series(np.asarray(unit_ids, dtype=object)).astype(str)).to_numpy()
    if group_ids is None:
        return own
    groups = pd.Series(np.asarray(group_ids, dtype=object))
    return np.where(groups.notna().to_numpy(), ("group:" + groups.astype(str)).to_numpy(), own)


def cluster_codes(unit_ids: Sequence, group_ids: Sequence | None = None) -> np.ndarray:
    """(n,) integer codes from 0 of `cluster_keys`: equal for units of one group, one of its own for each unit whose
    group id is missing (None, NaN), or for every unit without `group_ids`."""
    return pd.factorize(pd.Series(cluster_keys(unit_ids, group_ids)))[0]


def frame_clusters(frame: pd.DataFrame, id_column: str = "id") -> np.ndarray:
    """`cluster_codes` of an attack's frame or a corpus: its `group_id` column where it has one, else each row alone."""
    groups = frame["group_id"].to_numpy() if "group_id" in frame else None
    return cluster_codes(frame[id_column].to_numpy(), groups)


def ungrouped_count(frame: pd.DataFrame) -> int:
    """How many rows lack a group id where others have one (0 where no row or every row has one): the rows the audit
    treats as groups of their own, which a warning counts."""
    if "group_id" not in frame:
        return 0
    missing = frame["group_id"].isna()
    return int(missing.sum()) if 0 < missing.sum() < len(frame) else 0
