"""Model folders: where a model is (a folder, or a hub id in the local cache; never downloaded), whether it and its
adapter are whole, and what lmaudit wrote beside it."""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path

from lmaudit.errors import InputError
from lmaudit.models.source import ADAPTER_CONFIG, ModelSource, as_source

log = logging.getLogger(__name__)


def resolve_model_folder(name: str | Path) -> Path:
    """A local model folder, or the local Hugging Face cache's copy of hub id `name` (never downloaded)."""
    folder = Path(name)
    if folder.is_dir() or folder.is_absolute() or str(name).startswith("."):
        return folder
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(str(name), local_files_only=True))
    except Exception:  # not a valid id, or not in the cache: both mean the same thing to the user
        raise InputError(
            f"{name}: no such model folder, and no model of that id in the local Hugging Face cache "
            "(lmaudit never downloads); pass a folder written by save_pretrained"
        ) from None


# A tokenizer's vocabulary is in one of these (fast tokenizers, WordPiece, BPE, SentencePiece).
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "tokenizer.model", "spiece.model",
                   "sentencepiece.bpe.model")


def check_model_folder(path: Path) -> None:
    """Refuse a model folder that is missing, has no config or has no safetensors weights."""
    if not path.is_dir():
        raise InputError(f"{path}: no such model folder; pass a folder written by save_pretrained or `lmaudit train`")
    if (path / ADAPTER_CONFIG).is_file() and not (path / "config.json").is_file():
        base = adapter_base(path)
        raise InputError(f"{path}: a PEFT adapter, not a whole model; pass its base model as the model "
                         f"({base or 'the folder it was trained on'}) and this folder as --adapter")
    if not (path / "config.json").is_file():
        raise InputError(f"{path}: no config.json; pass a folder written by save_pretrained")
    if not any(path.glob("*.safetensors")):
        raise InputError(
            f"{path}: no .safetensors weights (lmaudit does not load pickled .bin weights); "
            "re-save the model with save_pretrained(..., safe_serialization=True)"
        )
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        # Without them transformers would build an empty tokenizer and score every word as unknown.
        raise InputError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES)}); save the tokenizer with the "
                         "model (tokenizer.save_pretrained(folder))")


def checked_source(model: str | Path | ModelSource) -> ModelSource:
    """The source with its folder resolved (a hub id becomes the cached folder), after checking the folder and adapter."""
    source = as_source(model)
    folder = resolve_model_folder(source.folder)
    check_model_folder(folder)
    if source.adapter is not None:
        check_adapter_folder(Path(source.adapter))
    return ModelSource(str(folder), source.adapter, source.served)


def check_adapter_folder(path: Path) -> None:
    """Refuse an adapter folder that is missing or has no adapter_config.json or no safetensors weights."""
    if not path.is_dir() or not (path / ADAPTER_CONFIG).is_file():
        raise InputError(f"{path}: not a PEFT adapter folder (no {ADAPTER_CONFIG}); pass a folder written by "
                         "`lmaudit train ... --lora` or a PEFT model's save_pretrained")
    if not any(path.glob("*.safetensors")):
        raise InputError(f"{path}: no .safetensors adapter weights (lmaudit does not load pickled .bin weights); "
                         "re-save the adapter with save_pretrained(..., safe_serialization=True)")


def adapter_base(path: Path) -> str | None:
    """The base model an adapter was trained on, as its adapter_config.json names it (None if it names none)."""
    try:
        return json.loads((path / ADAPTER_CONFIG).read_text(encoding="utf-8")).get("base_model_name_or_path")
    except (OSError, ValueError):
        return None


@functools.cache
def warn_remote_code(folder: Path) -> None:
    """Log, once per folder, that trust_remote_code lets the folder's own Python files run with the user's rights."""
    code = sorted(p.name for p in folder.glob("*.py"))
    log.warning("trust_remote_code is on: loading %s runs %s with your permissions; use it only for a folder whose "
                "code you have read", folder, ", ".join(code) if code else "the code its config names")
