"""MLM energy and pseudo-log-likelihood: masked copies scored in batches, no autograd.

Masking (which positions, `masks.py`) and batching (how copies are run, `score_masked_copies`)
are separate so that a faster scorer can replace the second without touching the first.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.models.heads import checked_encoder_and_head, input_device
from lmaudit.models.inputs import pad_batch
from lmaudit.models.text import model_max_length
from lmaudit.signals.base import PADDING_SHARE, STATISTICS, EncodedSample, encode, pack_token_values
from lmaudit.signals.masks import all_masks, random_masks, single_position_masks
from lmaudit.signals.memory import run_backing_off
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.tokens import token_statistics


def mask_patterns(sample: EncodedSample, settings: SignalSettings) -> np.ndarray:
    """The sample's mask patterns as positions in its input ids, shape (copies, l)."""
    n_content = len(sample.content_positions)
    if settings.signal in ("mlm_pll", "mlm_tokens"):  # each position once
        patterns = single_position_masks(n_content)
    elif settings.masks == "all":
        patterns = all_masks(n_content, settings.mask_fraction, settings.all_masks_cap, sample.sample_id)
    else:
        patterns = random_masks(sample.sample_id, n_content, settings.k, settings.seed, settings.mask_fraction)
    return sample.content_positions[patterns]


@dataclass(frozen=True)
class _Copy:
    sample_index: int
    slot: int  # which row of its sample's result the copy fills
    positions: np.ndarray


def _batches(samples: Sequence[EncodedSample], patterns: Sequence[np.ndarray], batch_tokens: int,
             padding_share: float = 0.0) -> Iterator[list[_Copy]]:
    """Masked copies, shortest first, in batches of up to `batch_tokens` padded tokens of which at most `padding_share`
    is padding: 0 groups them by exact length (no padding, right on a CPU, where padding costs as much as a token); a
    GPU runs fewer, larger batches faster than many small exact-length ones."""
    copies = sorted((_Copy(index, slot, p) for index, sample_patterns in enumerate(patterns)
                     for slot, p in enumerate(sample_patterns)), key=lambda c: len(samples[c.sample_index].input_ids))
    current: list[_Copy] = []
    longest = real = 0
    for copy in copies:
        length = len(samples[copy.sample_index].input_ids)
        padded = max(longest, length) * (len(current) + 1)
        if current and (padded > batch_tokens or padded - real - length > padding_share * padded):
            yield current
            current, longest, real = [], 0, 0
        current.append(copy)
        longest, real = max(longest, length), real + length
    if current:
        yield current


def score_masked_copies(
    model: torch.nn.Module,
    mask_token_id: int,
    samples: Sequence[EncodedSample],
    patterns: Sequence[np.ndarray],
    batch_tokens: int = 4096,
    progress: bool = False,
    precision: str = "fp32",
) -> list[np.ndarray]:
    """Negative log-likelihood (nats) of each masked token, shape (copies, l) per sample.

    The encoder runs once per batch of masked copies; the LM head only at masked positions.
    """
    return score_masked_copies_with_models([model], mask_token_id, samples, patterns, batch_tokens, progress, precision)[0]


@torch.inference_mode()
def score_masked_copies_with_models(
    models: Sequence[torch.nn.Module],
    mask_token_id: int,
    samples: Sequence[EncodedSample],
    patterns: Sequence[np.ndarray],
    batch_tokens: int = 4096,
    progress: bool = False,
    precision: str = "fp32",
    statistics: bool = False,
    padding_share: float | None = None,
) -> list[list[np.ndarray]]:
    """score_masked_copies for several models sharing a tokenizer: each batch is built once and run
    through every model (target and reference on the same batches). Result [model][sample]. With
    `statistics`, each masked token gets its token_statistics (log p, predictive mean and sd, first-choice id) in place of its
    NLL: arrays (copies, l, len(STATISTICS)). `padding_share`: of a batch's tokens, at most this much padding (None: none
    on a CPU, PADDING_SHARE on a GPU)."""
    shape = (len(STATISTICS),) if statistics else ()
    results = [[np.zeros(p.shape + shape, dtype=np.float64) for p in patterns] for _ in models]
    if not samples:
        return results
    probe = torch.from_numpy(samples[0].input_ids[:16])[None]
    splits = [checked_encoder_and_head(m, probe) for m in models]
    devices = [input_device(m) for m in models]
    if padding_share is None:
        padding_share = PADDING_SHARE if devices[0].type == "cuda" else 0.0

    def run(batch: Sequence[_Copy]) -> None:
        # Right-padded with id 0 behind an attention mask of 0: the padding is never attended to nor scored.
        originals, attention = pad_batch([samples[c.sample_index].input_ids for c in batch], 0)
        rows = torch.from_numpy(np.concatenate([np.full(len(c.positions), b) for b, c in enumerate(batch)]))
        cols = torch.from_numpy(np.concatenate([c.positions for c in batch]))
        masked = originals.clone()
        masked[rows, cols] = mask_token_id
        targets = originals[rows, cols]
        per_model = []  # written into the results only once every model has run the batch
        for (encoder, head), device in zip(splits, devices, strict=True):
            autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
            with autocast:
                hidden = encoder(masked.to(device), attention.to(device))
                picked = head(hidden[rows.to(hidden.device), cols.to(hidden.device)])
            log_probs = torch.log_softmax(picked.float(), dim=-1)  # fp32 whatever the matmul precision
            chunk_targets = targets.to(log_probs.device)
            if statistics:
                per_model.append(token_statistics(log_probs, chunk_targets).cpu().numpy())
            else:
                per_model.append(-log_probs.gather(1, chunk_targets[:, None])[:, 0].cpu().numpy())
        for model_results, nll in zip(results, per_model, strict=True):
            offset = 0
            for copy in batch:
                size = len(copy.positions)
                model_results[copy.sample_index][copy.slot] = nll[offset : offset + size]
                offset += size
        bar.update(len(batch))

    total = sum(len(p) for p in patterns)
    with tqdm(total=total, desc="masked copies", unit="copy", disable=not progress or None, leave=False) as bar:
        run_backing_off(list(_batches(samples, patterns, batch_tokens, padding_share)), run,
                        lambda copy: f"a masked copy of sample '{samples[copy.sample_index].sample_id}'")
    return results


def aggregate_energy(token_nll: np.ndarray, normalize: str) -> float:
    """E(s) from per-token NLL of shape (copies, l): mean over copies of the sum (or mean) over l."""
    per_copy = token_nll.sum(axis=1) if normalize == "sum" else token_nll.mean(axis=1)
    return float(per_copy.mean())


def mlm_signal(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    progress: bool = False,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """The signal (nats) of each text under `model`, and the encodings (lengths, truncation)."""
    values, samples = mlm_signals([model], tokenizer, texts, sample_ids, settings, progress)
    return values[0], samples


def mlm_signals(
    models: Sequence[torch.nn.Module],
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    progress: bool = False,
) -> tuple[list[np.ndarray], list[EncodedSample]]:
    """The signal of each text under each of several models that share `tokenizer`, on the same batches."""
    settings = resolved(settings, input_device(models[0]).type)
    max_length = settings.max_length or min(model_max_length(m.config, tokenizer) for m in models)
    samples = encode(tokenizer, texts, sample_ids, max_length)
    patterns = [mask_patterns(s, settings) for s in samples]
    per_model = score_masked_copies_with_models(models, tokenizer.mask_token_id, samples, patterns, settings.batch_tokens,
                                                progress, settings.precision)
    if settings.signal == "mlm_pll":
        values = [np.asarray([float(t.sum() if settings.normalize == "sum" else t.mean()) for t in token_nll])
                  for token_nll in per_model]
    else:
        values = [np.asarray([aggregate_energy(t, settings.normalize) for t in token_nll]) for token_nll in per_model]
    return values, samples


def mlm_token_values(
    model: torch.nn.Module,
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    progress: bool = False,
) -> tuple[list[np.ndarray], list[EncodedSample]]:
    """The per-position terms of the pseudo-log-likelihood, packed for the store (`pack_token_values`): each content
    token masked once, its log p, the predictive mean and sd at its position (nats), and its id; and the encodings."""
    settings = resolved(settings, input_device(model).type)
    samples = encode(tokenizer, texts, sample_ids, settings.max_length or model_max_length(model.config, tokenizer))
    patterns = [mask_patterns(s, settings) for s in samples]
    per_copy = score_masked_copies_with_models([model], tokenizer.mask_token_id, samples, patterns, settings.batch_tokens,
                                               progress, settings.precision, statistics=True)[0]
    # One position per copy, copies in content order: (T, 1, statistics) -> (statistics, T).
    packed = [pack_token_values(values[:, 0, :].T, sample.input_ids[sample.content_positions])
              for values, sample in zip(per_copy, samples, strict=True)]
    return packed, samples
