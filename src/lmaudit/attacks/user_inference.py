"""User inference (Kandpal et al. 2024, EMNLP): whether a user's (a patient's) data was used, from m samples of that
user, by the mean over them of the sequence log-likelihood ratio of the fine-tuned target over its reference (the
pretrained base):

    T(U) = (1/m) sum_i [log p_target(x_i) - log p_reference(x_i)]

with log p(x) the sum over the text's tokens (the paper's sequence likelihood, not a per-token mean: a longer text
carries more evidence). Scored at the group level only; the samples need not be the very training texts (the paper
draws fresh samples of the user's distribution): lmaudit reads whatever samples the audit holds for each group, so on
the training texts themselves it measures the upper end of what fresh samples would show.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_TOKEN_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    aggregate_by_group,
    evaluated_rows,
    user_frame,
)


def sequence_log_likelihood_ratio(target_log_probs: np.ndarray, reference_log_probs: np.ndarray) -> np.ndarray:
    """(n,) sum over each row's tokens of log p_target - log p_reference (nats per text) from (n, T) NaN-padded arrays."""
    return np.nansum(np.asarray(target_log_probs, float) - np.asarray(reference_log_probs, float), axis=1)


def build(data: AttackInput) -> Scored:
    """One score per group (audited and population groups): the mean of its samples' sequence log-likelihood ratios."""
    rows = evaluated_rows(data) & data.samples["group_id"].notna().to_numpy()
    samples = data.samples[rows]
    ratios = sequence_log_likelihood_ratio(data.values[TOKEN_LOG_PROBS][rows], data.values[REFERENCE_TOKEN_LOG_PROBS][rows])
    return Scored(user_frame(samples, aggregate_by_group(ratios, samples["group_id"].to_numpy())))


SPEC = AttackSpec(
    name="user_inference",
    description="a user's mean sequence log-likelihood ratio of the target over its reference (the pretrained base)",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, REFERENCE_TOKEN_LOG_PROBS),
    build=build,
    level="group",
    score_label="membership score = mean over the user's texts of log p_target(x) - log p_reference(x) (nats)",
    paper="Kandpal et al. 2024, User inference attacks on large language models (EMNLP)",
)
