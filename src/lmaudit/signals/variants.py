"""What the token-level attacks need besides the target's own pass, made without a model: compressed lengths (zlib),
token frequencies of non-audited text (DC-PDD), the non-member prefix (ReCaLL) and how close a model's first choice is to
the true token (PETAL)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

# Between the prefix's samples, and between the prefix and the scored text.
PREFIX_SEPARATOR = "\n\n"


def compressed_bytes(texts: Sequence[str]) -> np.ndarray:
    """Length in bytes of each text's UTF-8 encoding after zlib compression (default level)."""
    return np.array([len(zlib.compress(text.encode("utf-8"))) for text in texts], dtype=float)


def token_ids_of(tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
    """Each text's content token ids (no special tokens added)."""
    if not texts:
        return []
    return [np.asarray(ids, dtype=np.int64) for ids in tokenizer(list(texts), add_special_tokens=False)["input_ids"]]


def corpus_counts(token_ids: Sequence[np.ndarray], vocabulary: int) -> np.ndarray:
    """(vocabulary,) how often each token id occurs in a corpus of tokenized texts."""
    return np.bincount(np.concatenate([np.zeros(0, np.int64), *token_ids]), minlength=vocabulary)


def smoothed_frequencies(counts: np.ndarray, token_ids: np.ndarray, own_ids: Sequence[np.ndarray | None]) -> np.ndarray:
    """Laplace-smoothed frequency (count + 1) / (total + vocabulary) of each id in a NaN-padded (n, T) array of ids.

    counts: (vocabulary,) over the frequency corpus. own_ids: per row, the sample's own token ids when its text is in
    that corpus (else None); they are left out of its own frequencies, so that a population sample is not scored
    against a corpus that holds it."""
    frequencies = np.full(token_ids.shape, np.nan)
    for row, own in enumerate(own_ids):
        known = ~np.isnan(token_ids[row])
        ids = token_ids[row, known].astype(np.int64)
        own_counts = np.bincount(own, minlength=len(counts)) if own is not None else np.zeros(len(counts), np.int64)
        frequencies[row, known] = (counts[ids] - own_counts[ids] + 1) / (counts.sum() - own_counts.sum() + len(counts))
    return frequencies


def prefix_samples(population_ids: Sequence[str], count: int, seed: int) -> list[int]:
    """Positions of the `count` population samples whose texts make the non-member prefix (seeded, sorted)."""
    chosen = np.random.default_rng([seed, 0x7EC411]).choice(len(population_ids), size=count, replace=False)
    return sorted(chosen.tolist())


def prefix_text(texts: Sequence[str]) -> str:
    """ReCaLL's prefix: the chosen non-member texts one after the other, then the separator before the scored text."""
    return PREFIX_SEPARATOR.join(texts) + PREFIX_SEPARATOR


def first_choice_similarity(embeddings: np.ndarray, first_choice_ids: np.ndarray, token_ids: np.ndarray,
                            positions_per_block: int = 1 << 16) -> np.ndarray:
    """(n, T) cosine similarity between the embedding of a model's first choice at each position and the true token's
    (1 where they are the same token), from unit-norm (vocabulary, width) `embeddings` and (n, T) NaN-padded ids; NaN
    where either id is outside the table (a model whose vocabulary was resized past the reference's)."""
    similarity = np.full(token_ids.shape, np.nan)
    rows, columns = np.nonzero(~np.isnan(token_ids) & ~np.isnan(first_choice_ids))
    chosen, true = first_choice_ids[rows, columns].astype(np.int64), token_ids[rows, columns].astype(np.int64)
    inside = (chosen < len(embeddings)) & (true < len(embeddings))
    rows, columns, chosen, true = rows[inside], columns[inside], chosen[inside], true[inside]
    for start in range(0, len(rows), positions_per_block):  # bounds the (positions, width) gathers
        block = slice(start, start + positions_per_block)
        similarity[rows[block], columns[block]] = np.einsum("ij,ij->i", embeddings[chosen[block]],
                                                            embeddings[true[block]])
    return similarity

