"""Did the model leak at all? The verdict's test, with a level that holds when nothing leaked.

The null hypothesis: the model learnt nothing about its members, so which patients (users; units without a group each
alone) are members and which are the verdict's non-members is exchangeable. Every attack, at every level, gives its AUC
and, where the level has at least 100 non-member units, its true-positive rate at the threshold that accuses at most 1%
of them (the ROC's step lookup, `roc.tpr_at_fpr`: a threshold fitted on the audited non-members, which chance lifts far
more often than 1%). Each statistic is compared with its values over the same `permutations` random relabellings of
whole groups (as many member groups as there are, drawn among all), which carry the threshold's fitting, the patients'
correlation and ties into the null. The family of every attack, statistic and level is corrected at once over those
relabellings (Westfall and Young): the AUCs by single-step max-T, the TPRs, discrete and skewed, by single-step min-P,
each half of the level. So the chance that any test of the family rejects at level a when nothing leaked is at most a
(up to the relabellings' 1/(B+1) resolution), whatever the number of attacks and however they correlate. No torch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from lmaudit.attacks.base import AttackScores
from lmaudit.data.roles import AUDITED_ROLES, MEMBER
from lmaudit.metrics.clusters import cluster_keys
from lmaudit.metrics.results import Number
from lmaudit.metrics.slices import NonmemberSets

TEST_FPR = 0.01  # the false-positive rate the second statistic is read at
PERMUTATION_CELLS = 1 << 22  # relabellings x units held at once
NULL = ("the model learnt nothing about its members: which groups (patients, users; a unit without a group alone) are "
        "members and which are the verdict's non-members is exchangeable")


@dataclass(frozen=True)
class LeakageTest:
    """One statistic of one attack at one level: its observed value, its own permutation p-value, and its family-wise
    p-value (Westfall-Young max-T over every test of the family)."""

    attack: str
    signal: str
    level: str
    statistic: str
    observed: Number
    p_value: Number
    family_p_value: Number


@dataclass(frozen=True)
class LeakageTests:
    """The verdict's family of permutation tests: the null, the relabellings, the groups relabelled, the tests."""

    null: str
    permutations: int
    seed: int
    member_groups: int
    nonmember_groups: int
    tests: list[LeakageTest]

    def level_p_value(self, level: str) -> float | None:
        """The smallest family-wise p-value at `level` (None where no test ran there)."""
        values = [test.family_p_value for test in self.tests if test.level == level]
        return min(values) if values else None


@dataclass(frozen=True)
class _Units:
    """One attack's units at one level, members and the verdict's non-members: scores and global group codes."""

    attack: str
    signal: str
    level: str
    scores: np.ndarray
    groups: np.ndarray


def group_keys(frame: pd.DataFrame, level: str) -> np.ndarray:
    """The group key of each unit of an attack's frame: the unit itself at group level, else its group id."""
    if level == "group":
        return cluster_keys(frame["id"].to_numpy(), frame["id"].to_numpy())
    groups = frame["group_id"].to_numpy() if "group_id" in frame else None
    return cluster_keys(frame["id"].to_numpy(), groups, kind=level)


def verdict_units(attack: AttackScores, sets: NonmemberSets | None, roles: tuple[str, ...] = AUDITED_ROLES
                  ) -> pd.DataFrame:
    """The rows of an attack's frame in `roles`, the non-members among them only the verdict's set's (the first)."""
    frame = attack.frame
    if sets is not None:
        frame = frame[sets.masks(attack.level, frame["id"])[sets.names[0]].to_numpy()]
    return frame[frame["role"].isin(roles)]


def group_codes(units: list[tuple[AttackScores, pd.DataFrame]], first_role: str) -> tuple[list[np.ndarray], np.ndarray]:
    """Each attack's units' codes in one codebook of groups shared by every attack and level, and which groups are of
    `first_role` (members, say): one relabelling of these groups relabels every attack at once."""
    keys = [group_keys(frame, attack.level) for attack, frame in units]
    codes, uniques = pd.factorize(pd.Series(np.concatenate(keys)))
    first = np.zeros(len(uniques), bool)
    first[codes[np.concatenate([frame["role"].to_numpy() == first_role for _, frame in units])]] = True
    return np.split(codes, np.cumsum([len(key) for key in keys])[:-1]), first


def auc_statistics(scores: np.ndarray, groups: np.ndarray, members: np.ndarray) -> np.ndarray:
    """(relabellings,) AUC (ties 1/2) under each row of `members` (relabellings x groups, True = member group)."""
    ranks = np.bincount(groups, weights=rankdata(scores), minlength=members.shape[1])
    sizes = np.bincount(groups, minlength=members.shape[1]).astype(float)
    rank_sum, n_members = members @ ranks, members @ sizes
    n_nonmembers = len(scores) - n_members
    with np.errstate(invalid="ignore", divide="ignore"):
        return (rank_sum - n_members * (n_members + 1) / 2) / (n_members * n_nonmembers)


def tpr_statistics(scores: np.ndarray, groups: np.ndarray, members: np.ndarray, fpr: float = TEST_FPR) -> np.ndarray:
    """(relabellings,) the TPR at the largest ROC point whose FPR is at most `fpr` under each row of `members`: the
    share of members scoring above the (k+1)-th highest non-member, k = floor(fpr * non-members)."""
    order = np.argsort(-np.asarray(scores, dtype=float), kind="stable")
    descending, groups = np.asarray(scores, dtype=float)[order], groups[order]
    block_start = np.r_[0, np.flatnonzero(np.diff(descending)) + 1]
    first_of_block = np.repeat(block_start, np.diff(np.r_[block_start, len(descending)]))
    out = np.empty(len(members))
    step = max(1, PERMUTATION_CELLS // max(len(descending), 1))
    for first in range(0, len(members), step):
        is_member = members[first:first + step][:, groups]
        n_members = is_member.sum(1)
        n_nonmembers = len(descending) - n_members
        allowed = np.floor(fpr * n_nonmembers + 1e-9).astype(int)
        nonmembers_so_far = np.cumsum(~is_member, axis=1)
        at = np.argmax(nonmembers_so_far >= (allowed + 1)[:, None], axis=1)
        start = first_of_block[at]
        members_so_far = np.cumsum(is_member, axis=1)
        above = np.where(start > 0, members_so_far[np.arange(len(at)), np.maximum(start - 1, 0)], 0)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[first:first + step] = np.where((n_members > 0) & (n_nonmembers > 0), above / n_members, np.nan)
    return out


def relabellings(is_member_group: np.ndarray, permutations: int, seed: int) -> np.ndarray:
    """(permutations + 1, groups) member masks: the observed one first, then `permutations` draws of as many member
    groups among all groups, uniformly."""
    rng = np.random.default_rng(seed)
    count = int(is_member_group.sum())
    drawn = np.argsort(rng.random((permutations, len(is_member_group))), axis=1) < count
    return np.vstack([is_member_group[None, :], drawn])


def _no_evidence(statistics: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(statistics), -np.inf, statistics)


def raw_p_values(statistics: np.ndarray) -> np.ndarray:
    """Each column's share of rows at or above its observed value (the first row): its own permutation p-value
    ((B + 1) x tests, larger = more evidence, NaN = none)."""
    values = _no_evidence(statistics)
    return (values >= values[0]).mean(axis=0)


def max_t_adjusted(statistics: np.ndarray) -> np.ndarray:
    """Westfall-Young single-step max-T p-values of each column ((B + 1) x tests, the observed row first): the share of
    rows whose largest standardised statistic (each column centred and scaled over all its rows) reaches the column's
    own. For statistics near normal under the relabellings, such as AUCs: an overwhelming result stands out however
    many columns there are, where min-P would stop at the rows on which some null column peaks."""
    finite = np.where(np.isfinite(_no_evidence(statistics)), statistics, np.nan)
    centre, spread = np.nanmean(finite, axis=0), np.nanstd(finite, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        standard = np.where(spread > 0, (finite - centre) / spread, 0.0)
    standard = np.where(np.isnan(finite), -np.inf, standard)
    return (standard.max(axis=1)[:, None] >= standard[0][None, :]).mean(axis=0)


def min_p_adjusted(statistics: np.ndarray) -> np.ndarray:
    """Westfall-Young single-step min-P p-values of each column ((B + 1) x tests, the observed row first): the share of
    rows whose smallest permutation p-value reaches the column's own. For discrete, skewed statistics such as a TPR at a
    low FPR, whose standardised values would swamp max-T."""
    values = _no_evidence(statistics)
    ordered = np.sort(values, axis=0)
    at_or_above = np.stack([len(values) - np.searchsorted(ordered[:, j], values[:, j], side="left")
                            for j in range(values.shape[1])], axis=1)
    smallest = (at_or_above / len(values)).min(axis=1)
    return (smallest[:, None] <= (at_or_above[0] / len(values))[None, :]).mean(axis=0)


def family_p_values(statistics: np.ndarray, is_auc: np.ndarray) -> np.ndarray:
    """Family-wise p-values: the AUC columns by max-T, the TPR columns by min-P, each family at half the level
    (Bonferroni: its p-values doubled) where both have columns."""
    adjusted = np.ones(statistics.shape[1])
    families = [family for family in (is_auc, ~is_auc) if family.any()]
    for family in families:
        within = max_t_adjusted(statistics[:, family]) if family is is_auc else min_p_adjusted(statistics[:, family])
        adjusted[family] = np.minimum(1.0, len(families) * within)
    return adjusted


def leakage_tests(attacks: list[AttackScores], sets: NonmemberSets | None = None, permutations: int = 1000,
                  seed: int = 0) -> LeakageTests | None:
    """The family of permutation tests (module docstring) over every attack and level with at least 2 members and 2 of
    the verdict's non-members; None where none has."""
    units = []
    for attack in attacks:
        frame = verdict_units(attack, sets)
        roles = frame["role"].to_numpy()
        if (roles == MEMBER).sum() >= 2 and (roles != MEMBER).sum() >= 2:
            units.append((attack, frame))
    if not units:
        return None
    codes, is_member_group = group_codes(units, MEMBER)
    members = relabellings(is_member_group, permutations, seed)
    columns, names = [], []
    for (attack, frame), groups in zip(units, codes, strict=True):
        scores = frame["score"].to_numpy(dtype=float)
        columns.append(auc_statistics(scores, groups, members))
        names.append((attack, "auc"))
        if (frame["role"] != MEMBER).sum() >= 1 / TEST_FPR:
            columns.append(tpr_statistics(scores, groups, members))
            names.append((attack, "tpr_at_1pct_fpr"))
    statistics = np.stack(columns, axis=1)
    raw, adjusted = raw_p_values(statistics), family_p_values(statistics, np.array([n == "auc" for _, n in names]))
    tests = [LeakageTest(attack.attack, attack.signal, attack.level, statistic, float(statistics[0, j]), float(raw[j]),
                         float(adjusted[j])) for j, (attack, statistic) in enumerate(names)]
    return LeakageTests(NULL, permutations, seed, int(is_member_group.sum()), int((~is_member_group).sum()), tests)
