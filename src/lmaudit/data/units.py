"""The units `lmaudit split` draws: each patient or user (group_id) whole, and each row without a group id with the rows
it cannot be parted from (its admission's, and those of its exact text unless two writers hold that text), so that
every split passes the audit's checks (data/roles.py: a group, an admission, or a text no two writers hold, in one
role).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from lmaudit.data.roles import same_texts, writers
from lmaudit.errors import InputError, row_location


def own_units(corpus: pd.DataFrame) -> pd.Series:
    """Each row's unit before any joining: 'group:<id>', or 'row:<sample id>' for a row without a group id (the prefixes
    keep a sample id that equals some group id another unit)."""
    groups = corpus["group_id"]
    return ("group:" + groups.astype(str)).where(groups.notna(), "row:" + corpus["sample_id"].astype(str))


def refuse_admissions_of_two_groups(corpus: pd.DataFrame) -> None:
    """InputError naming an admission (subgroup_id) whose rows carry two group ids: a split could part it, and the
    audit would then find one admission in two roles."""
    grouped = corpus.dropna(subset=["subgroup_id", "group_id"])
    groups = grouped.groupby("subgroup_id", sort=False)["group_id"].nunique()
    if (groups > 1).any():
        rows = grouped[grouped["subgroup_id"] == groups.index[groups.to_numpy() > 1][0]].drop_duplicates("group_id")
        first, second = rows.iloc[0], rows.iloc[1]
        raise InputError(f"{row_location(second)}: admission (subgroup_id) '{second['subgroup_id']}' is of group "
                         f"'{second['group_id']}', but {row_location(first)} gives it to '{first['group_id']}'; an "
                         "admission belongs to one patient: fix the ids (admission ids unique across patients)")


def _naming_order(key: str) -> tuple[int, str]:
    """Which key names a joined unit: its first group, else its first row without a group (never a link's key)."""
    return (0 if key.startswith("group:") else 1 if key.startswith("row:") else 2, key)


def drawn_units(corpus: pd.DataFrame) -> pd.Series:
    """Each row's unit of the draw: its group's, or for a row without one, the unit of the rows that share its admission
    or its text (where fewer than two `writers` hold that text), joined transitively (the connected components of
    units and what links them); a unit holding a group is named by its first group, so that a file whose rows all have
    group ids draws exactly its groups."""
    refuse_admissions_of_two_groups(corpus)
    index, corpus = corpus.index, corpus.reset_index(drop=True)
    own = own_units(corpus)
    ungrouped = corpus["group_id"].isna()
    if not ungrouped.any():
        return own.set_axis(index)
    texts = same_texts(corpus["text"])
    few_writers = writers(corpus).groupby(texts, sort=False).transform("nunique") < 2
    links = pd.concat([pd.DataFrame({"unit": own, "via": "admission:" + corpus["subgroup_id"].astype(str)})
                       [corpus["subgroup_id"].notna()],
                       pd.DataFrame({"unit": own, "via": "text:" + texts})[few_writers]])
    reached = set(links.loc[ungrouped[links.index].to_numpy(), "via"])  # only what a row without a group shares matters
    links = links[links["via"].isin(reached)]
    keys = pd.Index(pd.unique(np.concatenate([own.to_numpy(), links["via"].to_numpy()])))
    graph = coo_matrix((np.ones(len(links)), (keys.get_indexer(links["unit"]), keys.get_indexer(links["via"]))),
                       shape=(len(keys), len(keys)))
    component = pd.Series(connected_components(graph, directed=False)[1], index=keys)
    names = pd.Series(keys, index=keys).groupby(component.to_numpy()).agg(lambda found: min(found, key=_naming_order))
    named = pd.Series(names.loc[component.to_numpy()].to_numpy(), index=keys)  # each key: its component's name
    return own.map(named).set_axis(index)
