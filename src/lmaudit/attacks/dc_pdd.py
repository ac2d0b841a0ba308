"""DC-PDD (Zhang et al. 2024): token probabilities calibrated by how frequent each token is in non-audited text; a
training text gets high probability on tokens that are rare elsewhere.

Followed from the paper and its authors' released code: per token, alpha = p(x_t) * log(1 / f(x_t)), with f the
Laplace-smoothed frequency of the token in a reference corpus, capped at a (0.01); the score is the mean of alpha over
each distinct token's first occurrence. Here the reference corpus is the audit's non-audited text (the population, each
population sample's own text left out of its frequencies, and --frequency-data), and the tokens are those the causal
LM predicts (the second onwards: no start token is prepended).
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    TARGET_LOSS,
    TOKEN_FREQUENCIES,
    TOKEN_IDS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)


def dc_pdd_score(log_probs: np.ndarray, token_ids: np.ndarray, frequencies: np.ndarray, bound: float) -> np.ndarray:
    """Per row of NaN-padded (n, T) arrays: mean over first occurrences of min(p * log(1 / f), bound): higher = member."""
    scores = np.empty(len(log_probs))
    for row in range(len(log_probs)):
        known = ~np.isnan(token_ids[row])
        _, first = np.unique(token_ids[row, known], return_index=True)
        alpha = np.exp(log_probs[row, known][first]) * -np.log(frequencies[row, known][first])
        scores[row] = np.minimum(alpha, bound).mean()
    return scores


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores = dc_pdd_score(data.values[TOKEN_LOG_PROBS][rows], data.values[TOKEN_IDS][rows],
                          data.values[TOKEN_FREQUENCIES][rows], data.settings.dc_pdd_bound)
    return Scored(score_frame(data.samples[rows], scores), calibration={"a": data.settings.dc_pdd_bound})


SPEC = AttackSpec(
    name="dc_pdd",
    description="token probabilities times the log inverse frequency of the token in non-audited text, capped, "
                "averaged over each token's first occurrence",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, TOKEN_IDS, TOKEN_FREQUENCIES),
    build=build,
    score_label="membership score = mean min(p log(1/f), a)",
    paper="Zhang et al. 2024, Pretraining data detection for large language models: a divergence-based calibration "
          "method (EMNLP)",
)
