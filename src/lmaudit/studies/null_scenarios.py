"""The null laboratory's data: simulated audits where the truth is known. Members, non-members and the population are
drawn from one distribution (no leakage) or members are shifted by a planted effect (leakage), with the dependence real
audits have: several notes per patient sharing a patient effect (an intraclass correlation), ragged note counts, tied
scores, few non-members, group ids missing for some rows, and several attacks that share most of their signal.
Everything is numpy; `studies/null_lab.py` runs lmaudit's own functions on it (docs/statistics.md)."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.stats import norm

from lmaudit.attacks.base import AttackScores, aggregated_attack, score_frame
from lmaudit.data.roles import MEMBER, NONMEMBER, POPULATION

# Registered sample-level attacks that are also aggregated per patient: the simulated attacks borrow their names so
# that the report's ranking can describe them.
ATTACK_NAMES = ("loss", "likelihood_ratio", "rmia", "lira", "zlib")
WORDS = tuple(f"w{i}" for i in range(300))  # the vocabulary of simulated notes


@dataclass(frozen=True)
class Scenario:
    """One simulated audit's design: patients per role and notes per patient (`ragged`: each patient's count drawn from
    1 to twice it), the patient effect's share of a score's variance (`icc`), the planted member effect (`effect`, in
    standard deviations; 0 = the null), the number of attacks and how much of their signal they share (`shared`),
    scores rounded to `decimals` (ties; None = none), and the share of rows without a group id."""

    name: str
    member_groups: int
    nonmember_groups: int
    population_groups: int
    per_group: int
    icc: float = 0.0
    effect: float = 0.0
    attacks: int = 5
    shared: float = 0.8
    decimals: int | None = None
    ragged: bool = False
    missing_groups: float = 0.0
    population_effect: float = 0.0  # the population's shift from the non-members (standard deviations)

    def with_effect(self, effect: float) -> Scenario:
        """The same design with members shifted by `effect` standard deviations (an alternative)."""
        return replace(self, effect=effect)

    @property
    def truth(self) -> str:
        """What is planted, in words: 'null', or the members' (and the population's) shift."""
        planted = [f"members {self.effect:+g} sd"] * bool(self.effect) + [
            f"population {self.population_effect:+g} sd"] * bool(self.population_effect)
        return ", ".join(planted) or "null"

    @property
    def true_auc(self) -> float:
        """The AUC of any one attack's note scores: members' N(effect, 1) against non-members' N(0, 1)."""
        return float(norm.cdf(self.effect / np.sqrt(2)))

    def fpr(self, threshold: float) -> float:
        """A non-member note's chance of scoring at or above `threshold`."""
        return float(norm.sf(threshold))

    def tpr(self, threshold: float) -> float:
        """A member note's chance of scoring at or above `threshold`."""
        return float(norm.sf(threshold - self.effect))


def samples(scenario: Scenario, rng: np.random.Generator) -> pd.DataFrame:
    """One row per note: sample_id, role, group_id (None for the `missing_groups` share), and `patient`, the true
    patient index (kept even where group_id is missing)."""
    roles = [(MEMBER, scenario.member_groups), (NONMEMBER, scenario.nonmember_groups),
             (POPULATION, scenario.population_groups)]
    patient_roles = np.concatenate([[role] * count for role, count in roles])
    counts = (rng.integers(1, 2 * scenario.per_group, size=len(patient_roles)) if scenario.ragged
              else np.full(len(patient_roles), scenario.per_group))
    patient = np.repeat(np.arange(len(patient_roles)), counts)
    table = pd.DataFrame({"sample_id": [f"n{i}" for i in range(len(patient))], "role": patient_roles[patient],
                          "group_id": [f"p{p}" for p in patient], "patient": patient})
    if scenario.missing_groups:
        table.loc[rng.random(len(table)) < scenario.missing_groups, "group_id"] = None
    return table


def attack_scores(scenario: Scenario, table: pd.DataFrame, rng: np.random.Generator) -> np.ndarray:
    """(notes, attacks) membership scores (higher = member), each marginally N(0, 1) for a non-member and N(effect, 1)
    for a member: a patient effect (share `icc`) and a note effect, each shared across attacks in part (`shared`); the
    population's shifted by `population_effect`."""
    patients, notes = table["patient"].max() + 1, len(table)

    def component(size: int, variance: float) -> np.ndarray:
        common = rng.normal(size=(size, 1))
        own = rng.normal(size=(size, scenario.attacks))
        return np.sqrt(variance) * (np.sqrt(scenario.shared) * common + np.sqrt(1 - scenario.shared) * own)

    scores = component(patients, scenario.icc)[table["patient"].to_numpy()] + component(notes, 1 - scenario.icc)
    scores += scenario.effect * (table["role"] == MEMBER).to_numpy()[:, None]
    scores += scenario.population_effect * (table["role"] == POPULATION).to_numpy()[:, None]
    return np.round(scores, scenario.decimals) if scenario.decimals is not None else scores


def simulated_attacks(scenario: Scenario, seed: int) -> tuple[pd.DataFrame, list[AttackScores]]:
    """A simulated audit: its samples and each attack's scores at sample level and, aggregated, at patient level."""
    rng = np.random.default_rng(seed)
    table = samples(scenario, rng)
    scores = attack_scores(scenario, table, rng)
    attacks = []
    for column, name in zip(range(scenario.attacks), ATTACK_NAMES, strict=False):
        sample = AttackScores(score_frame(table, scores[:, column], with_length=False), attack=name,
                              signal="simulated", level="sample")
        attacks += [sample, aggregated_attack(sample, "group")]
    return table.drop(columns="patient"), attacks


def losses_file(scenario: Scenario, seed: int) -> pd.DataFrame:
    """A scores file (`lmaudit attack --scores`'s layout) for the first attack's signal: the target's and a reference
    model's losses (lower = likelier), the reference drawn like the target but from its own patient and note effects
    beyond a shared part, so that no attack has anything to find unless `effect` is planted."""
    rng = np.random.default_rng(seed)
    table = samples(scenario, rng)
    scores = attack_scores(replace(scenario, attacks=2), table, rng)
    member = (table["role"] == MEMBER).to_numpy()
    reference = scores[:, 1] - scenario.effect * member  # the reference never saw the members
    return table.drop(columns="patient").assign(target_loss=3.0 - scores[:, 0], reference_loss=3.0 - reference)


def texts(scenario: Scenario, table: pd.DataFrame, rng: np.random.Generator, length: int = 30) -> list[str]:
    """A note per row of `samples`' table: words drawn from its patient's own preferences (a patient writes like
    themselves: `icc` of the choice follows the patient) and, in a share `effect` of members' notes, a word that only
    members' notes hold (a collection difference, not leakage)."""
    codes = table["patient"].to_numpy()
    preferences = rng.dirichlet(np.full(len(WORDS), 0.3), size=codes.max() + 1)
    common = np.full(len(WORDS), 1 / len(WORDS))
    member = (table["role"] == MEMBER).to_numpy()
    notes = []
    for row, code in enumerate(codes):
        weights = scenario.icc * preferences[code] + (1 - scenario.icc) * common
        words = list(rng.choice(WORDS, size=length, p=weights))
        if member[row] and rng.random() < scenario.effect:
            words[0] = "memberword"  # a collection difference the texts alone can see
        notes.append(" ".join(words))
    return notes
