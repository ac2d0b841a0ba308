"""How much of a text a model reads: the longest input a model accepts, the start of each text worth tokenizing, and a
text's ids as a causal LM continues them (with its padding id).
No torch: the configuration, the signals' encoding and training all use these."""

from __future__ import annotations

from collections.abc import Sequence

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


def model_max_length(config, tokenizer) -> int:
    """Longest input (tokens, with special tokens) the model accepts."""
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    tokenizer_limit = tokenizer_limit if tokenizer_limit and tokenizer_limit < 1_000_000 else None
    limit = getattr(config, "max_position_embeddings", None)  # None for models without positions (LSTM)
    if limit is None:
        return int(tokenizer_limit or 512)
    if "roberta" in config.model_type or config.model_type == "camembert":
        limit -= config.pad_token_id + 1  # RoBERTa's positions start after the padding index
    return int(min(limit, tokenizer_limit)) if tokenizer_limit else int(limit)


def text_ids(tokenizer, texts: Sequence[str]) -> list[list[int]]:
    """Each text's token ids as the model saw them in training (its start token included), less any end tokens: a
    suffix is text, not the end of it."""
    encoded = tokenizer(list(texts), return_special_tokens_mask=True)
    ids = []
    for row, special in zip(encoded["input_ids"], encoded["special_tokens_mask"], strict=True):
        end = len(row)
        while end > 0 and special[end - 1]:
            end -= 1
        ids.append(list(row[:end]))
    return ids


def pad_token(tokenizer) -> int:
    """The id batches are padded with: the tokenizer's padding token, else its end token."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
