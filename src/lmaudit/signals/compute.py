"""A model's signal for a set of samples, through the on-disk store (a model is loaded only if something is missing).

Which model class to load and which scorer to run come from the signal's registry entry.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from lmaudit.data.columns import DEFAULT_COLUMNS, ColumnNames
from lmaudit.data.corpus import load_corpus_chunks, table_kind, table_writer
from lmaudit.logs import Throttle
from lmaudit.models.fingerprints import tokenizer_fingerprint, weights_fingerprint
from lmaudit.models.folders import checked_source
from lmaudit.models.load import LoadedModel, load_model
from lmaudit.models.source import DEFAULT_PLACEMENT, ModelSource, Placement
from lmaudit.signals.registry import resolved, signal_spec
from lmaudit.signals.settings import SignalSettings
from lmaudit.signals.store import Backend, InProcess, open_store, shard_positions, stored_signals

log = logging.getLogger(__name__)

# The models the last scoring job used, kept loaded for the next: an audit's passes (the signal, lowercase, prefix, the
# chunks of a large file) reuse the target instead of loading it again. Models no job needs any more are let go.
_LOADED: dict[tuple, LoadedModel] = {}


def loaded_models(sources: tuple[ModelSource, ...], kind: str, placement: Placement) -> list[LoadedModel]:
    """The models of `sources`, loaded once per process and kept while consecutive jobs use them."""
    keys = [(source, kind, placement) for source in sources]
    for key in [key for key in _LOADED if key not in keys]:
        del _LOADED[key]
    for key in keys:
        if key not in _LOADED:
            _LOADED[key] = load_model(*key)
    return [_LOADED[key] for key in keys]


@dataclass(frozen=True)
class ScoringJob:
    """What turns a chunk of samples into stored values: the models (several are scored on the same batches), the
    signal's settings, where the models run, and a prefix or per-sample labels. Picklable (the models travel as
    sources, never as weights), so that a backend can run it in another process or on another machine."""

    sources: tuple[ModelSource, ...]
    settings: SignalSettings
    placement: Placement = DEFAULT_PLACEMENT
    prefix: str | None = None
    label_of: dict[str, int] | None = None
    progress: bool = False

    def __call__(self, ids: list[str], texts: list[str]) -> list[pd.DataFrame]:
        """One frame per model: columns value, n_tokens, truncated."""
        spec = signal_spec(self.settings.signal)
        if self.sources[0].served is not None:
            return [self._served(ids, texts)]
        models = loaded_models(self.sources, spec.model_kind, self.placement)
        if len(models) > 1:
            values, encoded = spec.scoring_function(joint=True)([m.model for m in models], models[0].tokenizer, texts, ids,
                                                                self.settings, self.progress)
            return [_frame(v, encoded) for v in values]
        extra = {"labels": np.array([self.label_of[i] for i in ids])} if self.label_of is not None else {}
        extra |= {"prefix": self.prefix} if self.prefix is not None else {}
        return [in_memory_signal(models[0].model, models[0].tokenizer, ids, texts, self.settings, self.progress, **extra)]

    def _served(self, ids: list[str], texts: list[str]) -> pd.DataFrame:
        from lmaudit.models.tokenizer import load_tokenizer
        from lmaudit.signals.served import served_values

        tokenizer = load_tokenizer(self.sources[0], self.placement.trust_remote_code)
        return _frame(*served_values(self.sources[0], tokenizer, texts, ids, self.settings, self.progress, self.prefix))


def in_memory_signal(model, tokenizer, sample_ids: list[str], texts: list[str], settings: SignalSettings,
                     progress: bool = False, **extra) -> pd.DataFrame:
    """Columns value, n_tokens, truncated: `settings.signal` (resolved) of a model already in memory, by the signal's
    registry scorer, the one a stored signal is computed with; not stored (a model in training changes every step).
    `extra`: the scorer's labels or prefix."""
    values, encoded = signal_spec(settings.signal).scoring_function()(model, tokenizer, texts, sample_ids, settings,
                                                                        progress, **extra)
    return _frame(values, encoded)


def store_fingerprint(source: ModelSource, placement: Placement) -> str:
    """What the signal store keys a model's values by: its weights as loaded, and what serves them when served."""
    weights = weights_fingerprint(source, placement)
    if source.served is None:
        return weights
    from lmaudit.signals.served import served_fingerprint

    return served_fingerprint(weights, source)


@dataclass(frozen=True)
class Scoring:
    """Where and how missing signal values are computed and kept: the signal store's folder, the models' placement,
    the backend that runs the missing chunks (None: this process), progress bars, samples per stored chunk, and the
    seed of the random order a served model's samples are sent in (so that no batch holds one role only)."""

    cache_dir: Path
    placement: Placement = DEFAULT_PLACEMENT
    backend: Backend | None = None
    progress: bool = False
    chunk_size: int = 512
    order_seed: int = 0


def model_signal(model: str | Path | ModelSource, sample_ids: list[str], texts: list[str], settings: SignalSettings,
                 scoring: Scoring, label: str = "model", class_labels: list[int] | None = None,
                 prefix: str | None = None) -> pd.DataFrame:
    """Columns sample_id, value, n_tokens (content tokens before truncation), truncated, read from the store under
    `scoring` (what is missing is computed there first; `label` names the pass in the logs).

    value: a number for the loss signals (nats); an array for the others (label log-probabilities,
    a feature vector). `class_labels` (label indices) are for a classifier's gradient features, whose
    loss depends on the label: such values are stored under the text and the label. A `prefix` (text) is put before
    every sample (ReCaLL; per-token signals only): values are stored under the text and the prefix."""
    source = checked_source(model)
    settings = resolved(settings, scoring.placement.device)
    store = open_store(scoring.cache_dir, store_fingerprint(source, scoring.placement), settings)
    label_of = dict(zip(sample_ids, class_labels, strict=True)) if class_labels is not None else None
    job = ScoringJob((source,), settings, scoring.placement, prefix, label_of, scoring.progress)
    keys = None
    if label_of is not None or prefix is not None:
        keys = [text + (f"\x00label={label_of[i]}" if label_of is not None else "")
                + (f"\x00prefix={prefix}" if prefix is not None else "") for i, text in zip(sample_ids, texts, strict=True)]
    return stored_signals([store], sample_ids, texts, job, scoring.chunk_size, description=f"scoring {label}",
                          progress=scoring.progress, keys=keys,
                          backend=LoggedBackend(scoring.backend, label, len(sample_ids), scoring.progress),
                          order_seed=scoring.order_seed if source.served is not None else None)[0]


class LoggedBackend:
    """A backend that logs the pass it runs (logging only: the chunks, their order and their results are the wrapped
    backend's): its start (samples, reused from the store, to compute), each finished chunk (DEBUG; and, when no bar
    shows progress, INFO at most every ten seconds) and its end with the seconds it took. Counts and labels only."""

    def __init__(self, backend: Backend | None, label: str, n_samples: int, progress: bool):
        self.backend, self.label, self.n_samples, self.progress = backend or InProcess(), label, n_samples, progress

    def map_chunks(self, job, chunks):
        to_compute = sum(len(ids) for ids, _ in chunks)
        reused = self.n_samples - to_compute
        if not chunks:
            log.info("%s: %d samples, all reused from the signal store", self.label, self.n_samples)
            yield from self.backend.map_chunks(job, chunks)
            return
        log.info("scoring %s: %d samples, %d reused from the signal store, %d to compute in %d chunks", self.label,
                 self.n_samples, reused, to_compute, len(chunks))
        start, throttle, done = time.monotonic(), Throttle(), 0
        for finished, (position, frames) in enumerate(self.backend.map_chunks(job, chunks), start=1):
            yield position, frames
            done += len(chunks[position][0])
            line = ("scoring %s: chunk %d/%d stored, %d/%d samples computed (%.0f s)", self.label, finished, len(chunks),
                    done, to_compute, time.monotonic() - start)
            if not self.progress and finished < len(chunks) and throttle():
                log.info(*line)
            else:
                log.debug(*line)
        log.info("scored %s: %d samples (%d reused, %d computed) in %.1f s", self.label, self.n_samples, reused,
                 to_compute, time.monotonic() - start)


def _frame(values, encoded) -> pd.DataFrame:
    return pd.DataFrame({"value": list(values), "n_tokens": [e.n_tokens for e in encoded], "truncated": [e.truncated for e in encoded]})


def model_signals(models: dict[str, str | Path | ModelSource], sample_ids: list[str], texts: list[str],
                  settings: SignalSettings, scoring: Scoring) -> dict[str, pd.DataFrame]:
    """model_signal for several models; when they share a tokenizer and the signal has a joint scorer, samples that
    none of them has stored are scored on the same batches (each batch built once, run through each model)."""
    sources = {name: checked_source(model) for name, model in models.items()}
    spec = signal_spec(settings.signal)
    settings = resolved(settings, scoring.placement.device)
    shared_tokenizer = len({tokenizer_fingerprint(s) for s in sources.values()}) == 1
    served = any(source.served is not None for source in sources.values())  # each served model is its own job
    if len(sources) > 1 and shared_tokenizer and spec.joint_scorer and not served:
        stores = [open_store(scoring.cache_dir, weights_fingerprint(s, scoring.placement), settings) for s in sources.values()]
        job = ScoringJob(tuple(sources.values()), settings, scoring.placement, progress=scoring.progress)
        names = " and ".join(sources)
        stored_signals(stores, sample_ids, texts, job, scoring.chunk_size, description=f"scoring {names}",
                       progress=scoring.progress, backend=LoggedBackend(scoring.backend, names, len(sample_ids), scoring.progress))
    return {name: model_signal(source, sample_ids, texts, settings, scoring, name) for name, source in sources.items()}


def score_file(model: ModelSource, data: str | Path, out: str | Path, settings: SignalSettings, scoring: Scoring,
               shard: tuple[int, int] | None = None, names: ColumnNames = DEFAULT_COLUMNS) -> tuple[int, int]:
    """Score every sample of a corpus file (its columns named as `names` says; or shard i of N of each chunk read) into
    `out`: columns sample_id and the signal. The file is read, scored and written a chunk at a time, so memory does not
    grow with its length; `out` appears whole at the end. Returns (samples written, samples truncated)."""
    table_kind(out)  # refuse an unknown output type before the work, not after
    written = truncated = 0
    with table_writer(out) as write:
        for corpus in load_corpus_chunks(data, names=names):
            if shard is not None:
                corpus = corpus.iloc[shard_positions(corpus["text"].tolist(), corpus["sample_id"].tolist(), shard)]
            values = model_signal(model, corpus["sample_id"].tolist(), corpus["text"].tolist(), settings, scoring)
            write(pd.DataFrame({"sample_id": values["sample_id"], settings.signal: values["value"]}))
            written += len(values)
            truncated += int(values["truncated"].sum())
    return written, truncated
