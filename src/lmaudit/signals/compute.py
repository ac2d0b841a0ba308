"""A model's signal for a set of samples, through the on-disk store (a model is loaded only if something is missing).

Which model class to load and which scorer to run come from the signal's registry entry.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.models.load import (
    LoadedModel,
    check_model_folder,
    load_model,
    model_fingerprint,
    resolve_model_folder,
    tokenizer_fingerprint,
)
from lmaudit.signals.base import SignalSettings
from lmaudit.signals.registry import resolved, signal_spec
from lmaudit.signals.store import SignalStore, stored_signal, stored_signals


def model_signal(
    model_dir: str | Path,
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    progress: bool = False,
    trust_remote_code: bool = False,
    label: str = "model",
    chunk_size: int = 512,
    device: str = "cpu",
    class_labels: list[int] | None = None,
    prefix: str | None = None,
) -> pd.DataFrame:
    """Columns sample_id, value, n_tokens (content tokens before truncation), truncated.

    value: a number for the loss signals (nats); an array for the others (label log-probabilities,
    a feature vector). `class_labels` (label indices) are for a classifier's gradient features, whose
    loss depends on the label: such values are stored under the text and the label. A `prefix` (text) is put before
    every sample (ReCaLL; per-token signals only): values are stored under the text and the prefix."""
    model_dir = resolve_model_folder(model_dir)
    check_model_folder(model_dir)
    spec = signal_spec(settings.signal)
    settings = resolved(settings, device)
    store = SignalStore(cache_dir, model_fingerprint(model_dir), settings)
    loaded: list[LoadedModel] = []
    label_of = dict(zip(sample_ids, class_labels, strict=True)) if class_labels is not None else None

    def compute(ids: list[str], chunk_texts: list[str]) -> pd.DataFrame:
        if not loaded:
            loaded.append(load_model(model_dir, spec.model_kind, device, trust_remote_code))
        extra = {"labels": np.array([label_of[i] for i in ids])} if label_of is not None else {}
        extra |= {"prefix": prefix} if prefix is not None else {}
        values, encoded = spec.scoring_function()(loaded[0].model, loaded[0].tokenizer, chunk_texts, ids, settings,
                                                  progress, **extra)
        return _frame(values, encoded)

    keys = None
    if label_of is not None or prefix is not None:
        keys = [text + (f"\x00label={label_of[i]}" if label_of is not None else "")
                + (f"\x00prefix={prefix}" if prefix is not None else "") for i, text in zip(sample_ids, texts, strict=True)]
    return stored_signal(store, sample_ids, texts, compute, chunk_size, description=f"scoring {label}", progress=progress,
                         keys=keys)


def _frame(values, encoded) -> pd.DataFrame:
    return pd.DataFrame({"value": list(values), "n_tokens": [e.n_tokens for e in encoded], "truncated": [e.truncated for e in encoded]})


def model_signals(
    model_dirs: dict[str, str | Path],
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    progress: bool = False,
    trust_remote_code: bool = False,
    device: str = "cpu",
) -> dict[str, pd.DataFrame]:
    """model_signal for several models; when they share a tokenizer and the signal has a joint scorer, samples that
    none of them has stored are scored on the same batches (each batch built once, run through each model)."""
    folders = {name: resolve_model_folder(path) for name, path in model_dirs.items()}
    for folder in folders.values():
        check_model_folder(folder)
    spec = signal_spec(settings.signal)
    settings = resolved(settings, device)
    shared_tokenizer = len({tokenizer_fingerprint(f) for f in folders.values()}) == 1
    if len(folders) > 1 and shared_tokenizer and spec.joint_scorer:
        stores = [SignalStore(cache_dir, model_fingerprint(f), settings) for f in folders.values()]
        loaded: list[LoadedModel] = []

        def compute(ids: list[str], chunk_texts: list[str]) -> list[pd.DataFrame]:
            if not loaded:
                loaded.extend(load_model(f, spec.model_kind, device, trust_remote_code) for f in folders.values())
            values, encoded = spec.scoring_function(joint=True)([m.model for m in loaded], loaded[0].tokenizer, chunk_texts,
                                                                ids, settings, progress)
            return [_frame(v, encoded) for v in values]

        stored_signals(stores, sample_ids, texts, compute, description=f"scoring {' and '.join(folders)}", progress=progress)
    return {name: model_signal(folder, sample_ids, texts, settings, cache_dir, progress, trust_remote_code, name,
                               device=device)
            for name, folder in folders.items()}
