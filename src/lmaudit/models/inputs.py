"""How texts become a model's input, for training and scoring alike: the part of each text worth tokenizing, right
padding, per-sample positions."""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import torch

# Tokens average 3 to 6 characters in the tokenizers we know; a text whose first N tokens do not fit in its first
# CHARS_PER_TOKEN x N characters is tokenized whole (text_heads checks), so the cut never changes a token used.
CHARS_PER_TOKEN = 64


def text_heads(tokenizer, texts: Sequence[str], max_tokens: int) -> tuple[list[str], list[list[int]]]:
    """Each text cut to a start that still holds its first `max_tokens` tokens, and that start's token ids (no special
    tokens). Only those tokens are ever used, and tokenizing a 5,000,000-character text whole takes gigabytes."""
    heads = [_head(text, max_tokens * CHARS_PER_TOKEN) for text in texts]
    ids = tokenizer(heads, add_special_tokens=False)["input_ids"] if heads else []
    for position, (text, head) in enumerate(zip(texts, heads, strict=True)):
        if len(head) < len(text) and len(ids[position]) < max_tokens:  # tokens longer than CHARS_PER_TOKEN
            heads[position] = text
            ids[position] = tokenizer(text, add_special_tokens=False)["input_ids"]
    return heads, ids


def _head(text: str, limit: int) -> str:
    """The first `limit` characters of `text`, shortened to end at a space so that no word is cut in two."""
    if len(text) <= limit or text[limit].isspace():
        return text[:limit]
    space = max(text.rfind(character, 0, limit) for character in " \t\n")
    return text[:space] if space > 0 else text[:limit]


def pad_batch(sequences: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids right-padded to the longest sequence, and the attention mask (1 on real tokens)."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
        mask[row, : len(sequence)] = 1
    return ids, mask


def per_sample_position_inputs(model: torch.nn.Module, input_ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """Position and token-type ids of shape (B, T), as the model would make them for right-padded input.

    Left to itself a model embeds positions once, (1, T), for the whole batch, and the gradient at
    that embedding is then the batch's sum; per-sample gradients need one row per sample. Positions
    start after the padding index where the position embedding has one (RoBERTa and kin).
    """
    parameters = inspect.signature(model.forward).parameters
    extra = {}
    if "position_ids" in parameters:
        embeddings = getattr(getattr(model, "base_model", model), "embeddings", None)
        padding_idx = getattr(getattr(embeddings, "position_embeddings", None), "padding_idx", None)
        start = 0 if padding_idx is None else padding_idx + 1
        extra["position_ids"] = (start + torch.arange(input_ids.shape[1], device=input_ids.device)).expand_as(input_ids)
    if "token_type_ids" in parameters and getattr(model.config, "type_vocab_size", 0):
        extra["token_type_ids"] = torch.zeros_like(input_ids)
    return extra
