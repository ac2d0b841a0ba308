"""A saved model whose configuration ties its embeddings while its weights file holds output embeddings of their own
(a merge of PEFT's modules_to_save by PEFT before 0.19): loaded as saved it is scored; loaded with its input rows as
output rows (transformers before 5) it is refused in one line naming the fix. A model whose embeddings are truly tied
loads either way."""

import pytest
import torch

from lmaudit.errors import InputError
from lmaudit.models.load import load_causal_lm
from lmaudit.models.tied_embeddings import saved_tensor
from tests.families import tiny_family_model
from tests.helpers import load_tying_by_the_config


@pytest.fixture
def apart(tmp_path, tiny_tokenizer):
    """A GPT-2 saved with tie_word_embeddings true and an output matrix of its own."""
    model = tiny_family_model("gpt2", "clm", tiny_tokenizer)
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach() + 0.5)
    assert model.config.tie_word_embeddings
    model.save_pretrained(tmp_path / "apart")
    tiny_tokenizer.save_pretrained(tmp_path / "apart")
    return tmp_path / "apart", model.lm_head.weight.detach().clone()


def test_the_saved_output_rows_are_the_ones_scored(apart):
    folder, trained = apart
    assert torch.equal(saved_tensor(folder, "lm_head.weight"), trained)
    assert torch.equal(load_causal_lm(folder).model.lm_head.weight.detach(), trained)


def test_a_loader_that_ties_them_back_is_refused_naming_the_fix(apart, monkeypatch):
    load_tying_by_the_config(monkeypatch)
    with pytest.raises(InputError, match=r'config.json: ties .* set "tie_word_embeddings": false in config.json') as err:
        load_causal_lm(apart[0])
    assert len(str(err.value).splitlines()) == 1


def test_truly_tied_embeddings_load_under_either_loader(tmp_path, tiny_tokenizer, monkeypatch):
    model = tiny_family_model("gpt2", "clm", tiny_tokenizer)
    model.save_pretrained(tmp_path / "tied")
    tiny_tokenizer.save_pretrained(tmp_path / "tied")
    assert saved_tensor(tmp_path / "tied", "lm_head.weight") is None  # one matrix saved
    load_tying_by_the_config(monkeypatch)
    loaded = load_causal_lm(tmp_path / "tied").model
    assert torch.equal(loaded.lm_head.weight, model.transformer.wte.weight)
