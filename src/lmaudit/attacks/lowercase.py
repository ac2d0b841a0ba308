"""Lowercase attack (Carlini et al. 2021): the target's loss on the lowercased text against its loss on the text as
written; a memorised text loses more of its likelihood when its casing changes."""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import LOWERCASE_LOSS, TARGET_LOSS, AttackInput, AttackSpec, Scored, evaluated_rows, score_frame


def lowercase_score(target_loss: np.ndarray, lowercase_loss: np.ndarray) -> np.ndarray:
    """NLL(lowercased) / NLL(text), a ratio of log-perplexities: higher = likelier a member."""
    return np.asarray(lowercase_loss, dtype=float) / np.asarray(target_loss, dtype=float)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    return Scored(score_frame(data.samples[rows], lowercase_score(data.values[TARGET_LOSS][rows],
                                                                  data.values[LOWERCASE_LOSS][rows])))


SPEC = AttackSpec(
    name="lowercase",
    description="the target's mean NLL of the lowercased text over its mean NLL of the text as written",
    reads=(TARGET_LOSS, LOWERCASE_LOSS),
    build=build,
    score_label="membership score = NLL(lowercased) / NLL",
    paper="Carlini et al. 2021, Extracting training data from large language models (USENIX Security)",
)
