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
UNGROUPED = ("refuse", "own-group")  # `lmaudit split --ungrouped`: what to do with rows without a group id


# How an error names each kind of unit whose samples must share one role, and what it tells the user to do.
UNITS = {"group_id": ("group", "move all of the group's samples to one of them"),
         "subgroup_id": ("admission (subgroup_id)", "an admission belongs to one patient and one role: give each "
                                                    "admission an id of its own across the files (e.g. with its "
                                                    "patient's id in front)")}


def check_disjoint_groups(corpus: pd.DataFrame, column: str = "role", what: str = "roles", unit: str = "group_id") -> None:
    """Refuse a corpus in which one group (patient, user; or admission, with `unit` subgroup_id) has samples in two
    roles (or two values of another `column`, such as two non-member sets, which `what` names)."""
    if unit not in corpus:
        return
    grouped = corpus.dropna(subset=[unit, column])
    values_per_group = grouped.groupby(unit, sort=False)[column].nunique()
    crossing = values_per_group[values_per_group > 1]
    if crossing.empty:
        return
    group, (name, remedy) = crossing.index[0], UNITS[unit]
    rows = grouped[grouped[unit] == group].drop_duplicates(column)
    where = " and ".join(f"{r[column]} ({row_location(r)})" for _, r in rows.iterrows())
    raise InputError(f"{name} '{group}' appears in {what} {where}; {what} must be disjoint by {name.split()[0]}: "
                     f"{remedy}")


def same_texts(texts: pd.Series) -> pd.Series:
    """Texts as lmaudit compares them: each run of whitespace one space, the ends stripped (a tokenizer reads texts
    that differ only there alike)."""
    return texts.astype(str).str.replace(r"\s+", " ", regex=True).str.strip()


def writers(corpus: pd.DataFrame) -> pd.Series:
    """Who wrote each row, as far as its ids tell: 'group:<group_id>'; for a row without one, its admission's group (from
    the admission's rows that have one), else 'admission:<subgroup_id>'; else nothing (NaN)."""
    groups = corpus["group_id"].astype(object)
    if "subgroup_id" not in corpus:
        return ("group:" + groups.astype(str)).where(groups.notna())
    admissions = corpus["subgroup_id"].astype(object)
    group_of = corpus.dropna(subset=["group_id", "subgroup_id"]).groupby("subgroup_id")["group_id"].first()
    groups = groups.fillna(admissions.map(group_of))
    named = ("group:" + groups.astype(str)).where(groups.notna(), "admission:" + admissions.astype(str))
    return named.where(groups.notna() | admissions.notna())


def text_sides(corpus: pd.DataFrame) -> pd.Series:
    """What a text may belong to one of: each row's role, or for a non-member, its set where there are several."""
    sides = corpus["role"].astype(object)
    if NONMEMBER_SET in corpus and corpus[NONMEMBER_SET].nunique() > 1:
        nonmember = (corpus["role"] == NONMEMBER).to_numpy()
        sides = sides.mask(nonmember, "non-member set '" + corpus[NONMEMBER_SET].astype(str) + "'")
    return sides


def check_disjoint_texts(corpus: pd.DataFrame) -> None:
    """Refuse a text (as `same_texts` compares them) in two of the target's roles, two non-member sets or the two
    shadow roles, unless two `writers` hold it (two groups; for rows without a group id, two admissions): then it is
    boilerplate that roles may share; otherwise one record would be both trained on and held out, and nothing tells it
    from a copy."""
    if "text" not in corpus:  # scores without texts (an audit from precomputed losses)
        return
    for roles in (TARGET_ROLES, SHADOW_ROLES):
        rows = corpus[corpus["role"].isin(roles)]
        rows = rows.assign(_text=same_texts(rows["text"]), _side=text_sides(rows), _writer=writers(rows))
        per_text = rows.groupby("_text", sort=False).agg(sides=("_side", "nunique"), writers=("_writer", "nunique"))
        copied = per_text.index[(per_text["sides"] > 1).to_numpy() & (per_text["writers"] < 2).to_numpy()]
        if len(copied):
            held = rows[rows["_text"].isin(copied)]
            first = held.iloc[0]
            other = held[(held["_text"] == first["_text"]) & (held["_side"] != first["_side"])].iloc[0]
            others = len(copied) - 1
            more = (f", and so {'does 1 other text' if others == 1 else f'do {others} other texts'} ({len(copied)} in all)"
                    if others else "")
            raise InputError(
                f"{row_location(other)} ({other['_side']}) has the same text as {row_location(first)} "
                f"({first['_side']}){more}: one record in two roles (trained on and held out, or held out twice) "
                "makes the audit meaningless, and a text may be in two only where the ids show two writers (two "
                "group_ids, or for rows without one, two subgroup_ids): boilerplate; keep each text in one role "
                "(remove its other copies), or give every row its group_id")


def check_role_sizes(corpus: pd.DataFrame, required: Sequence[str], minimum: int = 2) -> None:
    """Refuse a corpus in which a required role has fewer than `minimum` samples."""
    counts = corpus["role"].value_counts()
    for role in required:
        if counts.get(role, 0) < minimum:
            raise InputError(f"role '{role}' has {counts.get(role, 0)} sample(s); an audit needs at least {minimum}")


def check_audit_roles(corpus: pd.DataFrame, others: Sequence[str] = ()) -> None:
    """Refuse a table an audit cannot use: fewer than 2 members, non-members or samples of each role in `others`; a
    group or an admission in two roles or in two non-member sets; a text in two that no two groups hold
    (InputError naming the first problem)."""
    check_role_sizes(corpus, [*AUDITED_ROLES, *others])
    check_disjoint_groups(corpus)
    if NONMEMBER_SET in corpus:
        check_disjoint_groups(corpus, NONMEMBER_SET, "non-member sets")
    check_disjoint_texts(corpus)
    check_disjoint_groups(corpus, unit="subgroup_id")
    if NONMEMBER_SET in corpus:
        check_disjoint_groups(corpus, NONMEMBER_SET, "non-member sets", unit="subgroup_id")


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
