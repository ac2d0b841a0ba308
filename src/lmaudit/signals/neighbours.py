"""Neighbour texts for the neighbourhood attack (Mattern et al. 2023): copies of a text with a few words replaced by a
masked LM's proposals.

Neighbour j of a sample replaces `words` of its words, chosen by a generator seeded with (seed, sample_id, j), each by
the masked LM's most likely whole-word token at that word's place that is not the word itself. Mattern et al. rank
substitutes by the MLM's probability (with dropout on the input embeddings to diversify them); here diversity comes
from the seeded choice of positions, which keeps every neighbour a pure function of the seed, the sample and the MLM.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.heads import input_device
from lmaudit.signals.base import progress_bar
from lmaudit.signals.masks import sample_key

# A word: letters (with inner apostrophes or hyphens) and whatever punctuation clings to either side.
_WORD = re.compile(r"^(\W*)([^\W\d_]+(?:['-][^\W\d_]+)*)(\W*)$")
CANDIDATES = 20  # proposals looked at per masked word, most likely first


def replaceable_words(words: Sequence[str]) -> list[int]:
    """Positions of the words made of letters (numbers and symbols are left alone)."""
    return [i for i, word in enumerate(words) if _WORD.match(word)]


def chosen_positions(sample_id: str, n_words: int, candidates: list[int], neighbour: int, seed: int) -> list[int]:
    """The word positions neighbour j replaces: a pure function of (seed, sample_id, j)."""
    count = min(n_words, len(candidates))
    picked = np.random.default_rng([seed, *sample_key(sample_id), neighbour]).choice(len(candidates), count, replace=False)
    return sorted(candidates[i] for i in picked)


def _proposal(logits: torch.Tensor, tokenizer, original: str) -> str | None:
    """The most likely whole-word token that is not a special token nor the original word."""
    for token_id in torch.topk(logits, CANDIDATES).indices.tolist():
        if token_id in tokenizer.all_special_ids:
            continue
        token = tokenizer.convert_ids_to_tokens(token_id)
        word = tokenizer.convert_tokens_to_string([token]).strip()
        if token.startswith("##") or not word.isalpha() or word.lower() == original.lower():
            continue
        return word
    return None


@torch.inference_mode()
def neighbour_texts(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str], neighbours: int,
                    words: int, seed: int, batch_size: int = 64, progress: bool = False) -> list[list[str]]:
    """`neighbours` neighbour texts of each text (a text without replaceable words is its own neighbour)."""
    device = input_device(model)
    jobs = []  # (sample, neighbour, split words, replaced positions)
    for index, (text, sample_id) in enumerate(zip(texts, sample_ids, strict=True)):
        split = text.split(" ")
        candidates = replaceable_words(split)
        jobs += [(index, j, split, chosen_positions(sample_id, words, candidates, j, seed)) for j in range(neighbours)]
    result = [[text] * neighbours for text in texts]
    batches = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
    for batch in progress_bar(batches, len(batches), "neighbours", progress):
        masked = []
        for _, _, split, positions in batch:
            copy = list(split)
            for position in positions:
                before, _, after = _WORD.match(copy[position]).groups()
                copy[position] = before + tokenizer.mask_token + after
            masked.append(" ".join(copy))
        encoded = tokenizer(masked, return_tensors="pt", padding=True, truncation=True)
        logits = model(**{k: v.to(device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}).logits
        for row, (index, j, split, positions) in enumerate(batch):
            slots = torch.nonzero(encoded["input_ids"][row] == tokenizer.mask_token_id)[:, 0].tolist()
            copy = list(split)
            for position, slot in zip(positions, slots, strict=False):  # a mask cut off by truncation stays unchanged
                before, original, after = _WORD.match(copy[position]).groups()
                word = _proposal(logits[row, slot].float(), tokenizer, original)
                copy[position] = before + (word or original) + after
            result[index][j] = " ".join(copy)
    return result
