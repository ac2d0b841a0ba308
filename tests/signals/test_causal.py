"""Causal-LM loss: equal to the model's own per-sequence loss, whatever the batching and padding."""

import pytest
import torch

from lmaudit.signals.base import SignalSettings
from lmaudit.signals.causal import causal_lm_loss


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_tokenizer):
    from transformers import GPT2LMHeadModel

    from lmaudit.models.train import clm_config

    torch.manual_seed(0)
    return GPT2LMHeadModel(clm_config("tiny", len(tiny_tokenizer), 64, tiny_tokenizer)).eval()


@pytest.mark.parametrize("batch_tokens, position_chunk", [(64, 7), (4096, 2048)])
def test_causal_loss_equals_the_models_own_loss(tiny_gpt2, tiny_tokenizer, notes, batch_tokens, position_chunk):
    texts, ids = notes["text"].tolist()[:10], notes["sample_id"].tolist()[:10]
    settings = SignalSettings(signal="clm_loss", max_length=64, batch_tokens=batch_tokens)
    values, encoded = causal_lm_loss(tiny_gpt2, tiny_tokenizer, texts, ids, settings, position_chunk=position_chunk)
    for text, value in zip(texts, values, strict=True):
        input_ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            expected = tiny_gpt2(input_ids=input_ids, labels=input_ids).loss.item()
        assert value == pytest.approx(expected, rel=1e-5)
    assert all(not e.truncated for e in encoded)
