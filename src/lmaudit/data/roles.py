"""Role names (the only place they are spelled), role invariants, and seeded group splits.

Every sample has one role with respect to the target model (docs/design.md: Roles).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from lmaudit.errors import InputError, row_location

if TYPE_CHECKING:  # the checks only call methods of the frames they are given; the command line starts without pandas
    import pandas as pd

MEMBER = "member"
NONMEMBER = "nonmember"
POPULATION = "population"
CALIBRATION_MEMBER = "calibration_member"
SHADOW_MEMBER = "shadow_member"
SHADOW_NONMEMBER = "shadow_nonmember"

ROLES = (MEMBER, NONMEMBER, POPULATION, CALIBRATION_MEMBER, SHADOW_MEMBER, SHADOW_NONMEMBER)
# The samples whose membership the report is about.
AUDITED_ROLES = (MEMBER, NONMEMBER)
# Audited samples and the population that calibrates thresholds: the rows of an attack's scores.
EVALUATED_ROLES = (*AUDITED_ROLES, POPULATION)
# Every sample the target (and its references) is run on in a language-model audit.
TARGET_ROLES = (*EVALUATED_ROLES, CALIBRATION_MEMBER)
# The shadow model's own members and non-members (classifier audits).
SHADOW_ROLES = (SHADOW_MEMBER, SHADOW_NONMEMBER)
# The column of a corpus (and of scores.parquet) naming each non-member's set: the name its file was given under, else
# the file's stem. With two or more sets, every result is also reported per set (Mireshghallah et al.'s MIMIC and i2b2
# columns); the first set is the one the main results audit.
NONMEMBER_SET = "nonmember_set"
DEFAULT_HELD_OUT = 0.15  # `lmaudit split`: of the groups, for the non-members and for the population each


def check_disjoint_groups(corpus: pd.DataFrame, column: str = "role", what: str = "roles") -> None:
    """Refuse a corpus in which one group (patient, user) has samples in two roles (or two values of another `column`,
    such as two non-member sets, which `what` names)."""
    grouped = corpus.dropna(subset=["group_id", column])
    values_per_group = grouped.groupby("group_id", sort=False)[column].nunique()
    crossing = values_per_group[values_per_group > 1]
    if crossing.empty:
        return
    group = crossing.index[0]
    rows = grouped[grouped["group_id"] == group].drop_duplicates(column)
    where = " and ".join(f"{r[column]} ({row_location(r)})" for _, r in rows.iterrows())
    raise InputError(
        f"group '{group}' appears in {what} {where}; {what} must be disjoint by group: "
        f"move all of the group's samples to one of them"
    )


def check_role_sizes(corpus: pd.DataFrame, required: Sequence[str], minimum: int = 2) -> None:
    """Refuse a corpus in which a required role has fewer than `minimum` samples."""
    counts = corpus["role"].value_counts()
    for role in required:
        if counts.get(role, 0) < minimum:
            raise InputError(f"role '{role}' has {counts.get(role, 0)} sample(s); an audit needs at least {minimum}")


def check_audit_roles(corpus: pd.DataFrame, others: Sequence[str] = ()) -> None:
    """Refuse a table an audit cannot use: fewer than 2 members, non-members or samples of each role in `others`, or a
    group in two roles or in two non-member sets (InputError naming the first problem)."""
    check_role_sizes(corpus, [*AUDITED_ROLES, *others])
    check_disjoint_groups(corpus)
    if NONMEMBER_SET in corpus:
        check_disjoint_groups(corpus, NONMEMBER_SET, "non-member sets")


def check_no_single_sample_groups(corpus: pd.DataFrame) -> None:
    """Refuse a group (user) with a single sample: user-level statistics (variance, majority) need two."""
    grouped = corpus.dropna(subset=["group_id"])
    sizes = grouped.groupby("group_id", sort=False)["sample_id"].transform("size")
    single = grouped[sizes.to_numpy() == 1]
    if not single.empty:
        row = single.iloc[0]
        raise InputError(f"{row_location(row)}: user '{row['group_id']}' has only this sample; user-level "
                         "attacks need at least 2 samples per user: add the user's other samples or remove the row")


def split_groups(groups: Sequence[str], fractions: Mapping[str, float], seed: int) -> dict[str, str]:
    """Assign each group to a role, in the given proportions, by a seeded shuffle."""
    import numpy as np  # here, not above: the command line reads the role names without loading numpy

    unique = sorted(set(groups))
    order = np.random.default_rng(seed).permutation(len(unique))
    total = sum(fractions.values())
    bounds = np.cumsum([f / total for f in fractions.values()]) * len(unique)
    assignment = {}
    for rank, index in enumerate(order):
        role_index = int(np.searchsorted(bounds, rank, side="right"))
        assignment[unique[index]] = list(fractions)[min(role_index, len(fractions) - 1)]
    return assignment
