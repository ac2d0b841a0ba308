"""A secret canary's membership score read on its secret alone (Panda et al. 2025 set the training labels and read the
loss on the secret only): every canary of a design shares its sentence, so the rest of the text only adds noise.

Pure numpy over stored per-token values (a masked LM's tokens each masked alone, a causal LM's next tokens): the secret
is found in a canary's scored tokens by its token ids, the last place they occur in a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def secret_positions(token_ids: np.ndarray, secret_ids: Sequence[int]) -> np.ndarray | None:
    """Positions of the last occurrence of `secret_ids` in one row of scored token ids (floats, NaN-padded), or None."""
    width = len(secret_ids)
    if width == 0:
        return None
    row = np.asarray(token_ids, dtype=float)
    for start in range(len(row) - width, -1, -1):
        if np.array_equal(row[start:start + width], np.asarray(secret_ids, dtype=float)):
            return np.arange(start, start + width)
    return None


def secret_log_probability(log_probs: np.ndarray, token_ids: np.ndarray, secret_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """(n,) mean log-probability (nats per token) of each row's secret tokens, from (n, T) per-token log-probabilities
    and token ids; NaN where a secret is not among the scored tokens (cut off by truncation)."""
    means = np.full(len(secret_ids), np.nan)
    for row, ids in enumerate(secret_ids):
        positions = secret_positions(token_ids[row], ids)
        if positions is not None:
            means[row] = float(np.mean(log_probs[row, positions]))
    return means
