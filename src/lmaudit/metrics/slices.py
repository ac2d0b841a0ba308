"""Slices from the data. At sample level: token-length bins (quantiles of the audited samples, or given bounds) and
the values of any corpus column, so every sample is in exactly one slice of each slicing. At every level: the
non-member sets, each slice holding every member and one set's non-members."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmaudit.attacks.base import LEVEL_COLUMNS
from lmaudit.data.roles import AUDITED_ROLES, MEMBER, NONMEMBER, NONMEMBER_SET
from lmaudit.metrics.clusters import ungrouped_count
from lmaudit.metrics.settings import EvaluationSettings

NONMEMBER_SLICE = "nonmembers:"  # the prefix of a non-member set's slice name

MISSING_VALUE = "(none)"  # the slice of samples that have no value in a slice_by column


def length_edges(audited_lengths: np.ndarray, bins: int, bounds: tuple[int, ...] = ()) -> list[int]:
    """Inner bin edges in tokens: the given bounds, else the 1/bins, 2/bins, ... quantiles of the audited lengths
    (rounded up to whole tokens); a bin is [edge_i, edge_i+1), the first open below and the last above."""
    if bounds:
        return sorted(set(int(b) for b in bounds))
    lengths = np.asarray(audited_lengths, dtype=float)
    lengths = lengths[np.isfinite(lengths)]
    if bins < 2 or len(lengths) == 0:
        return []
    quantiles = np.quantile(lengths, np.arange(1, bins) / bins)
    return sorted({math.ceil(q) for q in quantiles if lengths.min() < math.ceil(q) <= lengths.max()})


def length_slice_names(lengths: np.ndarray, edges: list[int]) -> np.ndarray:
    """Each sample's length slice, named by the token range its bin covers in the data, e.g. 'length:12-23'."""
    lengths = np.asarray(lengths, dtype=float)
    bin_of = np.searchsorted(np.asarray(edges, dtype=float), lengths, side="right")
    names = np.empty(len(lengths), dtype=object)
    for index in np.unique(bin_of):
        inside = bin_of == index
        low, high = int(lengths[inside].min()), int(lengths[inside].max())
        names[inside] = f"length:{low}-{high}" if low != high else f"length:{low}"
    return names


def sample_slices(samples: pd.DataFrame, settings: EvaluationSettings, columns: pd.DataFrame | None = None) -> pd.DataFrame:
    """Slice names per sample (index: sample_id; one column per slicing: 'length', then each slice_by column), from
    `samples` (sample_id, role, length) and `columns` (index sample_id: the slice_by columns' values)."""
    slices = pd.DataFrame(index=pd.Index(samples["sample_id"], name="sample_id"))
    lengths = samples["length"].to_numpy(dtype=float) if "length" in samples else np.array([])
    wanted = settings.length_bounds or settings.length_slices >= 2
    if wanted and len(lengths) and np.isfinite(lengths).all():
        audited = samples["role"].isin(AUDITED_ROLES)
        sets = nonmember_sets(samples)
        if sets is not None:  # the bins of the results they slice, which audit the first set
            audited &= (samples["role"] != NONMEMBER) | (samples[NONMEMBER_SET] == sets.names[0])
        audited = audited.to_numpy()
        edges = length_edges(lengths[audited], settings.length_slices, settings.length_bounds)
        if edges:
            slices["length"] = length_slice_names(lengths, edges)
    for column in settings.slice_by:
        values = columns.loc[slices.index, column] if columns is not None else pd.Series(index=slices.index, dtype=object)
        text = values.map(lambda v: MISSING_VALUE if v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip() == ""
                          else str(v).strip())
        slices[column] = (column + ":" + text).to_numpy()
    return slices


def slice_order(names: pd.Series) -> list[str]:
    """A slicing's slice names in reading order: length bins by their lower bound, other values alphabetically."""
    def key(name: str):
        value = name.split(":", 1)[1]
        low = value.split("-", 1)[0]
        return (0, int(low), name) if name.startswith("length:") and low.isdigit() else (1, 0, name)

    return sorted(names.dropna().unique(), key=key)


@dataclass(frozen=True)
class NonmemberSets:
    """Two or more sets of non-members: their names in the order given (the first is the one the main results audit)
    and, per level, each non-member unit's set (index: the unit's id; members and the population have none)."""

    names: tuple[str, ...]
    by_level: dict[str, pd.Series]

    def masks(self, level: str, ids: pd.Series) -> dict[str, pd.Series]:
        """Per set, which of the units `ids` (of `level`) are in its slice: every unit without a set (members and the
        population, which all sets share) and the set's own non-members."""
        sets = ids.map(self.by_level[level])
        return {name: sets.isna() | (sets == name) for name in self.names}


def nonmember_set_names(samples: pd.DataFrame) -> list[str]:
    """The names of the non-member sets among `samples`, in the order they come (the first is the verdict's); [] when
    no non-member carries a set name."""
    if NONMEMBER_SET not in samples:
        return []
    return list(dict.fromkeys(samples.loc[samples["role"] == NONMEMBER, NONMEMBER_SET].dropna()))


def members_against_each_set(samples: pd.DataFrame) -> list[tuple[str, np.ndarray]]:
    """(set name, row mask) for the members with each non-member set in turn ('nonmembers' with every non-member when
    no set is named): the comparisons a per-set result reads."""
    is_member = (samples["role"] == MEMBER).to_numpy()
    names = nonmember_set_names(samples)
    if not names:
        return [("nonmembers", np.ones(len(samples), bool))]
    return [(name, is_member | (samples[NONMEMBER_SET] == name).to_numpy()) for name in names]


def nonmember_sets(samples: pd.DataFrame) -> NonmemberSets | None:
    """The non-member sets of the samples (sample_id, role, group_id, subgroup_id and NONMEMBER_SET), or None when the
    samples have a single set (or none named)."""
    names = tuple(nonmember_set_names(samples))
    if len(names) < 2:
        return None
    nonmembers = samples[(samples["role"] == NONMEMBER) & samples[NONMEMBER_SET].notna()]
    by_level = {"sample": nonmembers.set_index("sample_id")[NONMEMBER_SET]}
    for level, column in LEVEL_COLUMNS.items():
        units = nonmembers.dropna(subset=[column])
        by_level[level] = units.groupby(column, sort=False)[NONMEMBER_SET].first()
    return NonmemberSets(names, by_level)


def data_summary(signals: pd.DataFrame) -> dict:
    """Counts per role, groups per role, truncated samples, the samples without a group id where others have one
    (`ungrouped`, when any), and the non-member samples of each set when there are several (in the order given: the
    first is the one the main results audit)."""
    groups = signals.dropna(subset=["group_id"]).groupby("role")["group_id"].nunique()
    truncated = int(signals["truncated"].fillna(False).astype(bool).sum()) if "truncated" in signals else 0
    summary = {
        "counts": {role: int(n) for role, n in signals["role"].value_counts().sort_index().items()},
        "groups": {role: int(n) for role, n in groups.items()},
        "truncated": truncated,
    }
    if ungrouped_count(signals):
        summary["ungrouped"] = ungrouped_count(signals)
    if NONMEMBER_SET in signals:
        sets = signals[NONMEMBER_SET].dropna()
        summary["nonmember_sets"] = {name: int((sets == name).sum()) for name in dict.fromkeys(sets)}
    return summary
