"""SaMIA's pass (Kaneko et al. 2024): generations only, no log-probabilities. Each text's first half (by words) is
given to the causal LM, which samples `draws` continuations (temperature 1, top-k 50, top-p 1, as the authors' code);
each continuation's ROUGE-1 recall against the text's second half is stored (one value per draw), and the attack
(attacks/samia.py) reads their mean.

Departures from the authors' code, each because the code would mislead here: words are word and punctuation tokens,
lowercased (`WORD`), since a tokenizer's decoding does not give back the text's whitespace; the reference is the text's
own second half, not one cut at a nominal length bucket; a continuation is cut to the reference's word count (recall
rewards length otherwise); it is given as many new tokens as the longest true second half in its chunk, within the
model's positions (a first half keeps at most half of them, its end). Sampling is seeded per chunk of
texts (seed, the chunk's first sample id): a rerun reads the stored values, so results do not depend on the run.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lmaudit.models.source import ModelSource, Placement

WORD = re.compile(r"\w+|[^\w\s]")
SAMPLING = {"temperature": 1.0, "top_k": 50, "top_p": 1.0}


def words(text: str) -> list[str]:
    """Word and punctuation tokens of `text`, lowercased."""
    return [word.lower() for word in WORD.findall(text)]


def halves(text: str) -> tuple[str, list[str]]:
    """The text cut after its first half of words: (the first half as it stands in the text, the second half's words)."""
    found = list(WORD.finditer(text))
    middle = len(found) // 2
    cut = found[middle].start() if middle < len(found) else len(text)
    return text[:cut].rstrip(), [match.group(0).lower() for match in found[middle:]]


def rouge1_recall(candidate: list[str], reference: list[str]) -> float:
    """Multiset unigram overlap over the reference's length, the candidate first cut to that length."""
    overlap = Counter(candidate[:len(reference)]) & Counter(reference)
    return sum(overlap.values()) / len(reference)


@dataclass(frozen=True)
class SamiaJob:
    """One chunk's SaMIA values: per text, the ROUGE-1 recall of each of `draws` sampled continuations of its first
    half (NaN for a text of fewer than 2 words). Picklable, like signals/compute.py's ScoringJob."""

    source: ModelSource
    placement: Placement
    draws: int
    seed: int
    batch_size: int = 16

    def __call__(self, ids: list[str], texts: list[str]) -> list[pd.DataFrame]:
        """One frame (value, n_tokens, truncated) for the chunk."""
        import torch

        from lmaudit.models.generation import continuations
        from lmaudit.models.text import model_max_length, pad_token, text_ids
        from lmaudit.signals.compute import loaded_models

        [loaded] = loaded_models((self.source,), "clm", self.placement)
        cut = [halves(text) for text in texts]
        usable = [i for i, (_, reference) in enumerate(cut) if reference and cut[i][0]]
        values = [np.full(self.draws, np.nan) for _ in texts]
        full_ids = text_ids(loaded.tokenizer, texts)
        if not usable:
            return [pd.DataFrame({"value": values, "n_tokens": [len(row) for row in full_ids], "truncated": False})]
        # within the model's positions: a prefix keeps at most half of them (its end, next to the continuation)
        limit = model_max_length(loaded.model.config, loaded.tokenizer)
        prefix_ids = [prefix[-(limit // 2):] for prefix in text_ids(loaded.tokenizer, [cut[i][0] for i in usable])]
        torch.manual_seed(zlib.crc32(f"{self.seed}:{ids[0]}".encode()))
        # as many new tokens as the longest second half: each continuation is cut to its own reference's words anyway
        length = max(1, max(len(full_ids[i]) - len(prefix) for i, prefix in zip(usable, prefix_ids, strict=True)))
        length = min(length, limit - max(map(len, prefix_ids)))
        generated = continuations(loaded.model, prefix_ids, length, pad_token(loaded.tokenizer),
                                  loaded.tokenizer.eos_token_id, self.batch_size, SAMPLING, self.draws)
        for i, copies in zip(usable, generated, strict=True):
            decoded = loaded.tokenizer.batch_decode(copies, skip_special_tokens=True)
            values[i] = np.array([rouge1_recall(words(text), cut[i][1]) for text in decoded])
        return [pd.DataFrame({"value": values, "n_tokens": [len(row) for row in full_ids], "truncated": False})]
