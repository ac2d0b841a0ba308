"""Learned attacks on white-box feature vectors: standardised features, logistic regression (Jagannatha et al.).

Two ways to get labelled training data, both reported:
- `split`: as in the paper, a seeded 20% of the audited members and non-members train the
  attack and the other 80% are audited. The split is by group (a sample without one is its own
  unit), so no patient has samples on both sides.
- `calibration`: the attack trains on known training samples (`calibration_member`) against half
  of the population; no audited sample's label is ever read. The other half of the population
  calibrates the population thresholds.
- `shadow` (classifiers): the attack trains on the shadow model's features of its own members and
  non-members, and is applied to the target's features of the audited samples.
The membership score is the regression's log-odds (higher = member).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from lmaudit.attacks.suite import AttackScores, Threshold, aggregated_attack

AUDITED_ROLES = ("member", "nonmember")
# The regression's own decision: log-odds >= 0, i.e. membership probability >= 0.5.
DECISION = [Threshold("probability_0.5", 0.0)]


def training_split(roles: np.ndarray, units: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """True for the rows that train the attack: `fraction` of each role's units (patients or users; a sample
    without a group is its own unit), at least one and never all of them, seeded. Roles need 2 units or more."""
    roles, units = np.asarray(roles), np.asarray(units)
    rng = np.random.default_rng(seed)
    chosen = set()
    for role in sorted(set(roles)):
        role_units = np.unique(units[roles == role])
        count = min(max(1, int(round(fraction * len(role_units)))), len(role_units) - 1)
        chosen.update(role_units[rng.permutation(len(role_units))[:count]].tolist())
    return np.isin(units, list(chosen))


def split_units(table: pd.DataFrame) -> np.ndarray:
    """Each row's unit for splitting: its group, or the sample itself when it has none."""
    groups = table["group_id"].astype(object)
    return np.where(groups.isna(), "sample:" + table["sample_id"].astype(str), "group:" + groups.astype(str))


def _too_few_units(table: pd.DataFrame, rows: np.ndarray, roles: tuple[str, ...]) -> str | None:
    units = pd.Series(split_units(table[rows])).groupby(table.loc[rows, "role"].to_numpy()).nunique()
    short = [role for role in roles if units.get(role, 0) < 2]
    return f"{', '.join(short)}: fewer than 2 patients or users to split" if short else None


def informative_columns(features: np.ndarray, relative: float = 1e-9) -> np.ndarray:
    """Columns not numerically zero everywhere: attention key biases, for one, have a gradient that is
    zero up to float noise, and standardising that noise would give it the weight of a real feature."""
    magnitude = np.abs(np.asarray(features, dtype=float)).max(axis=0)
    return magnitude > relative * magnitude.max()


def logistic_scores(train_features: np.ndarray, train_is_member: np.ndarray, features: np.ndarray, seed: int = 0) -> np.ndarray:
    """Log-odds of membership from a standardised logistic regression fitted on the training rows."""
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=seed))
    model.fit(np.asarray(train_features, dtype=float), np.asarray(train_is_member, dtype=bool))
    return model.decision_function(np.asarray(features, dtype=float))


def _frame(table: pd.DataFrame, scores: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"id": table["sample_id"].to_numpy(), "role": table["role"].to_numpy(),
                         "group_id": table["group_id"].to_numpy(), "subgroup_id": table["subgroup_id"].to_numpy(),
                         "length": table["length"].to_numpy() if "length" in table else np.nan, "score": scores})


def build_learned_attacks(table: pd.DataFrame, features: np.ndarray, signal: str, fraction: float = 0.2,
                          seed: int = 0) -> tuple[list[AttackScores], list[dict]]:
    """The split variant, and the calibration or shadow variants the roles allow, for one feature matrix (one row
    per row of `table`, which has columns sample_id, role, group_id, subgroup_id and optionally length), at
    sample, subgroup and group level. Shadow rows must hold the shadow model's features."""
    features = np.asarray(features, dtype=float)
    kept = informative_columns(features)
    features = features[:, kept]
    roles = table["role"].to_numpy()
    attacks, skipped = [], []

    audited = np.isin(roles, AUDITED_ROLES)
    population = roles == "population"
    reason = _too_few_units(table, audited, AUDITED_ROLES)
    if reason:
        skipped.append({"attack": "logistic_split", "level": "sample", "slice": "all", "signal": signal, "reason": reason})
    else:
        train = np.zeros(len(table), dtype=bool)
        train[audited] = training_split(roles[audited], split_units(table[audited]), fraction, seed)
        scored = (audited & ~train) | population
        scores = logistic_scores(features[train], roles[train] == "member", features[scored], seed)
        attacks.append(AttackScores("logistic_split", signal, "sample", _frame(table[scored], scores), DECISION,
                                    calibration={"trained_on": "audited members and non-members", "fraction": fraction,
                                                 "seed": seed, "n_train": int(train.sum()),
                                                 "zero_columns_dropped": int((~kept).sum())}))

    shadow_member, shadow_nonmember = roles == "shadow_member", roles == "shadow_nonmember"
    if shadow_member.any() and shadow_nonmember.any():
        train = shadow_member | shadow_nonmember
        scores = logistic_scores(features[train], shadow_member[train], features[audited], seed)
        attacks.append(AttackScores("logistic_shadow", signal, "sample", _frame(table[audited], scores), DECISION,
                                    calibration={"trained_on": "the shadow model's members and non-members",
                                                 "seed": seed, "n_train": int(train.sum())}))

    calibration = roles == "calibration_member"
    if calibration.any() and not _too_few_units(table, population, ("population",)):
        population_train = np.zeros(len(table), dtype=bool)
        population_train[population] = training_split(roles[population], split_units(table[population]), 0.5, seed)
        train = calibration | population_train
        scored = audited | (population & ~population_train)
        scores = logistic_scores(features[train], calibration[train], features[scored], seed)
        attacks.append(AttackScores("logistic_calibration", signal, "sample", _frame(table[scored], scores), DECISION,
                                    calibration={"trained_on": "calibration members and half of the population",
                                                 "seed": seed, "n_train": int(train.sum())}))
    elif not shadow_member.any():
        skipped.append({"attack": "logistic_calibration", "level": "sample", "slice": "all", "signal": signal,
                        "reason": "needs calibration_member samples and population samples of 2 patients or more"})

    for column, level in (("subgroup_id", "subgroup"), ("group_id", "group")):
        if table.loc[audited, column].notna().all():
            attacks += [aggregated_attack(a, column, level) for a in list(attacks) if a.level == "sample"]
    return attacks, skipped
