"""Probabilistic extraction's one pass (Hayes et al. 2024): with teacher forcing on prefix + suffix, the log of p_z,
the probability that one query under a sampling scheme (metrics/extraction.py:SamplingScheme) reproduces the suffix:
the sum over suffix tokens of the log-probability of the true token under the post-processed next-token distribution.
The post-processing is transformers' own warpers (temperature, top-k, top-p, in `generate`'s order), so the
probability is that of `generate(do_sample=True, ...)` with the same settings (top_k None is `generate`'s top_k=0,
not its default of 50); a true token the scheme removes gives log p_z = -inf (p_z = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from lmaudit.models.inputs import pad_batch
from lmaudit.models.source import ModelSource, Placement
from lmaudit.models.text import pad_token, text_ids
from lmaudit.signals.sampling import ExtractionSettings, SamplingScheme


def scheme_warpers(scheme: SamplingScheme) -> list:
    """transformers' logits warpers for `scheme`, in the order `generate` applies them."""
    from transformers import TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    warpers = [TemperatureLogitsWarper(scheme.temperature)] if scheme.temperature != 1.0 else []
    if scheme.top_k is not None:
        warpers.append(TopKLogitsWarper(scheme.top_k))
    if scheme.top_p < 1.0:
        warpers.append(TopPLogitsWarper(scheme.top_p))
    return warpers


@torch.inference_mode()
def suffix_log_probabilities(model: torch.nn.Module, prefixes: Sequence[Sequence[int]], suffixes: Sequence[Sequence[int]],
                             schemes: Sequence[SamplingScheme], pad_token_id: int, batch_size: int = 16) -> np.ndarray:
    """log p_z (natural log) of each suffix after its prefix under each scheme: an array (samples, schemes)."""
    device = next(model.parameters()).device
    warpers = [scheme_warpers(scheme) for scheme in schemes]
    result = np.empty((len(prefixes), len(schemes)))
    for start in range(0, len(prefixes), batch_size):
        rows = range(start, min(start + batch_size, len(prefixes)))
        ids, attention = pad_batch([list(prefixes[i]) + list(suffixes[i]) for i in rows], pad_token_id)
        logits = model(input_ids=ids.to(device), attention_mask=attention.to(device)).logits.float()
        for offset, i in enumerate(rows):
            # position t predicts token t + 1: the suffix's tokens are predicted from len(prefix) - 1 onwards
            first = len(prefixes[i]) - 1
            scores = logits[offset, first:first + len(suffixes[i])]
            truth = torch.as_tensor(list(suffixes[i]), device=scores.device)[:, None]
            for column, chain in enumerate(warpers):
                warped = scores
                for warper in chain:
                    warped = warper(None, warped)
                result[i, column] = float(torch.log_softmax(warped, dim=-1).gather(1, truth).sum())
    return result


def unpack_extraction(value: np.ndarray, suffix_tokens: int) -> tuple[list[int], np.ndarray]:
    """A stored extraction value as (the greedy continuation's token ids, log p_z per scheme)."""
    generated = value[:suffix_tokens]
    return [int(token) for token in generated[generated >= 0]], np.asarray(value[suffix_tokens:], dtype=float)


@dataclass(frozen=True)
class ExtractionJob:
    """One prefix length's extraction pass over a chunk of texts (each at least prefix + suffix tokens long): per text,
    the greedy continuation of its prefix (`suffix_tokens` ids, -1 after an early end) then log p_z of its suffix
    under each scheme, stored as one array. Picklable (the model travels as its source), so a backend can run it
    anywhere, like signals/compute.py's ScoringJob."""

    source: ModelSource
    placement: Placement
    settings: ExtractionSettings
    prefix_tokens: int

    def __call__(self, ids: list[str], texts: list[str]) -> list[pd.DataFrame]:
        """One frame (value, n_tokens, truncated) for the chunk."""
        from lmaudit.models.generation import greedy_continuations
        from lmaudit.signals.compute import loaded_models

        [loaded] = loaded_models((self.source,), "clm", self.placement)
        tokens = text_ids(loaded.tokenizer, texts)
        prefixes = [row[:self.prefix_tokens] for row in tokens]
        suffixes = [row[self.prefix_tokens:self.prefix_tokens + self.settings.suffix_tokens] for row in tokens]
        pad = pad_token(loaded.tokenizer)
        generated = greedy_continuations(loaded.model, prefixes, self.settings.suffix_tokens, pad,
                                         loaded.tokenizer.eos_token_id, self.settings.batch_size)
        log_p = suffix_log_probabilities(loaded.model, prefixes, suffixes, self.settings.sampling_schemes(), pad,
                                         self.settings.batch_size)
        width = self.settings.suffix_tokens
        values = [np.concatenate([np.pad(np.asarray(row, float), (0, width - len(row)), constant_values=-1), p])
                  for row, p in zip(generated, log_p, strict=True)]
        return [pd.DataFrame({"value": values, "n_tokens": [len(row) for row in tokens], "truncated": False})]
