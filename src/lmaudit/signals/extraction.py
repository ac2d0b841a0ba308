"""Probabilistic extraction's one pass (Hayes et al. 2024): with teacher forcing on prefix + suffix, the log of p_z,
the probability that one query under a sampling scheme (metrics/extraction.py:SamplingScheme) reproduces the suffix:
the sum over suffix tokens of the log-probability of the true token under the post-processed next-token distribution.
The post-processing is transformers' own warpers (temperature, top-k, top-p, in `generate`'s order), so the
probability is that of `generate(do_sample=True, ...)` with the same settings (top_k None is `generate`'s top_k=0,
not its default of 50); a true token the scheme removes gives log p_z = -inf (p_z = 0).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.signals.sampling import SamplingScheme
from lmaudit.models.inputs import pad_batch


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
