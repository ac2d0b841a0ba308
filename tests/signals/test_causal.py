"""Causal-LM loss: equal to the model's own per-sequence loss, whatever the batching and padding."""

import numpy as np
import pytest
import torch

from lmaudit.signals.base import unpack_token_values
from lmaudit.signals.causal import causal_lm_loss, causal_token_values
from lmaudit.signals.settings import SignalSettings
from tests.families import CAUSAL_FAMILIES, tiny_family_model


@pytest.fixture(scope="module")
def tiny_gpt2(tiny_tokenizer):
    from transformers import GPT2LMHeadModel

    from lmaudit.models.architectures import clm_config

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


@pytest.mark.parametrize("family", CAUSAL_FAMILIES)
def test_every_causal_lm_family_gives_its_own_loss_and_token_log_probabilities(tiny_tokenizer, notes, family,
                                                                                monkeypatch):
    """The chunked head (base model, then output embedding on chunks of positions, in vocabulary tiles of 37 rows here
    so that a tiny vocabulary makes several, the last one short) of every causal family gives what the model's own
    forward pass gives: its loss, each token's log-probability, the mean and standard deviation of log p under its
    predictive distribution (computed in reused scratch, chunk after chunk), and whether the token is its first choice."""
    monkeypatch.setattr("lmaudit.models.heads.VOCABULARY_TILE", 37)
    monkeypatch.setattr("lmaudit.signals.causal.VOCABULARY_TILE", 37)
    model = tiny_family_model(family, "clm", tiny_tokenizer)
    texts, ids = notes["text"].tolist()[:6], notes["sample_id"].tolist()[:6]
    settings = SignalSettings(signal="clm_tokens", max_length=64, batch_tokens=128)
    packed, _ = causal_token_values(model, tiny_tokenizer, texts, ids, settings, position_chunk=5)
    for text, values in zip(texts, packed, strict=True):
        input_ids = tiny_tokenizer(text, truncation=True, max_length=64, return_tensors="pt")["input_ids"]
        with torch.no_grad():
            output = model(input_ids=input_ids, labels=input_ids)
        every = torch.log_softmax(output.logits[0, :-1].double(), -1)
        expected = every.gather(1, input_ids[0, 1:, None])[:, 0]
        mean = (every.exp() * every).sum(-1)
        std = (every.exp() * (every - mean[:, None]) ** 2).sum(-1).sqrt()
        table = unpack_token_values([values])
        log_probs = table["log_prob"][0]
        np.testing.assert_allclose(log_probs, expected.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(table["mean"][0], mean.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(table["std"][0], std.numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(table["top1_id"][0], output.logits[0, :-1].argmax(-1).double().numpy())
        assert -log_probs.mean() == pytest.approx(output.loss.item(), rel=1e-5)


@pytest.mark.parametrize("batch_tokens, prefix_tokens", [(64, 0), (256, 0), (4096, 0), (256, 7)])
def test_batches_cover_every_sample_once_within_the_token_budget_and_the_padding_share(batch_tokens, prefix_tokens):
    """Each sample in exactly one batch; a batch of more than one sample fits the budget padded to its longest and is at
    most PADDING_SHARE padding; lengths never go down from one batch to the next (sorted); no two neighbouring batches
    could have been one."""
    from lmaudit.signals.base import PADDING_SHARE, EncodedSample, length_sorted_batches

    lengths = np.random.default_rng(batch_tokens).lognormal(np.log(40), 0.8, 300).astype(int) + 2
    samples = [EncodedSample(str(i), np.zeros(n, np.int64), np.ones(n, np.int64), n, False) for i, n in enumerate(lengths)]
    batches = length_sorted_batches(samples, batch_tokens, prefix_tokens)
    assert sorted(i for batch in batches for i in batch) == list(range(len(samples)))

    def padded_and_real(batch: list[int]) -> tuple[int, int]:
        sizes = lengths[batch] + prefix_tokens
        return sizes.max() * len(batch), sizes.sum()

    for batch in batches:
        padded, real = padded_and_real(batch)
        assert len(batch) == 1 or (padded <= batch_tokens and padded - real <= PADDING_SHARE * padded)
    assert all(lengths[a].max() <= lengths[b].min() for a, b in zip(batches, batches[1:]))
    for a, b in zip(batches, batches[1:]):  # greedy: the next sample did not fit
        padded, real = padded_and_real(a + b[:1])
        assert padded > batch_tokens or padded - real > PADDING_SHARE * padded
