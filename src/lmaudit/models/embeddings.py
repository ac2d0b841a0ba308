"""A causal LM's input token embeddings (PETAL's similarity space), read from the safetensors file alone where it can
be: loading the whole model again for one table costs a large base's every weight."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from lmaudit.models.source import DEFAULT_PLACEMENT, TORCH_DTYPE_NAMES, ModelSource, Placement, as_source


def normalised_input_embeddings(model: str | Path | ModelSource, placement: Placement = DEFAULT_PLACEMENT) -> np.ndarray:
    """(vocabulary, width) float32 array: the causal LM's input token embeddings as loaded with `placement`'s dtype,
    each row scaled to unit L2 norm (a zero row stays zero), so a dot product of two rows is their cosine similarity."""
    table = _table_from_file(model, placement)
    if table is None:  # an adapter, a remote-code model, or a file that names the table otherwise: load the model
        from lmaudit.models.load import load_causal_lm

        table = load_causal_lm(model, placement).model.get_input_embeddings().weight.detach().float().cpu().numpy()
    norms = np.linalg.norm(table, axis=1, keepdims=True)
    return table / np.where(norms == 0, 1.0, norms)


def _table_from_file(model: str | Path | ModelSource, placement: Placement) -> np.ndarray | None:
    """The input-embedding tensor read alone from the folder's (possibly sharded) safetensors, cast through the
    placement's dtype as loading would; None where that cannot be done faithfully."""
    import torch
    from safetensors import safe_open
    from transformers import AutoConfig, AutoModelForCausalLM

    from lmaudit.models.folders import resolve_model_folder

    source = as_source(model)
    if source.adapter is not None or placement.trust_remote_code:  # an adapter may change the embeddings
        return None
    folder = resolve_model_folder(source.folder)
    config = AutoConfig.from_pretrained(folder, local_files_only=True)
    try:
        with torch.device("meta"):  # the module tree without weights: which parameter is the input table
            network = AutoModelForCausalLM.from_config(config)
    except Exception:  # an architecture that cannot be built so: loading the model names the table instead
        return None
    weight = network.get_input_embeddings().weight
    name = next(name for name, parameter in network.named_parameters() if parameter is weight)
    files = _file_of_tensor(folder)
    for key in (name, name.removeprefix(f"{network.base_model_prefix}.")):  # older checkpoints drop the prefix
        if key in files:
            with safe_open(folder / files[key], framework="pt") as weights:
                tensor = weights.get_tensor(key)
            return tensor.to(getattr(torch, TORCH_DTYPE_NAMES[placement.dtype])).float().numpy()
    return None


def _file_of_tensor(folder: Path) -> dict[str, str]:
    """Each tensor's safetensors file in `folder`: from the shard index, else the single file's own names."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    if index.is_file():
        return json.loads(index.read_text(encoding="utf-8"))["weight_map"]
    single = folder / "model.safetensors"
    if not single.is_file():
        return {}
    with safe_open(single, framework="pt") as weights:
        return dict.fromkeys(weights.keys(), single.name)
