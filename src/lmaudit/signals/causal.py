"""Causal-LM signal: mean next-token negative log-likelihood per sequence (nats per token).

Sequences are sorted by length and batched up to a token budget; the LM head runs on chunks of
positions, so no batch x length x vocabulary tensor is ever built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.inputs import pad_batch
from lmaudit.signals.base import (
    EncodedSample,
    SignalSettings,
    encode_for,
    length_sorted_batches,
    progress_bar,
    refuse_single_token,
)
from lmaudit.signals.registry import resolved


@torch.inference_mode()
def causal_lm_loss(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    progress: bool = False,
    position_chunk: int = 2048,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """Mean NLL (nats) of every token after the first, given the tokens before it; and the encodings."""
    device = next(model.parameters()).device
    settings = resolved(settings, device.type)
    samples = encode_for(model, tokenizer, texts, sample_ids, settings)
    refuse_single_token(samples)
    encoder, head = model.base_model, model.get_output_embeddings()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    totals = np.zeros(len(samples))
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16")
    batches = length_sorted_batches(samples, settings.batch_tokens)
    for batch in progress_bar(batches, len(batches), "causal-LM batches", progress):
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
