"""A secret canary's membership score read on its secret alone (Panda et al. 2025 set the training labels and read the
loss on the secret only): every canary of a design shares its sentence, so the rest of the text only adds noise.

Pure numpy over stored per-token values (a masked LM's tokens each masked alone, a causal LM's next tokens): the secret
is found in a canary's scored tokens by its token ids, the last place they occur in a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmaudit.signals.base import unpack_token_values


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


def secret_token_ids(tokenizer, secrets: Sequence[str]) -> list[list[int]]:
    """Each secret's token ids as they are in its canary: the secret follows a space in its sentence, so tokenized
    after one, a byte-level BPE gives the ids it has in context."""
    return [tokenizer(" " + secret, add_special_tokens=False)["input_ids"] for secret in secrets]


def secrets_log_probability(token_values: Sequence, secret_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """(n,) each canary's mean log-probability (nats per token) of its secret's tokens, from a per-token signal's values
    (one row per canary, as the signal store keeps them); NaN where truncation cut the secret off."""
    table = unpack_token_values(token_values)
    return secret_log_probability(table["log_prob"], table["token_id"], secret_ids)


def secret_log_probability(log_probs: np.ndarray, token_ids: np.ndarray, secret_ids: Sequence[Sequence[int]]) -> np.ndarray:
    """(n,) mean log-probability (nats per token) of each row's secret tokens, from (n, T) per-token log-probabilities
    and token ids; NaN where a secret is not among the scored tokens (cut off by truncation)."""
    means = np.full(len(secret_ids), np.nan)
    for row, ids in enumerate(secret_ids):
        positions = secret_positions(token_ids[row], ids)
        if positions is not None:
            means[row] = float(np.mean(log_probs[row, positions]))
    return means
