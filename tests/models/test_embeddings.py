"""PETAL's embedding table read from the safetensors file alone: the very table the loaded model holds, for every
causal family and dtype; with an adapter, the adapted model's."""

import numpy as np
import pytest

from lmaudit.models.embeddings import _table_from_file, normalised_input_embeddings
from lmaudit.models.load import load_causal_lm
from lmaudit.models.source import ModelSource, Placement
from tests.families import CAUSAL_FAMILIES, save_family_model


def loaded_table(source, placement: Placement) -> np.ndarray:
    return load_causal_lm(source, placement).model.get_input_embeddings().weight.detach().float().numpy()


@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_the_table_read_alone_is_the_loaded_models(tmp_path, tiny_tokenizer, family):
    folder = save_family_model(family, "clm", tiny_tokenizer, tmp_path / family)
    for placement in (Placement(), Placement(dtype="bf16")):
        alone = _table_from_file(folder, placement)
        assert alone is not None and np.array_equal(alone, loaded_table(folder, placement))
    norms = np.linalg.norm(normalised_input_embeddings(folder), axis=1)
    zero = ~loaded_table(folder, Placement()).any(axis=1)  # the padding row of some families: it stays zero
    assert np.allclose(norms[~zero], 1.0, atol=1e-6) and (norms[zero] == 0).all()


def test_a_sharded_checkpoint_and_an_adapter(tmp_path, tiny_tokenizer):
    """A base saved in shards is read through its index; with a LoRA adapter that trains the embeddings, the table is the
    adapted model's (loaded whole), not the base's."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    folder = save_family_model("gpt2", "clm", tiny_tokenizer, tmp_path / "base")
    base = AutoModelForCausalLM.from_pretrained(folder)
    base.save_pretrained(tmp_path / "sharded", max_shard_size="20KB")
    tiny_tokenizer.save_pretrained(tmp_path / "sharded")
    assert (tmp_path / "sharded" / "model.safetensors.index.json").is_file()
    assert np.array_equal(_table_from_file(tmp_path / "sharded", Placement()), loaded_table(folder, Placement()))

    adapted = get_peft_model(base, LoraConfig(r=2, target_modules=["c_attn"], modules_to_save=["wte"]))
    with torch.no_grad():
        adapted.base_model.model.transformer.wte.modules_to_save["default"].weight.mul_(2.0)
    adapted.save_pretrained(tmp_path / "adapter")
    source = ModelSource(str(folder), str(tmp_path / "adapter"))
    table = normalised_input_embeddings(source)
    assert np.allclose(table, normalised_input_embeddings(folder), atol=1e-6)  # doubling keeps the direction
    assert _table_from_file(source, Placement()) is None
    assert np.allclose(loaded_table(source, Placement()), 2 * loaded_table(folder, Placement()))
