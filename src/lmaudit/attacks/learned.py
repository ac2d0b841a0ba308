"""Learned attacks on white-box feature vectors: standardised features, logistic regression (Jagannatha et al.).

Three sources of labelled training data, each a registered attack:
- `logistic_split`: a seeded 20% of the audited members and non-members train the attack and the other
  80% are audited. By default the split is by group (a sample without one is its own unit), so no
  patient has samples on both sides; `attacks.whitebox_split: sample` splits samples, as the paper
  does, which lets a patient's other notes in the training 20% vouch for the audited ones.
- `logistic_calibration`: the attack trains on known training samples (`calibration_member`) against half
  of the population; no audited sample's label is ever read. The other half of the population
  calibrates the population thresholds.
- `logistic_shadow` (classifiers): the attack trains on the shadow model's features of its own members and
  non-members, and is applied to the target's features of the audited samples.
The membership score is the regression's log-odds (higher = member).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from lmaudit.attacks.base import (
    FEATURE_VECTORS,
    AttackInput,
    AttackSpec,
    NotRun,
    Scored,
    Threshold,
    logistic_regression,
    score_frame,
)
from lmaudit.data.roles import (
    AUDITED_ROLES,
    CALIBRATION_MEMBER,
    MEMBER,
    POPULATION,
    SHADOW_MEMBER,
    SHADOW_NONMEMBER,
)

# The regression's own decision: log-odds >= 0, i.e. membership probability >= 0.5.
DECISION = [Threshold("probability_0.5", 0.0)]
SPLIT_FRACTION = 0.2


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


def split_units(table: pd.DataFrame, by: str = "patient") -> np.ndarray:
    """Each row's unit for splitting: its group (by "patient"), or the sample itself (by "sample", or without a
    group)."""
    samples = "sample:" + table["sample_id"].astype(str)
    if by == "sample":
        return samples.to_numpy()
    groups = table["group_id"].astype(object)
    return np.where(groups.isna(), samples, "group:" + groups.astype(str))


def _too_few_units(table: pd.DataFrame, rows: np.ndarray, roles: tuple[str, ...], by: str = "patient") -> str | None:
    units = pd.Series(split_units(table[rows], by)).groupby(table.loc[rows, "role"].to_numpy()).nunique()
    short = [role for role in roles if units.get(role, 0) < 2]
    return f"{', '.join(short)}: fewer than 2 {'samples' if by == 'sample' else 'patients or users'} to split" \
        if short else None


def informative_columns(features: np.ndarray, relative: float = 1e-9) -> np.ndarray:
    """Columns not numerically zero everywhere: attention key biases, for one, have a gradient that is
    zero up to float noise, and standardising that noise would give it the weight of a real feature."""
    magnitude = np.abs(np.asarray(features, dtype=float)).max(axis=0)
    return magnitude > relative * magnitude.max()


def logistic_scores(train_features: np.ndarray, train_is_member: np.ndarray, features: np.ndarray, seed: int = 0) -> np.ndarray:
    """Log-odds of membership from a standardised logistic regression fitted on the training rows."""
    model = logistic_regression(seed, max_iter=2000)
    model.fit(np.asarray(train_features, dtype=float), np.asarray(train_is_member, dtype=bool))
    return model.decision_function(np.asarray(features, dtype=float))


def _features(data: AttackInput) -> tuple[np.ndarray, np.ndarray]:
    """The informative feature columns, and the mask of which columns were kept."""
    features = np.asarray(data.values[FEATURE_VECTORS], dtype=float)
    kept = informative_columns(features)
    return features[:, kept], kept


def split_attack(data: AttackInput) -> Scored | NotRun:
    """Trained on 20% of the audited units (patients, or samples: `attacks.whitebox_split`), audited on the rest;
    population rows calibrate."""
    table, roles, by = data.samples, data.samples["role"].to_numpy(), data.settings.whitebox_split
    audited, population = np.isin(roles, AUDITED_ROLES), roles == POPULATION
    reason = _too_few_units(table, audited, AUDITED_ROLES, by)
    if reason:
        return NotRun(reason)
    features, kept = _features(data)
    train = np.zeros(len(table), dtype=bool)
    train[audited] = training_split(roles[audited], split_units(table[audited], by), SPLIT_FRACTION, data.seed)
    scored = (audited & ~train) | population
    scores = logistic_scores(features[train], roles[train] == MEMBER, features[scored], data.seed)
    return Scored(score_frame(table[scored], scores), DECISION,
                  {"trained_on": "audited members and non-members", "fraction": SPLIT_FRACTION, "split_by": by,
                   "seed": data.seed,
                   "n_train": int(train.sum()), "zero_columns_dropped": int((~kept).sum())})


def calibration_attack(data: AttackInput) -> Scored | NotRun:
    """Trained on the calibration members against half of the population; the other half calibrates."""
    table, roles = data.samples, data.samples["role"].to_numpy()
    audited, population, calibration = np.isin(roles, AUDITED_ROLES), roles == POPULATION, roles == CALIBRATION_MEMBER
    if not calibration.any() or _too_few_units(table, population, (POPULATION,)):
        return NotRun("needs calibration_member samples and population samples of 2 patients or more")
    features, _ = _features(data)
    population_train = np.zeros(len(table), dtype=bool)
    population_train[population] = training_split(roles[population], split_units(table[population]), 0.5, data.seed)
    train = calibration | population_train
    scored = audited | (population & ~population_train)
    scores = logistic_scores(features[train], calibration[train], features[scored], data.seed)
    return Scored(score_frame(table[scored], scores), DECISION,
                  {"trained_on": "calibration members and half of the population", "seed": data.seed,
                   "n_train": int(train.sum())})


def shadow_attack(data: AttackInput) -> Scored | NotRun:
    """Trained on the shadow model's features of its members and non-members, applied to the target's features."""
    table, roles = data.samples, data.samples["role"].to_numpy()
    shadow_member, shadow_nonmember = roles == SHADOW_MEMBER, roles == SHADOW_NONMEMBER
    if not (shadow_member.any() and shadow_nonmember.any()):
        return NotRun("needs a shadow model's features of shadow_member and shadow_nonmember samples")
    features, _ = _features(data)
    audited = np.isin(roles, AUDITED_ROLES)
    train = shadow_member | shadow_nonmember
    scores = logistic_scores(features[train], shadow_member[train], features[audited], data.seed)
    return Scored(score_frame(table[audited], scores), DECISION,
                  {"trained_on": "the shadow model's members and non-members", "seed": data.seed, "n_train": int(train.sum())})


_REGRESSION = {"score_label": "membership score = log-odds of the regression",
           "paper": "Jagannatha et al. 2021, Membership inference attack susceptibility of clinical language models"}
SPECS = (
    AttackSpec("logistic_split", "logistic regression on white-box features, trained on 20% of the audited patients "
               "(or samples, as the paper: attacks.whitebox_split) and audited on the rest (Jagannatha et al.)", (FEATURE_VECTORS,), split_attack,
               fitted_on=AUDITED_ROLES, **_REGRESSION),
    AttackSpec("logistic_calibration", "logistic regression on white-box features, trained on calibration members "
               "against half of the population: no audited label is read", (FEATURE_VECTORS,), calibration_attack,
               fitted_on=(CALIBRATION_MEMBER, POPULATION), **_REGRESSION),
    AttackSpec("logistic_shadow", "logistic regression on white-box features, trained on a shadow model's members and "
               "non-members and applied to the target's", (FEATURE_VECTORS,), shadow_attack,
               fitted_on=(SHADOW_MEMBER, SHADOW_NONMEMBER), **_REGRESSION),
)
