"""Likelihood-ratio attack (Mireshghallah et al. 2022, Eq. 1): the target's loss against a reference model's loss on
the same sample, which explains away how hard the sample is for any model."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_LOSS,
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    Scored,
    score_frame,
)
from lmaudit.data.roles import EVALUATED_ROLES


def likelihood_ratio_score(target_loss: np.ndarray, reference_loss: np.ndarray) -> np.ndarray:
    """E_reference - E_target (the signal's unit, nats for the LM signals): higher = likelier a member."""
    return np.asarray(reference_loss, dtype=float) - np.asarray(target_loss, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples; each sample keeps its own target and reference values."""
    evaluated = data.samples["role"].isin(EVALUATED_ROLES).to_numpy()
    ratio = likelihood_ratio_score(data.values[TARGET_LOSS][evaluated], data.values[REFERENCE_LOSS][evaluated])
    return Scored(score_frame(data.samples[evaluated], ratio))


SPEC = AttackSpec(
    name="likelihood_ratio",
    description="reference loss - target loss on the same sample: a reference model explains away sample difficulty",
    reads=(TARGET_LOSS, REFERENCE_LOSS),
    build=build,
    aggregated_to=("subgroup", "group"),
    score_label="membership score = E_reference - E_target (nats)",
)
