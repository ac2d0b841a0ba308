"""A model's MLM signal for a set of samples, through the on-disk store (load the model only if needed)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from lmaudit.models.load import (
    LoadedModel,
    check_model_folder,
    load_masked_lm,
    model_fingerprint,
    resolve_model_folder,
)
from lmaudit.signals.mlm import MlmSignalSettings, mlm_signal
from lmaudit.signals.store import SignalStore, stored_signal


def model_signal(
    model_dir: str | Path,
    sample_ids: list[str],
    texts: list[str],
    settings: MlmSignalSettings,
    cache_dir: str | Path,
    batch_tokens: int = 4096,
    progress: bool = False,
    trust_remote_code: bool = False,
    label: str = "model",
    chunk_size: int = 512,
) -> pd.DataFrame:
    """Columns sample_id, value (nats), n_tokens (content tokens before truncation), truncated."""
    model_dir = resolve_model_folder(model_dir)
    check_model_folder(model_dir)
    settings = settings.resolved()
    store = SignalStore(cache_dir, model_fingerprint(model_dir), settings)
    loaded: list[LoadedModel] = []

    def compute(ids: list[str], chunk_texts: list[str]) -> pd.DataFrame:
        if not loaded:
            loaded.append(load_masked_lm(model_dir, trust_remote_code=trust_remote_code))
        model = loaded[0]
        values, encoded = mlm_signal(model.model, model.tokenizer, chunk_texts, ids, settings, batch_tokens, progress)
        return pd.DataFrame({
            "value": values,
            "n_tokens": [e.n_tokens for e in encoded],
            "truncated": [e.truncated for e in encoded],
        })

    return stored_signal(store, sample_ids, texts, compute, chunk_size, description=f"scoring {label}", progress=progress)
