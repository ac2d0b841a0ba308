"""Is the population drawn like the audited non-members? Population thresholds calibrate precision and recall; where the
two sets score differently, those numbers mislead. For every attack and level, the AUC of the population against the
verdict's non-members (0.5 when they are one distribution) is compared, two-sided, with its values when whole groups of
the two sets are relabelled at random, and the family of every attack and level is corrected at once (Westfall-Young
max-T, as the verdict's own tests: metrics/permutation_tests.py), so a model audited with a population drawn like its
non-members is warned at most `level` of the time, however many attacks ran. No torch."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import AttackScores
from lmaudit.data.roles import NONMEMBER, POPULATION
from lmaudit.metrics.permutation_tests import (
    auc_statistics,
    group_codes,
    max_t_adjusted,
    raw_p_values,
    relabellings,
    verdict_units,
)
from lmaudit.metrics.slices import NonmemberSets

POPULATION_LEVEL = 0.01  # family-wise false-alarm level of the warning
TEST = ("the AUC of the population against the verdict's non-members, each attack and level, against its values when "
        "whole groups of the two are relabelled at random, two-sided, corrected over every attack and level at once "
        "(Westfall-Young max-T)")


def population_fit(attacks: list[AttackScores], sets: NonmemberSets | None = None, permutations: int = 1000,
                   seed: int = 0, level: float = POPULATION_LEVEL) -> dict:
    """report.json's `validity.population`: the test (module docstring), how many attack-levels it covered, its level,
    and those it rejects (`rejected`: attack, signal, level, the AUC of the population against the non-members and the
    family-wise p-value)."""
    units = []
    for attack in attacks:
        frame = verdict_units(attack, sets, (NONMEMBER, POPULATION))
        roles = frame["role"].to_numpy()
        if (roles == POPULATION).sum() >= 2 and (roles == NONMEMBER).sum() >= 2:
            units.append((attack, frame))
    summary = {"test": TEST, "tested": len(units), "level": level, "permutations": permutations, "rejected": []}
    if not units:
        return summary
    codes, is_population_group = group_codes(units, POPULATION)
    populations = relabellings(is_population_group, permutations, seed)
    aucs = np.stack([auc_statistics(frame["score"].to_numpy(dtype=float), groups, populations)
                     for (_, frame), groups in zip(units, codes, strict=True)], axis=1)
    distance = np.abs(aucs - 0.5)
    adjusted = max_t_adjusted(distance)
    raw = raw_p_values(distance)
    summary["rejected"] = [{"attack": attack.attack, "signal": attack.signal, "level": attack.level,
                            "population_auc": float(aucs[0, j]), "p": float(raw[j]), "family_p": float(adjusted[j])}
                           for j, (attack, _) in enumerate(units) if adjusted[j] < level]
    return summary
