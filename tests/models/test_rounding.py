"""Round-to-nearest quantization (models/rounding.py): a row rounded by hand, every linear layer of a tiny GPT-2 left
with at most 2^bits - 1 levels per group while its output head and embeddings are kept, and a placement of rtn4
loading the rounded model, whose stored values are kept apart from the weights' own."""

import numpy as np
import pytest
import torch

from lmaudit.models.rounding import ROUNDING, round_rows, round_weights


def test_a_row_is_rounded_to_its_largest_magnitude_by_hand():
    """4 bits: levels -7..7 of max|w| / 7 = 1; [0.2, -1.4, 7, 3.6] -> [0, -1, 7, 4] (round half to even: 3.6 -> 4)."""
    weight = torch.tensor([[0.2, -1.4, 7.0, 3.6]])
    assert round_rows(weight, 4, None).tolist() == [[0.0, -1.0, 7.0, 4.0]]
    grouped = round_rows(torch.tensor([[1.0, 0.6, 100.0, 30.0]]), 4, 2)  # two groups, each its own scale
    assert grouped[0, :2].tolist() == pytest.approx([1.0, 4 / 7])
    assert grouped[0, 2:].tolist() == pytest.approx([100.0, 200 / 7])


@pytest.mark.parametrize("quantization", list(ROUNDING))
def test_every_linear_layer_is_rounded_and_the_head_kept(quantization):
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.pytorch_utils import Conv1D

    torch.manual_seed(0)
    network = GPT2LMHeadModel(GPT2Config(n_embd=128, n_layer=2, n_head=2, vocab_size=50, n_positions=16))
    embeddings = network.transformer.wte.weight.clone()
    count = round_weights(network, quantization)
    bits, group = ROUNDING[quantization]
    layers = [module for module in network.modules() if isinstance(module, Conv1D)]
    assert count == len(layers) == 8
    for layer in layers:
        rows = layer.weight.T.detach().numpy()
        size = rows.shape[1] if group is None else group
        for row in rows[:4]:
            for start in range(0, len(row), size):
                assert len(np.unique(row[start:start + size])) <= 2 ** bits - 1
    assert torch.equal(network.transformer.wte.weight, embeddings)  # the tied head and the embeddings are kept


def test_a_rtn4_placement_loads_the_rounded_model(tmp_path):
    """load_model with quantization rtn4 gives different logits from the weights as saved, on the CPU, and the signal
    store's fingerprint of the two placements differs."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmaudit.models.fingerprints import weights_fingerprint
    from lmaudit.models.load import load_model
    from lmaudit.models.source import ModelSource, Placement
    from lmaudit.models.tokenizer import train_tokenizer

    tokenizer = train_tokenizer(["a b c d e f g", "b c d e"], vocab_size=60, max_length=16)
    torch.manual_seed(1)
    GPT2LMHeadModel(GPT2Config(n_embd=64, n_layer=1, n_head=2, vocab_size=len(tokenizer), n_positions=16)
                    ).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    ids = torch.tensor([[1, 2, 3, 4]])
    saved = load_model(tmp_path, "clm").model(ids).logits
    rounded = load_model(tmp_path, "clm", Placement(quantization="rtn4")).model(ids).logits
    assert not torch.allclose(saved, rounded)
    assert torch.allclose(saved, rounded, atol=0.5)
    source = ModelSource(str(tmp_path))
    assert weights_fingerprint(source, Placement()) != weights_fingerprint(source, Placement(quantization="rtn4"))
