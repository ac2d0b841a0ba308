"""Candidate scores for the reconstruction of sensitive fields (metrics/reconstruction.py reads them): each text with
every candidate in place of its field's value (every occurrence), scored under the model, in nats.

- causal LM: log p of the whole substituted text (every token after the start token, given those before): the model's
  probability of the text with that candidate, so candidates of different lengths compare as the model would generate
  them;
- masked LM (Lehman et al. 2021's fill-in): the candidate's tokens masked together, the sum of log p of each at its
  position from one pass (as many masks as the candidate has tokens: the mask count reveals a length, as it would to
  an attacker who knows the field's form).
A candidate cut off by truncation scores NaN (not ranked).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from lmaudit.data.fields import substituted
from lmaudit.models.heads import input_device
from lmaudit.models.text import model_max_length
from lmaudit.signals.base import EncodedSample, encode
from lmaudit.signals.causal import causal_passes
from lmaudit.signals.mlm import score_masked_copies
from lmaudit.signals.registry import resolved
from lmaudit.signals.settings import SignalSettings


def _masked_sample(tokenizer, text: str, spans: list[tuple[int, int]], max_length: int,
                   sample_id: str) -> tuple[EncodedSample, np.ndarray]:
    """One substituted text encoded, and the positions of the tokens that overlap the candidate's character spans."""
    encoded = tokenizer(text, truncation=True, max_length=max_length, return_offsets_mapping=True,
                        return_special_tokens_mask=True)
    offsets, special = np.asarray(encoded["offset_mapping"]), np.asarray(encoded["special_tokens_mask"])
    inside = np.zeros(len(offsets), bool)
    for start, end in spans:
        inside |= (offsets[:, 0] < end) & (offsets[:, 1] > start)
    content_end = offsets[special == 0, 1].max(initial=0)
    cut_off = any(end > content_end for _, end in spans)
    positions = np.array([], dtype=np.int64) if cut_off else np.flatnonzero(inside & (special == 0))
    ids = np.asarray(encoded["input_ids"], dtype=np.int64)
    return EncodedSample(sample_id, ids, np.flatnonzero(special == 0), len(ids), False), positions


def candidate_log_likelihoods(model: torch.nn.Module, tokenizer, model_kind: str, texts: Sequence[str],
                              values: Sequence[str], candidates: Sequence[str], settings: SignalSettings,
                              progress: bool = False) -> np.ndarray:
    """(texts, candidates) log-likelihoods in nats of each text with each candidate in place of its `values` entry
    (higher = likelier); `model_kind` 'clm' or 'mlm'."""
    settings = resolved(settings, input_device(model).type)
    max_length = settings.max_length or model_max_length(model.config, tokenizer)
    pairs = [(row, column) for row in range(len(texts)) for column in range(len(candidates))]
    filled = [substituted(texts[row], values[row], candidates[column]) for row, column in pairs]
    scores = np.full((len(texts), len(candidates)), np.nan)
    if not pairs:
        return scores
    names = [f"span {row} candidate {column}" for row, column in pairs]
    if model_kind == "clm":
        samples = encode(tokenizer, [text for text, _ in filled], names, max_length)
        log_probs = causal_passes(model, tokenizer, samples, settings, progress)
        for (row, column), sample, values_of in zip(pairs, samples, log_probs, strict=True):
            scores[row, column] = np.nan if sample.truncated else values_of[0].sum()
        return scores
    encoded = [_masked_sample(tokenizer, text, spans, max_length, name)
               for (text, spans), name in zip(filled, names, strict=True)]
    kept = [index for index, (_, positions) in enumerate(encoded) if len(positions)]
    nll = score_masked_copies(model, tokenizer.mask_token_id, [encoded[i][0] for i in kept],
                              [encoded[i][1][None] for i in kept], settings.batch_tokens, progress, settings.precision)
    for index, token_nll in zip(kept, nll, strict=True):
        row, column = pairs[index]
        scores[row, column] = -token_nll.sum()
    return scores
