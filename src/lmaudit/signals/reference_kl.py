"""The KL term of token-level InfoRMIA: KL(p_reference(. | x_<t) || p_target(. | x_<t)) in nats at every token after
the first, the target's tokens fed to both causal LMs in one joint pass.

Both models run on the same batches; their LM heads run on chunks of positions, and each chunk's two full next-token
distributions (log-softmax of the fp32 logits, in float64) are reduced to one KL value per position before the next
chunk, so no positions x vocabulary array outlives its chunk. The positions are those of the target's clm_tokens pass
(the same tokenizer, truncation and order), so the values line up with its per-token log-probabilities.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from lmaudit.errors import InputError
from lmaudit.models.fingerprints import weights_fingerprint
from lmaudit.models.folders import resolve_model_folder
from lmaudit.models.heads import VOCABULARY_TILE, checked_encoder_and_head, input_device, logits_in_tiles, tileable_head
from lmaudit.models.inputs import pad_batch
from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource, Placement, as_source
from lmaudit.signals.base import EncodedSample, encode_for, length_sorted_batches, progress_bar, refuse_single_token
from lmaudit.signals.compute import LoggedBackend, Scoring, loaded_models
from lmaudit.signals.memory import run_backing_off
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.store import open_store, stored_signals

SIGNAL = "reference_kl"  # the name its values are stored under in the signal store
# Logits per chunk of positions and model: half the clm pass's (signals/causal.py), since each chunk holds two models'
# distributions, in float64.
KL_CHUNK_ELEMENTS = 1 << 24


def configured_vocabulary(model: str | Path | ModelSource) -> int | None:
    """The width of a model's logits as its config.json gives it (vocab_size); None when it gives none."""
    config = json.loads((resolve_model_folder(as_source(model).folder) / "config.json").read_text(encoding="utf-8"))
    size = config.get("vocab_size")
    return int(size) if size is not None else None


def shared_vocabulary(target_width: int, reference_width: int, tokenizer_length: int) -> int | None:
    """How many logits of each model the KL compares: all when the widths agree; else the tokenizer's length when both
    have at least that many (Pythia pads its logits to 50,304 beyond its 50,277 tokens); else None (not comparable)."""
    if target_width == reference_width:
        return target_width
    return tokenizer_length if min(target_width, reference_width) >= tokenizer_length else None


def position_kl(reference_log_probs: torch.Tensor, target_log_probs: torch.Tensor) -> torch.Tensor:
    """(P,) KL(p_reference || p_target) = sum_v p_r(v) (log p_r(v) - log p_t(v)) of each row (nats), from (P, V)
    log-probabilities (float64), which it overwrites."""
    # in place: a third fewer passes over the P x V values than fresh temporaries (benchmarks/token_attacks.py's sizes)
    gains = target_log_probs.sub_(reference_log_probs)  # log p_t - log p_r
    kl = -reference_log_probs.exp_().mul_(gains).sum(-1)
    return kl.clamp_(min=0.0)  # >= 0 exactly; rounding leaves about -1e-17 where the two distributions all but agree


@torch.inference_mode()
def reference_kl_passes(target: torch.nn.Module, reference: torch.nn.Module, tokenizer, samples: Sequence[EncodedSample],
                        settings: SignalSettings, vocabulary: int, progress: bool = False,
                        position_chunk: int | None = None) -> list[np.ndarray]:
    """Per sample, KL(p_reference || p_target) (nats, float64) at each token after the first, over the first
    `vocabulary` logits of each model, both models reading the sample's (target-tokenized) ids."""
    models = (target, reference)
    position_chunk = position_chunk or max(1, KL_CHUNK_ELEMENTS // vocabulary)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results: list[np.ndarray] = [np.empty(0)] * len(samples)
    if not samples:
        return results
    probe = torch.from_numpy(samples[0].input_ids[:16])[None]
    splits = [checked_encoder_and_head(model, probe) for model in models]
    autocast = torch.autocast(device_type=input_device(target).type, dtype=torch.bfloat16,
                              enabled=settings.precision == "bf16")
    # each model's CPU fp32 head runs in vocabulary tiles into buffers reused by every chunk, as in signals/causal.py
    tiled = [None if settings.precision == "bf16" else tileable_head(head) for _, head in splits]
    buffers = [(torch.empty(position_chunk, layer.out_features), torch.empty(position_chunk, VOCABULARY_TILE))
               if layer is not None else None for layer in tiled]

    def log_probs_at(index: int, hidden: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        chosen = hidden[rows.to(hidden.device), cols.to(hidden.device)]
        layer = tiled[index]
        if layer is not None and chosen.device == layer.weight.device:
            logits = logits_in_tiles(layer, chosen, *buffers[index])
        else:
            with autocast:
                logits = splits[index][1](chosen)
        return torch.log_softmax(logits[:, :vocabulary].double(), dim=-1)

    def run(batch: Sequence[int]) -> None:
        ids, attention = pad_batch([samples[i].input_ids for i in batch], pad)
        with autocast:
            hidden = [encoder(ids.to(input_device(model)), attention.to(input_device(model)))
                      for model, (encoder, _) in zip(models, splits, strict=True)]
        # Position t predicts token t + 1, wherever t + 1 is a real token: the clm_tokens pass's positions.
        rows, cols = torch.nonzero(attention[:, 1:], as_tuple=True)
        values = torch.empty(len(rows), dtype=torch.float64)
        for start in range(0, len(rows), position_chunk):
            stop = start + position_chunk
            target_log_probs = log_probs_at(0, hidden[0], rows[start:stop], cols[start:stop])
            reference_log_probs = log_probs_at(1, hidden[1], rows[start:stop], cols[start:stop])
            values[start:stop] = position_kl(reference_log_probs.to(target_log_probs.device), target_log_probs).cpu()
        values_of, row_numbers = values.numpy(), rows.numpy()
        for position, index in enumerate(batch):  # rows come out in order, each row's positions left to right
            results[index] = values_of[row_numbers == position]
        bar.update(len(batch))

    batches = length_sorted_batches(samples, settings.batch_tokens)
    with progress_bar(None, len(samples), "reference KL passes", progress, unit="sample") as bar:
        run_backing_off(batches, run, lambda i: f"sample '{samples[i].sample_id}' ({len(samples[i].input_ids)} tokens)")
    return results


@dataclass(frozen=True)
class ReferenceKLJob:
    """One chunk's KL values (signals/compute.py's ScoringJob, for two models at once): the target and the reference
    (sources, so that the job is picklable), the target's clm_tokens settings with their batch size and precision
    resolved, and the logits compared (`shared_vocabulary`)."""

    target: ModelSource
    reference: ModelSource
    settings: SignalSettings
    vocabulary: int
    placement: Placement = DEFAULT_PLACEMENT
    progress: bool = False

    def __call__(self, ids: list[str], texts: list[str]) -> list[pd.DataFrame]:
        """One frame (value: the sample's KL per token, n_tokens, truncated) for the chunk."""
        target, reference = loaded_models((self.target, self.reference), "clm", self.placement)
        widths = [model.get_output_embeddings().out_features for model in (target.model, reference.model)]
        if shared_vocabulary(*widths, len(target.tokenizer)) != self.vocabulary:
            raise InputError(f"{self.reference}: logits of {widths[1]} tokens against the target's {widths[0]}, not what "
                             f"their config.json files say; the reference KL cannot compare them")
        samples = encode_for(target.model, target.tokenizer, texts, ids, self.settings)
        refuse_single_token(samples)
        values = reference_kl_passes(target.model, reference.model, target.tokenizer, samples, self.settings,
                                     self.vocabulary, self.progress)
        return [pd.DataFrame({"value": values, "n_tokens": [s.n_tokens for s in samples],
                              "truncated": [s.truncated for s in samples]})]


def reference_kl_signal(target: ModelSource, reference: ModelSource, sample_ids: list[str], texts: list[str],
                        settings: SignalSettings, scoring: Scoring, vocabulary: int) -> pd.DataFrame:
    """Columns sample_id, value (per sample, KL(p_reference || p_target) at each token after the first, nats), n_tokens,
    truncated, read from the store under `scoring` (what is missing is computed there first), keyed by both models'
    fingerprints and the settings that change the value: the target's length limit and precision (`settings`: its
    clm_tokens ones)."""
    clm = resolved(settings, scoring.placement.device)
    kl_settings = SignalSettings(signal=SIGNAL, max_length=clm.max_length, precision=clm.precision,
                                 batch_tokens=clm.batch_tokens)
    pair = "\x00".join(weights_fingerprint(source, scoring.placement) for source in (target, reference))
    store = open_store(scoring.cache_dir, hashlib.sha256(pair.encode()).hexdigest(), kl_settings)
    job = ReferenceKLJob(target, reference, kl_settings, vocabulary, scoring.placement, scoring.progress)
    label = "target and first reference, KL"
    return stored_signals([store], sample_ids, texts, job, scoring.chunk_size, description=f"scoring {label}",
                          progress=scoring.progress,
                          backend=LoggedBackend(scoring.backend, label, len(sample_ids), scoring.progress))[0]
