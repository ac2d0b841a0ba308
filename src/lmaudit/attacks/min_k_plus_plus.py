"""Min-K%++ (Zhang et al. 2025): each token's log-probability standardised by the mean and standard deviation of the
log-probability under the model's predictive distribution at its position; the mean of the k% lowest. A training text
sits at a local maximum of the likelihood, so its tokens score high relative to their alternatives."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    TOKEN_MEANS,
    TOKEN_STDS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    mean_of_lowest,
    score_frame,
)

# A position where the model puts all its mass on one token has sigma = 0 and log p = mu: its standardised value is 0.
SMALLEST_STD = 1e-12


def min_k_plus_plus_score(log_probs: np.ndarray, means: np.ndarray, stds: np.ndarray, fraction: float) -> np.ndarray:
    """Mean of the k% lowest (log p - mu) / sigma of each row (standard deviations): higher = likelier a member."""
    standardised = (np.asarray(log_probs, dtype=float) - means) / np.maximum(stds, SMALLEST_STD)
    return mean_of_lowest(standardised, fraction)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores = min_k_plus_plus_score(data.values[TOKEN_LOG_PROBS][rows], data.values[TOKEN_MEANS][rows],
                                   data.values[TOKEN_STDS][rows], data.settings.min_k_fraction)
    return Scored(score_frame(data.samples[rows], scores), calibration={"k": data.settings.min_k_fraction})


SPEC = AttackSpec(
    name="min_k_plus_plus",
    description="Min-K% of token log-probabilities standardised by the mean and deviation of the model's predictive "
                "distribution at each position",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, TOKEN_MEANS, TOKEN_STDS),
    build=build,
    score_label="membership score = mean of the k% lowest (log p - mu) / sigma",
    paper="Zhang et al. 2025, Min-K%++: improved baseline for detecting pre-training data from large language models "
          "(ICLR)",
)
