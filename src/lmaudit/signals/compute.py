"""A model's signal for a set of samples, through the on-disk store (load the model only if needed)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.models.load import (
    LoadedModel,
    check_model_folder,
    load_causal_lm,
    load_classifier,
    load_masked_lm,
    model_family,
    model_fingerprint,
    resolve_model_folder,
    tokenizer_fingerprint,
)
from lmaudit.signals.causal import causal_lm_loss
from lmaudit.signals.classifier import class_log_probabilities
from lmaudit.signals.mlm import SignalSettings, mlm_signal, mlm_signals
from lmaudit.signals.store import SignalStore, stored_signal, stored_signals
from lmaudit.signals.whitebox import attention_features, gradient_features

# Signals other than the MLM and white-box ones: how to load the model and how to score a chunk of texts.
SCORERS = {"clm_loss": (load_causal_lm, causal_lm_loss), "classifier": (load_classifier, class_log_probabilities)}
WHITEBOX_SIGNALS = ("whitebox_attention", "whitebox_gradient")


def model_signal(
    model_dir: str | Path,
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    batch_tokens: int = 4096,
    progress: bool = False,
    trust_remote_code: bool = False,
    label: str = "model",
    chunk_size: int = 512,
    device: str = "cpu",
    class_labels: list[int] | None = None,
) -> pd.DataFrame:
    """Columns sample_id, value, n_tokens (content tokens before truncation), truncated.

    value: nats for the LM signals; for "classifier", the array of label log-probabilities; for the
    white-box signals, the feature vector. `class_labels` (label indices) are needed for a
    classifier's gradient features, whose loss depends on the label."""
    model_dir = resolve_model_folder(model_dir)
    check_model_folder(model_dir)
    settings = settings.resolved(device)
    store = SignalStore(cache_dir, model_fingerprint(model_dir), settings)
    loaded: list[LoadedModel] = []

    load, score = _scorer(settings.signal, model_dir, progress)

    label_of = dict(zip(sample_ids, class_labels, strict=True)) if class_labels is not None else None

    def compute(ids: list[str], chunk_texts: list[str]) -> pd.DataFrame:
        if not loaded:
            loaded.append(load(model_dir, device=device, trust_remote_code=trust_remote_code))
        extra = {"labels": np.array([label_of[i] for i in ids])} if label_of is not None else {}
        values, encoded = score(loaded[0].model, loaded[0].tokenizer, chunk_texts, ids, settings, batch_tokens, **extra)
        return _frame(values, encoded)

    # A value that depends on the label is stored under the text and the label.
    keys = [f"{t}\x00label={label_of[i]}" for i, t in zip(sample_ids, texts, strict=True)] if label_of is not None else None
    return stored_signal(store, sample_ids, texts, compute, chunk_size, description=f"scoring {label}", progress=progress,
                         keys=keys)


def _scorer(signal: str, model_dir: Path, progress: bool):
    """How to load the model and score a chunk of texts for `signal`."""
    if signal in WHITEBOX_SIGNALS:
        family = model_family(model_dir)
        load = {"mlm": load_masked_lm, "clm": load_causal_lm, "classifier": load_classifier}[family]
        return load, attention_features if signal == "whitebox_attention" else partial(gradient_features, family=family)
    return SCORERS.get(signal, (load_masked_lm, partial(mlm_signal, progress=progress)))


def _frame(values, encoded) -> pd.DataFrame:
    return pd.DataFrame({"value": list(values), "n_tokens": [e.n_tokens for e in encoded], "truncated": [e.truncated for e in encoded]})


def model_signals(
    model_dirs: dict[str, str | Path],
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    batch_tokens: int = 4096,
    progress: bool = False,
    trust_remote_code: bool = False,
    device: str = "cpu",
) -> dict[str, pd.DataFrame]:
    """model_signal for several models; when they share a tokenizer, samples that none of them has
    stored are scored on the same batches (each batch of masked copies built once, run through each)."""
    folders = {name: resolve_model_folder(path) for name, path in model_dirs.items()}
    for folder in folders.values():
        check_model_folder(folder)
    settings = settings.resolved(device)
    shared_tokenizer = len({tokenizer_fingerprint(f) for f in folders.values()}) == 1
    if len(folders) > 1 and shared_tokenizer and settings.signal not in SCORERS and settings.signal not in WHITEBOX_SIGNALS:
        stores = [SignalStore(cache_dir, model_fingerprint(f), settings) for f in folders.values()]
        loaded: list[LoadedModel] = []

        def compute(ids: list[str], chunk_texts: list[str]) -> list[pd.DataFrame]:
            if not loaded:
                loaded.extend(load_masked_lm(f, device=device, trust_remote_code=trust_remote_code) for f in folders.values())
            values, encoded = mlm_signals([m.model for m in loaded], loaded[0].tokenizer, chunk_texts, ids, settings,
                                          batch_tokens, progress)
            return [_frame(v, encoded) for v in values]

        stored_signals(stores, sample_ids, texts, compute, description=f"scoring {' and '.join(folders)}", progress=progress)
    return {name: model_signal(folder, sample_ids, texts, settings, cache_dir, batch_tokens, progress, trust_remote_code,
                               name, device=device)
            for name, folder in folders.items()}
