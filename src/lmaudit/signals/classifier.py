"""A sequence classifier's output: log-probabilities of every label, per sample (nats)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.train import pad_batch
from lmaudit.signals.causal import length_sorted_batches
from lmaudit.signals.mlm import EncodedSample, SignalSettings, encode, model_max_length


@torch.inference_mode()
def class_log_probabilities(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    batch_tokens: int = 4096,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """log p(label | text) for every label (n x labels, float64 from an fp32 log-softmax), and the encodings."""
    device = next(model.parameters()).device
    samples = encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    log_probs = np.zeros((len(samples), model.config.num_labels))
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16")
    for batch in length_sorted_batches(samples, batch_tokens):
        ids, attention = pad_batch([samples[i].input_ids for i in batch], pad)
        with autocast:
            logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits
        log_probs[batch] = torch.log_softmax(logits.float(), dim=-1).double().cpu().numpy()
    return log_probs, samples
