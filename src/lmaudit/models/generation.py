"""Greedy and sampled continuations of token prefixes by a causal LM, batched (issue 33): prefixes sorted by length so a batch pads
little, padded on the left so every row's next token is at the same position, and decoded by transformers' `generate`
with its key-value cache. A generation stops at the end-of-text token: the tokens after it are not the model's, so a
continuation may be shorter than asked (and then cannot reproduce a longer suffix).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def left_padded(prefixes: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and attention mask of `prefixes`, each padded on the left to the longest."""
    width = max(len(prefix) for prefix in prefixes)
    ids = torch.full((len(prefixes), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prefixes), width), dtype=torch.long)
    for row, prefix in enumerate(prefixes):
        if len(prefix):
            ids[row, width - len(prefix):] = torch.as_tensor(list(prefix))
            mask[row, width - len(prefix):] = 1
    return ids, mask


def cut_at_end(tokens: list[int], end_token_id: int | None) -> list[int]:
    """`tokens` up to, not including, the first end-of-text token."""
    return tokens[: tokens.index(end_token_id)] if end_token_id is not None and end_token_id in tokens else tokens


@torch.inference_mode()
def continuations(model: torch.nn.Module, prefixes: Sequence[Sequence[int]], length: int, pad_token_id: int,
                  end_token_id: int | None, batch_size: int = 32, sampling: dict | None = None,
                  copies: int = 1) -> list[list[list[int]]]:
    """Per prefix (in the order given), `copies` continuations of up to `length` tokens (token ids; shorter where the
    model ends the text): greedy without `sampling`, else sampled with those `generate` settings (temperature, top_k,
    top_p), `batch_size` prefixes at a time."""
    if length < 1:
        raise ValueError(f"a continuation of {length} tokens: ask for at least one")
    if any(len(prefix) == 0 for prefix in prefixes):
        raise ValueError("an empty prefix: decoding needs at least one token to start from")
    decoding = {"do_sample": True, **sampling} if sampling else {"do_sample": False}
    device = next(model.parameters()).device
    order = sorted(range(len(prefixes)), key=lambda i: len(prefixes[i]))
    result: list[list[list[int]]] = [[] for _ in prefixes]
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        ids, mask = left_padded([prefixes[i] for i in batch], pad_token_id)
        output = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=length,
                                num_beams=1, num_return_sequences=copies, pad_token_id=pad_token_id, use_cache=True,
                                **decoding)
        for row, index in enumerate(batch):
            result[index] = [cut_at_end(output[row * copies + copy, ids.shape[1]:].tolist(), end_token_id)
                             for copy in range(copies)]
    return result


def greedy_continuations(model: torch.nn.Module, prefixes: Sequence[Sequence[int]], length: int,
                         pad_token_id: int, end_token_id: int | None, batch_size: int = 32) -> list[list[int]]:
    """The `length` tokens greedy decoding appends to each prefix (token ids, in the order given; shorter where the
    model ends the text), `batch_size` prefixes at a time."""
    return [copies[0] for copies in continuations(model, prefixes, length, pad_token_id, end_token_id, batch_size)]
