"""EZ-MIA, the error-zone score (Ilić et al. 2026): where the target's first choice is not the true token (the error
zone), a member's true token still gains probability over the reference (the pretrained base, by default), a
non-member's does not. The score is the ratio of the positive to the negative parts of lp_target - lp_reference over
the error zone; higher = likelier a member.

The authors' code returns 0 when the negative part is empty (N = 0), which sends the most member-like samples to the
bottom of the ranking; lmaudit's default keeps the ratio, P / (N + 1e-12), and scores a text whose error zone holds
fewer than `min_tokens` positions on all its positions instead of 0 (a target that gets nearly every token right is
no evidence against membership). `ez_mia_paper_parity` restores both of the code's zeros. As in the code, the first
scored position (the first token after the start) is dropped, and the zone needs at least 2 positions.
"""

from __future__ import annotations

import numpy as np

from lmaudit.attacks.base import (
    REFERENCE_TOKEN_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_IS_TOP1,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)

MIN_TOKENS = 2
EPSILON = 1e-12


def _drop_first_scored(values: np.ndarray) -> np.ndarray:
    """The (n, T) array with each row's first non-NaN entry set to NaN."""
    values = np.array(values, dtype=float)
    valid = ~np.isnan(values)
    first = np.argmax(valid, axis=1)
    rows = np.flatnonzero(valid.any(axis=1))
    values[rows, first[rows]] = np.nan
    return values


def _ratio(delta: np.ndarray, paper_parity: bool) -> np.ndarray:
    positive = np.nansum(np.maximum(delta, 0.0), axis=1)
    negative = np.nansum(np.maximum(-delta, 0.0), axis=1)
    ratio = positive / (negative + EPSILON)
    return np.where(negative == 0.0, 0.0, ratio) if paper_parity else ratio


def ez_mia_score(target_log_probs: np.ndarray, reference_log_probs: np.ndarray, is_top1: np.ndarray,
                 paper_parity: bool = False, min_tokens: int = MIN_TOKENS) -> np.ndarray:
    """(n,) EZ scores (dimensionless ratio) from (n, T) NaN-padded per-token log-probabilities of target and reference
    and the target's first-choice flags (1.0 = the true token is its argmax)."""
    delta = _drop_first_scored(np.asarray(target_log_probs, float) - np.asarray(reference_log_probs, float))
    in_zone = (np.asarray(is_top1) == 0.0) & ~np.isnan(delta)
    zone_score = _ratio(np.where(in_zone, delta, np.nan), paper_parity)
    too_few = in_zone.sum(axis=1) < min_tokens
    if paper_parity:
        return np.where(too_few, 0.0, zone_score)
    return np.where(too_few, _ratio(delta, paper_parity=False), zone_score)


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    paper_parity = data.settings.ez_mia_paper_parity
    scores = ez_mia_score(data.values[TOKEN_LOG_PROBS][rows], data.values[REFERENCE_TOKEN_LOG_PROBS][rows],
                          data.values[TOKEN_IS_TOP1][rows], paper_parity)
    return Scored(score_frame(data.samples[rows], scores),
                  calibration={"min_tokens": MIN_TOKENS, "paper_parity": paper_parity})


SPEC = AttackSpec(
    name="ez_mia",
    description="EZ-MIA: over the positions where the target's first choice is wrong, the positive over the negative "
                "part of the target's log-probability gain on the reference",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, TOKEN_IS_TOP1, REFERENCE_TOKEN_LOG_PROBS),
    build=build,
    score_label="membership score = sum of positive / sum of negative (lp_target - lp_reference) in the error zone",
    paper="Ilić, Stanojević and Cvejoski 2026, Powerful training-free membership inference against autoregressive "
          "language models (arXiv 2601.12104)",
)
