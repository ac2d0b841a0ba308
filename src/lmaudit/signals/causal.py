"""Causal-LM signals: the mean next-token NLL per sequence (nats per token), and the per-token values the token-level
attacks read (each token's log-probability, and the mean and standard deviation of the log-probability under the
model's predictive distribution at its position), from the same pass.

Sequences are sorted by length and batched up to a token budget; the LM head runs on chunks of
positions, so no batch x length x vocabulary tensor is ever built.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.models.heads import VOCABULARY_TILE, checked_encoder_and_head, input_device, logits_in_tiles, tileable_head
from lmaudit.models.inputs import pad_batch
from lmaudit.models.text import model_max_length
from lmaudit.signals.base import (
    STATISTICS,
    EncodedSample,
    encode,
    encode_for,
    length_sorted_batches,
    pack_token_values,
    progress_bar,
    refuse_single_token,
)
from lmaudit.signals.memory import run_backing_off
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.tokens import token_statistics

# Logits per chunk of positions (positions x vocabulary, fp32: 128 MiB). Measured on 2 CPU cores with a GPT-2-sized
# vocabulary, 512-position chunks ran the clm_tokens pass 1.5x faster than 2048-position ones (each 400 MiB
# temporary costs page faults); a vocabulary of 50k gives 667 positions.
LOGIT_CHUNK_ELEMENTS = 1 << 25


@torch.inference_mode()
def causal_passes(model: torch.nn.Module, tokenizer, samples: Sequence[EncodedSample], settings: SignalSettings,
                  progress: bool = False, statistics: bool = False, prefix_ids: Sequence[int] = (),
                  position_chunk: int | None = None) -> list[np.ndarray]:
    """Per sample, an array (values, tokens after the first): log p of each token given the tokens before it (and the
    prefix, when given), then, with `statistics`, the predictive mean and standard deviation at its position."""
    device = input_device(model)
    position_chunk = position_chunk or max(1, LOGIT_CHUNK_ELEMENTS // model.config.vocab_size)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    prefix = np.asarray(prefix_ids, dtype=np.int64)
    results: list[np.ndarray] = [np.empty(0)] * len(samples)
    if not samples:
        return results
    encoder, head = checked_encoder_and_head(model, torch.from_numpy(samples[0].input_ids[:16])[None])
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=settings.precision == "bf16")
    tiled = None if settings.precision == "bf16" else tileable_head(head)
    # Reused by every chunk: a fresh 128 MiB tensor per chunk costs its page faults each time. The logits' buffer, free
    # once the log-softmax has run, and one more hold token_statistics' probabilities and centred log-probabilities.
    widths: tuple[int, ...] = ()
    if tiled:
        widths = (tiled.out_features, tiled.out_features, VOCABULARY_TILE) + ((tiled.out_features,) if statistics else ())
    buffers = [torch.empty(position_chunk, width) for width in widths]

    def run(batch: Sequence[int]) -> None:
        ids, attention = pad_batch([np.concatenate([prefix, samples[i].input_ids]) for i in batch], pad)
        with autocast:
            hidden = encoder(ids.to(device), attention.to(device))
        # Position t predicts token t + 1, wherever t + 1 is a real token of the sample (not of the prefix).
        scored = attention[:, 1:].clone()
        scored[:, : len(prefix)] = 0
        rows, cols = torch.nonzero(scored, as_tuple=True)
        targets = ids[rows, cols + 1].to(hidden.device)
        values = torch.empty((len(rows), len(STATISTICS) if statistics else 1), device=hidden.device, dtype=torch.float64)
        for start in range(0, len(rows), position_chunk):
            stop = start + position_chunk
            chosen = hidden[rows[start:stop].to(hidden.device), cols[start:stop].to(hidden.device)]
            scratch = None
            if tiled and chosen.device == tiled.weight.device:  # under a device map the last layer may sit elsewhere
                logits_buffer, log_probs_buffer, tile, *extra = buffers
                log_probs = torch.log_softmax(logits_in_tiles(tiled, chosen, logits_buffer, tile), dim=-1,
                                              out=log_probs_buffer[: len(chosen)])
                scratch = (logits_buffer, *extra) if statistics else None
            else:
                with autocast:
                    logits = head(chosen)
                log_probs = torch.log_softmax(logits.float(), dim=-1)
            chunk_targets = targets[start:stop].to(log_probs.device)
            values[start:stop] = (token_statistics(log_probs, chunk_targets, scratch) if statistics
                                  else log_probs.gather(1, chunk_targets[:, None])).to(values.device)
        values = values.double().cpu().numpy()
        row_numbers = rows.numpy()
        for position, index in enumerate(batch):  # rows come out in order, each row's positions left to right
            results[index] = values[row_numbers == position].T
        bar.update(len(batch))

    batches = length_sorted_batches(samples, settings.batch_tokens, len(prefix))
    with progress_bar(None, len(samples), "causal-LM passes", progress, unit="sample") as bar:
        run_backing_off(batches, run, lambda i: f"sample '{samples[i].sample_id}' ({len(samples[i].input_ids)} tokens)")
    return results


def causal_lm_loss(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                   settings: SignalSettings, progress: bool = False,
                   position_chunk: int | None = None) -> tuple[np.ndarray, list[EncodedSample]]:
    """Mean NLL (nats) of every token after the first, given the tokens before it; and the encodings."""
    settings = resolved(settings, input_device(model).type)
    samples = encode_for(model, tokenizer, texts, sample_ids, settings)
    refuse_single_token(samples)
    log_probs = causal_passes(model, tokenizer, samples, settings, progress, position_chunk=position_chunk)
    return np.array([-values[0].mean() for values in log_probs]), samples


def causal_token_values(model: torch.nn.Module, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                        settings: SignalSettings, progress: bool = False,
                        prefix: str | None = None,
                        position_chunk: int | None = None) -> tuple[list[np.ndarray], list[EncodedSample]]:
    """Per sample, its per-token values packed for the store (`pack_token_values`): log p, predictive mean and standard
    deviation (nats) and id of every token after the first; and the encodings.

    With a `prefix` (text), every sample is scored after it: the prefix's tokens come first, at most half the length
    limit (its last tokens, those next to the sample, when it is longer), and only the sample's own tokens are scored."""
    settings = resolved(settings, input_device(model).type)
    limit = settings.max_length or model_max_length(model.config, tokenizer)
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"][-(limit // 2):] if prefix else []
    samples = encode(tokenizer, texts, sample_ids, limit - len(prefix_ids))
    refuse_single_token(samples)
    passes = causal_passes(model, tokenizer, samples, settings, progress, statistics=True, prefix_ids=prefix_ids,
                           position_chunk=position_chunk)
    packed = [pack_token_values(values, sample.input_ids[1:]) for values, sample in zip(passes, samples, strict=True)]
    return packed, samples
