"""The `words` design's secrets: random sequences of whole words of the model's own vocabulary, each canary's drawn
apart. No base model would write such a sequence (it is high-perplexity by construction), yet every word is one the
tokenizer keeps whole, so any recipe learns it as it is, and from its first word on each canary's context is its own,
which a number after a shared sentence (`--design secret`) is not."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lmaudit.errors import InputError

MIN_WORD_LENGTH = 3
MIN_VOCABULARY = 200  # whole words to draw from: fewer, and two canaries' secrets would share too much


def vocabulary_words(folder: str | Path, trust_remote_code: bool = False) -> list[str]:
    """The whole-word tokens of the tokenizer in `folder` (a model's or a tokenizer's): each token that decodes alone
    to letters only (at least MIN_WORD_LENGTH, lowercase), and that the tokenizer encodes back, after a space, as that
    one token; sorted, so that a seed draws the same words from the same tokenizer."""
    from lmaudit.models.tokenizer import load_tokenizer

    tokenizer = load_tokenizer(folder, trust_remote_code)
    decoded = {token_id: tokenizer.decode([token_id]).strip() for token_id in range(len(tokenizer))}
    candidates = {token_id: word for token_id, word in decoded.items()
                  if len(word) >= MIN_WORD_LENGTH and word.isalpha() and word.islower()}
    encoded = tokenizer([" " + word for word in candidates.values()], add_special_tokens=False)["input_ids"]
    words = {word for (token_id, word), ids in zip(candidates.items(), encoded, strict=True) if ids == [token_id]}
    if len(words) < MIN_VOCABULARY:
        raise InputError(f"--vocabulary {folder}: its tokenizer keeps {len(words)} lowercase words whole, fewer than "
                         f"{MIN_VOCABULARY}; give the folder of the model to be trained (its tokenizer)")
    return sorted(words)


def random_word_secrets(words: list[str], length: int, count: int, rng: np.random.Generator) -> list[str]:
    """`count` distinct secrets of `length` words each, drawn uniformly with replacement from `words`."""
    secrets: list[str] = []
    while len(secrets) < count:
        drawn = rng.integers(0, len(words), size=(count - len(secrets), length))
        secrets = list(dict.fromkeys(secrets + [" ".join(words[i] for i in row) for row in drawn]))
    return secrets
