"""A sequence classifier's output: log-probabilities of every label, per sample (nats)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.heads import input_device
from lmaudit.models.inputs import pad_batch
from lmaudit.signals.base import EncodedSample, encode_for, length_sorted_batches, progress_bar
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings


@torch.inference_mode()
def class_log_probabilities(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    progress: bool = False,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """log p(label | text) for every label (n x labels, float64 from an fp32 log-softmax), and the encodings."""
    device = input_device(model)
    settings = resolved(settings, device.type)
    samples = encode_for(model, tokenizer, texts, sample_ids, settings)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    log_probs = np.zeros((len(samples), model.config.num_labels))
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16")
    batches = length_sorted_batches(samples, settings.batch_tokens)
    for batch in progress_bar(batches, len(batches), "classifier batches", progress):
        ids, attention = pad_batch([samples[i].input_ids for i in batch], pad)
        with autocast:
            logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits
        log_probs[batch] = torch.log_softmax(logits.float(), dim=-1).double().cpu().numpy()
    return log_probs, samples
