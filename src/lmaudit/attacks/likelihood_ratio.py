"""Likelihood-ratio attack (Mireshghallah et al. 2022, Eq. 1): the target's loss against a reference model's loss on
the same sample, which explains away how hard the sample is for any model. With several references, their mean loss."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_LOSSES,
    TARGET_LOSS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)

# What E_reference is when there are several references (the report says it).
REFERENCE_COMBINATION = "mean of the reference models' losses"


def likelihood_ratio_score(target_loss: np.ndarray, reference_loss: np.ndarray) -> np.ndarray:
    """E_reference - E_target (the signal's unit, nats for the LM signals): higher = likelier a member."""
    return np.asarray(reference_loss, dtype=float) - np.asarray(target_loss, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples; each sample keeps its own target and reference values."""
    evaluated = evaluated_rows(data)
    reference = np.asarray(data.values[REFERENCE_LOSSES], dtype=float).mean(axis=1)
    ratio = likelihood_ratio_score(data.values[TARGET_LOSS][evaluated], reference[evaluated])
    return Scored(score_frame(data.samples[evaluated], ratio), calibration={"reference": REFERENCE_COMBINATION})


SPEC = AttackSpec(
    name="likelihood_ratio",
    description="reference loss - target loss on the same sample: a reference model explains away sample difficulty",
    reads=(TARGET_LOSS, REFERENCE_LOSSES),
    build=build,
    score_label="membership score = E_reference - E_target (nats)",
    paper="Mireshghallah et al. 2022, Quantifying privacy risks of masked language models using membership inference "
          "attacks (EMNLP)",
)
