"""MLM energy and pseudo-log-likelihood: masked copies scored in batches, no autograd.

Masking (which positions, `masks.py`) and batching (how copies are run, `score_masked_copies`)
are separate so that a faster scorer can replace the second without touching the first.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
from tqdm.auto import tqdm

from lmaudit.errors import InputError
from lmaudit.signals.heads import masked_position_logits
from lmaudit.signals.masks import all_masks, random_masks, single_position_masks

SignalName = Literal["mlm_energy", "mlm_pll", "clm_loss", "classifier", "whitebox_attention", "whitebox_gradient"]
DEFAULT_NORMALIZE = {"mlm_energy": "sum", "mlm_pll": "mean", "clm_loss": "mean"}


@dataclass(frozen=True)
class SignalSettings:
    """Everything that determines a signal's value, besides the model and the text (mask settings
    apply to the MLM signals only)."""

    signal: SignalName = "mlm_energy"
    k: int = 10
    masks: Literal["random", "all"] = "random"
    normalize: Literal["sum", "mean"] | None = None
    mask_fraction: float = 0.15
    seed: int = 0
    max_length: int | None = None
    all_masks_cap: int = 5000
    precision: Literal["fp32", "bf16", "auto"] = "fp32"

    def resolved(self, device: str = "cpu") -> "SignalSettings":
        """Fill the defaults that depend on the signal or the hardware, so stored values are keyed
        by what was computed: normalisation (Eq. 2 sums, A.3.2 averages) and 'auto' precision."""
        normalize = self.normalize or DEFAULT_NORMALIZE.get(self.signal)
        precision = resolve_precision(self.precision, torch.device(device))
        return SignalSettings(**{**self.__dict__, "normalize": normalize, "precision": precision})


@dataclass(frozen=True)
class EncodedSample:
    """One tokenized sample: its ids (with special tokens) and where its content tokens sit."""

    sample_id: str
    input_ids: np.ndarray
    content_positions: np.ndarray
    n_tokens: int
    truncated: bool


def encode(tokenizer, texts: Sequence[str], sample_ids: Sequence[str], max_length: int) -> list[EncodedSample]:
    """Tokenize with truncation to `max_length`, recording the untruncated content length."""
    full = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    batch = tokenizer(list(texts), truncation=True, max_length=max_length, return_special_tokens_mask=True)
    encoded = []
    for sample_id, ids, special, untruncated in zip(sample_ids, batch["input_ids"], batch["special_tokens_mask"], full, strict=True):
        content = np.flatnonzero(np.asarray(special) == 0)
        if len(content) == 0:
            raise InputError(f"sample '{sample_id}': the tokenizer makes no tokens of its text; remove the sample")
        encoded.append(EncodedSample(
            sample_id=sample_id,
            input_ids=np.asarray(ids, dtype=np.int64),
            content_positions=content,
            n_tokens=len(untruncated),
            truncated=len(content) < len(untruncated),
        ))
    return encoded


def has_fast_bf16(device: torch.device) -> bool:
    """CUDA, or a CPU with native bf16 matrix instructions (AVX512_BF16 or AMX)."""
    if device.type == "cuda":
        return True
    try:
        with open("/proc/cpuinfo") as handle:
            flags = handle.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' becomes bf16 where the hardware has fast bf16, else fp32."""
    if precision == "auto":
        return "bf16" if has_fast_bf16(device) else "fp32"
    return precision


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


def mask_patterns(sample: EncodedSample, settings: SignalSettings) -> np.ndarray:
    """The sample's mask patterns as positions in its input ids, shape (copies, l)."""
    n_content = len(sample.content_positions)
    if settings.signal == "mlm_pll":
        patterns = single_position_masks(n_content)
    elif settings.masks == "all":
        patterns = all_masks(n_content, settings.mask_fraction, settings.all_masks_cap, sample.sample_id)
    else:
        patterns = random_masks(sample.sample_id, n_content, settings.k, settings.seed, settings.mask_fraction)
    return sample.content_positions[patterns]


@dataclass(frozen=True)
class _Copy:
    sample_index: int
    positions: np.ndarray


def _batches(samples: Sequence[EncodedSample], patterns: Sequence[np.ndarray], batch_tokens: int) -> Iterator[list[_Copy]]:
    """Masked copies grouped by exact sequence length (no padding), up to `batch_tokens` tokens a batch."""
    by_length: dict[int, list[_Copy]] = defaultdict(list)
    for index, (sample, sample_patterns) in enumerate(zip(samples, patterns, strict=True)):
        by_length[len(sample.input_ids)].extend(_Copy(index, p) for p in sample_patterns)
    for length in sorted(by_length):
        copies = by_length[length]
        per_batch = max(1, batch_tokens // length)
        for start in range(0, len(copies), per_batch):
            yield copies[start : start + per_batch]


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
) -> list[list[np.ndarray]]:
    """score_masked_copies for several models sharing a tokenizer: each batch is built once and run
    through every model (target and reference on the same batches). Result [model][sample]."""
    devices = [next(m.parameters()).device for m in models]
    logits_at = [masked_position_logits(m) for m in models]
    results = [[np.zeros(p.shape, dtype=np.float64) for p in patterns] for _ in models]
    filled = [0] * len(samples)
    total = sum(len(p) for p in patterns)
    with tqdm(total=total, desc="masked copies", unit="copy", disable=not progress or None, leave=False) as bar:
        for batch in _batches(samples, patterns, batch_tokens):
            originals = torch.from_numpy(np.stack([samples[c.sample_index].input_ids for c in batch]))
            rows = np.concatenate([np.full(len(c.positions), b) for b, c in enumerate(batch)])
            cols = np.concatenate([c.positions for c in batch])
            masked = originals.clone()
            masked[rows, cols] = mask_token_id
            targets = originals[rows, cols]
            slots = []  # which row of its sample's result each copy fills
            for copy in batch:
                slots.append(filled[copy.sample_index])
                filled[copy.sample_index] += 1
            for model_results, device, logits_of in zip(results, devices, logits_at, strict=True):
                autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=precision == "bf16")
                with autocast:
                    picked = logits_of(masked.to(device), torch.from_numpy(rows).to(device), torch.from_numpy(cols).to(device))
                log_probs = torch.log_softmax(picked.float(), dim=-1)  # fp32 whatever the matmul precision
                nll = -log_probs.gather(1, targets.to(device)[:, None])[:, 0].cpu().numpy()
                offset = 0
                for copy, slot in zip(batch, slots, strict=True):
                    size = len(copy.positions)
                    model_results[copy.sample_index][slot] = nll[offset : offset + size]
                    offset += size
            bar.update(len(batch))
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
    batch_tokens: int = 4096,
    progress: bool = False,
) -> tuple[np.ndarray, list[EncodedSample]]:
    """The signal (nats) of each text under `model`, and the encodings (lengths, truncation)."""
    values, samples = mlm_signals([model], tokenizer, texts, sample_ids, settings, batch_tokens, progress)
    return values[0], samples


def mlm_signals(
    models: Sequence[torch.nn.Module],
    tokenizer,
    texts: Sequence[str],
    sample_ids: Sequence[str],
    settings: SignalSettings,
    batch_tokens: int = 4096,
    progress: bool = False,
) -> tuple[list[np.ndarray], list[EncodedSample]]:
    """The signal of each text under each of several models that share `tokenizer`, on the same batches."""
    settings = settings.resolved(next(models[0].parameters()).device.type)
    max_length = settings.max_length or min(model_max_length(m.config, tokenizer) for m in models)
    samples = encode(tokenizer, texts, sample_ids, max_length)
    patterns = [mask_patterns(s, settings) for s in samples]
    per_model = score_masked_copies_with_models(models, tokenizer.mask_token_id, samples, patterns, batch_tokens,
                                                progress, settings.precision)
    values = []
    for token_nll in per_model:
        if settings.signal == "mlm_pll":
            values.append(np.asarray([float(t.sum() if settings.normalize == "sum" else t.mean()) for t in token_nll]))
        else:
            values.append(np.asarray([aggregate_energy(t, settings.normalize) for t in token_nll]))
    return values, samples
