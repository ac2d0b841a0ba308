"""WBC, Window-Based Comparison (Chen et al., USENIX Security 2026): a fine-tune lowers the loss of its members' tokens
below its base's in most stretches of the text, not only on average. With d_t = lp_target(x_t) - lp_reference(x_t)
(nats) over the text's n scored tokens, each window of w consecutive tokens votes member when sum(d) > 0, and

    WBC(x) = mean over w in W of (member votes / windows of size w),  in [0, 1], higher = likelier a member.

As the authors' code (`Stry233/WBC`, `attacks/wbc.py`, checked in wave4-methods.md §1):
* W = (2, 3, 4, 6, 9, 13, 18, 25, 32, 40), the list of their `configs/example.yaml` and README; the paper's eq. 12,
  round(2 * 20^((k - 1) / 9)), gives (2, 3, 4, 5, 8, 11, 15, 21, 29, 40) instead, and is not used.
* Ties vote non-member: the code's test is the strict S_reference > S_target, i.e. sum(d) > 0, so a window where both
  models give the same loss counts against membership, and a target identical to its reference scores 0 for every
  text. The share of tied windows is reported (calibration `tied_windows`) so such a reference shows.
* A text shorter than w (n < w) is one window, the whole text, for each such w (the code's w' = min(w, n)).
* A text with no scored token scores 0, as the code's n = 0 does; never NaN.

Unlike the code, which tokenizes separately with each model and aligns losses by position, the reference must score the
target's very tokens: the attack reads the first reference's per-token log-probabilities, which the audit gives only
when its token ids equal the target's (else the attack is skipped with that reason in one line).
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from lmaudit.attacks.base import (
    REFERENCE_TOKEN_LOG_PROBS,
    TARGET_LOSS,
    TOKEN_LOG_PROBS,
    AttackInput,
    AttackSpec,
    Scored,
    evaluated_rows,
    score_frame,
)

WINDOWS = (2, 3, 4, 6, 9, 13, 18, 25, 32, 40)


def token_gains(target_log_probs: np.ndarray, reference_log_probs: np.ndarray) -> np.ndarray:
    """(n, T) lp_target - lp_reference of each token (nats), NaN where either is missing (the padding)."""
    return np.asarray(target_log_probs, dtype=float) - np.asarray(reference_log_probs, dtype=float)


def window_votes(gains: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of (n, T) NaN-padded gains: member votes (window sum > 0), tied windows (sum == 0) and windows of
    `window` consecutive tokens; a row with fewer tokens than `window` is one window, the whole row; an empty row none."""
    counts = np.sum(~np.isnan(gains), axis=1)
    if gains.shape[1] >= window:
        # a window reaching into the padding sums to NaN, which neither votes nor counts
        sums = sliding_window_view(gains, window, axis=1).sum(axis=2)
        votes, ties, windows = np.sum(sums > 0, axis=1), np.sum(sums == 0, axis=1), np.sum(~np.isnan(sums), axis=1)
    else:
        votes = ties = windows = np.zeros(len(gains), dtype=int)
    whole = np.nansum(gains, axis=1)
    short = (counts < window) & (counts > 0)
    return (np.where(short, whole > 0, votes), np.where(short, whole == 0, ties), np.where(short, 1, windows))


def wbc_score(target_log_probs: np.ndarray, reference_log_probs: np.ndarray,
              windows: tuple[int, ...] = WINDOWS) -> tuple[np.ndarray, float]:
    """(n,) WBC scores (share of windows voting member, averaged over window sizes, in [0, 1]) from (n, T) NaN-padded
    per-token log-probabilities of target and reference, and the share of all windows that tied."""
    gains = token_gains(target_log_probs, reference_log_probs)
    shares, tied, total = [], 0, 0
    for window in windows:
        votes, ties, counted = window_votes(gains, window)
        shares.append(np.divide(votes, counted, out=np.zeros(len(gains)), where=counted > 0))
        tied, total = tied + int(ties.sum()), total + int(counted.sum())
    return np.mean(shares, axis=0), tied / total if total else 0.0


def build(data: AttackInput) -> Scored:
    """Scores of the audited and population samples."""
    rows = evaluated_rows(data)
    scores, tied = wbc_score(data.values[TOKEN_LOG_PROBS][rows], data.values[REFERENCE_TOKEN_LOG_PROBS][rows])
    return Scored(score_frame(data.samples[rows], scores),
                  calibration={"windows": list(WINDOWS), "tie": "a window sum of exactly 0 votes non-member",
                               "tied_windows": tied})


SPEC = AttackSpec(
    name="wbc",
    description="WBC: the share of windows of 2 to 40 consecutive tokens where the target's log-likelihood exceeds the "
                "reference's, averaged over the window sizes",
    reads=(TARGET_LOSS, TOKEN_LOG_PROBS, REFERENCE_TOKEN_LOG_PROBS),
    build=build,
    score_label="membership score = mean over window sizes of the share of windows with sum(lp_target - lp_reference) > 0",
    paper="Chen et al. 2026, Window-based membership inference attacks against fine-tuned large language models "
          "(USENIX Security; arXiv 2601.02751) and the authors' code",
)
