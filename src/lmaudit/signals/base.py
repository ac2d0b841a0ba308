"""What the signals' scorers share: tokenized samples, batches of similar length, and how per-token values are stored.

A signal is a number (or vector) per sample in its natural unit, computed from one model; the scorers live one module
per signal (see `registry.py`), their settings in `settings.py`. This module imports no torch.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from lmaudit.errors import InputError
from lmaudit.models.text import model_max_length, text_heads
from lmaudit.signals.settings import SignalSettings

# A per-token signal's stored value, per sample: these rows, one column per scored token, flattened.
STATISTICS = ("log_prob", "mean", "std", "top1_id")  # signals/tokens.py:token_statistics' columns, in order
TOKEN_FIELDS = (*STATISTICS, "token_id")


@dataclass(frozen=True)
class EncodedSample:
    """One tokenized sample: its ids (with special tokens) and where its content tokens sit."""

    sample_id: str
    input_ids: np.ndarray
    content_positions: np.ndarray
    n_tokens: int
    truncated: bool


def encode(tokenizer, texts: Sequence[str], sample_ids: Sequence[str], max_length: int) -> list[EncodedSample]:
    """Tokenize with truncation to `max_length`, recording the content length before truncation (counted in the part of
    a text that `text_heads` keeps: at least max_length tokens for a text that is truncated)."""
    heads, full = text_heads(tokenizer, texts, max_length)
    batch = tokenizer(heads, truncation=True, max_length=max_length, return_special_tokens_mask=True)
    encoded = []
    for sample_id, ids, special, untruncated in zip(sample_ids, batch["input_ids"], batch["special_tokens_mask"], full, strict=True):
        content = np.flatnonzero(np.asarray(special) == 0)
        if len(content) == 0:
            raise InputError(f"sample '{sample_id}': the tokenizer makes no tokens of its text; remove the sample")
        encoded.append(EncodedSample(
            sample_id=sample_id,
            input_ids=np.asarray(ids, dtype=np.int64),
            content_positions=content,
            n_tokens=len(untruncated),
            truncated=len(content) < len(untruncated),
        ))
    return encoded


def encode_for(model, tokenizer, texts: Sequence[str], sample_ids: Sequence[str], settings: SignalSettings) -> list[EncodedSample]:
    """Encode for one model: truncated to `settings.max_length`, else to what the model accepts."""
    return encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))


# The most of a batch's tokens that may be padding. Padding costs as much as real tokens in every matrix product, and
# the causal LMs' scoring pass is matrix products: a batch of sorted lengths cut only by its token budget wasted 5-10%
# on notes of 20-60 words.
PADDING_SHARE = 0.05


def length_sorted_batches(samples: Sequence[EncodedSample], batch_tokens: int, prefix_tokens: int = 0,
                          padding_share: float = PADDING_SHARE) -> list[list[int]]:
    """Sample positions in batches of similar length whose padded size (with `prefix_tokens` put before every sample)
    stays within `batch_tokens` and at most `padding_share` of which is padding (a sample alone breaks either)."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].input_ids))
    batches, current, longest, real = [], [], 0, 0
    for index in order:
        length = prefix_tokens + len(samples[index].input_ids)
        padded = max(longest, length) * (len(current) + 1)
        if current and (padded > batch_tokens or padded - real - length > padding_share * padded):
            batches.append(current)
            current, longest, real = [], 0, 0
        current.append(index)
        longest, real = max(longest, length), real + length
    return batches + ([current] if current else [])


def exact_length_groups(samples: Sequence[EncodedSample]) -> list[list[int]]:
    """Positions of samples grouped by exact input length (shortest first): batches with no padding."""
    groups: dict[int, list[int]] = defaultdict(list)
    for index, sample in enumerate(samples):
        groups[len(sample.input_ids)].append(index)
    return [groups[length] for length in sorted(groups)]


def refuse_single_token(samples: Sequence[EncodedSample]) -> None:
    """A causal LM predicts nothing in a one-token sample: refuse it by name."""
    short = next((sample for sample in samples if len(sample.input_ids) < 2), None)
    if short is not None:
        raise InputError(f"sample '{short.sample_id}': one token only, so a causal LM predicts nothing in it; "
                         "remove the sample or give it more text")


def pack_token_values(statistics: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """One sample's per-token values as stored: (len(STATISTICS), T) statistics and the T token ids -> a flat float64
    array, TOKEN_FIELDS by TOKEN_FIELDS."""
    return np.concatenate([np.asarray(statistics, dtype=np.float64), np.asarray(token_ids, dtype=np.float64)[None]]).ravel()


def unpack_token_values(stored: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
    """Stored per-token values of n samples -> TOKEN_FIELDS name -> (n, T) array, NaN-padded to the longest sample."""
    rows = [np.asarray(value, dtype=np.float64).reshape(len(TOKEN_FIELDS), -1) for value in stored]
    width = max((row.shape[1] for row in rows), default=0)
    table = np.full((len(TOKEN_FIELDS), len(rows), width), np.nan)
    for index, row in enumerate(rows):
        table[:, index, : row.shape[1]] = row
    return dict(zip(TOKEN_FIELDS, table, strict=True))


def progress_bar(items: Iterable, total: int, description: str, enabled: bool, unit: str = "batch"):
    """A transient progress bar over `items` within one stored chunk (off unless `enabled` and on a terminal)."""
    return tqdm(items, total=total, desc=description, unit=unit, disable=not enabled or None, leave=False)
