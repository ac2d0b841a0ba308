"""A secret canary's membership score read on its secret alone (Panda et al. 2025 set the training labels and read the
loss on the secret only): every canary of a design shares its sentence, so the rest of the text only adds noise.

Pure numpy over stored per-token values (a masked LM's tokens each masked alone, a causal LM's next tokens): the secret
is found in a canary's scored tokens by its token ids, the last place they occur in a row.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lmaudit.signals.base import unpack_token_values

ID_BYTES = 8  # an id as int64: a sequence is found by a byte search, only where it starts on an id's boundary


def id_bytes(ids: Sequence) -> bytes:
    """A row of token ids (ints, or floats NaN-padded as the signal store keeps them; NaN becomes -1, no id) as the
    bytes `sequence_starts` searches."""
    values = np.asarray(ids)
    if values.dtype.kind == "f":
        values = np.where(np.isnan(values), -1, values)
    return values.astype(np.int64).tobytes()


def sequence_starts(row: bytes, sequence: bytes) -> list[int]:
    """Every position (in ids, ascending) where the id sequence `sequence` starts in `row` (both `id_bytes`)."""
    found, start = [], row.find(sequence) if sequence else -1
    while start != -1:
        if start % ID_BYTES == 0:
            found.append(start // ID_BYTES)
        start = row.find(sequence, start + 1)
    return found


def secret_positions(token_ids: np.ndarray, secret_ids: Sequence[int]) -> np.ndarray | None:
    """Positions of the last occurrence of `secret_ids` in one row of scored token ids (floats, NaN-padded), or None."""
    starts = sequence_starts(id_bytes(token_ids), id_bytes(np.asarray(secret_ids, dtype=np.int64)))
    return np.arange(starts[-1], starts[-1] + len(secret_ids)) if starts else None


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
