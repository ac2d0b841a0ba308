"""ReCaLL (Xie et al. 2024): how much a text's log-likelihood changes when the target reads a prefix of known
non-member text first. Conditioning on non-member context lowers a member's likelihood more than a non-member's, so
the ratio LL(x | P) / LL(x) of two negative log-likelihoods is higher for members.

LL(x) is over the same tokens as LL(x | P) (those that fit after the prefix), so the ratio compares like with like.
The population samples that make the prefix are not scored.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    PREFIXED_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    first_tokens,
    score_frame,
)


def recall_score(prefixed_log_probs: np.ndarray, token_log_probs: np.ndarray) -> np.ndarray:
    """LL(x | P) / LL(x), mean log-likelihoods over the same tokens (nats per token each): higher = likelier a member."""
    counts = np.sum(~np.isnan(prefixed_log_probs), axis=1)
    return np.nanmean(prefixed_log_probs, axis=1) / np.nanmean(first_tokens(token_log_probs, counts), axis=1)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples outside the prefix."""
    rows = evaluated_rows(data) & ~np.isnan(data.values[PREFIXED_LOG_PROBS]).all(axis=1)
    scores = recall_score(data.values[PREFIXED_LOG_PROBS][rows], data.values[TOKEN_LOG_PROBS][rows])
    return Scored(score_frame(data.samples[rows], scores))


SPEC = AttackSpec(
    name="recall",
    description="the target's log-likelihood of the text after a prefix of population (non-member) text, over its "
                "log-likelihood without it",
    reads=(TARGET_LOSS, PREFIXED_LOG_PROBS, TOKEN_LOG_PROBS),
    build=build,
    score_label="membership score = LL(x | prefix) / LL(x)",
    paper="Xie et al. 2024, ReCaLL: membership inference via relative conditional log-likelihoods (EMNLP)",
)
