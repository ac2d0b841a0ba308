"""Fingerprints of model folders and adapters (SHA-256 over their files), remembered across runs: the signal store's
keys and the report's record of what was audited."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from lmaudit.atomic import write_text
from lmaudit.models.folders import check_adapter_folder, resolve_model_folder
from lmaudit.models.source import ADAPTER_CONFIG, ModelSource, Placement, as_source

FINGERPRINT_FILES = (
    "config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
    "vocab.txt", "vocab.json", "merges.txt",
)


def model_fingerprint(model: str | Path | ModelSource) -> str:
    """SHA-256 over the weights, config, tokenizer and Python files of a model folder (with trust_remote_code the
    code computes the numbers too), and over the adapter's files when there is one (hex)."""
    source = as_source(model)
    folder = resolve_model_folder(source.folder)
    base = _files_digest(folder, _stat_key(folder, model_file_names(folder)))
    if source.adapter is None:
        return base
    return hashlib.sha256(f"{base}:{adapter_fingerprint(source.adapter)}".encode()).hexdigest()


def model_file_names(folder: Path) -> list[str]:
    """The files of a model folder that its fingerprint covers: weights, config, tokenizer and Python files, sorted."""
    return sorted(p.name for p in folder.iterdir() if p.suffix in (".safetensors", ".py") or p.name in FINGERPRINT_FILES)


def adapter_file_names(folder: Path) -> list[str]:
    """The files of a PEFT adapter folder that its fingerprint covers: its config and safetensors weights, sorted."""
    return sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors" or p.name == ADAPTER_CONFIG)


def adapter_fingerprint(path: str | Path) -> str:
    """SHA-256 over a PEFT adapter folder's config and safetensors weights (hex)."""
    folder = Path(path)
    check_adapter_folder(folder)
    return _files_digest(folder, _stat_key(folder, adapter_file_names(folder)))


def weights_fingerprint(model: str | Path | ModelSource, placement: Placement) -> str:
    """The fingerprint of the numbers a model computes: its files' fingerprint, and the dtype and quantization its
    weights are loaded in when those are not the saved fp32 (a bf16 copy is another model to the signal store)."""
    files = model_fingerprint(model)
    if placement.dtype == "fp32" and placement.quantization is None:
        return files
    return hashlib.sha256(f"{files}:{placement.dtype}:{placement.quantization}".encode()).hexdigest()


def tokenizer_fingerprint(model: str | Path | ModelSource) -> str:
    """SHA-256 over a model folder's tokenizer files: equal for two models that tokenize alike."""
    folder = resolve_model_folder(as_source(model).folder)
    names = sorted(p.name for p in folder.iterdir() if p.name in FINGERPRINT_FILES and p.name != "config.json")
    return _files_digest(folder, _stat_key(folder, names))


def _stat_key(folder: Path, names: list[str]) -> tuple:
    return tuple((name, (folder / name).stat().st_size, (folder / name).stat().st_mtime_ns) for name in names)


@functools.lru_cache(maxsize=64)
def _files_digest(folder: Path, files: tuple) -> str:
    """Hash of the named files, cached on (name, size, mtime) in this process and on disk (`fingerprint_cache`): a
    model of many GB is read once, not at every run (measured: 1.2 s per run for a 1.6 GB model on this machine)."""
    remembered = fingerprint_cache() / hashlib.sha256(repr((str(folder.resolve()), files)).encode()).hexdigest()
    try:
        return remembered.read_text(encoding="utf-8").strip()
    except OSError:
        pass
    digest = files_digest_now(folder, [name for name, _, _ in files])
    try:
        remembered.parent.mkdir(parents=True, exist_ok=True)
        write_text(remembered, digest)
    except OSError:  # a read-only home: hashing again next time is all it costs
        pass
    return digest


def files_digest_now(folder: Path, names: list[str]) -> str:
    """The fingerprint of the named files of `folder` (SHA-256 over each name and its bytes, hex), read now, never
    remembered: what a verification compares, since a file changed in place may keep its size and time."""
    digest = hashlib.sha256()
    for name in names:
        digest.update(name.encode())
        with open(folder / name, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def fingerprint_cache() -> Path:
    """Where model fingerprints are remembered across runs, by folder and each file's size and modification time:
    $LMAUDIT_CACHE_HOME/fingerprints (default ~/.cache/lmaudit/fingerprints)."""
    home = os.environ.get("LMAUDIT_CACHE_HOME") or Path.home() / ".cache" / "lmaudit"
    return Path(home) / "fingerprints"
