"""Role invariants (disjoint by group, enough samples) and seeded group splits."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from lmaudit.errors import InputError


def check_disjoint_groups(corpus: pd.DataFrame) -> None:
    """Refuse a corpus in which one group (patient, user) has samples in two roles."""
    grouped = corpus.dropna(subset=["group_id"])
    roles_per_group = grouped.groupby("group_id", sort=False)["role"].nunique()
    crossing = roles_per_group[roles_per_group > 1]
    if crossing.empty:
        return
    group = crossing.index[0]
    rows = grouped[grouped["group_id"] == group].drop_duplicates("role")
    where = " and ".join(f"{r['role']} ({r['source']}, row {r['row']})" for _, r in rows.iterrows())
    raise InputError(
        f"group '{group}' appears in roles {where}; roles must be disjoint by group: "
        "move all of the group's samples to one role"
    )


def check_role_sizes(corpus: pd.DataFrame, required: Sequence[str], minimum: int = 2) -> None:
    """Refuse a corpus in which a required role has fewer than `minimum` samples."""
    counts = corpus["role"].value_counts()
    for role in required:
        if counts.get(role, 0) < minimum:
            raise InputError(f"role '{role}' has {counts.get(role, 0)} sample(s); an audit needs at least {minimum}")


def split_groups(groups: Sequence[str], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """Assign each group to a role, in the given proportions, by a seeded shuffle."""
    unique = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(unique))
    total = sum(fractions.values())
    bounds = np.cumsum([f / total for f in fractions.values()]) * len(unique)
    assignment = {}
    for rank, index in enumerate(order):
        role_index = int(np.searchsorted(bounds, rank, side="right"))
        assignment[unique[index]] = list(fractions)[min(role_index, len(fractions) - 1)]
    return assignment
