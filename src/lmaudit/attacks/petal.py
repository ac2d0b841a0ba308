"""PETAL (He et al., USENIX Security 2025): membership from the target's greedy next tokens alone (a label-only API),
with a public surrogate model that gives log-probabilities. On the surrogate, per text, the log-probability of each
true token is fitted as a line in the log of the similarity between the surrogate's first choice and that token:
lp_i = a u_i + b. The same line turns the target's similarities into estimated log-probabilities; their mean is the
score (a member's true tokens are close to the target's first choices, so its estimate is higher).

Departures from the authors' code, each because it cannot run here or would mislead: the surrogate is the audit's first
reference (the fine-tune's base, with the target's tokenizer, so positions align; the code's surrogate has its own
tokenizer and does not align them); similarity is the cosine between the two tokens' input embeddings in that reference
(the code embeds the decoded tokens with a sentence-embedding model, which lmaudit would have to download); the
target's greedy token at every position is read from one forward pass, which is the same token as one generation call
per prefix. A text whose surrogate similarities are all equal has no slope: its line is flat at the mean
log-probability (a = 0), where np.polyfit would divide by zero.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_TOKEN_LOG_PROBS,
    REFERENCE_TOP1_SIMILARITY,
    TOKEN_TOP1_IDS,
    TOP1_SIMILARITY,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)

SIMILARITY_FLOOR = 1e-16  # as the code: a cosine at or below zero counts as this before its log


def log_similarity(similarity: np.ndarray) -> np.ndarray:
    """log max(s, 1e-16) of (n, T) cosine similarities, NaN kept."""
    return np.log(np.maximum(similarity, SIMILARITY_FLOOR))


def petal_score(reference_log_probs: np.ndarray, reference_similarity: np.ndarray,
                target_similarity: np.ndarray) -> np.ndarray:
    """(n,) mean estimated log-probability (nats per token) of each text's tokens under the target, from (n, T)
    NaN-padded surrogate log-probabilities and the surrogate's and target's first-choice similarities."""
    u_reference = log_similarity(np.asarray(reference_similarity, float))
    u_target = log_similarity(np.asarray(target_similarity, float))
    log_probs = np.asarray(reference_log_probs, float)
    used = ~(np.isnan(u_reference) | np.isnan(u_target) | np.isnan(log_probs))
    u_reference, u_target, log_probs = (np.where(used, values, np.nan) for values in (u_reference, u_target, log_probs))
    # least squares per row: a = cov(u, lp) / var(u), b = mean(lp) - a mean(u)
    u_centred = u_reference - np.nanmean(u_reference, axis=1, keepdims=True)
    spread = np.nansum(u_centred ** 2, axis=1)
    covariance = np.nansum(u_centred * (log_probs - np.nanmean(log_probs, axis=1, keepdims=True)), axis=1)
    slope = np.divide(covariance, spread, out=np.zeros_like(spread), where=spread > 0)
    intercept = np.nanmean(log_probs, axis=1) - slope * np.nanmean(u_reference, axis=1)
    return slope * np.nanmean(u_target, axis=1) + intercept


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores = petal_score(data.values[REFERENCE_TOKEN_LOG_PROBS][rows], data.values[REFERENCE_TOP1_SIMILARITY][rows],
                         data.values[TOP1_SIMILARITY][rows])
    return Scored(score_frame(data.samples[rows], scores),
                  calibration={"similarity": "cosine of the first reference's input embeddings"})


SPEC = AttackSpec(
    name="petal",
    description="PETAL: the target's greedy next tokens compared with the true ones, turned into log-probabilities by "
                "a line fitted per text on the reference (generated text and a reference model only)",
    reads=(TOKEN_TOP1_IDS, REFERENCE_TOKEN_LOG_PROBS, TOP1_SIMILARITY, REFERENCE_TOP1_SIMILARITY),
    build=build,
    score_label="membership score = mean estimated log-probability of the text's tokens under the target (nats)",
    paper="He et al. 2025, Towards label-only membership inference attack against pre-trained large language models "
          "(USENIX Security)",
)
