"""The LM head run in vocabulary tiles: the same logits as the layer itself, written into a reused buffer."""

import pytest
import torch

from lmaudit.models.heads import VOCABULARY_TILE, logits_in_tiles, tileable_head


@pytest.mark.parametrize("bias", [False, True])
def test_logits_in_tiles_equal_the_layers_own_logits(bias):
    """Three tiles, the last one short, with and without a bias; the buffer has more rows than the chunk, whose logits
    are its first rows."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(24, 2 * VOCABULARY_TILE + 5, bias=bias)
    hidden = torch.randn(37, 24)
    out = torch.full((50, layer.out_features), float("nan"))
    logits = logits_in_tiles(layer, hidden, out, torch.empty(50, VOCABULARY_TILE))
    assert logits.data_ptr() == out.data_ptr() and logits.shape == (37, layer.out_features)
    torch.testing.assert_close(logits, layer(hidden), rtol=1e-5, atol=1e-5)


def test_only_an_fp32_linear_head_is_run_in_tiles():
    """Anything else (a 16-bit layer, a masked LM's head of several layers) runs as it is."""
    layer = torch.nn.Linear(8, 16)
    assert tileable_head(layer) is layer
    assert tileable_head(torch.nn.Linear(8, 16).to(torch.bfloat16)) is None
    assert tileable_head(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 16))) is None
