"""What an audit's counts can show at best, whatever the scores: per level, the false-positive rate the non-members
resolve at the verdict's 1% threshold, the smallest family-wise p-value the relabellings can give, and so which risks
the verdict can read at all (a perfect attack, or a model that learnt nothing, on these counts); and the best value a
gate's threshold can be met with. `lmaudit plan` and `lmaudit split` read it from the planned files before anything is
trained, the verdict from the audited units (summary.levels[...].power), and the gate says "cannot decide" where the
counts could not have told. Rates are bounded as the verdict's own intervals bound them (metrics/uncertainty.py: a
rate of 0 or 1 counts groups; the 1% threshold's accusations are placed in distinct groups, the best case); the AUC's
interval counts units as independent, the best case for notes that come in patients. No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import comb

from lmaudit.data.roles import MEMBER, NONMEMBER, NONMEMBER_SET, POPULATION
from lmaudit.metrics.auc_interval import FEW_UNITS, score_interval
from lmaudit.metrics.privacy import epsilon_from_bounds
from lmaudit.metrics.risk_rule import (
    HIGH_EPSILON,
    HIGH_LEVEL,
    HIGH_RATIO,
    MODERATE_LEVEL,
    ONE_PERCENT,
    RESOLUTION_FACTOR,
    exposure_ratio,
)
from lmaudit.metrics.uncertainty import clopper_pearson, rate_interval

CALIBRATION_UNITS = 10  # population units a calibrated threshold needs (the 10% threshold's), for an epsilon bound
LEVEL_COLUMNS = {"subgroup": "subgroup_id", "group": "group_id"}


@dataclass(frozen=True)
class LevelCounts:
    """The units one level of an audit compares: members and the verdict's non-members at the level, the independent
    groups they come from (patients, users; a unit without a group alone), whether a threshold can be calibrated
    without their labels (population or calibration members, for epsilon), and the verdict's test: the groups it
    relabels (every level's at once), its relabellings and its families (2 where some level has at least 100
    non-member units: its TPRs are tested too)."""

    members: int
    nonmembers: int
    member_groups: int
    nonmember_groups: int
    calibrated: bool
    relabelled_members: int
    relabelled_nonmembers: int
    permutations: int = 1000
    families: int = 1


@dataclass(frozen=True)
class LevelPower:
    """What a level's counts (`counts`) allow at best: the FPR's upper 95% bound at the 1% threshold (no ties:
    `best_fpr_bound`), the smallest family-wise p-value, the largest exposure ratio and epsilon bound (every member
    exposed, no non-member accused), which risks can be read, and the independent non-member units 'low' needs (the
    fewest at or above the groups, or the units where each stands alone, that reach it)."""

    counts: LevelCounts
    fpr_bound: float
    smallest_p: float
    best_exposure_ratio: float
    best_epsilon: float
    can_read_moderate: bool
    can_read_high: bool
    can_read_low: bool
    nonmembers_for_low: int


def one_percent_fpr_bound(nonmembers: int) -> float:
    """The FPR's upper 95% bound at the threshold that accuses at most 1% of `nonmembers` independent units, when
    their scores do not tie: Clopper-Pearson's, of floor(n / 100) accused."""
    return clopper_pearson(math.floor(ONE_PERCENT * nonmembers + 1e-9), nonmembers)[1] if nonmembers else 1.0


def reads_low(nonmembers: int) -> bool:
    """Whether `nonmembers` independent units resolve a 1% false-positive rate as 'low' asks."""
    return one_percent_fpr_bound(nonmembers) <= RESOLUTION_FACTOR * ONE_PERCENT


def nonmembers_for_low(given: int = 0) -> int:
    """The fewest independent non-member units, `given` or more, that resolve a 1% false-positive rate (581 from
    scratch; the bound is not monotone, as floor(n / 100) steps)."""
    count = max(1, given)
    while not reads_low(count):
        count += 1
    return count


def smallest_family_p(member_groups: int, nonmember_groups: int, permutations: int, families: int = 1) -> float:
    """The smallest family-wise p-value the verdict's test can give: (1 + the relabellings expected to repeat the
    observed one) / (permutations + 1), times the families (each at half the level where there are two)."""
    if member_groups < 1 or nonmember_groups < 1:
        return 1.0
    distinct = float(comb(member_groups + nonmember_groups, member_groups, exact=False))
    return min(1.0, families * (1 + permutations / distinct) / (permutations + 1))


def best_fpr_bound(counts: LevelCounts) -> float:
    """The FPR's upper bound at the 1% threshold of an attack that accuses no more than it must (floor(n / 100)), at
    best: its accusations in distinct groups and the non-members spread evenly over their groups, the clustered
    interval the verdict computes (metrics/uncertainty.py:rate_interval; none accused counts groups)."""
    accused = math.floor(ONE_PERCENT * counts.nonmembers + 1e-9)
    if counts.nonmembers == 0 or counts.nonmember_groups == 0:
        return 1.0
    if counts.nonmember_groups >= counts.nonmembers:
        return one_percent_fpr_bound(counts.nonmembers)
    groups = np.arange(counts.nonmembers) % counts.nonmember_groups  # unit i in group i mod g: the first g differ
    return rate_interval(np.arange(counts.nonmembers) < accused, groups)[1]


def level_power(counts: LevelCounts, delta: float = 1e-5) -> LevelPower:
    """What `counts` can show at best (module docstring)."""
    every_member = clopper_pearson(counts.member_groups, counts.member_groups)[0] if counts.member_groups else 0.0
    no_nonmember = clopper_pearson(0, counts.nonmember_groups)[1] if counts.nonmember_groups else 1.0
    fpr_bound = best_fpr_bound(counts)
    ratio = exposure_ratio(every_member, fpr_bound)
    epsilon = epsilon_from_bounds(every_member, no_nonmember, delta) if counts.calibrated else 0.0
    smallest = smallest_family_p(counts.relabelled_members, counts.relabelled_nonmembers, counts.permutations,
                                 counts.families)
    return LevelPower(
        counts=counts, fpr_bound=fpr_bound, smallest_p=smallest, best_exposure_ratio=ratio,
        best_epsilon=epsilon, can_read_moderate=smallest < MODERATE_LEVEL,
        can_read_high=smallest < HIGH_LEVEL and (ratio >= HIGH_RATIO or epsilon >= HIGH_EPSILON),
        can_read_low=fpr_bound <= RESOLUTION_FACTOR * ONE_PERCENT,
        nonmembers_for_low=nonmembers_for_low(min(counts.nonmembers, counts.nonmember_groups)))


def best_auc_upper(counts: LevelCounts) -> float:
    """The upper end of the AUC's 95% interval for a model that learnt nothing (AUC 0.5), at best: Newcombe's score
    interval of independent units, widened below FEW_UNITS groups a side to the exact interval of that many pairs, as
    metrics/auc_interval.py widens every interval (its bootstrap can only widen it more)."""
    high = score_interval(0.5, counts.members, counts.nonmembers)[1]
    fewest = min(counts.member_groups, counts.nonmember_groups)
    if fewest < FEW_UNITS:
        high = max(high, clopper_pearson(round(0.5 * fewest), fewest)[1])
    return high


def best_tpr_upper(counts: LevelCounts) -> float:
    """The upper end of the TPR's 95% interval at the 1% threshold when no member is exposed (a rate of 0: groups)."""
    return clopper_pearson(0, counts.member_groups)[1] if counts.member_groups else 1.0


def _units(frame: pd.DataFrame, level: str) -> int:
    if level == "sample":
        return len(frame)
    return int(frame[LEVEL_COLUMNS[level]].dropna().nunique())


def _groups(frame: pd.DataFrame, level: str = "sample") -> int:
    if level != "sample":  # a level's units, each with its group where it has one (a group is its own)
        column = LEVEL_COLUMNS[level]
        frame = frame.dropna(subset=[column]).drop_duplicates(column)
    grouped = frame["group_id"].notna() if "group_id" in frame else pd.Series(False, index=frame.index)
    return int(frame.loc[grouped, "group_id"].nunique() + (~grouped).sum())


def corpus_counts(corpus: pd.DataFrame, permutations: int, calibration_members: bool = False) -> dict[str, LevelCounts]:
    """Each level's LevelCounts in an audit's corpus (lmaudit's columns and roles; the verdict's non-members are the
    first set's): sample always, subgroup and group where some sample carries their id."""
    members = corpus[corpus["role"] == MEMBER]
    nonmembers = corpus[corpus["role"] == NONMEMBER]
    if NONMEMBER_SET in corpus and nonmembers[NONMEMBER_SET].notna().any():
        nonmembers = nonmembers[nonmembers[NONMEMBER_SET] == nonmembers[NONMEMBER_SET].dropna().iloc[0]]
    population = corpus[corpus["role"] == POPULATION]
    levels = ["sample", *(level for level, column in LEVEL_COLUMNS.items()
                          if column in corpus and corpus[column].notna().any())]
    families = 2 if any(_units(nonmembers, level) >= 1 / ONE_PERCENT for level in levels) else 1
    return {level: LevelCounts(
        members=_units(members, level), nonmembers=_units(nonmembers, level), member_groups=_groups(members, level),
        nonmember_groups=_groups(nonmembers, level),
        calibrated=calibration_members or _units(population, level) >= CALIBRATION_UNITS,
        relabelled_members=_groups(members), relabelled_nonmembers=_groups(nonmembers),
        permutations=permutations, families=families) for level in levels}


def best_value(metric: str, side: str, counts: LevelCounts) -> float:
    """The least a gate's number can read on `counts` (`metric` auc or tpr_at_1pct_fpr, `side` upper, point or lower
    of its interval): a model that learnt nothing, at best; a threshold below it cannot pass whatever was trained."""
    if metric == "auc":
        return {"upper": best_auc_upper(counts), "point": 0.5, "lower": 1 - best_auc_upper(counts)}[side]
    return best_tpr_upper(counts) if side == "upper" else 0.0
