"""On-disk signal store: values appended in chunks, keyed by model fingerprint, settings and sample.

A run that is interrupted keeps every finished chunk; the next run computes only what is
missing, and since masks depend only on (seed, sample_id, k) its numbers equal an
uninterrupted run's. The store holds sample ids and keyed hashes of texts, never text: each text's key is an
HMAC-SHA256 under a random secret kept in the store's root (`store.key`), so that a stored key ties a value to the
exact text it was computed on, yet nobody without the store's secret can hash a guessed sentence and look it up
(an unsalted hash next to a sample id would make the store a membership oracle).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import socket
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from lmaudit.atomic import staged, write_text
from lmaudit.errors import InputError
from lmaudit.signals.settings import SignalSettings

STORE_COLUMNS = ["sample_id", "text_key", "value", "n_tokens", "truncated"]
ROW_KEY = ["sample_id", "text_key"]
CACHE_SUFFIX = ".signals"
SECRET_FILE = "store.key"
README_FILE = "README.txt"
STORE_README = ("lmaudit's signal store: each audited sample's signals and per-token values, with the token ids of its "
                "text (the tokenizer decodes them back into the text), and keyed hashes of the texts under the secret in "
                f"{SECRET_FILE}. It is as sensitive as the training data: keep it on the auditor's machine, never share "
                "it, and delete it when the audit is done (a rerun then computes the signals again).\n")
# Part of every store's folder name: stores written before texts were keyed (format 1, unsalted SHA-256), or before
# per-token values held the model's first choice at each position (formats 2 and 3, the latter only whether it was the
# true token), are never read again, and nothing is mixed with them.
STORE_FORMAT = 4


def default_cache_dir(output: str | Path) -> Path:
    """Where signals are stored unless --cache-dir says otherwise: `<output>.signals/` beside the output folder (or
    file), never inside it, since the per-token values hold the texts as token ids and the output folder is what a
    user shares."""
    output = Path(output).absolute()
    return output.with_name(output.name + CACHE_SUFFIX)


def create_store_root(root: Path) -> None:
    """Make a new store's root readable by its owner only, with a README that says what it holds; a folder that
    already exists (a --cache-dir the user chose) keeps its permissions."""
    if root.exists():
        return
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o700)
    write_text(root / README_FILE, STORE_README)


def store_secret(root: Path, create: bool = True) -> bytes | None:
    """The store's random 32-byte secret; None if it has none yet and `create` is False. Created atomically (a hard
    link that fails if the file exists), so processes sharing a store agree on one secret."""
    path = root / SECRET_FILE
    if not path.exists():
        if not create:
            return None
        create_store_root(root)
        candidate = root / f".{SECRET_FILE}.{socket.gethostname()}-{os.getpid()}"
        candidate.write_text(secrets.token_hex(32), encoding="ascii")
        os.chmod(candidate, 0o600)
        try:
            os.link(candidate, path)
        except FileExistsError:  # another process created it first: use theirs
            pass
        finally:
            candidate.unlink()
    return bytes.fromhex(path.read_text(encoding="ascii").strip())


def text_key(secret: bytes, text: str) -> str:
    """HMAC-SHA256 of a text under the store's secret (hex): ties a stored value to the exact text, and reveals nothing
    about the text to whoever lacks the secret."""
    return hmac.new(secret, text.encode("utf-8"), hashlib.sha256).hexdigest()


class SignalStore:
    """Stored values of one signal (with fixed settings) under one model."""

    def __init__(self, root: str | Path, fingerprint: str, settings: SignalSettings):
        key = {**settings.value_key(), "store_format": STORE_FORMAT}
        settings_key = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        self.root = Path(root)
        self.folder = self.root / fingerprint[:16] / f"{settings.signal}-{settings_key}"
        # Nothing is created until the first chunk is written: a run that fails before leaves no trace.
        self._settings_record = {"model_fingerprint": fingerprint, **key}
        self._table: pd.DataFrame | None = None  # the rows read or written so far by this process
        self._read: set[str] = set()
        self._written: list[pd.DataFrame] = []
        self._next_part = len(list(self.folder.glob("part-*.parquet")))

    @property
    def secret(self) -> bytes | None:
        """The secret texts are keyed under; None while nothing has been stored under this store's root."""
        return store_secret(self.root, create=False)

    def load(self) -> pd.DataFrame:
        """All stored rows (one per sample id and text key). Parts are read once per process: a later call reads only
        the parts written since (by other processes sharing the store)."""
        new = [part for part in sorted(self.folder.glob("part-*.parquet")) if part.name not in self._read]
        frames = [*([] if self._table is None else [self._table]), *self._written, *(pd.read_parquet(p) for p in new)]
        self._read |= {part.name for part in new}
        self._written = []
        if not frames:
            return pd.DataFrame(columns=STORE_COLUMNS)
        if len(frames) > 1 or self._table is None:
            self._table = pd.concat(frames, ignore_index=True).drop_duplicates(ROW_KEY, keep="last")
        return self._table

    def append(self, rows: pd.DataFrame) -> None:
        """Write one chunk atomically (temporary name, then rename), creating the store's folder with the first."""
        self.folder.mkdir(parents=True, exist_ok=True)
        info = self.folder / "settings.json"
        if not info.exists():
            write_text(info, json.dumps(self._settings_record, indent=2))
        # The host and process make the name unique among shards on several machines writing one shared store.
        while (self.folder / (name := f"part-{self._next_part:06d}-{socket.gethostname()}-{os.getpid()}.parquet")).exists():
            self._next_part += 1  # another store object of this process wrote it
        self._next_part += 1
        with staged(self.folder / name) as (temporary,):
            rows[STORE_COLUMNS].to_parquet(temporary, index=False)
        self._read.add(name)
        self._written.append(rows[STORE_COLUMNS].reset_index(drop=True))


def open_store(root: str | Path, fingerprint: str, settings: SignalSettings) -> SignalStore:
    """The store of (root, model, settings), one object per process: what it has read stays read across calls."""
    return _open_store(str(Path(root).resolve()), fingerprint, settings)


@functools.lru_cache(maxsize=64)
def _open_store(root: str, fingerprint: str, settings: SignalSettings) -> SignalStore:
    return SignalStore(root, fingerprint, settings)


def parse_shard(text: str) -> tuple[int, int]:
    """'i/N' -> (i, N), with 0 <= i < N."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise InputError(f"--shard {text}: expected i/N, e.g. 0/4") from None
    if not 0 <= index < count:
        raise InputError(f"--shard {text}: need 0 <= i < N")
    return index, count


def shard_positions(texts: list[str], sample_ids: list[str], shard: tuple[int, int]) -> np.ndarray:
    """Positions of shard i of N: samples sorted by length, then dealt round-robin, so the N parts are
    disjoint, cover everything and carry about the same amount of work."""
    index, count = shard
    order = sorted(range(len(texts)), key=lambda i: (len(texts[i]), sample_ids[i]))
    return np.sort(np.asarray(order[index::count], dtype=np.int64))


class Backend(Protocol):
    """Runs a scoring job on chunks of samples, somewhere: `map_chunks` yields (chunk position, one frame per store)
    in whatever order chunks finish."""

    def map_chunks(self, job: Callable[[list[str], list[str]], list[pd.DataFrame]],
                   chunks: list[tuple[list[str], list[str]]]) -> Iterator[tuple[int, list[pd.DataFrame]]]: ...


class InProcess:
    """The default backend: chunks one after another, in this process."""

    def map_chunks(self, job, chunks):
        """Each chunk's frames, in order."""
        for position, (ids, texts) in enumerate(chunks):
            yield position, job(ids, texts)


def sending_order(positions: np.ndarray, order_seed: int | None) -> np.ndarray:
    """The positions in the order they are computed: as given, or, with `order_seed`, in a random order drawn from it
    (a server batches what arrives together; in a random order no batch's effect follows the role)."""
    return positions if order_seed is None else np.random.default_rng(order_seed).permutation(positions)


def stored_signals(
    stores: Sequence[SignalStore],
    sample_ids: list[str],
    texts: list[str],
    compute: Callable[[list[str], list[str]], list[pd.DataFrame]],
    chunk_size: int = 512,
    description: str = "scoring",
    progress: bool = False,
    keys: list[str] | None = None,
    backend: Backend | None = None,
    order_seed: int | None = None,
) -> list[pd.DataFrame]:
    """Values for every sample from each store, computing in chunks (each stored as soon as it is done) the samples
    missing from all of them; samples missing from only some stay missing (NaN) for the caller.

    `compute(ids, texts)` returns one frame per store, columns value, n_tokens, truncated; `backend` runs it (default:
    in this process). A value is stored under its sample id and the keyed hash of its text, or of `keys` (what else it
    depends on) when given. With `order_seed`, the missing samples are computed in a random order drawn from it, not
    in the given one (a served model batches what arrives together: no batch then holds one role only).
    """
    keyed = keys if keys is not None else texts
    by_secret: dict[bytes, list[str]] = {}

    def keyed_rows(secret: bytes) -> pd.DataFrame:
        # stores under one root share a secret: each text is keyed once per secret
        if secret not in by_secret:
            by_secret[secret] = [text_key(secret, text) for text in keyed]
        return pd.DataFrame({"sample_id": sample_ids, "text_key": by_secret[secret]})

    missing_everywhere = np.ones(len(sample_ids), dtype=bool)
    for store in stores:
        if store.secret is not None:  # else nothing is stored under its root yet
            found = keyed_rows(store.secret).merge(store.load(), on=ROW_KEY, how="left")["value"].notna().to_numpy()
            missing_everywhere &= ~found
    missing = sending_order(np.flatnonzero(missing_everywhere), order_seed)
    parts = [missing[start : start + chunk_size] for start in range(0, len(missing), chunk_size)]
    chunks = [([sample_ids[i] for i in part], [texts[i] for i in part]) for part in parts]
    finished = (backend or InProcess()).map_chunks(compute, chunks)
    for position, frames in tqdm(finished, total=len(chunks), desc=description, unit="chunk", disable=not progress or None):
        for store, computed in zip(stores, frames, strict=True):
            rows = keyed_rows(store_secret(store.root)).iloc[parts[position]]
            store.append(pd.concat([rows.reset_index(drop=True), computed.reset_index(drop=True)], axis=1))
    empty = pd.DataFrame(columns=STORE_COLUMNS)
    return [(keyed_rows(store.secret).merge(store.load(), on=ROW_KEY, how="left") if store.secret is not None
             else pd.DataFrame({"sample_id": sample_ids}).merge(empty, on="sample_id", how="left"))
            [["sample_id", "value", "n_tokens", "truncated"]] for store in stores]
