"""Con-ReCall (Wang et al. 2024, COLING 2025): ReCaLL with a second, contrasting prefix. Known non-member context
lowers a member's log-likelihood more than a non-member's, and known member context lowers it less, so

    s(x) = (LL(x | P_nonmember) - gamma * LL(x | P_member)) / LL(x)

is higher for members. P_nonmember is ReCaLL's prefix of population texts; P_member a prefix of calibration members
(known members that are never audited), as many texts, chosen with the same seed: no audited sample is ever in a
prefix, and the prefixes' own samples are not scored. All three log-likelihoods are means over the same tokens (those
that fit after the longer prefix). gamma is a setting (`attacks.con_recall_gamma`, 0.5), not tuned on the audited
labels as the paper's sweep is.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    MEMBER_PREFIXED_LOG_PROBS,
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


def con_recall_score(nonmember_prefixed: np.ndarray, member_prefixed: np.ndarray, token_log_probs: np.ndarray,
                     gamma: float) -> np.ndarray:
    """(LL(x | P_nm) - gamma LL(x | P_m)) / LL(x), each a mean log-likelihood (nats per token) over the tokens both
    prefixed passes scored: higher = likelier a member."""
    counts = np.minimum(np.sum(~np.isnan(nonmember_prefixed), axis=1), np.sum(~np.isnan(member_prefixed), axis=1))

    def mean_over_shared(values: np.ndarray) -> np.ndarray:
        return np.nanmean(first_tokens(values, counts), axis=1)

    return ((mean_over_shared(nonmember_prefixed) - gamma * mean_over_shared(member_prefixed))
            / mean_over_shared(token_log_probs))


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples in neither prefix."""
    in_no_prefix = ~(np.isnan(data.values[PREFIXED_LOG_PROBS]).all(axis=1)
                     | np.isnan(data.values[MEMBER_PREFIXED_LOG_PROBS]).all(axis=1))
    rows = evaluated_rows(data) & in_no_prefix
    gamma = data.settings.con_recall_gamma
    scores = con_recall_score(data.values[PREFIXED_LOG_PROBS][rows], data.values[MEMBER_PREFIXED_LOG_PROBS][rows],
                              data.values[TOKEN_LOG_PROBS][rows], gamma)
    return Scored(score_frame(data.samples[rows], scores), calibration={"gamma": gamma})


SPEC = AttackSpec(
    name="con_recall",
    description="ReCaLL contrasted: the log-likelihood after a prefix of population text less gamma times that after a "
                "prefix of calibration members, over the log-likelihood without a prefix",
    reads=(TARGET_LOSS, PREFIXED_LOG_PROBS, MEMBER_PREFIXED_LOG_PROBS, TOKEN_LOG_PROBS),
    build=build,
    score_label="membership score = (LL(x | non-member prefix) - gamma LL(x | member prefix)) / LL(x)",
    paper="Wang et al. 2024, Con-ReCall: detecting pre-training data in LLMs via contrastive decoding (COLING 2025)",
)
