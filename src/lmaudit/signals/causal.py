"""Causal-LM signal: mean next-token negative log-likelihood per sequence (nats per token).

Sequences are sorted by length and batched up to a token budget; the LM head runs on chunks of
positions, so no batch x length x vocabulary tensor is ever built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.errors import InputError
from lmaudit.models.train import pad_batch
from lmaudit.signals.mlm import EncodedSample, SignalSettings, encode, model_max_length


def length_sorted_batches(samples: Sequence[EncodedSample], batch_tokens: int) -> list[list[int]]:
    """Sample positions in batches of similar length whose padded size stays within `batch_tokens`."""
    order = sorted(range(len(samples)), key=lambda i: len(samples[i].input_ids))
    batches, current, longest = [], [], 0
    for index in order:
        longest = max(longest, len(samples[index].input_ids))
        if current and longest * (len(current) + 1) > batch_tokens:
            batches.append(current)
            current, longest = [], len(samples[index].input_ids)
        current.append(index)
    return batches + ([current] if current else [])


@torch.inference_mode()
def causal_lm_loss(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    batch_tokens: int = 4096,
    position_chunk: int = 2048,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """Mean NLL (nats) of every token after the first, given the tokens before it; and the encodings."""
    device = next(model.parameters()).device
    max_length = settings.max_length or model_max_length(model.config, tokenizer)
    samples = encode(tokenizer, texts, sample_ids, max_length)
    short = next((sample for sample in samples if len(sample.input_ids) < 2), None)
    if short is not None:
        raise InputError(f"sample '{short.sample_id}': one token only, so a causal LM predicts nothing in it; "
                         "remove the sample or give it more text")
    encoder, head = model.base_model, model.get_output_embeddings()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    totals = np.zeros(len(samples))
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16")
    for batch in length_sorted_batches(samples, batch_tokens):
        ids, attention = pad_batch([samples[i].input_ids for i in batch], pad)
        with autocast:
            hidden = encoder(input_ids=ids.to(device), attention_mask=attention.to(device)).last_hidden_state
        # Position t predicts token t + 1, wherever t + 1 is a real token.
        rows, cols = torch.nonzero(attention[:, 1:], as_tuple=True)
        targets = ids[rows, cols + 1].to(device)
        nll = torch.empty(len(rows), device=device)
        for start in range(0, len(rows), position_chunk):
            stop = start + position_chunk
            with autocast:
                logits = head(hidden[rows[start:stop].to(device), cols[start:stop].to(device)])
            log_probs = torch.log_softmax(logits.float(), dim=-1)
            nll[start:stop] = -log_probs.gather(1, targets[start:stop, None])[:, 0]
        np.add.at(totals, np.asarray(batch)[rows.numpy()], nll.double().cpu().numpy())
    counts = np.array([len(s.input_ids) - 1 for s in samples])
    return totals / counts, samples
