"""Min-K% Prob (Shi et al. 2024): the mean log-probability of a text's k% least likely tokens; a text seen in training
has few very unlikely tokens."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    mean_of_lowest,
    score_frame,
)


def min_k_score(token_log_probs: np.ndarray, fraction: float) -> np.ndarray:
    """Mean of the floor(fraction * T) lowest token log-probabilities of each row (nats): higher = likelier a member."""
    return mean_of_lowest(np.asarray(token_log_probs, dtype=float), fraction)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores = min_k_score(data.values[TOKEN_LOG_PROBS][rows], data.settings.min_k_fraction)
    return Scored(score_frame(data.samples[rows], scores), calibration={"k": data.settings.min_k_fraction})


SPEC = AttackSpec(
    name="min_k",
    description="mean log-probability of the text's k% least likely tokens (k = 0.2 unless set)",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS),
    build=build,
    score_label="membership score = mean of the k% lowest log p (nats)",
    paper="Shi et al. 2024, Detecting pretraining data from large language models (ICLR)",
)
