"""A model's signal for a set of samples, through the on-disk store (a model is loaded only if something is missing).

Which model class to load and which scorer to run come from the signal's registry entry.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.models.load import (
    DEFAULT_PLACEMENT,
    LoadedModel,
    ModelSource,
    Placement,
    checked_source,
    load_model,
    tokenizer_fingerprint,
    weights_fingerprint,
)
from lmaudit.signals.base import SignalSettings
from lmaudit.signals.registry import resolved, signal_spec
from lmaudit.signals.store import SignalStore, stored_signal, stored_signals


def model_signal(
    model: str | Path | ModelSource,
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    progress: bool = False,
    placement: Placement = DEFAULT_PLACEMENT,
    label: str = "model",
    chunk_size: int = 512,
    class_labels: list[int] | None = None,
    prefix: str | None = None,
) -> pd.DataFrame:
    """Columns sample_id, value, n_tokens (content tokens before truncation), truncated.

    value: a number for the loss signals (nats); an array for the others (label log-probabilities,
    a feature vector). `class_labels` (label indices) are for a classifier's gradient features, whose
    loss depends on the label: such values are stored under the text and the label. A `prefix` (text) is put before
    every sample (ReCaLL; per-token signals only): values are stored under the text and the prefix."""
    source = checked_source(model)
    spec = signal_spec(settings.signal)
    settings = resolved(settings, placement.device)
    store = SignalStore(cache_dir, weights_fingerprint(source, placement), settings)
    loaded: list[LoadedModel] = []
    label_of = dict(zip(sample_ids, class_labels, strict=True)) if class_labels is not None else None

    def compute(ids: list[str], chunk_texts: list[str]) -> pd.DataFrame:
        if not loaded:
            loaded.append(load_model(source, spec.model_kind, placement))
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
    models: dict[str, str | Path | ModelSource],
    sample_ids: list[str],
    texts: list[str],
    settings: SignalSettings,
    cache_dir: str | Path,
    progress: bool = False,
    placement: Placement = DEFAULT_PLACEMENT,
) -> dict[str, pd.DataFrame]:
    """model_signal for several models; when they share a tokenizer and the signal has a joint scorer, samples that
    none of them has stored are scored on the same batches (each batch built once, run through each model)."""
    sources = {name: checked_source(model) for name, model in models.items()}
    spec = signal_spec(settings.signal)
    settings = resolved(settings, placement.device)
    shared_tokenizer = len({tokenizer_fingerprint(s) for s in sources.values()}) == 1
    if len(sources) > 1 and shared_tokenizer and spec.joint_scorer:
        stores = [SignalStore(cache_dir, weights_fingerprint(s, placement), settings) for s in sources.values()]
        loaded: list[LoadedModel] = []

        def compute(ids: list[str], chunk_texts: list[str]) -> list[pd.DataFrame]:
            if not loaded:
                loaded.extend(load_model(s, spec.model_kind, placement) for s in sources.values())
            values, encoded = spec.scoring_function(joint=True)([m.model for m in loaded], loaded[0].tokenizer, chunk_texts,
                                                                ids, settings, progress)
            return [_frame(v, encoded) for v in values]

        stored_signals(stores, sample_ids, texts, compute, description=f"scoring {' and '.join(sources)}", progress=progress)
    return {name: model_signal(source, sample_ids, texts, settings, cache_dir, progress, placement, name)
            for name, source in sources.items()}
