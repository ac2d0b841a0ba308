"""Build every attack that a signals table allows, at sample and group level."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from lmaudit.attacks.scores import (
    aggregate_by_group,
    likelihood_ratio_score,
    loss_score,
)
from lmaudit.attacks.thresholds import mean_member_loss_threshold

EVALUATED_ROLES = ("member", "nonmember", "population")


@dataclass(frozen=True)
class Threshold:
    """A calibrated threshold in membership-score units, and the rule that chose it."""

    rule: str
    value: float
    alpha: float | None = None


@dataclass
class AttackScores:
    """Membership scores of one attack at one level: `frame` has one row per sample or group,
    with columns id, role, score (and length at sample level). `calibration` holds what was fitted
    on calibration or shadow data (class thresholds, a regression's coefficients), for the report."""

    attack: str
    signal: str
    level: str
    frame: pd.DataFrame
    fixed_thresholds: list[Threshold] = field(default_factory=list)
    calibration: dict = field(default_factory=dict)


def aggregated_attack(sample_attack: AttackScores, column: str, level: str) -> AttackScores:
    """Mean score per group (or subgroup), with the same thresholds rules (Jagannatha: the mu threshold
    applied to the group's mean loss)."""
    frame = sample_attack.frame.dropna(subset=[column])
    grouped = aggregate_by_group(frame["score"].to_numpy(), frame[column].to_numpy())
    roles = frame.groupby(column, sort=True)["role"].first()
    group_frame = pd.DataFrame({"id": grouped.index, "role": roles.loc[grouped.index].to_numpy(), "score": grouped.to_numpy()})
    if column == "subgroup_id":  # keep the patient of each admission, for group-aware statistics
        group_frame["group_id"] = frame.groupby(column, sort=True)["group_id"].first().loc[grouped.index].to_numpy()
    return AttackScores(sample_attack.attack, sample_attack.signal, level, group_frame, sample_attack.fixed_thresholds,
                        sample_attack.calibration)


def build_attacks(signals: pd.DataFrame, signal: str) -> tuple[list[AttackScores], list[dict]]:
    """Attacks from a table with columns sample_id, role, group_id, length, target and optional reference.

    `target` and `reference` are losses in the signal's unit (lower = the model finds the sample
    more likely). Returns the attacks and, for those the data does not allow, why not.
    """
    evaluated = signals[signals["role"].isin(EVALUATED_ROLES)]
    base = pd.DataFrame({
        "id": evaluated["sample_id"].to_numpy(),
        "role": evaluated["role"].to_numpy(),
        "group_id": evaluated["group_id"].to_numpy(),
        "subgroup_id": evaluated["subgroup_id"].to_numpy() if "subgroup_id" in evaluated else None,
        "length": evaluated["length"].to_numpy() if "length" in evaluated else np.nan,
    })
    calibration = signals.loc[signals["role"] == "calibration_member", "target"].to_numpy(dtype=float)
    loss_thresholds = [Threshold("mean_member_loss", mean_member_loss_threshold(calibration))] if len(calibration) else []
    attacks = [AttackScores("loss", signal, "sample", base.assign(score=loss_score(evaluated["target"])), loss_thresholds)]
    skipped = []
    if "reference" in evaluated and evaluated["reference"].notna().all():
        ratio = likelihood_ratio_score(evaluated["target"], evaluated["reference"])
        attacks.append(AttackScores("likelihood_ratio", signal, "sample", base.assign(score=ratio)))
    else:
        skipped.append({"attack": "likelihood_ratio", "level": "sample", "slice": "all", "reason": "no reference-model signal"})
    audited = base[base["role"].isin(["member", "nonmember"])]
    sample_attacks = list(attacks)
    for column, level in (("subgroup_id", "subgroup"), ("group_id", "group")):
        if audited[column].notna().all():
            attacks += [aggregated_attack(a, column, level) for a in sample_attacks]
        else:
            skipped.append({"attack": "*", "level": level, "slice": "all", "reason": f"audited samples without {column}"})
    return attacks, skipped
