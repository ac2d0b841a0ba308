"""Neighbour texts for the neighbourhood attack (Mattern et al. 2023) and SPV-MIA's perturbations (Fu et al. 2024):
copies of a text with a few words replaced by a language model's proposals.

Neighbour j of a sample replaces `words` of its words, chosen by a generator seeded with (seed, sample_id, j), each by
the proposing model's most likely whole-word token at that word's place that is not the word itself: a masked LM's at
the masked word (Mattern et al.), a causal LM's after the words before it (so a fine-tune's public base can propose,
with no other model: SPV-MIA's authors mask-fill with T5, which lmaudit would have to download). Mattern et al. rank
substitutes by the MLM's probability (with dropout on the input embeddings to diversify them); here diversity comes
from the seeded choice of positions, which keeps every neighbour a pure function of the seed, the sample and the model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.config_json import family_of
from lmaudit.models.heads import checked_encoder_and_head, input_device
from lmaudit.models.inputs import pad_batch
from lmaudit.models.text import model_max_length, pad_token, text_ids
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


def neighbour_texts(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str], neighbours: int,
                    words: int, seed: int, batch_size: int = 64, progress: bool = False) -> list[list[str]]:
    """`neighbours` neighbour texts of each text (a text without replaceable words is its own neighbour), proposed by a
    masked LM or a causal LM (by the model's class, as config.json's architectures name it)."""
    causal = family_of([type(model).__name__]) == "clm"
    jobs = []  # (sample, neighbour, split words, replaced positions)
    for index, (text, sample_id) in enumerate(zip(texts, sample_ids, strict=True)):
        split = text.split(" ")
        # a causal LM proposes from the words before: not where none come before, nor for a word whose punctuation
        # comes first
        candidates = [i for i in replaceable_words(split)
                      if not causal or (" ".join(split[:i]).strip() and _WORD.match(split[i]).group(1) == "")]
        jobs += [(index, j, split, chosen_positions(sample_id, words, candidates, j, seed)) for j in range(neighbours)]
    result = [[text] * neighbours for text in texts]
    batches = [jobs[start : start + batch_size] for start in range(0, len(jobs), batch_size)]
    propose = _causal_proposals if causal else _masked_proposals
    for batch in progress_bar(batches, len(batches), "neighbours", progress):
        for (index, j, split, positions), proposals in zip(batch, propose(model, tokenizer, batch), strict=True):
            copy = list(split)
            for position, word in zip(positions, proposals, strict=False):  # a word cut off by truncation stays
                before, original, after = _WORD.match(copy[position]).groups()
                copy[position] = before + (word or original) + after
            result[index][j] = " ".join(copy)
    return result


@torch.inference_mode()
def _masked_proposals(model: torch.nn.Module, tokenizer, batch: list) -> list[list[str | None]]:
    """Per job, the masked LM's word for each of its positions, all masked at once."""
    masked = []
    for _, _, split, positions in batch:
        copy = list(split)
        for position in positions:
            before, _, after = _WORD.match(copy[position]).groups()
            copy[position] = before + tokenizer.mask_token + after
        masked.append(" ".join(copy))
    encoded = tokenizer(masked, return_tensors="pt", padding=True, truncation=True)
    device = input_device(model)
    logits = model(**{k: v.to(device) for k, v in encoded.items() if k in ("input_ids", "attention_mask")}).logits
    proposals = []
    for row, (_, _, split, positions) in enumerate(batch):
        slots = torch.nonzero(encoded["input_ids"][row] == tokenizer.mask_token_id)[:, 0].tolist()
        proposals.append([_proposal(logits[row, slot].float(), tokenizer, _WORD.match(split[position]).group(2))
                          for position, slot in zip(positions, slots, strict=False)])
    return proposals


@torch.inference_mode()
def _causal_proposals(model: torch.nn.Module, tokenizer, batch: list) -> list[list[str | None]]:
    """Per job, the causal LM's word for each of its positions, each from the original words before it: the most likely
    token that, appended to them, decodes as a space and a whole word of letters other than the original."""
    contexts = [(" ".join(split[:position]), _WORD.match(split[position]).group(2))
                for _, _, split, positions in batch for position in positions]
    proposals: list[str | None] = []
    if contexts:
        limit = model_max_length(model.config, tokenizer)
        ids = [row[-limit:] for row in text_ids(tokenizer, [context for context, _ in contexts])]  # the words before
        inputs, attention = pad_batch([np.asarray(row, dtype=np.int64) for row in ids], pad_token(tokenizer))
        encoder, head = checked_encoder_and_head(model, inputs[:1, :16])
        device = input_device(model)
        hidden = encoder(inputs.to(device), attention.to(device))
        last = (attention.sum(dim=1) - 1).to(hidden.device)
        # the head on each context's last position only: no contexts x length x vocabulary tensor
        logits = head(hidden[torch.arange(len(ids), device=hidden.device), last]).float()
        for row, (context_ids, (_, original)) in enumerate(zip(ids, contexts, strict=True)):
            start = tokenizer.decode(context_ids, skip_special_tokens=True)
            proposals.append(next((word for word in (_appended_word(tokenizer, context_ids, start, token_id)
                                                     for token_id in torch.topk(logits[row], CANDIDATES).indices.tolist())
                                   if word and word.lower() != original.lower()), None))
    per_job, offset = [], 0
    for _, _, _, positions in batch:
        per_job.append(proposals[offset : offset + len(positions)])
        offset += len(positions)
    return per_job


def _appended_word(tokenizer, context_ids: list[int], start: str, token_id: int) -> str | None:
    """The word `token_id` adds after the context when it starts a new word of letters; else None."""
    if token_id in tokenizer.all_special_ids:
        return None
    added = tokenizer.decode([*context_ids, token_id], skip_special_tokens=True)
    word = added[len(start):]
    return word[1:] if added.startswith(start) and word.startswith(" ") and word[1:].isalpha() else None
