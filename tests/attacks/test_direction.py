"""Score direction, for every registered attack: higher score = more likely a member (DESIGN.md: Score convention).

Each attack runs alone on one synthetic input that holds every kind of value an attack can read, in
which members (and calibration and shadow members) are clearly more member-like than non-members.
An attack added to the registry is tested here with no other edit; one that reads a new kind of value
fails until this file can synthesise it.
"""

import numpy as np
import pandas as pd
import pytest

from lmaudit.attacks.base import (
    CLASSIFIER_FEATURE,
    FEATURE_VECTORS,
    REFERENCE_LOSS,
    TARGET_LOSS,
    VALUES,
    AttackInput,
)
from lmaudit.attacks.registry import ATTACKS, run_attacks
from lmaudit.data.roles import CALIBRATION_MEMBER, MEMBER, ROLES, SHADOW_MEMBER
from tests.helpers import audited_auc

MEMBER_LIKE = (MEMBER, CALIBRATION_MEMBER, SHADOW_MEMBER)
GROUPS_PER_ROLE, SAMPLES_PER_GROUP = 24, 4


def synthetic_samples() -> pd.DataFrame:
    """Every role, 24 patients each with 4 samples in 2 admissions, 3 labels."""
    rows = []
    for role in ROLES:
        for group in range(GROUPS_PER_ROLE):
            for sample in range(SAMPLES_PER_GROUP):
                rows.append({"sample_id": f"{role}-{group}-{sample}", "role": role, "group_id": f"{role}-p{group}",
                             "subgroup_id": f"{role}-p{group}-a{sample % 2}", "length": 25, "label": f"c{sample % 3}"})
    return pd.DataFrame(rows)


def synthetic_values(samples: pd.DataFrame, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """One array per kind of value; member-like rows differ the way a leaking model makes them differ."""
    member = samples["role"].isin(MEMBER_LIKE).to_numpy()
    difficulty = rng.uniform(1, 8, len(samples))
    features = rng.normal(size=(len(samples), 6))
    features[:, 0] += 1.5 * member
    return {
        # A member's loss is lower than its reference loss; difficulty varies far more than membership moves it.
        TARGET_LOSS: difficulty - 1.5 * member,
        REFERENCE_LOSS: difficulty,
        FEATURE_VECTORS: features,
        # Higher and steadier for members, so every user statistic (including the variance) separates them.
        CLASSIFIER_FEATURE: np.where(member, rng.normal(3.0, 0.3, len(samples)), rng.normal(0.0, 1.0, len(samples))),
    }


@pytest.fixture(scope="module")
def synthetic_input() -> AttackInput:
    samples = synthetic_samples()
    return AttackInput("synthetic", samples, synthetic_values(samples, np.random.default_rng(0)), seed=0, scored_roles=ROLES)


def test_every_kind_of_value_is_synthesised():
    assert set(synthetic_values(synthetic_samples(), np.random.default_rng(0))) == set(VALUES)


@pytest.mark.parametrize("spec", ATTACKS, ids=[spec.name for spec in ATTACKS])
def test_members_score_higher(spec, synthetic_input):
    scores, skipped = run_attacks([synthetic_input], [spec])
    assert not skipped, f"{spec.name} did not run on the synthetic input: {skipped}"
    assert [s.level for s in scores] == list(spec.levels)
    for attack in scores:
        assert (attack.attack, attack.signal) == (spec.name, "synthetic")
        # Every attack is above 0.65 here (the loss, fooled by difficulty by design, is the weakest at 0.68); the same
        # attack with its sign flipped would score below 0.35.
        assert audited_auc(attack.frame) > 0.65, f"{spec.name} at {attack.level} level"
