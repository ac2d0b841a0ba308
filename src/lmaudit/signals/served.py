"""A causal LM's signals from a served model (vLLM's engine or an endpoint): the same encoding, truncation and stored
layout as transformers' pass (signals/causal.py), with what the server cannot give left NaN.

A server gives each token's log-probability and, at best, its top few: not the whole next-token distribution, so the
predictive mean and standard deviation (Min-K%++) are NaN, and the top-1 id is NaN where the server does not say it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence

import numpy as np

from lmaudit.errors import InputError
from lmaudit.models.source import ModelSource
from lmaudit.signals.base import TOKEN_FIELDS, EncodedSample, encode, pack_token_values, progress_bar, refuse_single_token
from lmaudit.signals.settings import SignalSettings

SERVED_SIGNALS = ("clm_loss", "clm_tokens")


def served_limit(source: ModelSource, tokenizer, settings: SignalSettings, identity: dict) -> int:
    """The longest input scored: --max-length, else the smaller of what the model's config accepts and what the server
    scores (its context length less the one token it must generate: vLLM refuses a request with no room for it)."""
    from transformers import AutoConfig

    from lmaudit.models.text import model_max_length

    if settings.max_length:
        return settings.max_length
    own = model_max_length(AutoConfig.from_pretrained(source.folder, local_files_only=True), tokenizer)
    served = identity.get("max_model_len")
    return min(own, served - 1) if served else own


def served_passes(source: ModelSource, samples: Sequence[EncodedSample], prefix_ids: Sequence[int] = (),
                  progress: bool = False) -> list[np.ndarray]:
    """Per sample, the (len(STATISTICS), tokens after the first) values of its own tokens, from the server: log p,
    NaN mean and standard deviation, the top-1 id (NaN where not said)."""
    from lmaudit.serving.scorers import served_scorer

    scorer = served_scorer(source)
    prompts = [[*prefix_ids, *sample.input_ids.tolist()] for sample in samples]
    with progress_bar(None, len(samples), f"served passes ({scorer.identity['address']})", progress, unit="sample") as bar:
        scored = scorer.score(prompts, bar.update)
    results = []
    for tokens in scored:
        own = slice(len(prefix_ids), None)  # the prefix's tokens are context, never scored
        log_probs, top1 = tokens.log_probs[own], tokens.top1_ids[own]
        results.append(np.stack([log_probs, np.full_like(log_probs, np.nan), np.full_like(log_probs, np.nan), top1]))
    return results


def served_token_values(source: ModelSource, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                        settings: SignalSettings, progress: bool = False,
                        prefix: str | None = None) -> tuple[list[np.ndarray], list[EncodedSample]]:
    """causal_token_values through the server: per sample its packed per-token values, and the encodings."""
    from lmaudit.serving.scorers import served_scorer

    limit = served_limit(source, tokenizer, settings, served_scorer(source).identity)
    prefix_ids = tokenizer(prefix, add_special_tokens=False)["input_ids"][-(limit // 2):] if prefix else []
    samples = encode(tokenizer, texts, sample_ids, limit - len(prefix_ids))
    refuse_single_token(samples)
    passes = served_passes(source, samples, prefix_ids, progress)
    return [pack_token_values(values, sample.input_ids[1:]) for values, sample in zip(passes, samples, strict=True)], samples


def served_values(source: ModelSource, tokenizer, texts: Sequence[str], sample_ids: Sequence[str],
                  settings: SignalSettings, progress: bool = False, prefix: str | None = None) -> tuple[list, list]:
    """The stored values of `settings.signal` through the server: per-token values (clm_tokens) or the mean NLL
    (clm_loss, nats per token)."""
    if settings.signal not in SERVED_SIGNALS:
        raise InputError(f"--signal {settings.signal}: a served model gives a causal LM's log-probabilities only; use "
                         f"--signal {' or '.join(SERVED_SIGNALS)}, or audit the model in process")
    packed, samples = served_token_values(source, tokenizer, texts, sample_ids, settings, progress, prefix)
    if settings.signal == "clm_tokens":
        return packed, samples
    return [-np.asarray(values).reshape(len(TOKEN_FIELDS), -1)[0].mean() for values in packed], samples


def served_fingerprint(weights: str, source: ModelSource) -> str:
    """The signal store's key of a served model's numbers: its weights' fingerprint, and what serves them (engine,
    address, API, served name, the server's version and dtype, vLLM's arguments), since each may change them."""
    from lmaudit.serving.scorers import served_scorer

    identity = served_scorer(source).identity
    served = source.served
    what = {"weights": weights, "engine": served.engine, "api": served.api, "args": list(served.vllm_args),
            **{key: identity.get(key) for key in ("address", "model", "version", "dtype")}}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()
