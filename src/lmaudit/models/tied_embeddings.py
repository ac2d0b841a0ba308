"""A saved model whose configuration ties its input and output embeddings while its weights file holds output
embeddings of their own: PEFT's modules_to_save trains a copy of each, and a merged model saved still saying
`tie_word_embeddings: true` (PEFT before 0.19 leaves it so) is loaded by transformers before 5 with the input rows as
its output rows. The model scored would then not be the one saved; for new-token canaries, whose output rows are what
training moved, the audit falls to chance. Loading is checked against the file instead of trusting either library."""

from __future__ import annotations

import json
from pathlib import Path

from lmaudit.errors import InputError

WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"


def saved_tensor(folder: Path, name: str):
    """The tensor `name` of the folder's safetensors weights (one file or an indexed set of shards), or None."""
    from safetensors import safe_open

    index = folder / INDEX
    if index.is_file():
        shard = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}).get(name)
        path = folder / shard if shard else None
    else:
        path = folder / WEIGHTS
    if path is None or not path.is_file():
        return None
    with safe_open(str(path), framework="pt") as weights:
        return weights.get_tensor(name) if name in weights.keys() else None


def check_output_embeddings(network, folder: Path) -> None:
    """InputError where loading left output embeddings other than those the folder's weights hold (a configuration that
    ties them, with both saved apart and the loader tying the output to the input)."""
    import torch

    output = network.get_output_embeddings()
    if not getattr(network.config, "tie_word_embeddings", False) or output is None:
        return
    name = next((module_name for module_name, module in network.named_modules() if module is output), None)
    saved = saved_tensor(folder, f"{name}.weight") if name is not None else None
    loaded = output.weight.detach()
    if saved is None or (saved.shape == loaded.shape and torch.equal(saved.to(loaded.dtype), loaded.cpu())):
        return
    raise InputError(f"{folder / 'config.json'}: ties the input and output embeddings (tie_word_embeddings: true), but "
                     f"{name}.weight is saved apart with other values, and loading replaced it by the input embeddings "
                     "(as a model merged from PEFT's modules_to_save is saved): the model scored would not be the one "
                     "trained; set \"tie_word_embeddings\": false in config.json and audit again")
